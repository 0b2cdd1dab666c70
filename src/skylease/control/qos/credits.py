"""The Credit System (decisions S17, S28, S29 in docs/decisions/spequlos.md): accounts, orders per bag,
billing, payment, refunds.

A banking ledger in credits, 1 CPU.hour of cloud worker = 15 credits. A user's credits move to a
bag of tasks when ordered; cloud workers are billed against the order; paying closes the order
and gives the unspent credits back. An order can never be billed past what it holds.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field

#: The exchange rate: credits for one CPU.hour of cloud worker.
CREDITS_PER_CPU_HOUR = 15.0


class CreditError(ValueError):
    """A bill or order the ledger refuses (over the order, closed order, bad amount)."""


def _amount(x: float, what: str) -> float:
    if not (math.isfinite(x) and x >= 0):
        raise CreditError(f"{what} must be a finite amount >= 0, got {x!r}")
    return float(x)


@dataclass(slots=True)
class Order:
    """Credits provisioned for one bag: how many, by whom, how many spent and on which workers."""

    user: Hashable
    ordered: float
    spent: float = 0.0
    closed: bool = False
    by_worker: dict[Hashable, float] = field(default_factory=dict)

    @property
    def remaining(self) -> float:
        return self.ordered - self.spent

    def fits(self, amount: float) -> bool:
        """Whether ``amount`` more can be billed without spending more than ordered."""
        return not self.closed and self.spent + amount <= self.ordered


class CreditSystem:
    """Users' balances and bags' orders; credits are only ever moved, never created by billing."""

    def __init__(self) -> None:
        self._balance: dict[Hashable, float] = {}
        self._orders: dict[Hashable, Order] = {}
        self.deposited = 0.0

    def deposit(self, user: Hashable, amount: float) -> None:
        """Credit a user's account."""
        amount = _amount(amount, "deposit")
        self._balance[user] = self._balance.get(user, 0.0) + amount
        self.deposited += amount

    def balance(self, user: Hashable) -> float:
        """Credits in a user's account (not counting open orders)."""
        return self._balance.get(user, 0.0)

    def order(self, user: Hashable, bot: Hashable, credits: float) -> bool:
        """Move ``credits`` from ``user`` to ``bot``'s order; False if the balance is short.

        Ordering again for an open bag adds to its order (same user only).
        """
        credits = _amount(credits, "order")
        existing = self._orders.get(bot)
        if existing is not None and (existing.closed or existing.user != user):
            raise CreditError(f"bag {bot!r} already has an order that is closed or someone else's")
        if self.balance(user) < credits:
            return False
        self._balance[user] = self.balance(user) - credits
        if existing is None:
            self._orders[bot] = Order(user, credits)
        else:
            existing.ordered += credits
        return True

    def get(self, bot: Hashable) -> Order:
        """The order of ``bot`` (KeyError if none)."""
        try:
            return self._orders[bot]
        except KeyError:
            raise KeyError(f"no credits ordered for bag {bot!r}") from None

    def has_credits(self, bot: Hashable, amount: float = 1.0) -> bool:
        """Whether ``bot``'s open order can still pay ``amount``."""
        o = self._orders.get(bot)
        return o is not None and o.fits(amount)

    def bill(self, bot: Hashable, cw: Hashable, amount: float) -> None:
        """Charge ``amount`` for worker ``cw`` to ``bot``'s order; refuses (CreditError) past it."""
        amount = _amount(amount, "bill")
        o = self.get(bot)
        if o.closed:
            raise CreditError(f"bag {bot!r}: order is closed")
        if not o.fits(amount):
            raise CreditError(f"bag {bot!r}: billing {amount:g} would spend {o.spent + amount:g} "
                              f"of {o.ordered:g} credits ordered")
        o.spent += amount
        o.by_worker[cw] = o.by_worker.get(cw, 0.0) + amount

    def pay(self, bot: Hashable) -> float:
        """Close ``bot``'s order and refund its unspent credits to the user; returns the refund."""
        o = self.get(bot)
        if o.closed:
            return 0.0
        o.closed = True
        refund = o.remaining
        self._balance[o.user] = self.balance(o.user) + refund
        return refund

    def spent(self) -> float:
        """Credits billed over all orders."""
        return math.fsum(o.spent for o in self._orders.values())

    def held(self) -> float:
        """Credits sitting in open orders, unspent."""
        return math.fsum(o.remaining for o in self._orders.values() if not o.closed)


def top_up(bank: CreditSystem, user: Hashable, cap: float) -> float:
    """The deposit policy of S17: bring ``user``'s balance up to ``cap``; returns the deposit."""
    d = max(0.0, _amount(cap, "cap") - bank.balance(user))
    if d > 0:
        bank.deposit(user, d)
    return d
