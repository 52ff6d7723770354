"""Which episode of a rollout a free worker runs next: the order that keeps sandboxes warm."""

from __future__ import annotations

import collections


class Schedule:
    """Which episode a free worker runs next.

    The next sample of the task it just ran, while there is one: the sandbox it released is
    reset in milliseconds and serves that sample, where another task's episode would start
    a sandbox (about a second, several on a loaded machine). A worker whose task has no
    sample left joins the first task with fewer than its share of workers (concurrency /
    tasks, at least 1), else the one with fewest: near the end of a run, with episodes as
    slow as a model's, a start costs less than waiting. Measured on 2 cores, 15 tasks x G=4
    with the oracle at concurrency 4: a plain semaphore over the episodes in task order
    started a sandbox for every episode (0.81 episodes/s); this order starts about one per
    task (1.75 episodes/s).
    """

    def __init__(self, todo: list[tuple[int, int]], concurrency: int):
        self.pending: dict[int, collections.deque] = {}
        for i, s in todo:
            self.pending.setdefault(i, collections.deque()).append(s)
        self.workers: collections.Counter = collections.Counter()
        self.share = max(1, -(-concurrency // max(1, len(self.pending))))

    def next(self, current: int | None) -> tuple[int, int] | None:
        """The (task, sample) for a worker that just finished an episode of ``current``."""
        if current is not None:
            if self.pending[current]:
                return current, self.pending[current].popleft()
            self.workers[current] -= 1
        left = [i for i, q in self.pending.items() if q]
        if not left:
            return None
        under = [i for i in left if self.workers[i] < self.share]
        i = under[0] if under else min(left, key=lambda i: (self.workers[i], i))
        self.workers[i] += 1
        return i, self.pending[i].popleft()


__all__ = ["Schedule"]
