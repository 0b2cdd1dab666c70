import json

import pytest

from skylease.model import Catalog, InstanceType, UserError

GOOD = """
name = "paper"

[[instance_type]]
name = "small"
price = 0.06
boot_time = 300

[[instance_type]]
name = "large"
speed = 4
price = 0.24
max_count = 20
"""


def test_load_toml(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(GOOD)
    cat = Catalog.load(p)
    assert cat.names == ["small", "large"]
    assert cat["large"].speed == 4
    assert cat["small"].billing.cost(3601) == pytest.approx(0.12)


def test_load_json_roundtrip(tmp_path):
    cat = Catalog((InstanceType("a", price=1.5), InstanceType("b", speed=2)), name="x")
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cat.to_dict()))
    assert Catalog.load(p) == cat


def test_bad_field_names_file_line_and_field(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(GOOD.replace("speed = 4", "speed = -4"))
    with pytest.raises(UserError) as e:
        Catalog.load(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:11: instance_type[1].speed:")
    assert "\n" not in msg


def test_unknown_key_and_duplicate_names(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(GOOD.replace("boot_time = 300", "boot = 300"))
    with pytest.raises(UserError, match=r"instance_type\[0\]\.boot"):
        Catalog.load(p)
    p.write_text(GOOD.replace('"large"', '"small"'))
    with pytest.raises(UserError, match="unique"):
        Catalog.load(p)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(UserError, match="file not found"):
        Catalog.load(tmp_path / "nope.toml")
    p = tmp_path / "c.json"
    p.write_text('{"instance_type": [\n  {"name": "a",}\n]}')
    with pytest.raises(UserError) as e:
        Catalog.load(p)
    assert e.value.line == 2


def test_a_type_without_a_price_is_free(tmp_path):
    assert InstanceType("a").price == 0 and InstanceType("a").billing.cost(7200) == 0
    p = tmp_path / "c.toml"
    p.write_text('[[instance_type]]\nname = "a"\nbilling_unit = 60\n')
    assert Catalog.load(p)["a"].billing.cost(3600) == 0


@pytest.mark.parametrize(("text", "where"), [
    (GOOD.replace("speed = 4", 'speed = "fast"'),
     "11: instance_type[1].speed: must be a finite number > 0, got 'fast'"),
    (GOOD.replace("max_count = 20", "max_count = 20.5"),
     "13: instance_type[1].max_count: must be a whole number >= 0, got 20.5"),
    (GOOD.replace("boot_time = 300", "boot_tme = 300"),
     "7: instance_type[0].boot_tme: unknown key 'boot_tme'; did you mean 'boot_time'?"),
    (GOOD.replace('name = "paper"', 'nmae = "paper"'), "2: nmae: unknown key 'nmae'; did you mean 'name'?"),
    (GOOD.replace('"large"', '"small"'), "10: instance_type[1].name: instance type names must be unique: "
     "'small' is repeated"),
])
def test_mistakes_name_file_line_and_key(tmp_path, text, where):
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(UserError) as e:
        Catalog.load(p)
    assert str(e.value) == f"{p}:{where}"


def test_a_json_catalog_names_the_line(tmp_path):
    p = tmp_path / "c.json"
    p.write_text('{"instance_type": [\n  {"name": "a"},\n  {"name": "b",\n   "speed": 0}\n]}')
    with pytest.raises(UserError) as e:
        Catalog.load(p)
    assert str(e.value) == f"{p}:4: instance_type[1].speed: must be a finite number > 0, got 0"


def test_a_binary_catalog_is_one_line(tmp_path):
    p = tmp_path / "c.toml"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    with pytest.raises(UserError) as e:
        Catalog.load(p)
    assert str(e.value) == f"{p}:1: not a text file (invalid UTF-8)"
