"""One client of the ledger hammer of ``test_ledger.py``: run as a script, in its own process with
its own engine (``python ledger_hammer.py URL DATA_DIR INDEX GO OUT SECONDS``); light on imports
so that 20 of them start quickly."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

from skylease.runtime.qos.ledger import CreditRefused, Ledger
from skylease.service.db import engine_for

USERS = ("ann", "bob", "cyd")
#: Clients order on the same few BoTs per account: a new generation of them every GEN_S seconds.
GEN_S, BOTS_PER_GEN = 1.0, 4


def hammer_client(url: str, data_dir: str, index: str, go: str, out: str, seconds: str) -> None:
    """One client in its own process, with its own engine: waits for ``go`` (which holds the start
    time), then orders, bills, pays and deposits at random on the same few BoTs of the same three
    accounts as the 19 others, until ``seconds`` have passed; writes what it did to ``out``."""
    led = Ledger(engine_for(url or None, Path(data_dir)))
    Path(out + ".ready").touch()
    while not os.path.exists(go):
        time.sleep(0.01)
    t0 = float(Path(go).read_text())
    while time.time() < t0:
        time.sleep(0.005)
    Path(out).write_text(json.dumps(hammer_loop(led, int(index), t0, float(seconds))))


def hammer_loop(led: Ledger, index: int, t0: float, seconds: float) -> dict:
    """Order, bill, pay and deposit at random from ``t0`` for ``seconds``: what was done and refused."""
    rng = random.Random(index)
    done: list[tuple[str, str, int | None, int]] = []
    refused: Counter[str] = Counter()
    negative: list[float] = []
    while (now := time.time()) < t0 + seconds:
        acct = rng.randrange(len(USERS))
        user, gen = USERS[acct], int((now - t0) / GEN_S)
        # this generation's BoTs are ordered and billed; the last one's are mostly billed and paid
        current = acct * 1_000_000 + gen * 10 + rng.randrange(BOTS_PER_GEN)
        last = current - 10 if gen > 0 else current
        r = rng.random()
        try:
            if r < 0.3:
                amount = rng.choice([2, 5, 10.5, 25])
                led.order(user, current, amount)
                done.append(("order", user, current, round(amount * 1e6)))
            elif r < 0.8:
                bot, amount = rng.choice([current, current, last]), rng.choice([0.25, 1, 1.5, 4])
                o = led.bill(bot, amount, worker=f"client-{index}")
                done.append(("bill", o.user, bot, round(amount * 1e6)))
            elif r < 0.9:
                bot = last if rng.random() < 0.8 else current
                refund = led.pay(bot)
                if refund > 0:
                    done.append(("refund", user, bot, round(refund * 1e6)))
            elif r < 0.95:
                # another user on a BoT of this account that has an order (its user's for good):
                # must be refused; were it not, the ledger check below would see the row
                if led.order_of(current) is not None:
                    other = USERS[(acct + 1) % len(USERS)]
                    led.order(other, current, 1)
                    done.append(("order", other, current, 1_000_000))
            else:
                led.deposit(user, 5)
                done.append(("deposit", user, None, 5_000_000))
        except CreditRefused as exc:
            refused[exc.reason] += 1
        if len(done) % 25 == 0 and (b := led.balance(user)) < 0:
            negative.append(b)
    return {"done": done, "refused": refused, "negative": negative}


if __name__ == "__main__":
    hammer_client(*sys.argv[1:])
