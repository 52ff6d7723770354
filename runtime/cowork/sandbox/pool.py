"""Warm sandboxes for many episodes: acquire, release with a verified reset, replace what fails.

A fresh sandbox costs about a second of CPU (the in-container server's imports); a verified
reset costs milliseconds. A :class:`SandboxPool` keeps reset, ready sandboxes per task and
hands them out, so that rollouts of hundreds of episodes start almost none.

Every sandbox it hands out is either fresh or was reset and verified: its state hash (see
``server/reset.py``) equals the one recorded when it first started. A reset that fails or
does not verify, a failed health check, a sandbox past ``max_uses`` or one that died is
removed and never handed out again.

Resets run in the background, off the episode's critical path: a released sandbox is reset
while the next episode already runs in a spare (``spares``), so in back-to-back group
sampling an acquire takes a verified sandbox instead of waiting for the reset of the one
just released (issue 26: the acquire's p50 in back-to-back episodes at concurrency 4 fell
from 39 to 11 ms with one spare on 2 loaded cores; docs/performance.md, "environment share").
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

from ..errors import SandboxError
from ..spec.loader import LoadedSpec, load_spec
from .sandbox import Sandbox

log = logging.getLogger(__name__)

#: Seconds ``acquire`` waits for a running reset of the task before it starts a sandbox
#: instead (when there is room).
RESET_WAIT_S = 1.0
#: The folder under the run root holding the pools' task bundles, one folder per pool.
BUNDLES = "bundles"


def early_acquire(pool: Any) -> dict[str, bool]:
    """``{"early": True}`` for a pool whose ``acquire`` takes ``early`` (a :class:`SandboxPool`,
    or a wrapper that passes it on); nothing for any other pool-like object."""
    if isinstance(pool, SandboxPool):  # the common case, without reading a signature per episode
        return {"early": True}
    try:
        takes = "early" in inspect.signature(pool.acquire).parameters
    except (TypeError, ValueError):
        takes = False
    return {"early": True} if takes else {}


def spares_for(concurrency: int) -> int:
    """Spares a pool keeps beyond ``concurrency`` episodes in flight: one per four, at least one.

    One spare covers an episode whose acquire follows its own release (group sampling);
    episodes that end together (a fixed model latency keeps them in step) each want one, and
    a reset takes ~10 ms against the few milliseconds between their ends, so a quarter of the
    episodes in flight keeps most acquires off a reset. Each spare costs an idle sandbox
    (~22 MiB). Measured by ``cowork bench`` (the environment-share phase).
    """
    return max(1, concurrency // 4)


@dataclass
class _TaskSlots:
    """The sandboxes of one task image."""

    loaded: LoadedSpec
    image: str | None = None
    bundle: Path | None = None
    """The task layer as a mounted folder (pools made with ``bundles=True``)."""
    warm: collections.deque = field(default_factory=collections.deque)
    busy: set = field(default_factory=set)
    starting: int = 0
    resetting: int = 0
    target: int = 0
    resets: dict = field(default_factory=dict)
    """The background reset of each sandbox being reset (sandbox -> task), cancelled by close()."""

    @property
    def total(self) -> int:
        return len(self.warm) + len(self.busy) + self.starting + self.resetting


class SandboxPool:
    """Warm, verified-clean sandboxes per task, reused across episodes.

    ``acquire(spec)`` hands out a warm sandbox (starting one only when none is warm);
    ``release(sb)`` resets it in the background and makes it warm again once the reset is
    verified. ``async with pool.sandbox(spec) as sb:`` does both.

    Args:
        max_per_task: Most sandboxes of one task at once (warm, in use, starting, resetting).
        max_total: Most sandboxes of all tasks at once; a full pool closes the longest-idle
            warm sandbox of another task to make room, or waits for a release.
        target_per_task: Warm sandboxes kept ready per task once it was used (refilled in the
            background; 0: only what releases bring back).
        spares: Sandboxes kept ready per task beyond those checked out, within the size limits:
            after each acquire, and when a sandbox is retired, the pool starts sandboxes in the
            background until this many are warm, starting or resetting. An acquire right after
            a release then takes a spare that is already verified instead of waiting for that
            release's reset. Size the pool for the episodes in flight plus ``spares``
            (:func:`spares_for`).
        max_uses: Episodes one sandbox serves before it is replaced by a fresh one.
        idle_timeout_s: Warm sandboxes unused this long are closed.
        backend: Where sandboxes run (a name from ``cowork.sandbox.backend`` or an instance).
        ready_timeout: Seconds a starting sandbox may take to answer.
        bundles: Mount each task's layer from a folder (``engine.images.write_task_bundle``)
            on the sandbox image instead of building a task image: specs that differ only in
            data share one image, and a spec costs no build. The folders are the pool's and go
            when it closes (a dead process's go with ``cowork gc``). Needs a root host process.

    Raises (from its methods):
        SandboxError: naming the task and the step that failed (start, health check, reset).
    """

    def __init__(self, *, max_per_task: int = 8, max_total: int = 32, target_per_task: int = 0,
                 max_uses: int = 100, idle_timeout_s: float = 300.0, backend: Any = None,
                 ready_timeout: float = 60.0, bundles: bool = False, spares: int = 0):
        if max_per_task < 1 or max_total < 1 or max_uses < 1:
            raise ValueError("max_per_task, max_total and max_uses must be at least 1")
        if spares < 0:
            raise ValueError(f"spares must be at least 0, got {spares}")
        self.max_per_task = max_per_task
        self.max_total = max_total
        self.target_per_task = target_per_task
        self.spares = spares
        self.max_uses = max_uses
        self.idle_timeout_s = idle_timeout_s
        self.backend = backend
        self.ready_timeout = ready_timeout
        self.bundles = bundles
        self._bundle_root: Path | None = None
        self._tasks: dict[str, _TaskSlots] = {}
        self._specs: dict[str, LoadedSpec] = {}
        self._owner: dict[str, _TaskSlots] = {}
        self._idle_since: dict[str, float] = {}
        self._cond: asyncio.Condition | None = None
        self._background: set[asyncio.Task] = set()
        self._janitor: asyncio.Task | None = None
        self._closed = False
        #: Counters: ``started``, ``reused`` (handed out warm), ``resets`` (verified),
        #: ``reset_failed`` (failed or did not verify: replaced), ``health_check_failed``,
        #: ``retired_max_uses``, ``idle_closed``, ``evicted``, ``discarded``, ``removed`` (any
        #: reason), ``start_failed`` (background starts).
        self.stats: collections.Counter[str] = collections.Counter()

    # ------------------------------------------------------------------ public
    async def acquire(self, spec: LoadedSpec | str | os.PathLike, *, seed: int | None = None,
                      early: bool = False) -> Sandbox:
        """A ready sandbox for ``spec``: warm if one is, else freshly started.

        Args:
            spec: A loaded spec or a task folder (read once per path and pool).
            seed: The episode's fault seed (None: the spec's own).
            early: Hand a warm sandbox out before its health check answers: the check runs
                on while the caller's model takes its first turn, and the sandbox's first use
                waits for it (``Sandbox.begin_episode(early=True)``). A warm sandbox that
                fails it then raises :class:`~cowork.errors.SandboxNotReady` at that first
                use, an infrastructure failure for the caller to retry, instead of being
                replaced here. ``run_task`` asks for this: the round trip left the critical
                path of every pooled episode.

        Raises:
            SandboxError: the pool is closed, or a sandbox could not be started (the message
                names the task and the step).
        """
        slots = await self._slots(spec)
        cond = self._condition()
        waited_for_reset = False
        while True:
            if self._closed:
                raise SandboxError("the sandbox pool is closed")
            while slots.warm:
                sb = slots.warm.popleft()
                self._idle_since.pop(sb.id, None)
                slots.busy.add(sb)
                try:
                    check = await sb.begin_episode(seed, early=early)
                    if check is not None:  # counted when it fails, as a check made here is
                        check.add_done_callback(self._count_failed_check)
                except SandboxError as exc:
                    slots.busy.discard(sb)
                    self.stats["health_check_failed"] += 1
                    log.warning("task %s: warm sandbox %s failed its health check, replacing it: %s",
                                slots.loaded.spec.id, sb.name, exc)
                    self._spawn(self._retire(sb))
                    continue
                self.stats["reused"] += 1
                self._refill(slots)
                return sb
            # A reset takes milliseconds, a start about a second: wait for a reset first, but
            # not for long (a reset draining a slow tool call may take the tool's timeout).
            if slots.resetting and not waited_for_reset:
                waited_for_reset = True
                async with cond:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(cond.wait(), RESET_WAIT_S)
                continue
            if self._room(slots) or self._evict_other(slots):
                slots.starting += 1
                sb = None
                try:
                    sb = await self._start(slots)
                    await sb.begin_episode(seed)
                except BaseException as exc:
                    slots.starting -= 1
                    if sb is not None:  # started, then failed its first health check: never leaked
                        self._owner.pop(sb.id, None)
                        await asyncio.shield(sb.stop())
                    await self._notify()
                    if sb is not None and isinstance(exc, SandboxError):
                        raise SandboxError(f"task {slots.loaded.spec.id}: health check of the new sandbox "
                                           f"{sb.name} failed: {exc}") from exc
                    raise
                slots.starting -= 1
                slots.busy.add(sb)
                self._refill(slots)
                return sb
            async with cond:  # full: wait for a release, a reset or a removal
                await cond.wait()

    async def prepare(self, spec: LoadedSpec | str | os.PathLike) -> tuple[str, Path | None]:
        """Build the task's image (or write its bundle) now, before any sandbox.

        Returns:
            The image its sandboxes start from, and the bundle folder mounted on it (None when
            the task layer is in the image).

        Raises:
            ImageError: the build failed (naming the task).
        """
        slots = await self._slots(spec)
        assert slots.image is not None
        return slots.image, slots.bundle

    async def release(self, sb: Sandbox, *, discard_evidence: bool = False) -> None:
        """Give ``sb`` back: it is reset and verified in the background, then warm again.

        Raises:
            SandboxError: the episode's evidence was not exported and ``discard_evidence`` is
                not set (the sandbox stays yours, nothing is lost: export, then release).
        """
        slots = self._owner.get(sb.id)
        if slots is None or sb not in slots.busy:
            raise SandboxError(f"sandbox {sb.name} is not checked out of this pool")
        if sb.unexported and not discard_evidence:
            raise SandboxError(f"task {sb.spec.id}: release of {sb.name} refused: the episode's evidence was not "
                               "exported; call export_evidence() first or pass discard_evidence=True")
        slots.busy.discard(sb)
        if self._closed or sb.uses >= self.max_uses or not sb.resettable:
            if not self._closed:  # worn out, or an http service without a reset endpoint: recycled
                self.stats["retired_max_uses" if sb.resettable else "retired_no_reset"] += 1
            self._spawn(self._retire(sb))
            self._refill(slots)  # its replacement starts now, not in the next episode's acquire
            return
        slots.resetting += 1
        slots.resets[sb] = self._spawn(self._reset(slots, sb, discard_evidence))

    async def discard(self, sb: Sandbox) -> None:
        """Remove ``sb`` for good (the agent broke it, or it failed): never handed out again."""
        slots = self._owner.get(sb.id)
        if slots is not None:
            slots.busy.discard(sb)
        self.stats["discarded"] += 1
        await self._retire(sb)

    @contextlib.asynccontextmanager
    async def sandbox(self, spec: LoadedSpec | str | os.PathLike, *, seed: int | None = None
                      ) -> AsyncIterator[Sandbox]:
        """``async with pool.sandbox(spec) as sb:`` acquire, then release on leaving.

        Leaving with an exception, or without having exported the evidence of tool calls,
        removes the sandbox instead of resetting it (a reset would drop that evidence
        without a word; removing it is what ``Sandbox.stop`` does too).
        """
        sb = await self.acquire(spec, seed=seed)
        try:
            yield sb
        except BaseException:
            await asyncio.shield(self.discard(sb))
            raise
        if sb.unexported:
            await self.discard(sb)
        else:
            await self.release(sb)

    async def prewarm(self, spec: LoadedSpec | str | os.PathLike, n: int) -> int:
        """Start sandboxes for ``spec`` until ``n`` are warm (within the size limits); keep
        that many warm from now on. Returns how many are warm."""
        slots = await self._slots(spec)
        slots.target = max(slots.target, n)
        want = min(n - len(slots.warm) - slots.starting - slots.resetting, self.max_per_task - slots.total,
                   self.max_total - self.total)
        await asyncio.gather(*(self._start_warm(slots) for _ in range(max(0, want))))
        return len(slots.warm)

    @property
    def total(self) -> int:
        """Sandboxes held now (warm, in use, starting, resetting), all tasks."""
        return sum(s.total for s in self._tasks.values())

    def counts(self, spec_id: str | None = None) -> dict[str, int]:
        """Warm / busy / starting / resetting sandboxes (of one task id, or all)."""
        out: collections.Counter[str] = collections.Counter()
        for s in self._tasks.values():
            if spec_id is None or s.loaded.spec.id == spec_id:
                out.update(warm=len(s.warm), busy=len(s.busy), starting=s.starting, resetting=s.resetting)
        return dict(out)

    async def wait_idle(self) -> None:
        """Wait until no reset, start or removal runs in the background."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    async def close(self) -> None:
        """Remove every sandbox of the pool (in use ones too) and stop its background work.

        Resets still running are cancelled, not awaited (a reset draining a hung tool call may
        take the tool's timeout plus 30 s): their sandboxes are removed like the others.
        Starts are awaited, then their sandboxes removed.
        """
        self._closed = True
        if self._janitor is not None:
            self._janitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._janitor
        for slots in self._tasks.values():
            for task in slots.resets.values():
                task.cancel()
        await self.wait_idle()
        doomed = []
        for slots in self._tasks.values():
            # A reset cancelled before it ran never removed its sandbox: it goes here.
            doomed += list(slots.warm) + list(slots.busy) + list(slots.resets)
            slots.resetting -= len(slots.resets)
            slots.warm.clear()
            slots.busy.clear()
            slots.resets.clear()
        await asyncio.gather(*(sb.stop() for sb in doomed), return_exceptions=True)
        if self._bundle_root is not None:
            import shutil

            shutil.rmtree(self._bundle_root, ignore_errors=True)
        if self._cond is not None:
            async with self._cond:
                self._cond.notify_all()

    async def __aenter__(self) -> "SandboxPool":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # ------------------------------------------------------------------ internals
    def _condition(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        if self._janitor is None and not self._closed:
            self._janitor = asyncio.get_running_loop().create_task(self._janitor_loop())
        return self._cond

    async def _slots(self, spec: LoadedSpec | str | os.PathLike) -> _TaskSlots:
        from ..engine.client import in_thread
        from ..engine.images import ensure_task_image

        if isinstance(spec, LoadedSpec):
            loaded = spec
        else:
            path = str(Path(spec).resolve())
            known = self._specs.get(path)
            if known is None:
                known = self._specs[path] = load_spec(spec)
            loaded = known
        key = f"{loaded.spec.id}@{loaded.root}"
        slots = self._tasks.get(key)
        if slots is None:
            slots = self._tasks[key] = _TaskSlots(loaded=loaded, target=self.target_per_task)
        if slots.image is None:
            try:
                if self.bundles:
                    from ..engine.images import write_task_bundle

                    slots.image, slots.bundle = await in_thread(write_task_bundle, loaded, self._bundles())
                else:
                    slots.image = await in_thread(ensure_task_image, loaded)
            except Exception as exc:
                raise type(exc)(f"task {loaded.spec.id}: image build failed: {exc}") from exc
        self._condition()
        return slots

    def _bundles(self) -> Path:
        """This pool's folder of task bundles (under the run root, named by this process)."""
        if self._bundle_root is None:
            import uuid

            from ..engine.container import run_root

            self._bundle_root = run_root() / BUNDLES / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        return self._bundle_root

    def _room(self, slots: _TaskSlots) -> bool:
        return slots.total < self.max_per_task and self.total < self.max_total

    def _evict_other(self, slots: _TaskSlots) -> bool:
        """Make room in a full pool by closing the longest-idle warm sandbox of another task."""
        if slots.total >= self.max_per_task:
            return False
        idle = [(self._idle_since.get(sb.id, 0.0), s, sb) for s in self._tasks.values() if s is not slots
                for sb in s.warm]
        if not idle:
            return False
        _, other, sb = min(idle, key=lambda x: x[0])
        other.warm.remove(sb)
        self._idle_since.pop(sb.id, None)
        self.stats["evicted"] += 1
        self._spawn(self._retire(sb))
        return self.total < self.max_total

    async def _start(self, slots: _TaskSlots) -> Sandbox:
        spec_id = slots.loaded.spec.id
        try:
            sb = await Sandbox.start(slots.loaded, image=slots.image, backend=self.backend,
                                     ready_timeout=self.ready_timeout, bundle=slots.bundle)
        except SandboxError as exc:
            raise SandboxError(f"task {spec_id}: sandbox start failed: {exc}") from exc
        try:
            await sb.record_pristine()
        except BaseException as exc:
            await asyncio.shield(sb.stop())
            if isinstance(exc, SandboxError):
                raise SandboxError(f"task {spec_id}: recording the pristine state of {sb.name} failed: {exc}") from exc
            raise
        self._owner[sb.id] = slots
        self.stats["started"] += 1
        return sb

    async def _start_warm(self, slots: _TaskSlots) -> None:
        slots.starting += 1
        try:
            sb = await self._start(slots)
        except Exception as exc:
            log.warning("%s", exc)
            self.stats["start_failed"] += 1
            return
        finally:
            slots.starting -= 1
        if self._closed:
            await sb.stop()
            return
        self._make_warm(slots, sb)
        await self._notify()

    def _make_warm(self, slots: _TaskSlots, sb: Sandbox) -> None:
        slots.warm.append(sb)
        self._idle_since[sb.id] = time.monotonic()

    def _refill(self, slots: _TaskSlots) -> None:
        """Start, in the background, what it takes to have the task's target (or its spares)
        warm, starting or resetting; a reset is counted as ready (milliseconds, not a second)."""
        if self._closed:
            return
        missing = max(slots.target, self.spares) - len(slots.warm) - slots.starting - slots.resetting
        for _ in range(max(0, missing)):
            if not self._room(slots):
                break
            slots.starting += 1  # counted now, so the next _refill sees it
            self._spawn(self._refill_one(slots))

    async def _refill_one(self, slots: _TaskSlots) -> None:
        slots.starting -= 1
        await self._start_warm(slots)

    async def _reset(self, slots: _TaskSlots, sb: Sandbox, discard_evidence: bool) -> None:
        """Reset and verify ``sb`` in the background; warm again only once its hash verified."""
        try:
            await sb.reset(discard_evidence=discard_evidence)
        except asyncio.CancelledError:  # close() while resetting: removed, never half-reset and warm
            slots.resets.pop(sb, None)
            slots.resetting -= 1
            await asyncio.shield(self._retire(sb))
            raise
        except Exception as exc:  # not verified, failed, or the sandbox died: replace it
            slots.resets.pop(sb, None)
            slots.resetting -= 1
            self.stats["reset_failed"] += 1
            log.warning("task %s: reset of %s failed, replacing it: %s", slots.loaded.spec.id, sb.name, exc)
            await self._retire(sb)
            self._refill(slots)
            return
        slots.resets.pop(sb, None)
        slots.resetting -= 1
        self.stats["resets"] += 1
        if self._closed:
            await sb.stop()
            return
        self._make_warm(slots, sb)
        await self._notify()

    def _count_failed_check(self, check: "asyncio.Future[Any]") -> None:
        # Cancelled: the sandbox went before its answer (removed, pool closed), not a failure.
        if not check.cancelled() and check.exception() is not None:
            self.stats["health_check_failed"] += 1

    async def _retire(self, sb: Sandbox) -> None:
        self._owner.pop(sb.id, None)
        self._idle_since.pop(sb.id, None)
        self.stats["removed"] += 1
        try:
            await sb.stop()
        except Exception as exc:  # the reaper removes it once this process is gone
            log.warning("could not remove sandbox %s: %s", sb.name, exc)
        await self._notify()

    async def _notify(self) -> None:
        if self._cond is not None:
            async with self._cond:
                self._cond.notify_all()

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _janitor_loop(self) -> None:
        """Close sandboxes idle past the timeout; keep each task's warm target."""
        period = max(0.5, min(self.idle_timeout_s / 2, 5.0))
        while not self._closed:
            await asyncio.sleep(period)
            now = time.monotonic()
            for slots in list(self._tasks.values()):
                for sb in [sb for sb in slots.warm if now - self._idle_since.get(sb.id, now) > self.idle_timeout_s]:
                    slots.warm.remove(sb)
                    self.stats["idle_closed"] += 1
                    self._spawn(self._retire(sb))


__all__ = ["SandboxPool", "spares_for"]
