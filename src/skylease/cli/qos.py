"""`skylease qos`: SpeQuloS accounts, credits and bags of tasks on a `skylease serve` server."""

from __future__ import annotations

import math
from typing import Annotated

import typer

from skylease.cli.app import qos_app
from skylease.cli.common import (
    _ID_SETTINGS,
    AllOption,
    JsonOption,
    LimitOption,
    ServerOption,
    TokenOption,
    _ask,
    _listed,
)
from skylease.model.errors import UserError

# -- qos (SpeQuloS on a server) ----------------------------------------------------------------
BotIdArgument = Annotated[int, typer.Argument(metavar="BOT", min=0, max=2**53, help="The bag's id.")]
CreditsArgument = Annotated[float, typer.Argument(metavar="CREDITS", help="Credits (15 per CPU hour of "
                                                  "cloud worker).")]
_BOT_COLUMNS = ("id", "owner", "infrastructure", "n_tasks", "state", "completed", "strategy",
                "credits_ordered", "credits_spent", "t_pred")  # (t_pred: the Oracle's, s since registered)


def _credits(value: float, option: str = "CREDITS") -> float:

    from skylease.model.limits import MAX_CREDITS

    if not (math.isfinite(value) and 0 < value <= MAX_CREDITS):
        raise UserError(f"must be a number of credits in (0, {MAX_CREDITS:g}], got {value:g}", field=option)
    return value


@qos_app.command("account")
def qos_account_cmd(
    user: Annotated[str | None, typer.Argument(help="Whose account (default: yours; another's only for "
                                               "an administrator).")] = None,
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """An account's balance and its last movements (deposits, orders, bills, refunds)."""
    _ask(server, token, as_json, lambda c: c.qos_account(user),
         lambda t, a: [t.record_table(f"account {a['user']}", a),
                        t.rows_table("last movements", a.get("movements") or [],
                                      ("at", "kind", "amount", "bot", "worker", "note"))])


@qos_app.command("deposit", context_settings=_ID_SETTINGS)  # (a negative number is a value)
def qos_deposit_cmd(
    user: Annotated[str, typer.Argument(help="Whose account.")], credits: CreditsArgument,
    note: Annotated[str | None, typer.Option(help="Why (kept in the ledger).")] = None,
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """Credit a user's account (administrators only)."""
    amount = _credits(credits)
    _ask(server, token, as_json, lambda c: c.qos_deposit(user, amount, note),
         lambda t, a: [t.record_table("deposit", a)])


@qos_app.command("order", context_settings=_ID_SETTINGS)  # (a negative number is a value)
def qos_order_cmd(bot: BotIdArgument, credits: CreditsArgument, server: ServerOption = None,
                  token: TokenOption = None, as_json: JsonOption = False) -> None:
    """Order credits for one of your bags: refused (exit 2, with the reason) when the balance is short."""
    amount = _credits(credits)
    _ask(server, token, as_json, lambda c: c.qos_order(bot, amount),
         lambda t, o: [t.record_table(f"order of bag {bot}", o)])


@qos_app.command("predict", context_settings=_ID_SETTINGS)  # (a negative number is a value)
def qos_predict_cmd(bot: BotIdArgument, server: ServerOption = None, token: TokenOption = None,
                    as_json: JsonOption = False) -> None:
    """The Oracle's predicted completion time of a bag, its ±20 % band and the success rate."""
    _ask(server, token, as_json, lambda c: c.qos_predict(bot),
         lambda t, p: [t.record_table(f"prediction for bag {bot}", p)])


@qos_app.command("bots")
def qos_bots_cmd(server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
                 limit: LimitOption = None, every: AllOption = False) -> None:
    """Your bags of tasks (an administrator's: all), oldest first, with progress, prediction and
    credits: the first page, or --all."""
    _ask(server, token, as_json, lambda c: c.qos_bots(limit, every),
         lambda t, bs: [t.rows_table(_listed("bag(s) of tasks", bs), bs, _BOT_COLUMNS)])


@qos_app.command("history")
def qos_history_cmd(
    infrastructure: Annotated[str, typer.Argument(help="The infrastructure's name (as runs register it).")],
    server: ServerOption = None, token: TokenOption = None, as_json: JsonOption = False,
) -> None:
    """Finished bags of an infrastructure: what the Oracle learns α from."""
    _ask(server, token, as_json, lambda c: c.qos_history(infrastructure),
         lambda t, h: [t.record_table(f"{infrastructure}: α learned from {h['runs']} finished bag(s)", h),
                        t.rows_table("finished bags (yours; an administrator's: all)", h["bots"],
                                      ("id", "owner", "n_tasks", "p_half", "completion_time"))])
