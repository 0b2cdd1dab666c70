"""The Credit System on a database (issue 20): the ledger's arithmetic and refusals, a property
against the in-memory CreditSystem, 20 processes hammering the same accounts, and the SpeQuloS
policy billing the ledger through LedgerBank; on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skylease.control.qos import CreditError, CreditSystem, SpeQuloS
from skylease.model.errors import UserError
from skylease.runtime.qos import ledger as L
from skylease.runtime.qos.ledger import MAX_CREDITS, CreditRefused, Ledger, LedgerBank
from skylease.service.db import engine_for

from .ledger_hammer import USERS, hammer_loop

#: How long the 20 clients hammer the ledger, on each database (the issue's Done-when: 30 s).
HAMMER_S = 30
CLIENTS = 20
HAMMER_CLIENT = Path(__file__).with_name("ledger_hammer.py")


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request, tmp_path):
    """(url or None, data folder, engine) on each database."""
    url = None if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    engine = engine_for(url, tmp_path / "serve")
    yield url, tmp_path / "serve", engine
    engine.dispose()


@pytest.fixture
def led(backend):
    return Ledger(backend[2])


def rows(engine: sa.Engine) -> list[tuple[str, str, int | None, int]]:
    """The ledger's movements as (kind, user, bot, micro-credits), in order."""
    with engine.connect() as c:
        t = L.ledger.c
        q = sa.select(t.kind, t.user, t.bot, t.amount).order_by(t.id)
        return [(k, u, None if b is None else int(b), int(a)) for k, u, b, a in c.execute(q)]


def check_books(engine: sa.Engine, led: Ledger) -> None:
    """The invariants, from the tables themselves: each cached order equals its ledger sums and is
    not spent past its order; each balance equals deposits + refunds − orders and is >= 0."""
    sums: Counter[tuple[str, int | None, str]] = Counter()
    balance: Counter[str] = Counter()
    for kind, user, bot, amount in rows(engine):
        sums[kind, bot, user] += amount
        balance[user] += {"deposit": amount, "refund": amount, "order": -amount, "bill": 0}[kind]
    with engine.connect() as c:
        cached = list(c.execute(sa.select(L.orders)))
    for o in cached:
        assert o.ordered == sums["order", o.bot, o.user] and o.spent == sums["bill", o.bot, o.user], o
        assert 0 <= o.spent <= o.ordered
        refund = sums["refund", o.bot, o.user]
        assert refund == (o.ordered - o.spent if o.closed else 0), o
    assert {b for _, b, _ in sums if b is not None} <= {o.bot for o in cached}
    for user, micro in balance.items():
        assert micro >= 0 and led.balance(user) == micro / 1e6
    assert {a.user: a.balance for a in led.accounts()} == {u: m / 1e6 for u, m in balance.items()}
    assert led.audit() == []


# -- arithmetic and refusals ------------------------------------------------------------------------
def test_balance_is_deposits_plus_refunds_minus_orders(backend, led):
    led.deposit("ann", 100, note="welcome")
    led.order("ann", 1, 30)
    assert led.bill(1, 10, worker="cw-3").spent == 10
    led.order("ann", 2, 20)
    led.order("ann", 1, 5)  # adds to the open order
    assert led.balance("ann") == 45 and led.order_of(1).ordered == 35
    assert led.pay(1) == 25  # 35 ordered − 10 spent
    assert led.balance("ann") == 70 and led.order_of(1).closed and led.order_of(1).remaining == 25
    assert led.order_of(2).remaining == 20 and led.order_of(99) is None
    got = [(m.kind, m.bot, m.amount, m.worker, m.note) for m in led.movements("ann", 3)]
    assert got == [("refund", 1, 25, None, None), ("order", 1, 5, None, None), ("order", 2, 20, None, None)]
    assert [m.kind for m in led.movements("ann")][-3:] == ["bill", "order", "deposit"]
    assert led.balance("nobody") == 0 and led.movements("nobody") == []
    check_books(backend[2], led)


def test_an_order_larger_than_the_balance_is_refused_with_the_reason(backend, led):
    led.deposit("ann", 10)
    before = rows(backend[2])
    with pytest.raises(CreditRefused, match=r"^ann has 10 credits, 10.5 ordered for BoT 4$") as exc:
        led.order("ann", 4, 10.5)
    assert exc.value.reason == "short" and "\n" not in str(exc.value) and isinstance(exc.value, UserError)
    with pytest.raises(CreditRefused, match="has 0 credits"):
        led.order("bob", 5, 1)
    assert rows(backend[2]) == before and led.order_of(4) is None
    led.order("ann", 4, 10)  # exactly the balance is fine
    assert led.balance("ann") == 0


def test_a_bill_past_the_order_is_refused_and_pay_refunds_once(backend, led):
    led.deposit("ann", 50)
    led.order("ann", 7, 3)
    led.bill(7, 1)
    led.bill(7, 1.75)
    over = r"^BoT 7: billing 0.5 would spend 3.25 of 3 credits ordered$"
    with pytest.raises(CreditRefused, match=over) as e:
        led.bill(7, 0.5)
    assert e.value.reason == "over"
    led.bill(7, 0.25)  # to the last micro-credit
    assert led.order_of(7).remaining == 0
    with pytest.raises(CreditRefused, match="would spend"):
        led.bill(7, 1e-6)
    led.order("ann", 8, 10)
    led.bill(8, 4)
    assert led.pay(8) == 6 and led.pay(8) == 0 and led.balance("ann") == 43
    assert [m.kind for m in led.movements("ann")].count("refund") == 1
    for move in (lambda: led.bill(8, 1), lambda: led.order("ann", 8, 1)):
        with pytest.raises(CreditRefused, match=r"^BoT 8: its order is paid and closed$") as exc:
            move()
        assert exc.value.reason == "closed"
    for move in (lambda: led.bill(9, 1), lambda: led.pay(9)):
        with pytest.raises(CreditRefused, match=r"^no credits ordered for BoT 9$") as exc:
            move()
        assert exc.value.reason == "none"
    assert led.pay(7) == 0  # fully spent: closed, nothing to refund
    check_books(backend[2], led)


def test_float_amounts_do_not_drift_past_the_order(backend, led):
    led.deposit("ann", 1)
    led.order("ann", 1, 1)
    for _ in range(10):
        led.bill(1, 0.1)  # ten float tenths sum to 0.9999999999999999 or 1.0000000000000002
    assert led.order_of(1).spent == 1 and led.order_of(1).remaining == 0
    with pytest.raises(CreditRefused):
        led.bill(1, 1e-6)
    assert led.pay(1) == 0 and led.balance("ann") == 0


def test_nobody_orders_on_another_users_bot(backend, led):
    led.deposit("ann", 10)
    led.deposit("bob", 10)
    led.order("bob", 3, 5)
    with pytest.raises(CreditRefused, match=r"^BoT 3 has an order of another user$") as exc:
        led.order("ann", 3, 1)
    assert exc.value.reason == "owner" and "bob" not in str(exc.value)
    led.pay(3)
    with pytest.raises(CreditRefused, match="another user"):
        led.order("ann", 3, 1)
    assert led.balance("ann") == 10 and led.balance("bob") == 10


@pytest.mark.parametrize("amount", [-1, 0, 1e-7, math.nan, math.inf, -math.inf, 1e13, MAX_CREDITS * 1.01,
                                    "5", True, None])
def test_bad_amounts_are_one_line_and_write_nothing(backend, led, amount):
    led.deposit("ann", 10)
    led.order("ann", 1, 5)
    before = rows(backend[2])
    cap = -1 if amount in (0, 1e-7) else amount  # (0 and 1e-7 are fine caps)
    for move in (lambda: led.deposit("ann", amount), lambda: led.order("ann", 2, amount),
                 lambda: led.bill(1, amount), lambda: led.top_up("ann", cap)):
        with pytest.raises(UserError) as exc:
            move()
        assert not isinstance(exc.value, CreditRefused)
        assert exc.value.field in ("amount", "cap") and "\n" not in str(exc.value)
        assert "must be a finite number" in str(exc.value)
    assert rows(backend[2]) == before


def test_bad_names_ids_and_limits_are_one_line(led):
    for move, field in ((lambda: led.deposit("", 1), "user"), (lambda: led.balance("x" * 65), "user"),
                        (lambda: led.order("ann", -1, 1), "bot"), (lambda: led.order("ann", 1.5, 1), "bot"),
                        (lambda: led.bill(2**63, 1), "bot"), (lambda: led.movements("ann", 0), "limit"),
                        (lambda: led.bill(1, 1, worker="w" * 200), "worker"),
                        (lambda: led.deposit("ann", 1, note=3), "note")):
        with pytest.raises(UserError) as exc:
            move()
        assert exc.value.field == field and "\n" not in str(exc.value)


def test_no_balance_grows_past_the_limit(backend, led):
    led.deposit("ann", MAX_CREDITS)
    with pytest.raises(CreditRefused, match="would pass the limit") as exc:
        led.deposit("ann", 1)
    assert exc.value.reason == "cap" and led.balance("ann") == MAX_CREDITS


def test_top_up_is_the_deposit_policy(backend, led):
    assert led.top_up("ann", 200) == 200
    led.order("ann", 1, 150)
    assert led.top_up("ann", 200) == 150 and led.top_up("ann", 200) == 0
    assert led.top_up("ann", 100) == 0 and led.balance("ann") == 200
    last = led.movements("ann", 1)[0]
    assert (last.kind, last.amount, last.note) == ("deposit", 150, "top-up")
    led.deposit("bob", 1)
    assert [(a.user, a.balance) for a in led.accounts()] == [("ann", 200), ("bob", 1)]


# -- a property against the in-memory CreditSystem -------------------------------------------------------
OPS = st.lists(st.tuples(st.sampled_from(["deposit", "order", "bill", "pay"]),
                         st.sampled_from(["ann", "bob"]), st.integers(0, 3),
                         st.integers(1, 400).map(lambda q: q / 4)), max_size=30)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=OPS)
def test_any_sequence_keeps_the_books_as_the_in_memory_bank(backend, ops):
    engine = backend[2]
    led = Ledger(engine)
    with engine.begin() as c:  # one database for every example: start each from empty books
        for table in (L.ledger, L.orders, L.accounts):
            c.execute(sa.delete(table))
    model, placed = CreditSystem(), set()
    for op, user, bot, amount in ops:
        if op == "deposit":
            model.deposit(user, amount)
            led.deposit(user, amount)
            continue
        if op != "order" and bot not in placed:
            with pytest.raises(CreditRefused) as exc:
                led.bill(bot, amount) if op == "bill" else led.pay(bot)
            assert exc.value.reason == "none"
            continue
        try:
            ok = (model.order(user, bot, amount) if op == "order" else model.bill(bot, "w", amount)
                  if op == "bill" else model.pay(bot))
        except CreditError:
            with pytest.raises(CreditRefused) as exc:
                led.order(user, bot, amount) if op == "order" else led.bill(bot, amount)
            assert exc.value.reason in ("owner", "closed", "over")
            continue
        if op == "order" and not ok:
            with pytest.raises(CreditRefused) as exc:
                led.order(user, bot, amount)
            assert exc.value.reason == "short"
        elif op == "order":
            led.order(user, bot, amount)
            placed.add(bot)
        elif op == "bill":
            led.bill(bot, amount)
        else:
            assert led.pay(bot) == ok
        for u in ("ann", "bob"):
            assert led.balance(u) == model.balance(u) >= 0
        for b in placed:
            o, got = model.get(b), led.order_of(b)
            assert (got.user, got.ordered, got.spent, got.closed) == (o.user, o.ordered, o.spent, o.closed)
            assert got.spent <= got.ordered
    check_books(engine, led)


# -- 20 clients at once ----------------------------------------------------------------------------------
@pytest.mark.integration  # a hammer: 20 client processes on a real database
def test_twenty_clients_at_once_never_overdraw_nor_overspend_nor_lose_a_movement(backend, tmp_path):
    """The issue's Done-when, as written: 20 clients for 30 s on each database."""
    hammer(backend, tmp_path, HAMMER_S)


def hammer(backend, tmp_path: Path, seconds: float) -> None:
    """20 client processes for ``seconds`` on three accounts; then the books must be exact."""
    url, data_dir, engine = backend
    led = Ledger(engine)
    for user in USERS:
        led.deposit(user, 60)
    go = tmp_path / "go"
    outs = [tmp_path / f"client-{i}.json" for i in range(CLIENTS)]
    procs = [subprocess.Popen([sys.executable, str(HAMMER_CLIENT), url or "", str(data_dir), str(i), str(go),
                               str(out), str(seconds)]) for i, out in enumerate(outs)]
    try:
        deadline = time.monotonic() + 120
        while not all(Path(f"{out}.ready").exists() for out in outs):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a client died"
            time.sleep(0.05)
        (tmp_path / "go.tmp").write_text(repr(time.time() + 0.2))
        (tmp_path / "go.tmp").rename(go)
        for p in procs:
            assert p.wait(timeout=seconds + 120) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    check_hammer(engine, led, [json.loads(out.read_text()) for out in outs])


def check_hammer(engine: sa.Engine, led: Ledger, reports: list[dict]) -> None:
    """The books after the clients of ``reports``, each account having started with 60 credits."""
    done = Counter(tuple(m) for r in reports for m in r["done"])
    refused = sum((Counter(r["refused"]) for r in reports), Counter())
    # nothing lost, nothing doubled: the ledger holds exactly the movements the clients were told of
    assert Counter(rows(engine)) == done + Counter(("deposit", u, None, 60_000_000) for u in USERS)
    assert not any(r["negative"] for r in reports)
    check_books(engine, led)
    # the hammer did press: every movement happened often, and every guard refused something
    kinds = Counter(k for (k, *_), n in done.items() for _ in range(n))
    assert min(kinds[k] for k in ("order", "bill", "refund", "deposit")) >= 10, kinds
    assert min(refused[r] for r in ("short", "over", "owner", "closed")) >= 1, refused
    print(f"{engine.dialect.name}: {sum(kinds.values())} movements {dict(kinds)}, refused {dict(refused)}")


@pytest.mark.integration  # a hammer: threads on one real database
def test_threads_sharing_one_engine_keep_the_books_too(backend):
    """The server's request threads share one engine (and its pool of connections)."""
    engine = backend[2]
    led = Ledger(engine)
    for user in USERS:
        led.deposit(user, 60)
    t0 = time.time() + 0.1
    with ThreadPoolExecutor(8) as pool:
        reports = list(pool.map(lambda i: hammer_loop(led, i, t0, 3.0), range(8)))
    check_hammer(engine, led, json.loads(json.dumps(reports)))


def test_a_movement_waits_out_another_writer_on_sqlite_and_retries_past_the_busy_timeout(tmp_path):
    """A writer holding SQLite's lock longer than the driver waits ("database is locked") delays a
    movement but does not fail it: the ledger retries until the lock is free."""
    import sqlite3
    import threading

    Ledger(engine_for(None, tmp_path)).deposit("ann", 5)  # the file, in WAL mode, with the tables
    impatient = sa.create_engine(f"sqlite:///{tmp_path / 'skylease.sqlite'}", connect_args={"timeout": 0.05})
    led = Ledger(impatient)
    other = sqlite3.connect(tmp_path / "skylease.sqlite", isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.6, other.execute, ["COMMIT"])
    release.start()
    t = time.monotonic()
    led.deposit("ann", 1)
    assert time.monotonic() - t >= 0.5 and led.balance("ann") == 6
    release.join()
    other.close()
    impatient.dispose()


# -- the SpeQuloS policy billing the ledger --------------------------------------------------------------
def test_the_spequlos_policy_bills_the_ledger_as_it_bills_the_in_memory_bank(backend, led):
    from skylease.model.availability import Availability, AvailabilityTrace
    from skylease.sim.dg import DesktopGridEnv

    # four nodes, one 20 times slower: its last task is the tail that cloud workers remove
    up = Availability.from_intervals([(0, 1e6)])
    trace = AvailabilityTrace("test", (up, up, up, up), 0.0, 1e6)

    def run(bank):
        env = DesktopGridEnv("xwhep", trace, [1e6] * 20, powers=[1000, 1000, 1000, 50], seed=1)
        policy = SpeQuloS("9C-C-R", 300, bank=bank, user="ann", bot=7)
        return env.run(policy), policy

    memory = CreditSystem()
    memory.deposit("ann", 500)
    led.deposit("ann", 500)
    (res_m, pol_m), (res_l, pol_l) = run(memory), run(LedgerBank(led))
    assert pol_l.spent > 0 and pol_l.cws  # cloud workers were rented and billed
    assert pol_l.summary() == pol_m.summary() and res_l.completion_s == res_m.completion_s
    o = led.order_of(7)
    assert o.closed and o.spent == pol_l.spent and o.ordered == 300
    assert pol_l.refund == 300 - o.spent and led.balance("ann") == 500 - o.spent == memory.balance("ann")
    bills = [m for m in led.movements("ann", 1000) if m.kind == "bill"]
    assert math.fsum(m.amount for m in bills) == o.spent
    assert {m.worker for m in bills} == {str(h) for h in pol_l.cws if pol_l.cws[h].billed > 0}
    check_books(backend[2], led)


def test_ledger_bank_answers_as_the_in_memory_bank(led):
    bank = LedgerBank(led)
    bank.deposit("ann", 10)
    bank.deposit("ann", 0)
    assert bank.balance("ann") == 10
    assert bank.order("ann", 1, 20) is False and bank.order("ann", 1, 0) is False
    assert bank.order("ann", 1, 4) is True
    assert bank.has_credits(1, 4) and not bank.has_credits(1, 4.000001) and not bank.has_credits(2)
    bank.bill(1, 3, 1.5)
    assert bank.get(1).remaining == 2.5
    with pytest.raises(CreditError, match="would spend"):
        bank.bill(1, 3, 3)
    with pytest.raises(CreditError, match="another user"):
        bank.order("bob", 1, 1)
    with pytest.raises(CreditError, match="finite"):
        bank.bill(1, 3, math.nan)
    with pytest.raises(KeyError):
        bank.get(2)
    with pytest.raises(KeyError):
        bank.pay(2)
    assert bank.pay(1) == 2.5 and bank.pay(1) == 0 and not bank.has_credits(1, 0.5)
    with pytest.raises(CreditError, match="closed"):
        bank.order("ann", 1, 1)


