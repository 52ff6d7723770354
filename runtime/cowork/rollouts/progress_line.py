"""A rollout's live progress as the library shows it (``RolloutRunner(progress=True)``): one line on
a stream. The CLI draws its own bar (:mod:`cowork.rollouts.progress`)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TextIO

from ..terminal import printable
from .metrics import NOT_SCORED
from .results import RolloutSample


class ProgressLine:
    """Live progress on a stream: one line redrawn on a terminal, plain lines (each tenth, or
    every 5 s) otherwise.

    Args:
        stream: Where to write (None: count only).
        total: Episodes in all, resumed ones included.
        tasks: Tasks in the rollout.
        group_size: Samples per task.
        done: Samples an earlier run finished (counted, not toward the rate).
    """

    def __init__(self, stream: TextIO | None, total: int, tasks: int, group_size: int,
                 done: Iterable[RolloutSample]):
        self.stream, self.total, self.tasks, self.group_size = stream, total, tasks, group_size
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self.t0 = self.last_print = time.monotonic()
        self.done = self.ran = self.infra = self.retries = self.broke = 0
        self.rewards: list[float] = []
        self.per_task: dict[str, int] = {}
        self.decile = -1
        self.last_task = ""
        for s in done:
            self._count(s)
        self.ran = 0

    def _count(self, s: RolloutSample) -> None:
        self.done += 1
        self.ran += 1
        self.per_task[s.task] = self.per_task.get(s.task, 0) + 1
        self.infra += s.grade.status in NOT_SCORED
        self.broke += s.grade.status == "agent_broke_sandbox"
        self.retries += len(s.infra_failures)
        if s.reward is not None:
            self.rewards.append(s.reward)
        self.last_task = s.task

    def line(self) -> str:
        """The figures so far, as one line."""
        rate = self.ran / max(time.monotonic() - self.t0, 1e-9)
        mean = f"{sum(self.rewards) / len(self.rewards):.3f}" if self.rewards else "-"
        tasks_done = sum(n >= self.group_size for n in self.per_task.values())
        return (f"rollout: {self.done}/{self.total} episodes, {tasks_done}/{self.tasks} tasks, {rate:.2f} episodes/s, "
                f"mean reward {mean}, infra errors {self.infra} (retried {self.retries}), broken sandboxes {self.broke}"
                + (f", last {printable(self.last_task)}" if self.last_task else ""))

    def add(self, s: RolloutSample) -> None:
        """Count a finished sample and show the line when it is due."""
        self._count(s)
        if self.stream is None:
            return
        if self.tty:
            self.stream.write("\r\x1b[K" + self.line())
            self.stream.flush()
            return
        decile = self.done * 10 // max(self.total, 1)
        now = time.monotonic()
        if decile > self.decile or now - self.last_print >= 5.0:
            self.decile, self.last_print = decile, now
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def close(self) -> None:
        """End the redrawn line."""
        if self.stream is not None and self.tty:
            self.stream.write("\n")
            self.stream.flush()


__all__ = ["ProgressLine"]
