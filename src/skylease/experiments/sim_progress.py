"""Progress of a long simulated bag, for a command's progress bar.

:class:`Watched` passes every callback of a policy on to it and, every ``every_s`` simulated
seconds, tells how many tasks are done. Its ticks are policy timers, which the simulators run after
the model's events of the same time and which change no model state: a run watched gives the
results of a run not watched (tests/experiments/test_spequlos_scale.py).
"""

from __future__ import annotations

from collections.abc import Callable

from skylease.control.env import Environment, HostView, Policy
from skylease.model.task import Task

__all__ = ["Watched"]


class Watched(Policy):
    """``inner`` (a policy overriding ``on_start``, ``on_host_idle`` and ``on_task_done`` at most, as
    SpeQuloS's does: the others are not forwarded, so that the simulators keep skipping them) with
    ``say(done, n)`` called at the start, every ``every_s`` simulated seconds and at the end."""

    def __init__(self, inner: Policy, say: Callable[[int, int], None], every_s: float = 600.0) -> None:
        self.inner, self.say, self.every_s = inner, say, every_s
        self._k = 0

    def describe(self) -> str:
        return self.inner.describe()

    def on_start(self, env: Environment) -> None:
        self.env = env
        self.inner.on_start(env)
        self._tick()

    def _say(self) -> None:
        done = self.env.progress().completed
        self.say(done, done + self.env.pending())

    def _tick(self) -> None:
        self._say()
        if self.env.pending() == 0:
            return
        self._k += 1
        self.env.call_at(self._k * self.every_s, self._tick)

    def on_host_idle(self, host: HostView) -> None:
        self.inner.on_host_idle(host)

    def on_task_done(self, task: Task, host: HostView, runtime: float) -> None:
        self.inner.on_task_done(task, host, runtime)
        if self.env.pending() == 0:
            self._say()
