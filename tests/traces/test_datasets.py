"""The data set registry behind ``skylease data``: true to the shared folder, safe to write."""

from __future__ import annotations

import gzip
import hashlib
import io
import urllib.error
from pathlib import Path

import pytest

from skylease.model.errors import UserError
from skylease.traces import datasets
from skylease.traces.datasets import DATASETS, Dataset

EXPECTED_NAMES = {
    "braun", "swf-blue", "swf-lcg", "swf-nasa", "lwf-injected", "lwf-scenarios",
    "lwf-multi", "fta-lanl", "spot", "prices", "bot", "power",
}  # fmt: skip


class FakeResponse:
    """Enough of an HTTP response for ``fetch``: ``read(n)`` and ``close()``."""

    def __init__(self, body: bytes, *, fail_after: int | None = None) -> None:
        self._body = io.BytesIO(body)
        self._fail_after = fail_after
        self._served = 0
        self.closed = False

    def read(self, n: int = -1) -> bytes:
        if self._fail_after is not None and self._served >= self._fail_after:
            raise ConnectionResetError(104, "Connection reset by peer")
        chunk = self._body.read(n if self._fail_after is None else min(n, self._fail_after))
        self._served += len(chunk)
        return chunk

    def close(self) -> None:
        self.closed = True


def offline_opener(url: str, timeout: float | None = None) -> FakeResponse:
    raise urllib.error.URLError(OSError(101, "Network is unreachable"))


def real_opener(shared_data: Path, name: str):
    """An opener that serves each URL of data set ``name`` the real file (as upstream has it: gzip
    files compressed on arrival are served uncompressed)."""
    ds = datasets.get(name)
    by_url = dict(zip(ds.urls, ds.files, strict=True))

    def opener(url: str, timeout: float | None = None) -> FakeResponse:
        file = by_url[url]
        body = (shared_data / ds.folder / file).read_bytes()
        if datasets._compress_on_arrival(file, url):
            body = gzip.decompress(body)
        return FakeResponse(body)

    return opener


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink())


# --------------------------------------------------------------------------- the registry


def test_registry_names_are_unique_and_complete() -> None:
    names = [ds.name for ds in DATASETS]
    assert len(names) == len(set(names))
    assert set(names) == EXPECTED_NAMES


def test_registry_entries_are_consistent() -> None:
    for ds in DATASETS:
        assert ds.description and ds.source and ds.license and ds.homepage
        assert ds.homepage.startswith("https://")
        assert not ds.urls or len(ds.urls) == len(ds.files)
        if ds.url_verified:
            assert ds.urls and all(ds.urls)
        for url in ds.urls:
            assert not url or url.startswith("https://raw.githubusercontent.com/")
    # folders shared by several data sets (swf) never list the same file twice
    seen: set[str] = set()
    for ds in DATASETS:
        for f in ds.files:
            key = f"{ds.folder}/{f}"
            assert key not in seen
            seen.add(key)


def test_dataset_rejects_inconsistent_records() -> None:
    one, two = ("0" * 64,), ("0" * 64, "1" * 64)
    Dataset("x", "d", "x", ("a",), "s", "l", urls=("https://h/a",), sha256=one)  # a good one
    with pytest.raises(ValueError):
        Dataset("x", "d", "x", ("a", "b"), "s", "l", urls=("https://h/a",), sha256=two)
    with pytest.raises(ValueError):
        Dataset("x", "d", "x", ("a",), "s", "l", urls=("",), url_verified=True, sha256=one)
    with pytest.raises(ValueError):
        Dataset("x", "d", "../x", ("a",), "s", "l", sha256=one)
    with pytest.raises(ValueError):
        Dataset("x", "d", "x", ("a",), "s", "l", urls=("http://insecure/a",), sha256=one)
    with pytest.raises(ValueError, match="SHA-256"):  # every file needs its digest
        Dataset("x", "d", "x", ("a", "b"), "s", "l", sha256=one)


def test_every_listed_file_exists_in_shared_data(shared_data: Path) -> None:
    for ds in DATASETS:
        folder = shared_data / ds.folder
        for f in ds.files:
            assert (folder / f).is_file(), f"{ds.name}: {folder / f} is missing"


def test_registry_covers_every_shared_file(shared_data: Path) -> None:
    listed = {f"{ds.folder}/{f}" for ds in DATASETS for f in ds.files}
    on_disk = {
        p.relative_to(shared_data).as_posix()
        for p in shared_data.rglob("*")
        if p.is_file() and p.name != "README.md"
    }
    assert on_disk == listed


def test_get_unknown_name_lists_valid_names() -> None:
    assert datasets.get("braun").folder == "braun"
    with pytest.raises(UserError) as err:
        datasets.get("brawn")
    msg = str(err.value)
    assert "'brawn'" in msg and "braun" in msg and "power" in msg
    assert "\n" not in msg


# --------------------------------------------------------------------------- data folder


def test_default_data_dir_honours_skylease_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("SKYLEASE_DATA", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert datasets.default_data_dir() == tmp_path / "mine"


def test_default_data_dir_falls_back_to_xdg_then_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SKYLEASE_DATA", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert datasets.default_data_dir() == tmp_path / "xdg" / "skylease"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert datasets.default_data_dir() == tmp_path / "home" / ".local" / "share" / "skylease"


def test_functions_use_default_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SKYLEASE_DATA", str(tmp_path))
    rows = {row["name"]: row for row in datasets.status()}
    assert rows["power"]["path"] == tmp_path / "power"
    assert rows["power"]["present"] is False


# --------------------------------------------------------------------------- import


@pytest.mark.parametrize("name", ["braun", "power"])
def test_import_local_copies_byte_identical_files(
    name: str, shared_data: Path, tmp_path: Path
) -> None:
    ds = datasets.get(name)
    dest = datasets.import_local(name, shared_data / ds.folder, tmp_path)
    assert dest == tmp_path / ds.folder
    for f in ds.files:
        copied = dest / f
        assert copied.is_file() and not copied.is_symlink()
        assert copied.read_bytes() == (shared_data / ds.folder / f).read_bytes()
    assert not [p for p in dest.iterdir() if p.name.endswith(".part")]
    row = next(r for r in datasets.status(tmp_path) if r["name"] == name)
    assert row["present"] is True
    assert row["files_present"] == row["files_total"] == len(ds.files)
    assert datasets.locate(name, tmp_path) == dest


def test_import_local_finds_the_subfolder_and_links(shared_data: Path, tmp_path: Path) -> None:
    # the root of a data folder works too: the data set sits under its folder name
    dest = datasets.import_local("lwf-multi", shared_data, tmp_path, link=True)
    ds = datasets.get("lwf-multi")
    for f in ds.files:
        assert (dest / f).is_symlink()
        assert (dest / f).resolve() == (shared_data / ds.folder / f).resolve()
    assert datasets.locate("lwf-multi", tmp_path) == dest
    # importing again (copy this time) replaces the links by real files
    datasets.import_local("lwf-multi", shared_data, tmp_path)
    assert not any((dest / f).is_symlink() for f in ds.files)


def test_import_local_keeps_subfolders(shared_data: Path, tmp_path: Path) -> None:
    dest = datasets.import_local("lwf-injected", shared_data / "lwf", tmp_path, link=True)
    assert dest == tmp_path / "lwf" / "injected"
    assert (dest / "15days" / "work_10-dur_2h-size_3large-24h.lwf").is_symlink()
    assert datasets.locate("lwf-injected", tmp_path) == dest


def test_import_local_missing_file_names_it(tmp_path: Path) -> None:
    ds = datasets.get("power")
    src = tmp_path / "src"
    src.mkdir()
    for f in ds.files[1:]:
        (src / f).write_text("1 2 3\n")
    out = tmp_path / "out"
    with pytest.raises(UserError) as err:
        datasets.import_local("power", src, out)
    msg = str(err.value)
    assert ds.files[0] in msg and str(src) in msg
    assert "\n" not in msg
    assert not out.exists()  # nothing written when a file is missing


def test_import_local_refuses_a_file_whose_sha256_differs(tmp_path: Path, shared_data: Path) -> None:
    """A file with the right name but other content is refused, naming it and both digests, and
    nothing of the data set is imported (issue 18, item 7)."""
    ds = datasets.get("power")
    src = tmp_path / "src"
    src.mkdir()
    for f in ds.files:
        (src / f).write_bytes((shared_data / "power" / f).read_bytes())
    bad = ds.files[3]
    (src / bad).write_text("1 2 3 4 5 6 7 8 9 10 11\n")
    out = tmp_path / "out"
    for link in (False, True):
        with pytest.raises(UserError) as err:
            datasets.import_local("power", src, out, link=link)
        msg = str(err.value)
        assert "\n" not in msg and bad in msg and ds.digest(bad) in msg
        assert datasets.content_sha256(src / bad) in msg and "nothing was imported" in msg
        assert not out.exists()


def test_every_file_has_the_sha256_of_the_shared_copy(shared_data: Path) -> None:
    for ds in DATASETS:
        for f in ds.files:
            assert datasets.content_sha256(shared_data / ds.folder / f) == ds.digest(f), (ds.name, f)


def test_import_local_source_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a folder"):
        datasets.import_local("power", tmp_path / "nowhere", tmp_path / "out")


# --------------------------------------------------------------------------- fetch


def test_fetch_offline_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        datasets.fetch("braun", tmp_path, opener=offline_opener)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("cannot download braun from https://raw.githubusercontent.com/")
    assert "no network" in msg and "Network is unreachable" in msg
    assert "skylease data import braun PATH" in msg
    assert files_under(tmp_path) == []


def test_fetch_unreachable_url_with_real_urlopen(tmp_path: Path) -> None:
    """The real opener against a closed local port: the same one-line error, nothing written."""
    from urllib.request import urlopen

    def closed_port(url: str, timeout: float | None = None):
        return urlopen("http://127.0.0.1:9/", timeout=timeout)

    with pytest.raises(UserError) as err:
        datasets.fetch("power", tmp_path, timeout=2.0, opener=closed_port)
    assert "\n" not in str(err.value) and "no network" in str(err.value)
    assert files_under(tmp_path) == []


def test_fetch_http_error_is_reported(tmp_path: Path) -> None:
    def not_found(url: str, timeout: float | None = None):
        raise urllib.error.HTTPError(url, 404, "Not Found", None, None)  # type: ignore[arg-type]

    with pytest.raises(UserError, match="HTTP 404 Not Found") as err:
        datasets.fetch("power", tmp_path, opener=not_found)
    assert "\n" not in str(err.value)


def test_fetch_writes_files_from_opener(tmp_path: Path, shared_data: Path) -> None:
    ds = datasets.get("power")
    asked: list[tuple[str, float | None]] = []
    responses: list[FakeResponse] = []
    serve = real_opener(shared_data, "power")

    def opener(url: str, timeout: float | None = None) -> FakeResponse:
        asked.append((url, timeout))
        responses.append(serve(url))
        return responses[-1]

    dest = datasets.fetch("power", tmp_path, timeout=5.0, opener=opener)
    assert dest == tmp_path / "power"
    assert [u for u, _ in asked] == list(ds.urls)
    assert all(t == 5.0 for _, t in asked)
    assert all(r.closed for r in responses)
    for f in ds.files:
        assert (dest / f).read_bytes() == (shared_data / "power" / f).read_bytes()
    assert sorted(p.name for p in dest.iterdir()) == sorted(ds.files)  # no temp files left
    assert datasets.locate("power", tmp_path) == dest


def test_fetch_compresses_files_stored_uncompressed_upstream(tmp_path: Path, shared_data: Path) -> None:
    dest = datasets.fetch("fta-lanl", tmp_path, opener=real_opener(shared_data, "fta-lanl"))
    got = gzip.decompress((dest / "lanl_event_trace.tab.gz").read_bytes())
    assert got == gzip.decompress((shared_data / "fta" / "lanl_event_trace.tab.gz").read_bytes())


def test_fetch_refuses_a_file_whose_sha256_differs(tmp_path: Path, shared_data: Path) -> None:
    """Any answer with the right name is not enough: a download that is not the registry's file is
    one line naming it and both digests, and is not written (issue 18, item 7)."""
    ds = datasets.get("power")
    body = b"58.4 98 the wrong file\n"
    with pytest.raises(UserError) as err:
        datasets.fetch("power", tmp_path, opener=lambda url, timeout=None: FakeResponse(body))
    msg = str(err.value)
    assert "\n" not in msg and ds.files[0] in msg
    assert hashlib.sha256(body).hexdigest() in msg and ds.sha256[0] in msg
    assert files_under(tmp_path) == []
    # gzip files are compared by content: the same data compressed otherwise is accepted
    opener = real_opener(shared_data, "swf-nasa")

    def recompressed(url: str, timeout: float | None = None) -> FakeResponse:
        return FakeResponse(gzip.compress(gzip.decompress(opener(url)._body.getvalue()), 1, mtime=7))

    dest = datasets.fetch("swf-nasa", tmp_path, opener=recompressed)
    assert datasets.locate("swf-nasa", tmp_path) == dest


def test_fetch_rejects_non_gzip_answer_for_gz_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a gzip file"):
        datasets.fetch(
            "swf-nasa", tmp_path, opener=lambda url, timeout=None: FakeResponse(b"<html>")
        )
    assert files_under(tmp_path) == []


def test_fetch_cut_short_leaves_no_partial_file(tmp_path: Path) -> None:
    body = b"x" * (3 * 65536)
    with pytest.raises(UserError) as err:
        datasets.fetch(
            "fta-lanl",
            tmp_path,
            opener=lambda url, timeout=None: FakeResponse(body, fail_after=65536),
        )
    assert "\n" not in str(err.value) and "Connection reset" in str(err.value)
    assert files_under(tmp_path) == []


def test_fetch_failure_keeps_the_previous_whole_file(tmp_path: Path, shared_data: Path) -> None:
    ds = datasets.get("prices")
    datasets.fetch("prices", tmp_path, opener=real_opener(shared_data, "prices"))
    with pytest.raises(UserError):
        datasets.fetch(
            "prices",
            tmp_path,
            opener=lambda url, timeout=None: FakeResponse(b"new" * 50000, fail_after=10),
        )
    folder = tmp_path / ds.folder
    assert sorted(p.name for p in folder.iterdir()) == sorted(ds.files)
    assert all((folder / f).read_bytes() == (shared_data / "prices" / f).read_bytes() for f in ds.files)


def test_fetch_without_verified_urls_points_to_homepage(tmp_path: Path) -> None:
    ds = datasets.get("swf-lcg")
    assert not ds.url_verified and not ds.urls
    with pytest.raises(UserError) as err:
        datasets.fetch("swf-lcg", tmp_path, opener=offline_opener)
    msg = str(err.value)
    assert "no verified download URL" in msg and ds.homepage in msg and "\n" not in msg
    assert files_under(tmp_path) == []


def test_fetch_partial_registry_downloads_what_it_can(tmp_path: Path, shared_data: Path) -> None:
    ds = datasets.get("braun")
    with_url = [f for f, u in zip(ds.files, ds.urls, strict=True) if u]
    assert 0 < len(with_url) < len(ds.files)
    by_url = {u: f for f, u in zip(ds.files, ds.urls, strict=True) if u}
    with pytest.raises(UserError) as err:
        datasets.fetch("braun", tmp_path, opener=lambda url, timeout=None: FakeResponse(
            (shared_data / "braun" / by_url[url]).read_bytes()))
    msg = str(err.value)
    assert f"downloaded {len(with_url)} of {len(ds.files)}" in msg
    assert ds.homepage in msg and "\n" not in msg
    assert sorted(p.name for p in (tmp_path / "braun").iterdir()) == sorted(with_url)


# --------------------------------------------------------------------------- locate


def test_locate_errors_when_absent_or_incomplete(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        datasets.locate("power", tmp_path)
    msg = str(err.value)
    assert "skylease data fetch power" in msg and "skylease data import power PATH" in msg
    assert "0 of 7" in msg and "\n" not in msg
    (tmp_path / "power").mkdir()
    (tmp_path / "power" / datasets.get("power").files[0]).write_text("1\n")
    with pytest.raises(UserError, match="1 of 7"):
        datasets.locate("power", tmp_path)
    with pytest.raises(UserError, match="unknown data set"):
        datasets.locate("nope", tmp_path)
