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
    with pytest.raises(UserError, match="no such file"):
        Catalog.load(tmp_path / "nope.toml")
    p = tmp_path / "c.json"
    p.write_text('{"instance_type": [\n  {"name": "a",}\n]}')
    with pytest.raises(UserError) as e:
        Catalog.load(p)
    assert e.value.line == 2
