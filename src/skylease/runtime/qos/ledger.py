"""The SpeQuloS Credit System on the service's database (issue 20, decisions S28, S29).

Every movement of credits is one row of the ledger ``qos_ledger``: a ``deposit`` (an
administrator, or the deposit policy :meth:`Ledger.top_up`), an ``order`` (credits moved from a
user's account to one BoT), a ``bill`` (a cloud worker's turn charged to that order) and a
``refund`` (the unspent rest of an order, given back when it is paid). The ledger is the truth:

* a user's balance = deposits + refunds − orders (a bill spends credits already ordered: it does
  not touch the balance again);
* an order's spent = the sum of its bills, its remaining = ordered − spent.

``qos_orders`` caches each order's sums (ordered, spent, closed) and is written in the same
transaction as the movement; :meth:`Ledger.audit` checks that it agrees with the ledger.
``qos_accounts`` holds one row per user: the row every movement of that user locks first.

Amounts are stored as whole **micro-credits** (10⁻⁶ credit, ``BigInteger``), so sums are exact
on both databases and no float rounding can let a BoT's bills drift past its order; the API takes
and returns credits as floats, rounded to the micro-credit. An amount is finite, at least one
micro-credit and at most :data:`MAX_CREDITS`; no balance grows past :data:`MAX_CREDITS` either
(so a bad request body cannot store absurd numbers, and SQLite's 64-bit sums cannot overflow).

Concurrency: one transaction per movement, which first locks the account it moves (PostgreSQL:
``SELECT ... FOR UPDATE`` on the ``qos_accounts`` row; SQLite: ``BEGIN IMMEDIATE``, which takes the
database's one write lock before anything is read), then reads, checks and writes. A transaction
locks one account only, so movements cannot deadlock each other. A lock that cannot be had within
SQLite's busy timeout ("database is locked"), a PostgreSQL serialization failure or deadlock, and
the loser of two first orders for one BoT at once are retried until :data:`LOCK_WAIT_S`.

Users are plain names (the service's user names: this layer does not import ``skylease.service``).
:class:`LedgerBank` lets the SpeQuloS policy of :mod:`skylease.control.qos` bill this ledger
through the interface of its in-memory :class:`~skylease.control.qos.credits.CreditSystem`.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from skylease.control.qos.credits import CreditError
from skylease.model.errors import UserError
from skylease.model.limits import MAX_CREDITS, check_number

__all__ = ["LOCK_WAIT_S", "MAX_CREDITS", "METADATA", "Account", "CreditRefused", "Ledger", "LedgerBank",
           "Movement", "OrderView"]

# MAX_CREDITS (skylease.model.limits, 1e9): the largest amount one movement may carry, and the largest
# balance, in credits (a year of 200 nodes at 15 credits/h is 2.6e7: this is far above any real
# need, far below int64 overflow).
#: Micro-credits per credit: the unit amounts are stored in.
MICRO = 1_000_000
#: How long a movement keeps retrying a busy database before the error is raised (seconds).
LOCK_WAIT_S = 60.0
#: The longest user name (the service's ``users.name``), worker name and note.
MAX_USER, MAX_WORKER, MAX_NOTE = 64, 128, 256
#: The most movements one :meth:`Ledger.movements` call lists.
MAX_LIST = 10_000
#: BoT ids are 64-bit keys.
MAX_BOT = 2**63 - 1

Kind = Literal["deposit", "order", "bill", "refund"]
KINDS: tuple[Kind, ...] = ("deposit", "order", "bill", "refund")
Refusal = Literal["short", "owner", "closed", "over", "none", "cap"]

METADATA = sa.MetaData()
#: A 64-bit key that SQLite also makes its row id (autoincrement needs INTEGER there).
_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")
_MICRO_NOTE = "micro-credits (1e-6 credit)"

accounts = sa.Table(
    "qos_accounts", METADATA,
    sa.Column("user", sa.String(MAX_USER), primary_key=True),
)
ledger = sa.Table(
    "qos_ledger", METADATA,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("user", sa.String(MAX_USER), nullable=False, index=True),
    sa.Column("bot", sa.BigInteger, index=True),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("amount", sa.BigInteger, nullable=False, comment=_MICRO_NOTE),
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("worker", sa.String(MAX_WORKER)),
    sa.Column("note", sa.String(MAX_NOTE)),
    sa.CheckConstraint("amount > 0", name="qos_ledger_amount_positive"),
    sa.CheckConstraint("kind IN ('deposit', 'order', 'bill', 'refund')", name="qos_ledger_kind"),
)
orders = sa.Table(
    "qos_orders", METADATA,
    sa.Column("bot", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("user", sa.String(MAX_USER), nullable=False, index=True),
    sa.Column("ordered", sa.BigInteger, nullable=False, comment=_MICRO_NOTE),
    sa.Column("spent", sa.BigInteger, nullable=False, comment=_MICRO_NOTE),
    sa.Column("closed", sa.Boolean, nullable=False),
    # the database itself refuses an order spent past what it holds, whatever the code does
    sa.CheckConstraint("spent >= 0 AND spent <= ordered", name="qos_orders_spent_within_order"),
)

T = TypeVar("T")


class CreditRefused(UserError):
    """A movement the Credit System refuses; the message is the one-line reason, ``reason`` its
    kind: ``short`` (balance too low), ``owner`` (the BoT's order is another user's), ``closed``
    (the order was paid), ``over`` (a bill past the order), ``none`` (no order for that BoT),
    ``cap`` (a deposit past :data:`MAX_CREDITS`)."""

    def __init__(self, message: str, *, reason: Refusal) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class OrderView:
    """A BoT's order: who placed it, credits ordered and spent, whether it was paid (closed)."""

    bot: int
    user: str
    ordered: float
    spent: float
    closed: bool

    @property
    def remaining(self) -> float:
        """Credits ordered and not spent (a paid order keeps its sums: its refund was this)."""
        return _credits(_micro_of(self.ordered) - _micro_of(self.spent))


@dataclass(frozen=True, slots=True)
class Movement:
    """One row of the ledger (amount in credits)."""

    id: int
    user: str
    bot: int | None
    kind: str
    amount: float
    at: float
    worker: str | None
    note: str | None


@dataclass(frozen=True, slots=True)
class Account:
    """A user's account and its balance (credits)."""

    user: str
    balance: float


# -- checks -----------------------------------------------------------------------------------------
def _credits(micro: int) -> float:
    return micro / MICRO


def _micro_of(credits: float) -> int:
    return round(credits * MICRO)


def _amount(value: object, field: str = "amount") -> int:
    """A movement's amount in micro-credits: finite, >= one micro-credit, <= MAX_CREDITS."""
    v = check_number(value, field, minimum=1 / MICRO, maximum=MAX_CREDITS,
                     hint="credits, at least one micro-credit")
    return max(1, _micro_of(v))


def _user(user: object) -> str:
    if not isinstance(user, str) or not 1 <= len(user) <= MAX_USER:
        raise UserError(f"must be a user name of 1 to {MAX_USER} characters, got {user!r}", field="user")
    return user


def _bot(bot: object) -> int:
    if isinstance(bot, bool) or not isinstance(bot, int) or not 0 <= bot <= MAX_BOT:
        raise UserError(f"must be a BoT id (a whole number >= 0), got {bot!r}", field="bot")
    return bot


def _text(value: object, field: str, longest: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > longest:
        raise UserError(f"must be text of at most {longest} characters", field=field)
    return value


_SIGNED = sa.case((ledger.c.kind == "order", -ledger.c.amount), (ledger.c.kind == "bill", 0),
                  else_=ledger.c.amount)


def _order_view(row: Any) -> OrderView:
    return OrderView(int(row.bot), row.user, _credits(int(row.ordered)), _credits(int(row.spent)),
                     bool(row.closed))


# -- the ledger -------------------------------------------------------------------------------------
class Ledger:
    """The Credit System on ``engine`` (SQLite or PostgreSQL; its tables are created if missing).

    ``clock`` gives the ``at`` of each movement (Unix seconds).
    """

    def __init__(self, engine: sa.Engine, clock: Callable[[], float] = time.time) -> None:
        self.engine = engine
        self.clock = clock
        self._sqlite = engine.dialect.name == "sqlite"
        self._insert = sqlite.insert if self._sqlite else postgresql.insert
        METADATA.create_all(engine, checkfirst=True)

    # -- movements --------------------------------------------------------------------------------
    def deposit(self, user: str, amount: float, note: str | None = None) -> None:
        """Credit ``user``'s account with ``amount`` (refused past :data:`MAX_CREDITS`)."""
        user, micro, note = _user(user), _amount(amount), _text(note, "note", MAX_NOTE)

        def move(c: sa.Connection) -> None:
            self._lock(c, user)
            balance = self._balance(c, user)
            if balance + micro > MAX_CREDITS * MICRO:
                raise CreditRefused(f"{user} holds {_credits(balance):g} credits: a deposit of "
                                    f"{_credits(micro):g} would pass the limit of {MAX_CREDITS:g}",
                                    reason="cap")
            self._record(c, user, None, "deposit", micro, note=note)
        self._transaction(move)

    def top_up(self, user: str, cap: float) -> float:
        """The deposit policy: bring ``user``'s balance up to ``cap``; returns the deposit (credits)."""
        user = _user(user)
        cap_micro = _micro_of(check_number(cap, "cap", minimum=0, maximum=MAX_CREDITS))

        def move(c: sa.Connection) -> int:
            self._lock(c, user)
            d = max(0, cap_micro - self._balance(c, user))
            if d > 0:
                self._record(c, user, None, "deposit", d, note="top-up")
            return d
        return _credits(self._transaction(move))

    def order(self, user: str, bot: int, amount: float) -> OrderView:
        """Move ``amount`` from ``user``'s account to ``bot``'s order (ordering again for an open
        order of the same user adds to it); refused when the balance is short, or the BoT's order
        is someone else's or closed. Returns the order."""
        user, bot, micro = _user(user), _bot(bot), _amount(amount)

        def move(c: sa.Connection) -> OrderView:
            self._lock(c, user)
            row = self._order_row(c, bot)
            if row is not None and row.user != user:
                raise CreditRefused(f"BoT {bot} has an order of another user", reason="owner")
            if row is not None and row.closed:
                raise CreditRefused(f"BoT {bot}: its order is paid and closed", reason="closed")
            balance = self._balance(c, user)
            if balance < micro:
                raise CreditRefused(f"{user} has {_credits(balance):g} credits, "
                                    f"{_credits(micro):g} ordered for BoT {bot}", reason="short")
            if row is None:
                # a concurrent first order for this BoT makes this insert fail: retried, it sees it
                c.execute(sa.insert(orders).values(bot=bot, user=user, ordered=micro, spent=0, closed=False))
            else:
                c.execute(sa.update(orders).where(orders.c.bot == bot)
                          .values(ordered=orders.c.ordered + micro))
            self._record(c, user, bot, "order", micro)
            return _order_view(self._order_row(c, bot))
        return self._transaction(move)

    def bill(self, bot: int, amount: float, worker: str | None = None) -> OrderView:
        """Charge ``amount`` (for ``worker``) to ``bot``'s order; refused past what it ordered, or
        when it is closed or missing. Returns the order."""
        bot, micro, worker = _bot(bot), _amount(amount), _text(worker, "worker", MAX_WORKER)

        def move(c: sa.Connection) -> OrderView:
            row = self._locked_order(c, bot)
            if row.closed:
                raise CreditRefused(f"BoT {bot}: its order is paid and closed", reason="closed")
            if row.spent + micro > row.ordered:
                raise CreditRefused(f"BoT {bot}: billing {_credits(micro):g} would spend "
                                    f"{_credits(row.spent + micro):g} of {_credits(row.ordered):g} "
                                    "credits ordered", reason="over")
            c.execute(sa.update(orders).where(orders.c.bot == bot).values(spent=orders.c.spent + micro))
            self._record(c, row.user, bot, "bill", micro, worker=worker)
            return _order_view(self._order_row(c, bot))
        return self._transaction(move)

    def pay(self, bot: int) -> float:
        """Close ``bot``'s order and refund its unspent credits to its user; returns the refund.

        Idempotent: paying a closed order refunds 0 and records nothing.
        """
        bot = _bot(bot)

        def move(c: sa.Connection) -> int:
            row = self._locked_order(c, bot)
            if row.closed:
                return 0
            c.execute(sa.update(orders).where(orders.c.bot == bot).values(closed=True))
            refund = int(row.ordered) - int(row.spent)
            if refund > 0:
                self._record(c, row.user, bot, "refund", refund)
            return refund
        return _credits(self._transaction(move))

    # -- reading ----------------------------------------------------------------------------------
    def balance(self, user: str) -> float:
        """``user``'s credits: deposits + refunds − orders (0 for a user with no account)."""
        user = _user(user)
        with self.engine.connect() as c:
            return _credits(self._balance(c, user))

    def order_of(self, bot: int) -> OrderView | None:
        """``bot``'s order, or None if none was placed."""
        bot = _bot(bot)
        with self.engine.connect() as c:
            row = self._order_row(c, bot)
        return None if row is None else _order_view(row)

    def movements(self, user: str, limit: int = 100) -> list[Movement]:
        """``user``'s latest ``limit`` movements, newest first."""
        user = _user(user)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST:
            raise UserError(f"must be a whole number from 1 to {MAX_LIST:,}, got {limit!r}", field="limit")
        q = sa.select(ledger).where(ledger.c.user == user).order_by(ledger.c.id.desc()).limit(limit)
        with self.engine.connect() as c:
            return [Movement(int(r.id), r.user, None if r.bot is None else int(r.bot), r.kind,
                             _credits(int(r.amount)), float(r.at), r.worker, r.note)
                    for r in c.execute(q)]

    def accounts(self) -> list[Account]:
        """Every account with its balance, by user name."""
        q = (sa.select(accounts.c.user, sa.func.coalesce(sa.func.sum(_SIGNED), 0))
             .select_from(accounts.outerjoin(ledger, ledger.c.user == accounts.c.user))
             .group_by(accounts.c.user).order_by(accounts.c.user))
        with self.engine.connect() as c:
            return [Account(u, _credits(int(b))) for u, b in c.execute(q)]

    def audit(self) -> list[str]:
        """What disagrees between the ledger and its caches, or is impossible (an empty list when
        all is well): each order's ordered/spent against its movements, refunds of open orders,
        spent past ordered, negative balances."""
        sums = (sa.select(ledger.c.bot, ledger.c.kind, sa.func.sum(ledger.c.amount), sa.func.count())
                .where(ledger.c.bot.is_not(None)).group_by(ledger.c.bot, ledger.c.kind))
        problems: list[str] = []
        with self.engine.connect() as c:
            by_bot: dict[int, dict[str, tuple[int, int]]] = {}
            for bot, kind, total, n in c.execute(sums):
                by_bot.setdefault(int(bot), {})[kind] = (int(total), int(n))
            cached = {int(r.bot): r for r in c.execute(sa.select(orders))}
        for bot in sorted(set(by_bot) | set(cached)):
            got, row = by_bot.get(bot, {}), cached.get(bot)
            ordered, spent = got.get("order", (0, 0))[0], got.get("bill", (0, 0))[0]
            refund, n_refunds = got.get("refund", (0, 0))
            if row is None:
                problems.append(f"BoT {bot}: movements but no order")
                continue
            if (int(row.ordered), int(row.spent)) != (ordered, spent):
                problems.append(f"BoT {bot}: cache says ordered {row.ordered} spent {row.spent} (µcredits), "
                                f"ledger says {ordered} and {spent}")
            if spent > ordered:
                problems.append(f"BoT {bot}: spent {spent} past its order of {ordered} µcredits")
            if n_refunds > 1 or (n_refunds and (not row.closed or refund != ordered - spent)):
                state = "a closed" if row.closed else "an open"
                problems.append(f"BoT {bot}: {n_refunds} refunds of {refund} µcredits for {state} order "
                                f"of {ordered}, spent {spent}")
        problems += [f"{a.user}: negative balance {a.balance:g}" for a in self.accounts() if a.balance < 0]
        return problems

    # -- inside a movement's transaction ------------------------------------------------------------
    def _transaction(self, move: Callable[[sa.Connection], T]) -> T:
        """Run ``move`` in one transaction that holds the write lock, retrying while the database is busy."""
        deadline = time.monotonic() + LOCK_WAIT_S
        pause = 0.001
        while True:
            try:
                with self.engine.connect() as c:
                    if self._sqlite:
                        # pysqlite (legacy transaction control) begins only before a write, and
                        # DEFERRED: a read-then-write could then lose the race to another writer.
                        # An explicit BEGIN IMMEDIATE takes the write lock first; the driver's
                        # commit() ends it, as it sees SQLite in a transaction.
                        c.exec_driver_sql("BEGIN IMMEDIATE")
                    out = move(c)
                    c.commit()
                    return out
            except sa.exc.DBAPIError as exc:
                if not self._retryable(exc) or time.monotonic() > deadline:
                    raise
            # jittered, growing pauses so that retrying clients do not collide again in step
            time.sleep(pause * (0.5 + random.random()))
            pause = min(pause * 2, 0.05)

    def _retryable(self, exc: sa.exc.DBAPIError) -> bool:
        if isinstance(exc, sa.exc.IntegrityError):  # two first orders for one BoT at once (not a CHECK)
            if self._sqlite:
                return "UNIQUE constraint failed: qos_orders" in str(exc.orig)
            return getattr(exc.orig, "sqlstate", None) == "23505" and "qos_orders" in str(exc.orig)
        if self._sqlite:
            text = str(exc.orig).lower()
            return "database is locked" in text or "database is busy" in text
        return getattr(exc.orig, "sqlstate", None) in ("40001", "40P01")  # serialization failure, deadlock

    def _lock(self, c: sa.Connection, user: str) -> None:
        """Make sure ``user`` has an account row, and lock it until the transaction ends."""
        c.execute(self._insert(accounts).values(user=user).on_conflict_do_nothing(index_elements=["user"]))
        if not self._sqlite:  # SQLite: BEGIN IMMEDIATE already holds the database's write lock
            c.execute(sa.select(accounts.c.user).where(accounts.c.user == user).with_for_update())

    def _locked_order(self, c: sa.Connection, bot: int) -> Any:
        """``bot``'s order row, read again after its user's account is locked (refused if none)."""
        row = self._order_row(c, bot)
        if row is None:
            raise CreditRefused(f"no credits ordered for BoT {bot}", reason="none")
        self._lock(c, row.user)  # an order never changes hands: this is the account to lock
        return self._order_row(c, bot)

    @staticmethod
    def _order_row(c: sa.Connection, bot: int) -> Any:
        return c.execute(sa.select(orders).where(orders.c.bot == bot)).first()

    @staticmethod
    def _balance(c: sa.Connection, user: str) -> int:
        q = sa.select(sa.func.coalesce(sa.func.sum(_SIGNED), 0)).where(ledger.c.user == user)
        return int(c.execute(q).scalar_one())

    def _record(self, c: sa.Connection, user: str, bot: int | None, kind: Kind, micro: int, *,
                worker: str | None = None, note: str | None = None) -> None:
        c.execute(sa.insert(ledger).values(user=user, bot=bot, kind=kind, amount=micro, at=self.clock(),
                                           worker=worker, note=note))


# -- the adapter for the SpeQuloS policy --------------------------------------------------------------
class LedgerBank:
    """A :class:`Ledger` with the interface of :class:`~skylease.control.qos.credits.CreditSystem`
    that :class:`~skylease.control.qos.SpeQuloS` uses, so the same policy bills a database.

    Users are the ledger's user names and BoTs its ids (``SpeQuloS(..., bank=LedgerBank(ledger),
    user="alice", bot=7)``). As the in-memory bank: ``order`` answers False when the balance is
    short and raises :class:`CreditError` for a BoT that is someone else's or closed; ``get`` and
    ``pay`` raise KeyError for a BoT with no order; ``bill`` raises CreditError past the order.
    Zero deposits and orders store nothing (the ledger holds no empty movement): a zero order
    answers False, so the policy never rents.
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def deposit(self, user: Hashable, amount: float) -> None:
        """Credit ``user``'s account (0: nothing)."""
        if amount != 0:
            _as_credit_error(lambda: self.ledger.deposit(str(user), amount))

    def balance(self, user: Hashable) -> float:
        """Credits in ``user``'s account."""
        return self.ledger.balance(str(user))

    def order(self, user: Hashable, bot: Hashable, credits: float) -> bool:
        """Order ``credits`` for ``bot``; False if the balance is short (or ``credits`` is 0)."""
        if credits == 0:
            o = self.ledger.order_of(_bot(bot))
            if o is not None and (o.closed or o.user != str(user)):
                raise CreditError(f"bag {bot!r} already has an order that is closed or someone else's")
            return False
        try:
            self.ledger.order(str(user), _bot(bot), credits)
        except CreditRefused as exc:
            if exc.reason == "short":
                return False
            raise CreditError(exc.message) from None
        except UserError as exc:
            raise CreditError(str(exc)) from None
        return True

    def get(self, bot: Hashable) -> OrderView:
        """``bot``'s order (KeyError if none)."""
        o = self.ledger.order_of(_bot(bot))
        if o is None:
            raise KeyError(f"no credits ordered for bag {bot!r}")
        return o

    def has_credits(self, bot: Hashable, amount: float = 1.0) -> bool:
        """Whether ``bot``'s open order can still pay ``amount``."""
        o = self.ledger.order_of(_bot(bot))
        return (o is not None and not o.closed and math.isfinite(amount)
                and _micro_of(o.spent) + _micro_of(amount) <= _micro_of(o.ordered))

    def bill(self, bot: Hashable, cw: Hashable, amount: float) -> None:
        """Charge ``amount`` for worker ``cw`` to ``bot``'s order (CreditError past it)."""
        _as_credit_error(lambda: self.ledger.bill(_bot(bot), amount, worker=str(cw)))

    def pay(self, bot: Hashable) -> float:
        """Close ``bot``'s order and refund the rest; returns the refund (KeyError if no order)."""
        try:
            return self.ledger.pay(_bot(bot))
        except CreditRefused as exc:
            if exc.reason == "none":
                raise KeyError(f"no credits ordered for bag {bot!r}") from None
            raise


def _as_credit_error(move: Callable[[], object]) -> None:
    """Run ``move``; the ledger's refusals and bad amounts become the in-memory bank's CreditError."""
    try:
        move()
    except UserError as exc:
        raise CreditError(exc.message if isinstance(exc, CreditRefused) else str(exc)) from None
