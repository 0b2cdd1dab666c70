"""Pools of SSH hosts described wrongly: a pools file's ``hosts``/``ssh``/``slots`` and the
``--hosts``/``--slots`` options are refused in one line naming the file, the line and the key (or
the option), exit 2, before anything is started; a host with a price of its own is a pool of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from skylease.cli import main
from skylease.experiments.run_options import RunOptions
from skylease.experiments.run_pools import pool_types


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], pools: str | None, *options: str) -> str:
    jobs = tmp_path / "jobs.txt"
    jobs.write_text("true\n")
    argv = ["run", str(jobs), "--out", str(tmp_path / "out"), *options]
    if pools is not None:
        (tmp_path / "pools.toml").write_text(pools)
        argv += ["--pools", str(tmp_path / "pools.toml")]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()
    return err.strip()


@pytest.mark.parametrize(("pools", "line", "key", "says"), [
    ('[pools.lab]\nhosts = ["127.0.0.1", "root@"]\n', 2, "pools.lab.hosts", "address"),
    ('[pools.lab]\nhosts = ["127.0.0.1:99999"]\n', 2, "pools.lab.hosts", "port"),
    ('[pools.lab]\nhosts = ["-oProxyCommand=x"]\n', 2, "pools.lab.hosts", "host name"),
    ('[pools.lab]\nhosts = []\n', 2, "pools.lab.hosts", ""),
    ('[pools.lab]\nslots = 2\n', 2, "pools.lab.slots", "goes with 'hosts'"),
    ('[pools.lab]\nhosts = ["h1"]\nslots = 0\n', 3, "pools.lab.slots", ">= 1"),
    ('[pools.lab]\nhosts = ["h1"]\naddress = "tcp://127.0.0.1:1"\n', 3, "pools.lab.address", "not both"),
    ('[pools.lab]\nhosts = ["h1"]\nssh = { usr = "root" }\n', 3, "pools.lab.ssh.usr", "unknown key"),
    ('[pools.lab]\nhosts = ["h1"]\nssh = { identity_file = "keys/none" }\n', 3, "pools.lab.ssh.identity_file",
     "no such file"),
    ('[pools.lab]\n[[pools.lab.hosts]]\naddress = "h1"\n[[pools.lab.hosts]]\naddress = "h2"\nslots = -1\n', 6,
     "pools.lab.hosts", ">= 1"),
    ('[pools.lab]\n[[pools.lab.hosts]]\naddress = "h1"\nprice = 1\n[[pools.lab.hosts]]\naddress = "h1"\n'
     'price = 2\n', 5, "pools.lab.hosts[1]", "twice"),
], ids=["no address", "port", "option injection", "empty", "slots alone", "slots 0", "with address",
        "ssh key", "identity file", "host table", "host twice"])
def test_a_wrong_pool_of_hosts_is_one_line(tmp_path, capsys, pools, line, key, says):
    err = refused(tmp_path, capsys, pools)
    assert f"pools.toml:{line}" in err and key in err and says in err, err


@pytest.mark.parametrize(("options", "says"), [
    (["--slots", "2"], "--slots: goes with --hosts"),
    (["--hosts", "h1,,h2"], "--hosts: an empty host"),
    (["--hosts", "root@h1:0"], "--hosts: the port"),
    (["--hosts", "bad user@h1"], "--hosts: must be [USER@]ADDRESS[:PORT]"),
], ids=["slots alone", "empty host", "port 0", "user"])
def test_wrong_hosts_options_are_one_line(tmp_path, capsys, options, says):
    assert says in refused(tmp_path, capsys, None, *options)


def test_hosts_and_a_pools_file_are_not_both_given(tmp_path, capsys):
    err = refused(tmp_path, capsys, '[pools.lab]\n', "--hosts", "h1")
    assert "--hosts and --pools" in err


def test_a_host_with_its_own_price_is_a_pool_of_its_own(tmp_path):
    (tmp_path / "k").write_text("")
    (tmp_path / "pools.toml").write_text(
        '[pools.lab]\nprice = 1\nslots = 2\nssh = { identity_file = "k" }\n'
        '[[pools.lab.hosts]]\naddress = "h1"\n'
        '[[pools.lab.hosts]]\naddress = "h2"\nuser = "root"\nport = 2222\n'
        '[[pools.lab.hosts]]\naddress = "h3"\nprice = 3\nslots = 1\n'
        '[[pools.lab.hosts]]\naddress = "h4"\nprice = 1\n')
    specs = pool_types(RunOptions(pools_file=tmp_path / "pools.toml"))
    assert list(specs) == ["lab", "lab.h3"]
    assert [h["address"] for h in specs["lab"]["hosts"]] == ["h1", "h2", "h4"]
    assert (specs["lab"]["price"], specs["lab"]["max_count"]) == (1, 6)
    assert (specs["lab.h3"]["price"], specs["lab.h3"]["max_count"]) == (3, 1)
    assert specs["lab"]["ssh"]["identity_file"] == str((tmp_path / "k").resolve())
    assert specs["lab"]["hosts"][1] == {"address": "h2", "port": 2222, "user": "root"}


def test_hosts_option_makes_the_hosts_pool():
    specs = pool_types(RunOptions(hosts="u@h1,h2:2222", slots=3, price=0.5))
    assert list(specs) == ["hosts"] and (specs["hosts"]["price"], specs["hosts"]["max_count"]) == (0.5, 6)
    assert specs["hosts"]["hosts"] == [{"address": "h1", "user": "u", "slots": 3},
                                       {"address": "h2", "port": 2222, "slots": 3}]
