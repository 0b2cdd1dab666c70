"""The token file `skylease login` writes is read back without the file schema (a client command's
start would pay for building it), and any other file still gets the schema's one-line errors, with
the file, the line and the key."""

from __future__ import annotations

import pytest

from skylease.model.errors import UserError
from skylease.runtime.credentials import Login, read_login, write_login


def test_the_file_login_writes_reads_back(tmp_path):
    path = tmp_path / "token"
    write_login(Login("http://127.0.0.1:8642", "abc-DEF_123"), path)
    assert read_login(path) == Login("http://127.0.0.1:8642", "abc-DEF_123")
    path.write_text('\ufeff# by hand\ntoken = "t0k"\nserver = " http://h:1 "\n')  # (any order, a BOM)
    assert read_login(path) == Login("http://h:1", "t0k")


@pytest.mark.parametrize(("text", "error"), [
    ('server = "http://a:1"\ntoken = "abc"\nextra = 1\n', "token:3: extra: unknown key 'extra'; the keys are "
                                                         "server, token"),
    ('server = "http://a:1"\ntoken = 5\n', "token:2: token: must be a string"),
    ('server = "http://a:1"\ntoken = "abc\n', "token:2: not valid TOML"),
    ('server = "http://a:1"\n', "token: token: required, but not given"),
    ('server = "http://a:1"\n[token]\nx = "y"\n', "token:2: token: must be a string"),
    (b'server = "\xff"\ntoken = "a"\n', "token:1: not a text file (invalid UTF-8)"),
])
def test_any_other_file_gets_the_schema_s_one_line_errors(tmp_path, text, error):
    path = tmp_path / "token"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    path.chmod(0o600)
    with pytest.raises(UserError) as exc:
        read_login(path)
    assert str(exc.value).startswith(str(tmp_path / error)), str(exc.value)
