"""Plain-text LWF files of the Haizea experiments (decision H16 in docs/decisions/haizea.md)."""

import pandas as pd
import pytest

from skylease.model.errors import UserError
from skylease.traces.lwf import read_plain_lwf, read_xml_lwf


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
    _assert_one_line_error(read_plain_lwf, tmp_path, text, needle)


def _assert_one_line_error(reader, tmp_path, text: str, needle: str) -> None:
    p = tmp_path / "w.lwf"
    p.write_text(text)
    with pytest.raises(UserError) as e:
        reader(p)
    msg = str(e.value)
    assert "w.lwf" in msg and needle in msg and "\n" not in msg


# AR count of every one of the authors' 30-day injection files (decision H16 in docs/decisions/haizea.md),
# rows rho = 5..30 %, columns (duration 1..4 h) x (size small, medium, large)
APPENDIX_B = {
    5: [422, 144, 85, 203, 71, 43, 137, 47, 29, 105, 36, 22],
    10: [815, 286, 171, 411, 141, 86, 280, 94, 57, 205, 72, 43],
    15: [1242, 439, 260, 618, 208, 128, 420, 141, 85, 312, 106, 64],
    20: [1653, 573, 342, 820, 285, 172, 564, 192, 114, 414, 144, 86],
    25: [2136, 714, 439, 1048, 359, 216, 691, 234, 144, 523, 175, 107],
    30: [2499, 849, 510, 1231, 428, 257, 825, 291, 170, 623, 212, 130],
}
SIZES = [("1small", 1, 24), ("2medium", 25, 48), ("3large", 49, 72)]


def test_all_72_injection_files_match_appendix_b(shared_data):
    for rho, counts in APPENDIX_B.items():
        for j, n in enumerate(counts):
            hours, (size, lo, hi) = j // 3 + 1, SIZES[j % 3]
            d = read_plain_lwf(shared_data / "lwf" / "injected" / "30days" /
                               f"work_{rho:02d}-dur_{hours}h-size_{size}.lwf")
            assert len(d) == n, (rho, hours, size)
            assert d["nodes"].between(lo, hi).all()
            assert d["duration"].between(hours * 3600 - 1800, hours * 3600 + 1800).all()
            # the ARs' node-seconds are rho % of 144 nodes x 30 days, within about 1 % (H16)
            share = (d["duration"] * d["nodes"]).sum() / (144 * 2_592_000)
            assert abs(share / (rho / 100) - 1) < 0.02
            # in the past only in the two files decision H16 names (dropped or rejected)
            past = {(25, 1, "1small"), (30, 1, "1small")}
            assert (d["start"] < 0).sum() == (2 if (rho, hours, size) in past else 0)


def test_comments_blank_lines_and_quoted_images(tmp_path):
    p = tmp_path / "w.lwf"
    p.write_text("# a comment\n\n0 100 60 30 2 1 1024 5120 \"img7\" 4096  # trailing\n")
    d = read_plain_lwf(p)
    assert d.iloc[0].to_dict() == {"submit": 0, "start": 100, "duration": 60, "real_duration": 30,
                                   "nodes": 2, "cpu": 1, "memory": 1024, "disk": 5120, "image": "img7",
                                   "image_size": 4096}


# -- the XML format of Haizea 1.0 ----------------------------------------------------------------------
def test_every_xml_workload_reads(shared_data):
    counts = {}
    for f in sorted((shared_data / "lwf").glob("*/*.lwf")):
        if f.parent.name != "injected":
            w = read_xml_lwf(f)
            counts[f.name] = (w.n_nodes, len(w.requests))
    assert counts["preemption.lwf"] == (4, 2) and counts["wait.lwf"] == (4, 8)
    assert counts["withprematureend.lwf"] == (None, 139)
    assert counts["sample.lwf"] == (None, 0)  # its requests are commented out


def test_xml_fields(shared_data):
    w = read_xml_lwf(shared_data / "lwf" / "scenarios" / "preemption_prematureend2.lwf")
    assert w.name == "preemption_prematureend2" and w.node_resources == {"CPU": 1.0, "Memory": 1024.0}
    be, ar = w.requests.to_dict("records")
    assert be["kind"] == "BE" and be["submit"] == 0 and be["duration"] == 3600
    assert be["real_duration"] == 2700 and pd.isna(be["start"]) and be["preemptible"]
    assert be["image"] == "foobar1.img" and be["image_size"] == 1024
    assert ar["kind"] == "AR" and (ar["submit"], ar["start"]) == (900, 1800)
    assert (ar["duration"], ar["real_duration"]) == (900, 600)
    assert ar["nodes"] == 4 and ar["cpu"] == 1.0 and ar["memory"] == 1024 and not ar["preemptible"]


_LEASE = ('<lease-request arrival="{arrival}"><lease id="{id}" preemptible="{pre}"><nodes>'
          '<node-set numnodes="1"><res type="CPU" amount="100"/><res type="Memory" amount="1024"/>'
          '</node-set></nodes>{start}<duration time="{dur}"/></lease></lease-request>')


def _xml(*leases: str) -> str:
    body = "\n".join(leases)
    return f"<lease-workload name='t'>\n<lease-requests>\n{body}\n</lease-requests>\n</lease-workload>\n"


def _one(arrival: str = "00:00:00", lid: int = 1, start: str = "<start/>", dur: str = "01:00:00") -> str:
    # (only a best-effort lease, one without a start, may be preemptible)
    pre = "true" if start == "<start/>" else "false"
    return _LEASE.format(arrival=arrival, id=lid, start=start, dur=dur, pre=pre)


def test_xml_immediate_and_day_times(tmp_path):
    p = tmp_path / "w.lwf"
    p.write_text(_xml(_one("1:00:00:00.5", 7, "<start><now/></start>", "00:10:00")))
    (r,) = read_xml_lwf(p).requests.to_dict("records")
    assert r["kind"] == "IM" and r["submit"] == 86401 and r["duration"] == 600 and r["id"] == 7


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (_xml(_one(arrival="xx")), ":3: arrival: 'xx' is not a time"),
        (_xml(_one(), _one()), ":4: id: lease id 1 is already"),
        (_xml(_one(start="")), ":3: start: <lease> has no <start>"),
        (_xml(_one(dur="00:00:00")), ":3: duration: must be > 0"),
        ("<lease-workload>\n<lease-requests>\n</lease-workload>\n", ":3: not well-formed XML"),
        ("<workload/>\n", ":1: the root element is <workload>"),
        # infinite numbers and times were an OverflowError (a traceback)
        (_xml(_one(dur="inf:00:00")), ":3: duration: 'inf:00:00' is not a time"),
        (_xml(_one().replace('numnodes="1"', 'numnodes="inf"')), ":3: numnodes: must be a finite number"),
    ],
)
def test_malformed_xml_names_file_line_and_field(tmp_path, body, needle):
    _assert_one_line_error(read_xml_lwf, tmp_path, body, needle)


def test_one_lease_element_as_text():
    """What the lease service reads from a request body: a <lease>, or its <lease-request>."""
    from skylease.model.errors import UserError
    from skylease.traces.lwf import parse_lease_xml

    req = _one(arrival="00:05:00", lid=3, start='<start><exact time="01:00:00"/></start>', dur="00:30:00")
    row = parse_lease_xml(req)
    assert (row["kind"], row["start"], row["duration"], row["id"]) == ("AR", 3600, 1800, 3)
    lease = req[req.index("<lease "):req.index("</lease-request>")]
    assert parse_lease_xml(lease) == row
    for text, needle in (("<lease-workload/>", "not <lease> or <lease-request>"),
                         ('<!DOCTYPE lease [<!ENTITY x "y">]><lease/>', "DOCTYPE"),
                         ("<lease>" + " " * 70_000 + "</lease>", "longer than 65,536 characters")):
        with pytest.raises(UserError, match=needle) as exc:
            parse_lease_xml(text)
        assert str(exc.value).startswith("request body") and "\n" not in str(exc.value)
