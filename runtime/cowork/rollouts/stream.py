"""Streaming rollouts: each group handed over as soon as its G samples are graded, while the next
groups already run, with a bound on how many weight versions old a sample may be.

:meth:`RolloutRunner.rollout` returns when every group is done: the GPU idles while the
slowest episode of the step finishes, and the trainer idles while the next step's episodes
run. :meth:`RolloutRunner.stream` (this module) keeps both busy: a trainer steps on each
finished group while the runner's workers go on with later groups, the model's weights
changing under them. Each sample records the policy version it started with
(``RolloutSample.policy_version``, from the ``version`` function: the trainer's counter,
e.g. ``lambda: engine.version``); each generated turn records its own in the token
trajectory (``TurnSpan.policy_version``), so an episode that went on across a weight update
(a partial rollout, see cowork.agents.gate) shows where the version changed.

``max_staleness`` bounds the lag, in versions: a sample that started at version v is never
handed over once the current version is past v + max_staleness. It is dropped and run
again (counted in ``stats.stale_dropped``), when it finishes or when its group would be
handed over, whichever sees it first. ``max_staleness=0`` is on-policy: every sample of a
group handed over started at the current version. And the workers run at most
``max_groups_ahead`` groups that the trainer has not taken yet, so finished work does not
pile up and go stale while the trainer is busy.

Episodes run group by group (every sample of the first unfinished group before the next
group's), so the first group is done as early as possible; the pool's per-task limit
bounds how many sandboxes one task holds.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..agents.base import Policy
from ..agents.tokens import seed_sample
from ..spec.loader import LoadedSpec
from ..spec.models import TaskSpec
from .results import RolloutGroup, RolloutSample

log = logging.getLogger(__name__)

VersionFn = Callable[[], "int | None"]


class _Runner(Protocol):
    """What a stream needs of its :class:`~cowork.rollouts.runner.RolloutRunner`."""

    concurrency: int

    async def _episode(self, loaded: LoadedSpec, group: int, s: int, base_seed: int | None, policy: Policy,
                       pool: Any) -> RolloutSample: ...

    def _get_pool(self) -> Any: ...

    def _check_loop(self) -> None: ...


@dataclass
class StreamStats:
    """What a stream did so far."""

    started: int = 0
    """Episodes started (re-runs included)."""
    finished: int = 0
    """Episodes finished (stale ones included)."""
    stale_dropped: int = 0
    """Samples dropped because the version moved past their start + ``max_staleness``, and run again."""
    groups_yielded: int = 0


class RolloutStream:
    """An async iterator over a rollout's groups, in the order they finish.

    Make it with :meth:`RolloutRunner.stream`; use it as
    ``async with runner.stream(...) as groups: async for group in groups: ...`` so that
    the episodes still running are cancelled when the loop is left early.
    """

    def __init__(self, runner: _Runner, specs: list[LoadedSpec], make: Callable[[TaskSpec], Policy], *,
                 group_size: int, seed: int | None, max_staleness: int | None, version: VersionFn | None,
                 max_groups_ahead: int | None, on_episode: Callable[[RolloutSample], Any] | None):
        if group_size < 1:
            raise ValueError(f"group_size must be at least 1, got {group_size}")
        if max_staleness is not None and (max_staleness < 0 or version is None):
            raise ValueError(f"max_staleness needs a version function and a value >= 0, got {max_staleness} "
                             f"with version={version!r}; pass e.g. version=lambda: engine.version")
        if max_groups_ahead is not None and max_groups_ahead < 1:
            raise ValueError(f"max_groups_ahead must be at least 1, got {max_groups_ahead}")
        self.runner = runner
        self.specs = specs
        self.make = make
        self.group_size = group_size
        self.seed = seed
        self.max_staleness = max_staleness
        self.version = version
        # Enough groups to keep every worker busy, and one more ready for the trainer.
        self.max_groups_ahead = max_groups_ahead or math.ceil(runner.concurrency / group_size) + 1
        self.on_episode = on_episode
        self.stats = StreamStats()
        self._pending: collections.deque[tuple[int, int]] = collections.deque(
            (i, s) for i in range(len(specs)) for s in range(group_size))
        self._samples: dict[int, list[RolloutSample | None]] = {}
        """Groups started and not yet handed over: their samples so far."""
        self._complete: list[int] = []
        """Groups whose samples are all in, in the order they completed."""
        self._error: BaseException | None = None
        self._closed = False
        self._changed = asyncio.Condition()
        self._workers: list[asyncio.Task] = []

    # ------------------------------------------------------------------ iteration
    async def __aenter__(self) -> RolloutStream:
        """Start the episodes (else the first ``__anext__`` does)."""
        self._start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __aiter__(self) -> RolloutStream:
        return self

    async def __anext__(self) -> RolloutGroup:
        """The next finished group, every sample within ``max_staleness`` of the current version.

        Raises:
            StopAsyncIteration: every group was handed over.
            CoworkError: an error outside the episodes (see :meth:`RolloutRunner.rollout`);
                the other episodes are cancelled.
        """
        self._start()
        async with self._changed:
            while True:
                if self._error is not None:
                    error, self._error = self._error, None
                    await self.aclose()
                    raise error
                if self._closed:
                    raise StopAsyncIteration
                group = self._take()
                if group is not None:
                    self._changed.notify_all()  # a slot for a group ahead is free
                    self.stats.groups_yielded += 1
                    return group
                if not self._pending and not self._samples:
                    raise StopAsyncIteration
                self._changed.notify_all()  # stale samples may have been queued again
                await self._changed.wait()

    async def aclose(self) -> None:
        """Cancel the episodes still running (their sandboxes go back to the pool); the stream ends."""
        self._closed = True
        await self._cancel()

    # ------------------------------------------------------------------ staleness
    def current_version(self) -> int | None:
        """The trainer's version now (None without a version function)."""
        return self.version() if self.version is not None else None

    def is_stale(self, sample: RolloutSample) -> bool:
        """True when ``sample`` started more than ``max_staleness`` versions before the current one."""
        if self.max_staleness is None or sample.policy_version is None:
            return False
        now = self.current_version()
        return now is not None and now - sample.policy_version > self.max_staleness

    def _drop_stale(self, i: int) -> None:
        """Drop group i's stale samples and queue them first: their group is the oldest open."""
        samples = self._samples[i]
        for s in reversed(range(self.group_size)):
            sample = samples[s]
            if sample is not None and self.is_stale(sample):
                log.info("%s sample %d started at version %s, now %s (max_staleness %s): run again",
                         sample.task, s, sample.policy_version, self.current_version(), self.max_staleness)
                samples[s] = None
                self.stats.stale_dropped += 1
                self._pending.appendleft((i, s))

    def _take(self) -> RolloutGroup | None:
        """The first completed group whose samples are all fresh (stale ones are sent back to run)."""
        for i in list(self._complete):
            self._drop_stale(i)
            if any(x is None for x in self._samples[i]):
                self._complete.remove(i)
                continue
            self._complete.remove(i)
            samples = self._samples.pop(i)
            return RolloutGroup(task=self.specs[i].spec.id, index=i,
                                samples=samples)  # type: ignore[arg-type]  # all set: checked above
        return None

    # ------------------------------------------------------------------ workers
    def _start(self) -> None:
        """Start the workers, once (not after the stream was closed)."""
        if self._workers or self._closed or not (self._pending or self._samples):
            return
        self.runner._check_loop()
        pool = self.runner._get_pool()
        n = min(self.runner.concurrency, len(self._pending))
        self._workers = [asyncio.ensure_future(self._worker(pool)) for _ in range(n)]

    def _next_job(self) -> tuple[int, int] | None:
        """The first pending episode, unless it opens a group past ``max_groups_ahead``."""
        if not self._pending:
            return None
        i, _ = self._pending[0]
        if i not in self._samples and len(self._samples) >= self.max_groups_ahead:
            return None
        return self._pending.popleft()

    async def _worker(self, pool: Any) -> None:
        try:
            while True:
                async with self._changed:
                    while (job := self._next_job()) is None:
                        if not self._pending and not self._samples:
                            return  # every group handed over (a running sample keeps its group open)
                        await self._changed.wait()
                    i, s = job
                    self._samples.setdefault(i, [None] * self.group_size)
                    self.stats.started += 1
                sample = await self._one(i, s, pool)
                async with self._changed:
                    self._record(i, s, sample)
                    self._changed.notify_all()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # an error outside the episodes: hand it to the consumer
            async with self._changed:
                if self._error is None:
                    self._error = exc
                self._changed.notify_all()

    async def _one(self, i: int, s: int, pool: Any) -> RolloutSample:
        version = self.current_version()
        policy = self.make(self.specs[i].spec)
        seed_sample(policy, self.specs[i].spec.id, s)  # a seeded sampler: each sample its own seed
        sample = await self.runner._episode(self.specs[i], i, s, self.seed, policy, pool)
        sample.policy_version = version
        if self.on_episode is not None:
            result = self.on_episode(sample)
            if inspect.isawaitable(result):
                await result
        return sample

    def _record(self, i: int, s: int, sample: RolloutSample) -> None:
        self.stats.finished += 1
        if self.is_stale(sample):  # seen at once: run it again now, not when its group is due
            log.info("%s sample %d started at version %s, now %s (max_staleness %s): run again", sample.task, s,
                     sample.policy_version, self.current_version(), self.max_staleness)
            self.stats.stale_dropped += 1
            self._pending.appendleft((i, s))
            return
        samples = self._samples[i]
        samples[s] = sample
        if all(x is not None for x in samples) and i not in self._complete:
            self._complete.append(i)

    async def _cancel(self) -> None:
        workers, self._workers = self._workers, []
        for w in workers:
            w.cancel()
        if workers:
            await asyncio.gather(*workers, return_exceptions=True)


__all__ = ["RolloutStream", "StreamStats"]
