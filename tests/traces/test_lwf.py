"""Plain-text LWF files of the Haizea experiments (spec 001 §8.2)."""

import pytest

from skylease.model.errors import UserError
from skylease.traces.lwf import read_plain_lwf


def test_injected_file_has_appendix_b_count(shared_data):
    d = read_plain_lwf(shared_data / "lwf" / "injected" / "30days" / "work_10-dur_3h-size_2medium.lwf")
    assert len(d) == 94  # Appendix B
    assert (d["real_duration"] == d["duration"]).all() and (d["start"] >= d["submit"]).all()
    assert d["duration"].between(3 * 3600 - 1800, 3 * 3600 + 1800).all() and d["nodes"].between(25, 48).all()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("0 10 100 100 2 1 1024 0 'a.img' 600\n0 x 100 100 2 1 1024 0 'a.img' 600\n", ":2: start:"),
        ("0 10 100 100 2 1 1024 0\n", ":1: expected 10 fields"),
        ("0 10 100 100 0 1 1024 0 'a.img' 600\n", ":1: nodes:"),
        ("0 10 100 200 2 1 1024 0 'a.img' 600\n", ":1: real_duration:"),
    ],
)
def test_malformed_lines_name_file_line_and_field(tmp_path, text, needle):
    p = tmp_path / "w.lwf"
    p.write_text(text)
    with pytest.raises(UserError) as e:
        read_plain_lwf(p)
    msg = str(e.value)
    assert "w.lwf" in msg and needle in msg and "\n" not in msg
