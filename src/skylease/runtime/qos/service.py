"""SpeQuloS as one service (decision S29): Information, Credit System, Oracle and Scheduler together.

:class:`QoSService` is what the HTTP layer (and a simulation, in process) calls: it registers bags
of tasks, orders credits for them, takes the runs' reports (stored as the bag's progress, given to
its SpeQuloS policy, answered with instructions), predicts, and keeps accounts. Each call checks
who may do it: a user reaches only their own account and bags; an administrator reaches all.

After a restart the Scheduler's policies are gone (they live in memory); the database is not. A
run's next report re-attaches its bag: a new policy serves it on what is left of its order, and
the cloud workers the old one started are stopped (the new one does not know them, and the old
bills ended with the old process), so nothing runs unbilled and nothing is billed twice.

Watchers (the dashboard's live pages) follow a change counter (a
:class:`~skylease.runtime.changes.ChangeLog`): every registration, report, order, finish,
abandonment and deposit bumps it, and :meth:`QoSService.changed` says whether a given bag (or any
of a user's bags) was among the changes since a version, so a page is told only of its own bags.
"""

from __future__ import annotations

import threading
from typing import Any

import sqlalchemy as sa

from skylease.control.qos.relay import Instructions, Report
from skylease.control.qos.strategy import parse_strategy
from skylease.control.qos.tail import rank
from skylease.model.errors import UserError
from skylease.runtime.changes import KEPT, ChangeLog
from skylease.runtime.qos.bots import METADATA as BOTS_METADATA
from skylease.runtime.qos.bots import BotNotFound, BotRegistry
from skylease.runtime.qos.ledger import METADATA as LEDGER_METADATA
from skylease.runtime.qos.ledger import CreditRefused, Ledger, LedgerBank
from skylease.runtime.qos.scheduler import QoSScheduler

__all__ = ["MAX_BOTS_PER_USER", "METADATA", "BotsRefused", "NotYours", "QoSService"]

#: Running bags one user may have at once, unless the service is given another bound (``skylease
#: serve``'s ``max_bots_per_user``): one more is refused (docs/decisions/serve-fair-sharing.md).
MAX_BOTS_PER_USER = 1000
#: The latest changes kept to tell a watcher which bags changed (one further behind is told "yes").
TOUCHES = KEPT
#: A worker state (:class:`~skylease.model.host.HostState` value) counted as running, as booting.
RUNNING, BOOTING = frozenset({"idle", "busy"}), "booting"

#: Every table of the QoS service (for ``create_schema``).
METADATA: tuple[sa.MetaData, ...] = (LEDGER_METADATA, BOTS_METADATA)


def _exact(r: Report, k: int) -> float | None:
    """The time of the ``k``-th completion when this report carries it (else None)."""
    i = k - 1 - r.since_c
    return r.completions[i] if k >= 1 and 0 <= i < len(r.completions) else None


class _AdoptingBank(LedgerBank):
    """The ledger as a served bag's policy sees it: the service places orders itself (when a user
    orders, before the bag is attached), so the policy's own order at its start adopts the open
    order of its bag instead of ordering again (also after a restart: nothing is ordered twice)."""

    def order(self, user: Any, bot: Any, credits: float) -> bool:
        o = self.ledger.order_of(int(bot))
        if o is not None and not o.closed and o.user == str(user):
            return True
        return super().order(user, bot, credits)


class NotYours(LookupError):
    """A bag or account the caller may not reach (answered as not found: ids tell nothing)."""


class BotsRefused(UserError):
    """A registration past the user's bound on running bags (answered 409, with the reason)."""


class QoSService:
    """The four modules of SpeQuloS over one database; a user may have at most
    ``max_bots_per_user`` bags running at once."""

    def __init__(self, engine: sa.Engine, *, max_bots_per_user: int = MAX_BOTS_PER_USER) -> None:
        if max_bots_per_user < 1:
            raise UserError(f"must be at least 1, got {max_bots_per_user}", field="max_bots_per_user")
        self.max_bots_per_user = max_bots_per_user
        self.ledger = Ledger(engine)
        self.registry = BotRegistry(engine)
        self.scheduler = QoSScheduler(_AdoptingBank(self.ledger))
        self._lock = threading.Lock()
        self._registering = threading.Lock()  # (a user's count and their new bag: one at a time)
        self.changes = ChangeLog(TOUCHES)  # the bags changed (None: an account's, a deposit)

    # -- watchers ------------------------------------------------------------------------------
    def _touch(self, bot: int | None, owner: str) -> None:
        self.changes.touch(bot, owner)

    def version(self) -> int:
        """The change counter: it grows at each change of a bag or an account."""
        return self.changes.version

    def wait_change(self, seen: int, timeout: float) -> int:
        """The counter once it differs from ``seen``, or after ``timeout`` seconds."""
        return self.changes.wait(seen, timeout)

    async def wait_change_async(self, seen: int, timeout: float) -> int:
        """As :meth:`wait_change`, awaited on an event loop (no thread held while it waits)."""
        return await self.changes.wait_async(seen, timeout)

    def changed(self, caller: str | None, since: int, bot: int | None = None) -> bool:
        """Whether a bag the caller reaches (None: any), or the bag ``bot`` only, changed after
        version ``since`` (True too when that is further back than the changes kept)."""
        return self.changes.changed(caller, since, bot)

    # -- who may -------------------------------------------------------------------------------
    def _bot(self, caller: str | None, bot: int) -> Any:
        """The bag, if ``caller`` (None: an administrator) may reach it."""
        try:
            view = self.registry.bot(bot, owner=caller)
        except BotNotFound:
            raise NotYours(f"no bag of tasks {bot}") from None
        return view

    @staticmethod
    def _account(caller: str | None, user: str) -> None:
        if caller is not None and caller != user:
            raise NotYours(f"no account {user!r} for you: a user sees only their own")

    # -- Information ---------------------------------------------------------------------------
    def register(self, owner: str, infrastructure: str, n_tasks: int, *, strategy: str = "9C-C-R",
                 tick: float = 240.0, pool: str = "cloud", credits: float = 0.0) -> Any:
        """Register a bag of tasks; it is served once credits are ordered for it (``credits``:
        ordered at once; a balance too short refuses the registration, nothing stored). A user with
        ``max_bots_per_user`` bags running is refused (:class:`BotsRefused`) until one ends."""
        if parse_strategy(strategy) is None:  # (a bad name is one line before anything is stored)
            raise UserError("'none' serves nothing: give a strategy such as 9C-C-R", field="strategy")
        if not 0 < tick <= 86_400:
            raise UserError(f"tick must be in (0, 86400] seconds, got {tick!r}", field="tick")
        if credits > 0 and self.ledger.balance(owner) < credits:
            raise CreditRefused(f"{owner} has {self.ledger.balance(owner):g} credits, {credits:g} asked "
                                "for the new bag", reason="short")
        with self._registering:
            running = self.registry.running(owner)
            if running >= self.max_bots_per_user:
                raise BotsRefused(f"{owner} already has {running:,} of at most {self.max_bots_per_user:,} "
                                  "bags of tasks running; one must finish (or be abandoned) first")
            view = self.registry.register(owner, infrastructure, n_tasks, strategy=strategy, tick=tick,
                                          pool=pool)
        try:
            if credits > 0:
                self.order(owner, view.id, credits)
        except CreditRefused:  # (spent meanwhile by another order): the bag is not left behind
            self.registry.abandon(view.id)
            raise
        finally:
            self._touch(view.id, owner)
        return view

    def bots(self, caller: str | None, after: int | None = None, limit: int | None = None, *,
             newest_first: bool = False) -> list[dict[str, Any]]:
        """The caller's bags (None: every bag), oldest first (or newest), each with its order and
        its prediction; only those after the id ``after`` in that order, at most ``limit`` (a page)."""
        views = self.registry.bots(caller, after=after, limit=limit, newest_first=newest_first)
        return [self._with_credits(v) for v in views]

    def bot(self, caller: str | None, bot: int) -> dict[str, Any]:
        return self._with_credits(self._bot(caller, bot))

    def _with_credits(self, view: Any) -> dict[str, Any]:
        d = view.model_dump()
        order = self.ledger.order_of(view.id)
        d["credits_ordered"] = None if order is None else order.ordered
        d["credits_spent"] = None if order is None else order.spent
        d["served"] = self.scheduler.served(view.id) is not None
        d["t_pred"] = self.registry.predict(view.id).t_p if view.completed else None
        return d

    def series(self, caller: str | None, bot: int) -> list[Any]:
        """The bag's progress reports, in order (its progress curve)."""
        self._bot(caller, bot)
        return self.registry.series(bot)

    def history(self, infrastructure: str) -> list[Any]:
        return self.registry.history(infrastructure)

    # -- Credit System -------------------------------------------------------------------------
    def account(self, caller: str | None, user: str) -> dict[str, Any]:
        self._account(caller, user)
        return {"user": user, "balance": self.ledger.balance(user),
                "movements": self.ledger.movements(user, 100)}

    def deposit(self, user: str, amount: float, note: str | None = None) -> float:
        """An administrator's deposit; returns the new balance."""
        self.ledger.deposit(user, amount, note=note)
        self._touch(None, user)
        return self.ledger.balance(user)

    def order(self, caller: str, bot: int, credits: float) -> Any:
        """Order credits for one's bag (CreditRefused when the balance is short); the bag is
        served from then on."""
        view = self._bot(caller, bot)
        if view.state != "running":
            raise CreditRefused(f"bag {bot} is {view.state}: nothing to order credits for",
                                reason="closed")
        with self._lock:
            order = self.ledger.order(caller, bot, credits)  # (refused with the reason when short)
            policy = self.scheduler.served(bot)
            if policy is None:
                self._attach(view)
            else:  # more credits for a bag already served
                policy.credits = order.ordered
        self._touch(bot, view.owner)
        return order

    def _attach(self, view: Any) -> None:
        """Serve ``view`` with a policy on its open order (placed already: the policy adopts it)."""
        order = self.ledger.order_of(view.id)
        assert order is not None
        self.scheduler.attach(view.id, view.owner, n_tasks=view.n_tasks, strategy=view.strategy or "9C-C-R",
                              credits=order.ordered, pool=view.pool or "cloud", tick=view.tick or 240.0,
                              alpha=self.registry.alpha(view.infrastructure),
                              now=self.registry.bot(view.id).t)  # (the last report's time)

    # -- the runs' reports ---------------------------------------------------------------------
    def report(self, caller: str, bot: int, r: Report) -> Instructions:
        """A run's report: stored as progress, given to the bag's policy (re-attached after a
        restart), answered with what the run must do."""
        view = self._bot(caller, bot)
        half = _exact(r, rank(0.5, view.n_tasks))
        states = list(r.workers.values())
        self.registry.report(bot, r.t, r.completed, r.assigned, max(0, r.queued), t_half=half,
                             cloud_workers=sum(s in RUNNING for s in states),
                             cloud_booting=states.count(BOOTING))
        try:
            return self._serve(view, r, half)
        finally:  # (the progress is stored: watchers see it even if serving it failed)
            self._touch(bot, view.owner)

    def _serve(self, view: Any, r: Report, half: float | None) -> Instructions:
        """The report ``r`` (stored) given to its bag's policy; the bag finished when it says so."""
        bot = view.id
        with self._lock:
            if self.scheduler.served(bot) is None:
                order = self.ledger.order_of(bot)
                if order is not None and not order.closed and view.state == "running":
                    self._attach(view)
            if self.scheduler.served(bot) is None:  # no credits: progress and predictions only
                answer = Instructions(acked_c=r.since_c + len(r.completions),
                                      acked_a=r.since_a + len(r.assignments),
                                      done=r.completed >= view.n_tasks,
                                      stop=tuple(int(w) for w, st in r.workers.items() if st != "released"),
                                      t_pred=self.registry.predict(bot).t_p)
            else:
                answer = self.scheduler.report(bot, r)
        if answer.done:
            end = _exact(r, view.n_tasks)
            self.registry.finish(bot, r.t, t_half=half, end=end)
        return answer

    def sweep(self, now: float, idle_s: float) -> list[int]:
        """Abandon the running bags whose run has not reported for ``idle_s`` seconds (at Unix time
        ``now``; a report's wall time is the bag's registration plus its time): their policies stop,
        their orders are paid (the unspent credits go back to their owners). The ids abandoned."""
        gone = []
        for view in self.registry.bots(None, state="running"):
            if view.registered_at + view.t + idle_s > now:
                continue
            with self._lock:
                self.scheduler.detach(view.id)
                order = self.ledger.order_of(view.id)
                if order is not None and not order.closed:
                    self.ledger.pay(view.id)
                self.registry.abandon(view.id)
            self._touch(view.id, view.owner)
            gone.append(view.id)
        return gone

    # -- Oracle --------------------------------------------------------------------------------
    def predict(self, caller: str | None, bot: int) -> Any:
        self._bot(caller, bot)
        return self.registry.predict(bot)
