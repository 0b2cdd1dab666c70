"""The helper's ``receive`` (what runs on a host to take an image in: runtime/leases/host_agent.py),
run here as a host runs it (``python3 -I -S -c SOURCE receive ...``, its stdin a pipe) without SSH:
whole or absent whatever the stream; the SSH path itself is test_host_images.py's."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys

from skylease.runtime.leases import host_agent, local

SIZE = 3 * 2**20 + 12345  # (not a whole number of chunks)


def receive(base, stdin: bytes, *nodes: str, size: int = SIZE,
            options: tuple[str, ...] = ()) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, "-I", "-S", "-c", host_agent.SOURCE, "receive", str(base),
                           "img", str(size), *(nodes or ("a", "b")), *options], input=stdin,
                          capture_output=True, timeout=30)
    return done.returncode, json.loads(done.stdout.splitlines()[-1])


def image() -> tuple[bytes, str]:
    """Random bytes with a MiB of zeros in the middle and at the end (kept as holes)."""
    mb = 2**20
    data = os.urandom(mb) + bytes(mb) + os.urandom(mb) + bytes(SIZE - 3 * mb)
    return data, hashlib.sha256(data).hexdigest()


def listing(base, node: str) -> list[str]:
    folder = base / "nodes" / node / "cache"
    return sorted(os.listdir(folder)) if folder.exists() else []


def test_the_helper_and_the_server_agree_on_image_names():
    assert host_agent.IMAGE_NAME.pattern == local._IMAGE_NAME.pattern


def test_a_committed_stream_becomes_each_nodes_own_whole_file(tmp_path):
    data, digest = image()
    code, answer = receive(tmp_path, data + json.dumps({"commit": digest}).encode())
    assert code == 0 and answer["sha256"] == digest and answer["bytes"] == SIZE
    inodes = set()
    for node in ("a", "b"):
        path = tmp_path / "nodes" / node / "cache" / "img"
        assert listing(tmp_path, node) == ["img"]
        assert path.read_bytes() == data
        st = path.stat()
        assert st.st_mode & 0o777 == 0o600
        with open(path, "rb") as fh:  # the middle MiB of zeros is mostly a hole (the pipe's reads are
            # not aligned to the file's blocks: its edges may be data; block counts vary by file system)
            hole = os.lseek(fh.fileno(), 2**20, os.SEEK_HOLE)
            assert hole < 2**20 + 2**17 and os.lseek(fh.fileno(), hole, os.SEEK_DATA) > 2 * 2**20 - 2**17
        inodes.add(st.st_ino)
    assert len(inodes) == 2


def test_a_short_stream_a_missing_or_wrong_commit_leave_nothing(tmp_path):
    data, digest = image()
    for stdin, why in ((data[:-1], "incomplete"), (data, "not committed"),
                       (data + b'{"commit": "00"}', "differs"),
                       (data[:-1] + b"x" + json.dumps({"commit": digest}).encode(), "differs")):
        code, answer = receive(tmp_path, stdin)
        assert code == 1 and why in answer["error"], (why, answer)
        assert listing(tmp_path, "a") == listing(tmp_path, "b") == []


def test_bad_names_are_refused_before_anything_is_written(tmp_path):
    for args in (("../a",), ("a", ".."), ("",)):
        code, answer = receive(tmp_path, b"", *args, size=0)
        assert code == 1 and "not a node name" in answer["error"]
    done = subprocess.run([sys.executable, "-I", "-S", "-c", host_agent.SOURCE, "receive", str(tmp_path),
                           ".img", "0", "a"], input=b"", capture_output=True, timeout=30)
    assert done.returncode == 1 and "not an image name" in json.loads(done.stdout)["error"]
    assert not (tmp_path / "nodes").exists()


def test_a_stand_in_is_holes_made_on_the_host_and_only_a_commit_of_zeros_keeps_it(tmp_path):
    gid = os.getgid() + 1 if os.geteuid() == 0 else os.getgid()  # (root may give any group)
    for stdin in (b"", b'{"commit": "00"}', b"x" + b'{"commit": "zeros"}'):  # no commit, a wrong one, bytes
        code, answer = receive(tmp_path, stdin, options=("--zeros",))
        assert code != 0 and "error" in answer and listing(tmp_path, "a") == [], (stdin, answer)
    code, answer = receive(tmp_path, b'{"commit": "zeros"}', options=("--zeros", "--group", str(gid)))
    assert code == 0 and answer == {"bytes": SIZE, "sha256": None, "paths": answer["paths"]}, answer
    for node in ("a", "b"):
        st = (tmp_path / "nodes" / node / "cache" / "img").stat()
        assert st.st_size == SIZE, st
        with open(tmp_path / "nodes" / node / "cache" / "img", "rb") as fh, contextlib.suppress(OSError):
            assert os.lseek(fh.fileno(), 0, os.SEEK_DATA) == SIZE, "data in a stand-in"  # (ENXIO: all holes)
        assert st.st_mode & 0o777 == 0o640 and st.st_gid == gid, st
