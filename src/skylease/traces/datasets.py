"""The public data sets behind ``skylease data``: list, fetch, import and locate them.

The registry itself is data: ``skylease/data/datasets.json`` lists, for every data set, its
files (exact names, as they sit in a data folder), where each file comes from and under which
license. :data:`DATASETS` is that file read once into frozen :class:`Dataset` records.

A data folder holds each data set under its ``folder`` (``<data dir>/braun/u_c_hihi.0``,
``<data dir>/lwf/injected/15days/...``). The data folder is ``$SKYLEASE_DATA`` when set, else
``$XDG_DATA_HOME/skylease``, else ``~/.local/share/skylease`` (:func:`default_data_dir`).

Download URLs point at raw.githubusercontent.com pinned to a commit (never a branch), and only
at (repository, commit, path) triples confirmed to exist with the expected size; a file with no
confirmed URL has an empty URL and its data set has ``url_verified=False``. Upstream files that
are stored uncompressed but kept here gzipped (``*.json.gz``, ``*.tab.gz``) are compressed on
arrival: the rule is "local name ends in ``.gz``, URL does not".

Every file has a SHA-256 in the registry, of its content as a reader sees it: the bytes of the
file, gunzipped when its name ends in ``.gz`` (so the digest does not depend on who compressed it,
or on the "compressed on arrival" rule). A downloaded file is checked before it is moved into place;
an import checks every file before it writes any. A file that does not match is one line naming it
and both digests, and nothing of it is written. The digests were computed from the copies the
project keeps of every file of every data set (all of them are there).

Every file lands through a temporary file in the destination folder and ``os.replace``, so a
data folder never holds a half-written file, whatever interrupts a download or an import.
Every error meant for the user is a one-line :class:`~skylease.model.errors.UserError`.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import json
import os
import secrets
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from skylease.model.errors import UserError

__all__ = [
    "DATASETS",
    "Dataset",
    "content_sha256",
    "default_data_dir",
    "fetch",
    "get",
    "import_local",
    "locate",
    "status",
]

_CHUNK = 1 << 16
_GZIP_MAGIC = b"\x1f\x8b"
# What a failed or cut download raises: URLError (and its HTTPError), socket errors and
# timeouts (OSError), and a truncated HTTP body (HTTPException, e.g. IncompleteRead).
_NET_ERRORS = (urllib.error.URLError, OSError, http.client.HTTPException)


@dataclass(frozen=True, slots=True)
class Dataset:
    """One public data set: which files, from where, under which license.

    ``folder`` and ``files`` are relative POSIX paths (a file may sit in a subfolder, as in
    ``lwf/injected``). ``urls`` is empty or has one entry per file, in the same order; an empty
    entry means no confirmed URL for that file. ``url_verified`` is true only when every file has
    a URL confirmed against the upstream repository. ``homepage`` is where to get the files by
    hand.
    """

    name: str
    description: str
    folder: str
    files: tuple[str, ...]
    source: str
    license: str
    urls: tuple[str, ...] = ()
    homepage: str = ""
    url_verified: bool = False
    sha256: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.strip():
            raise ValueError(f"bad data set name {self.name!r}")
        for rel in (self.folder, *self.files):
            _check_relative(self.name, rel)
        if not self.files:
            raise ValueError(f"data set {self.name} lists no files")
        if len(set(self.files)) != len(self.files):
            raise ValueError(f"data set {self.name} lists a file twice")
        if self.urls and len(self.urls) != len(self.files):
            raise ValueError(
                f"data set {self.name}: {len(self.urls)} URLs for {len(self.files)} files"
            )
        for url in self.urls:
            if url and not url.startswith("https://"):
                raise ValueError(f"data set {self.name}: URL is not https: {url}")
        if len(self.sha256) != len(self.files) or not all(len(h) == 64 for h in self.sha256):
            raise ValueError(f"data set {self.name}: one SHA-256 (64 hex digits) per file is needed")
        if self.url_verified and not (self.urls and all(self.urls)):
            raise ValueError(f"data set {self.name} is marked url_verified but lacks URLs")

    def digest(self, file: str) -> str:
        """The registry's SHA-256 of ``file`` (see the module docstring)."""
        return self.sha256[self.files.index(file)]

    @property
    def downloads(self) -> tuple[tuple[str, str], ...]:
        """The (file, URL) pairs that have a URL."""
        if not self.urls:
            return ()
        return tuple((f, u) for f, u in zip(self.files, self.urls, strict=True) if u)


def _check_relative(name: str, rel: str) -> None:
    path = PurePosixPath(rel)
    if not rel or path.is_absolute() or ".." in path.parts or "\\" in rel:
        raise ValueError(f"data set {name}: bad relative path {rel!r}")


def _load_registry() -> tuple[Dataset, ...]:
    text = resources.files("skylease").joinpath("data").joinpath("datasets.json").read_text("utf-8")
    raw = json.loads(text)
    out: list[Dataset] = []
    for entry in raw["datasets"]:
        rows = entry["files"]
        urls = tuple(row.get("url", "") for row in rows)
        out.append(
            Dataset(
                name=entry["name"],
                description=entry["description"],
                folder=entry["folder"],
                files=tuple(row["path"] for row in rows),
                source=entry["source"],
                license=entry["license"],
                urls=urls if any(urls) else (),
                homepage=entry.get("homepage", ""),
                url_verified=bool(entry.get("url_verified", False)),
                sha256=tuple(row.get("sha256", "") for row in rows),
            )
        )
    names = [d.name for d in out]
    if len(set(names)) != len(names):
        raise ValueError("datasets.json lists a data set name twice")
    return tuple(out)


DATASETS: tuple[Dataset, ...] = _load_registry()
"""Every known data set, in the order ``skylease data`` lists them."""


def get(name: str) -> Dataset:
    """The data set called ``name``; a :class:`UserError` listing the valid names otherwise."""
    for ds in DATASETS:
        if ds.name == name:
            return ds
    valid = ", ".join(ds.name for ds in DATASETS)
    raise UserError(f"unknown data set {name!r}; valid names: {valid}")


def default_data_dir() -> Path:
    """``$SKYLEASE_DATA``, else ``$XDG_DATA_HOME/skylease``, else ``~/.local/share/skylease``."""
    env = os.environ.get("SKYLEASE_DATA", "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():  # the XDG spec says to ignore a relative value
        return Path(xdg) / "skylease"
    return Path.home() / ".local" / "share" / "skylease"


def _root(data_dir: Path | str | None) -> Path:
    """The data folder; one that exists as something else than a folder is named as such (every
    data-set path under it would fail, and a listing would call everything absent)."""
    root = default_data_dir() if data_dir is None else Path(data_dir).expanduser()
    if root.exists() and not root.is_dir():
        raise UserError("is not a folder (the data folder holds one folder per data set)", file=root,
                        field="--dir" if data_dir is not None else None)
    return root


def _present(ds: Dataset, folder: Path) -> int:
    return sum(1 for f in ds.files if (folder / f).is_file())


def status(data_dir: Path | None = None) -> list[dict[str, Any]]:
    """One row per data set: which of its files the data folder holds.

    Keys: ``name``, ``present`` (all files there), ``files_present``, ``files_total``,
    ``path`` (the data set's folder), ``source``, ``license``, ``url_verified``.
    """
    root = _root(data_dir)
    rows: list[dict[str, Any]] = []
    for ds in DATASETS:
        folder = root / ds.folder
        n = _present(ds, folder)
        rows.append(
            {
                "name": ds.name,
                "present": n == len(ds.files),
                "files_present": n,
                "files_total": len(ds.files),
                "path": folder,
                "source": ds.source,
                "license": ds.license,
                "url_verified": ds.url_verified,
            }
        )
    return rows


def locate(name: str, data_dir: Path | None = None) -> Path:
    """The folder holding data set ``name`` with all its files; a :class:`UserError` if not."""
    ds = get(name)
    folder = _root(data_dir) / ds.folder
    n = _present(ds, folder)
    if n == len(ds.files):
        return folder
    raise UserError(
        f"data set {name} is not in {folder} ({n} of {len(ds.files)} files); "
        f"run 'skylease data fetch {name}' or 'skylease data import {name} PATH'"
    )


# --------------------------------------------------------------------------- writing files


def _temp_for(target: Path) -> Path:
    return target.with_name(f".{target.name}.{secrets.token_hex(6)}.part")


def _open_new(path: Path) -> BinaryIO:
    """Open a new file for writing; fails if it exists; mode 0666 minus the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    return os.fdopen(fd, "wb")


def _one_line(value: object) -> str:
    text = " ".join(str(value).split())
    return text or type(value).__name__


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return _one_line(exc)


def content_sha256(path: Path, name: str | None = None) -> str:
    """SHA-256 of a file's content, gunzipped when ``name`` (default: the file's) ends in ``.gz``."""
    digest = hashlib.sha256()
    gz = (name or path.name).endswith(".gz")
    with (gzip.open(path, "rb") if gz else path.open("rb")) as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _check_digest(ds: Dataset, file: str, path: Path, where: str,
                  outcome: str = "nothing of it was written") -> None:
    """A one-line UserError when ``path`` (holding ``file`` of ``ds``) is not the registry's file."""
    try:
        got = content_sha256(path, file)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise UserError(f"{ds.name}: {file} from {where} cannot be read ({_reason(exc)}); {outcome}"
                        ) from None
    want = ds.digest(file)
    if got != want:
        raise UserError(f"{ds.name}: {file} from {where} is not the expected file: its SHA-256 is {got}, "
                        f"expected {want}; {outcome}")


# --------------------------------------------------------------------------- fetch


def _network_error(name: str, url: str, exc: BaseException) -> UserError:
    if isinstance(exc, urllib.error.HTTPError):
        why = f"the server answered HTTP {exc.code} {_one_line(exc.reason)}"
    elif isinstance(exc, urllib.error.URLError):
        why = f"no network ({_one_line(exc.reason)})"
    elif isinstance(exc, http.client.HTTPException):
        why = f"download cut short ({_one_line(exc)})"
    else:
        why = f"no network ({_one_line(exc)})"
    return UserError(
        f"cannot download {name} from {url}: {why}; "
        f"copy the files by hand and run 'skylease data import {name} PATH'"
    )


def _compress_on_arrival(file: str, url: str) -> bool:
    return file.endswith(".gz") and not urlsplit(url).path.endswith(".gz")


def _download(
    ds: Dataset,
    file: str,
    url: str,
    target: Path,
    timeout: float,
    opener: Callable[..., Any],
) -> None:
    try:
        response = opener(url, timeout=timeout)
    except _NET_ERRORS as exc:
        raise _network_error(ds.name, url, exc) from exc
    compress = _compress_on_arrival(file, url)
    must_be_gzip = file.endswith(".gz") and not compress
    tmp: Path | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temp_for(target)
        with _open_new(tmp) as out:
            sink: BinaryIO = (
                gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) if compress else out
            )
            first = True
            while True:
                try:
                    chunk = response.read(_CHUNK)
                except _NET_ERRORS as exc:
                    raise _network_error(ds.name, url, exc) from exc
                if not chunk:
                    break
                if first and must_be_gzip and not chunk.startswith(_GZIP_MAGIC):
                    raise UserError(
                        f"cannot download {ds.name} from {url}: the answer is not a gzip file; "
                        f"copy the files by hand and run 'skylease data import {ds.name} PATH'"
                    )
                first = False
                sink.write(chunk)
            if first:
                raise UserError(
                    f"cannot download {ds.name} from {url}: the answer is empty; "
                    f"copy the files by hand and run 'skylease data import {ds.name} PATH'"
                )
            if compress:
                sink.close()
            out.flush()
            os.fsync(out.fileno())
        _check_digest(ds, file, tmp, url)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise UserError(f"cannot write {target}: {_reason(exc)}") from exc
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        close = getattr(response, "close", None)
        if callable(close):
            close()


def fetch(
    name: str,
    data_dir: Path | None = None,
    *,
    timeout: float = 20.0,
    opener: Callable[..., Any] = urllib.request.urlopen,
) -> Path:
    """Download data set ``name`` into ``<data_dir>/<folder>/`` and return that folder.

    ``opener(url, timeout=...)`` returns a response with ``read(n)`` (``urlopen`` by default).
    Each file is written to a temporary file next to its target and renamed, so a failure
    leaves no partial file; files completed before a failure stay (they are whole). Raises a
    one-line :class:`UserError` when offline, when the server refuses, when the data set has no
    confirmed URL, or when some of its files have none (after downloading the others).
    """
    ds = get(name)
    folder = _root(data_dir) / ds.folder
    downloads = ds.downloads
    if not downloads:
        raise UserError(
            f"data set {name} has no verified download URL; get its files from {ds.homepage} "
            f"and run 'skylease data import {name} PATH'"
        )
    for file, url in downloads:
        _download(ds, file, url, folder / file, timeout, opener)
    missing = [f for f in ds.files if not (folder / f).is_file()]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise UserError(
            f"downloaded {len(downloads)} of {len(ds.files)} files of {name} into {folder}; "
            f"no verified URL for {missing[0]}{more}: get them from {ds.homepage} "
            f"and run 'skylease data import {name} PATH'"
        )
    return folder


# --------------------------------------------------------------------------- import


def _candidates(ds: Dataset, source: Path) -> list[Path]:
    out: list[Path] = []
    for cand in (source, source / ds.folder, source / PurePosixPath(ds.folder).name):
        if cand not in out:
            out.append(cand)
    return out


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _place(src: Path, target: Path, *, link: bool) -> None:
    if link and _same_file(src, target):
        return  # already this very file, or a link to it
    tmp: Path | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temp_for(target)
        if link:
            os.symlink(src.resolve(), tmp)
        else:
            with src.open("rb") as inp, _open_new(tmp) as out:
                shutil.copyfileobj(inp, out, _CHUNK)
                out.flush()
                os.fsync(out.fileno())
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        verb = "link" if link else "copy"
        raise UserError(f"cannot {verb} {src} to {target}: {_reason(exc)}") from exc
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def import_local(
    name: str,
    source: Path,
    data_dir: Path | None = None,
    *,
    link: bool = False,
) -> Path:
    """Copy (or symlink, with ``link=True``) a local copy of data set ``name`` into the data folder.

    ``source`` is a folder holding the data set's files, directly or under a subfolder named
    like the data set's ``folder`` (so the root of a full data folder works too). Every file is
    checked (present, and its SHA-256 the registry's) before anything is written; each lands
    through a temporary file and a rename. Returns ``<data_dir>/<folder>``.
    """
    ds = get(name)
    source = Path(source).expanduser()
    if not source.is_dir():
        raise UserError(f"cannot import {name}: {source} is not a folder")
    candidates = _candidates(ds, source)
    counts = [_present(ds, cand) for cand in candidates]
    best = max(range(len(candidates)), key=lambda i: (counts[i], -i))
    src_dir = candidates[best]
    if counts[best] < len(ds.files):
        missing = next(f for f in ds.files if not (src_dir / f).is_file())
        searched = ", ".join(str(c) for c in candidates)
        raise UserError(
            f"cannot import {name}: file {missing} is missing "
            f"({counts[best]} of {len(ds.files)} files found in {src_dir}; searched {searched})"
        )
    for file in ds.files:  # every file checked before any is written
        _check_digest(ds, file, src_dir / file, str(src_dir), "nothing was imported")
    dest = _root(data_dir) / ds.folder
    if dest.is_dir() and _same_file(src_dir, dest):
        return dest  # importing the data folder onto itself
    for file in ds.files:
        _place(src_dir / file, dest / file, link=link)
    return dest
