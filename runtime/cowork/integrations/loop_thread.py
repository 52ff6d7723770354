"""A sandbox pool on an event loop of its own thread, for trainers that call in from theirs.

TRL calls environments synchronously from its own threads, SkyRL from an executor, OpenEnv's
server from one thread per session, and verl from an event loop of its own that may come and
go; a :class:`~cowork.sandbox.pool.SandboxPool`'s sandboxes live on one loop. A
:class:`PoolRuntime` is that loop, on a daemon thread, with the pool and one
:class:`~cowork.spec.loader.LoadedSpec` per task folder (the pool keys its sandboxes by the
folder); a :class:`Runtimes` holds a process's runtimes, one per pool settings, and closes
them at exit.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import os
import threading
from collections.abc import Callable, Coroutine, Hashable
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from ..errors import CoworkError
from ..spec.loader import LoadedSpec, load_spec

log = logging.getLogger(__name__)

T = TypeVar("T")


class PoolSettings(Protocol):
    """The pool settings a runtime reads from an integration's options (``EnvOptions``,
    ``LoopOptions``, ``PoolOptions``)."""

    @property
    def max_sandboxes(self) -> int:
        """Most sandboxes at once, all tasks together."""

    @property
    def max_per_task(self) -> int | None:
        """Most sandboxes of one task at once (None: ``max_sandboxes``)."""

    @property
    def max_uses(self) -> int:
        """Episodes one sandbox serves before it is replaced."""

    @property
    def backend(self) -> str | None:
        """Sandbox backend name (None: ``settings.sandbox_backend``)."""


class PoolRuntime:
    """An event loop on a named daemon thread, the sandbox pool that lives on it, and each
    task's spec.

    Args:
        options: The pool settings.
        name: The thread's name (None: the class's ``thread_name``).
        pool: The pool to drive (None: a :class:`~cowork.sandbox.pool.SandboxPool` made from
            ``options``); tests pass a fake one.
    """

    thread_name = "cowork-pool-loop"

    def __init__(self, options: PoolSettings, *, name: str | None = None, pool: Any = None):
        if pool is None:
            from ..sandbox.pool import SandboxPool

            pool = SandboxPool(max_per_task=options.max_per_task or options.max_sandboxes,
                               max_total=options.max_sandboxes, max_uses=options.max_uses, backend=options.backend)
        self.pool = pool
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name or self.thread_name, daemon=True)
        self.thread.start()
        self.background: set[concurrent.futures.Future] = set()
        """Work started by :meth:`spawn` and not finished yet (:meth:`close` waits for it)."""
        self._specs: dict[str, LoadedSpec] = {}
        self._lock = threading.Lock()
        self._background_lock = threading.Lock()  # the set changes on the loop's thread as work ends
        self._closed = False

    # ------------------------------------------------------------------ specs
    def spec(self, task: str | Path | LoadedSpec) -> LoadedSpec:
        """One LoadedSpec per task folder (the pool keys its sandboxes by the folder): the first
        one given or loaded for a folder is returned for every later path to it.

        Raises:
            SpecError: the task does not load.
        """
        key = str((task.root if isinstance(task, LoadedSpec) else Path(task)).resolve())
        with self._lock:
            if key not in self._specs:
                self._specs[key] = task if isinstance(task, LoadedSpec) else load_spec(key)
            return self._specs[key]

    # ------------------------------------------------------------------ running work on the loop
    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop and return its future at once (from any thread).

        Raises:
            CoworkError: the runtime is closed.
        """
        if self._closed:
            coro.close()  # never awaited: say so here rather than in a "never awaited" warning
            raise CoworkError(f"the {self.thread.name} runtime is closed: make a new one")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result, from a thread other than the loop's.

        A timeout leaves ``coro`` running: cancel it through :meth:`submit`'s future if needed.

        Raises:
            CoworkError: called on the loop's own thread (it would wait for itself forever: await
                the coroutine there instead), or the runtime is closed.
            TimeoutError: ``coro`` did not finish within ``timeout`` seconds.
        """
        if threading.current_thread() is self.thread:
            coro.close()
            raise CoworkError(f"run() called on the {self.thread.name} thread itself: await the coroutine there")
        return self.submit(coro).result(timeout)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        """Start ``coro`` on the loop in the background: nobody waits for it but :meth:`close`;
        a failure is logged.

        Raises:
            CoworkError: the runtime is closed.
        """
        fut = self.submit(coro)
        with self._background_lock:
            self.background.add(fut)
        fut.add_done_callback(self._background_done)
        return fut

    def _background_done(self, fut: concurrent.futures.Future) -> None:
        if not fut.cancelled() and fut.exception() is not None:  # said before it leaves the set
            log.warning("background work on %s failed: %s", self.thread.name, fut.exception())
        with self._background_lock:
            self.background.discard(fut)

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the runtime's loop from another event loop; cancelling the caller
        cancels ``coro``.

        Raises:
            CoworkError: the runtime is closed.
        """
        return await asyncio.wrap_future(self.submit(coro))

    # ------------------------------------------------------------------ closing
    def close(self, timeout: float = 120.0) -> None:
        """Wait for the background work, remove the pool's sandboxes and stop the loop (a second
        call does nothing).

        When the pool cannot close, the sandboxes this process started for the runtime's tasks
        are removed directly, by their labels: at interpreter exit (Python has shut down the
        thread pools the pool's Docker calls run in before any atexit hook runs:
        :func:`thread_pools_down`), or when its close fails or times out.

        Args:
            timeout: Seconds to wait for the background work, then as many for the pool.

        Raises:
            SandboxError: a leftover sandbox could not be removed.
            docker.errors.DockerException: the daemon did not answer the fallback (either way
                the reaper removes what is left later).
        """
        if self._closed:
            return
        try:
            with self._background_lock:
                pending = list(self.background)
            concurrent.futures.wait(pending, timeout=timeout)
            if thread_pools_down():
                # The pool's close would "succeed" without removing anything: each removal fails
                # to start and the pool gathers its removals' errors (measured: the sandbox stayed).
                log.info("%s: Python has shut its thread pools down (interpreter exit): removing the "
                         "pool's sandboxes directly", self.thread.name)
                self._remove_leftovers()
                return
            closing = self.submit(self.pool.close())
            try:
                closing.result(timeout)
            except Exception as exc:  # noqa: BLE001 - TimeoutError included: fall back, then say
                closing.cancel()
                log.info("the sandbox pool of %s did not close (%s): removing its sandboxes directly",
                         self.thread.name, exc)
                self._remove_leftovers()
        finally:
            self._closed = True
            self._stop_loop()

    def _stop_loop(self, grace: float = 5.0) -> None:
        """Cancel what still runs on the loop (the pool's janitor when the pool could not
        close, work nobody waited for), then stop and close the loop."""

        async def cancel_the_rest() -> None:
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:
                t.cancel()
            if rest:
                await asyncio.wait(rest, timeout=grace)

        try:
            asyncio.run_coroutine_threadsafe(cancel_the_rest(), self.loop).result(grace + 1)
        except Exception as exc:  # noqa: BLE001 - stop the loop all the same
            log.debug("%s: the loop's last tasks did not end: %s", self.thread.name, exc)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(grace)
        if not self.thread.is_alive():  # a closed loop while its thread still runs would break that thread
            self.loop.close()

    def _remove_leftovers(self) -> None:
        """Remove the containers of this process and session whose task is one of this
        runtime's (without the pool, which could not close)."""
        from ..engine import labels
        from ..engine.container import remove_container
        from ..engine.reaper import managed_containers

        with self._lock:
            tasks = {ld.spec.id for ld in self._specs.values()}
        if not tasks:
            return
        for c in managed_containers():
            lab = c.labels or {}
            if lab.get(labels.SESSION) == labels.SESSION_ID and lab.get(labels.OWNER_PID) == str(os.getpid()) \
                    and lab.get(labels.TASK) in tasks:
                remove_container(c.id, lab.get(labels.RUN_DIR))


def thread_pools_down() -> bool:
    """Whether Python has shut its thread pools down (at interpreter exit, before any atexit
    hook): no ``ThreadPoolExecutor`` takes work any more, so no Docker call of the engine runs."""
    try:  # the first use of ThreadPoolExecutor imports its module, which registers an exit hook
        probe = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="cowork-probe")
    except RuntimeError:  # "can't register atexit after shutdown"
        return True
    try:
        probe.submit(int).result()
    except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
        return True
    finally:
        probe.shutdown(wait=False)
    return False


R = TypeVar("R", bound=PoolRuntime)


class Runtimes(Generic[R]):
    """A process's runtimes of one integration, one per pool settings, made on first use and
    closed together (at exit too: :meth:`close_all` is registered once, with the first runtime).

    Args:
        make: Makes the runtime for options that have none yet.
    """

    def __init__(self, make: Callable[[Any], R]):
        self.make = make
        self.runtimes: dict[Hashable, R] = {}
        """Pool key -> its runtime."""
        self._lock = threading.Lock()
        self._at_exit = False

    def get(self, key: Hashable, options: Any) -> R:
        """The runtime for ``key``, made from ``options`` on first use."""
        with self._lock:
            if key not in self.runtimes:
                if not self._at_exit:
                    atexit.register(self.close_all)
                    self._at_exit = True
                self.runtimes[key] = self.make(options)
            return self.runtimes[key]

    def close_all(self, timeout: float = 120.0) -> None:
        """Close every runtime (their sandboxes removed, their loops stopped); a failure is
        logged, never raised (this runs at exit)."""
        with self._lock:
            runtimes = list(self.runtimes.values())
            self.runtimes.clear()
        for rt in runtimes:
            try:
                rt.close(timeout)
            except Exception as exc:  # noqa: BLE001 - at exit: say what was left, never raise
                log.warning("closing the sandbox pool of %s failed (the reaper removes what is left): %s",
                            rt.thread.name, exc)


__all__ = ["PoolRuntime", "PoolSettings", "Runtimes", "thread_pools_down"]
