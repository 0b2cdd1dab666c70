"""The Credit System (decisions S17, S28 in docs/decisions/spequlos.md): orders never spend more than they
hold; credits conserve."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skylease.control.qos.credits import CREDITS_PER_CPU_HOUR, CreditError, CreditSystem, top_up


def test_order_bill_pay_refunds_the_rest():
    bank = CreditSystem()
    bank.deposit("ann", 100)
    assert not bank.order("ann", "bot", 150)
    assert bank.order("ann", "bot", 60)
    assert bank.balance("ann") == 40
    assert bank.has_credits("bot", 60) and not bank.has_credits("bot", 61)
    bank.bill("bot", "cw0", 1)
    bank.bill("bot", "cw1", 24)
    assert bank.get("bot").spent == 25 and bank.get("bot").by_worker == {"cw0": 1, "cw1": 24}
    with pytest.raises(CreditError):
        bank.bill("bot", "cw0", 36)  # 61 > 60
    assert bank.get("bot").spent == 25
    assert bank.pay("bot") == 35
    assert bank.balance("ann") == 75
    assert bank.pay("bot") == 0.0  # already closed
    assert not bank.has_credits("bot", 0)
    with pytest.raises(CreditError):
        bank.bill("bot", "cw0", 0)


def test_order_again_adds_and_foreign_or_closed_orders_raise():
    bank = CreditSystem()
    bank.deposit("ann", 10)
    bank.deposit("bob", 10)
    assert bank.order("ann", "b", 4) and bank.order("ann", "b", 3)
    assert bank.get("b").ordered == 7
    with pytest.raises(CreditError):
        bank.order("bob", "b", 1)
    bank.pay("b")
    with pytest.raises(CreditError):
        bank.order("ann", "b", 1)
    with pytest.raises(CreditError):
        bank.deposit("ann", -1)
    with pytest.raises(KeyError):
        bank.get("nobody")
    assert not bank.has_credits("nobody")


def test_top_up_to_cap():
    bank = CreditSystem()
    assert top_up(bank, "ann", 100) == 100
    bank.order("ann", "b", 30)
    assert top_up(bank, "ann", 100) == 30
    assert bank.balance("ann") == 100
    assert top_up(bank, "ann", 50) == 0  # never withdraws
    assert CREDITS_PER_CPU_HOUR == 15


amounts = st.integers(0, 40).map(lambda k: k / 4)  # quarters: exact in binary floating point
ops = st.lists(
    st.one_of(
        st.tuples(st.just("deposit"), st.sampled_from("uv"), st.just(""), amounts),
        st.tuples(st.just("order"), st.sampled_from("uv"), st.sampled_from("abc"), amounts),
        st.tuples(st.just("bill"), st.just(""), st.sampled_from("abc"), amounts),
        st.tuples(st.just("pay"), st.just(""), st.sampled_from("abc"), st.just(0.0)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_random_sequences_never_overspend_and_conserve(seq):
    bank = CreditSystem()
    for op, user, bot, x in seq:
        try:
            if op == "deposit":
                bank.deposit(user, x)
            elif op == "order":
                bank.order(user, bot, x)
            elif op == "bill":
                before = bank.get(bot).spent if bot in bank._orders else None
                try:
                    bank.bill(bot, "cw", x)
                except CreditError:
                    assert bank.get(bot).spent == before  # a refused bill changes nothing
            else:
                bank.pay(bot)
        except (CreditError, KeyError):
            pass
        for o in bank._orders.values():
            assert 0 <= o.spent <= o.ordered
        total = bank.balance("u") + bank.balance("v") + bank.held() + bank.spent()
        assert total == pytest.approx(bank.deposited)
