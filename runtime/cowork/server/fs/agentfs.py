"""File access as the unprivileged agent user, without a fork per call.

Linux keeps the filesystem uid (fsuid) per thread, and a thread whose fsuid leaves 0
loses its filesystem capabilities. A small thread pool whose threads set fsuid/fsgid to
the agent's ids therefore reads and writes files with exactly the agent's permissions,
while the server's other threads stay root for the audit log and control paths.

The pool cannot be starved: a call that is still running when its caller gave up no longer
counts against the pool, and the next call gets a fresh thread (up to ``max_threads``
threads in all). The file tools also check a deadline inside their loops and open nothing
that can block, so such a thread normally frees itself soon after.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)
_libc = ctypes.CDLL(None, use_errno=True)


def _become(uid: int, gid: int) -> None:
    _libc.setfsgid(gid)
    _libc.setfsuid(uid)
    # setfsuid reports nothing on failure; asking again returns the value in force.
    if _libc.setfsuid(uid) != uid or _libc.setfsgid(gid) != gid:
        raise PermissionError(f"could not switch file access to uid {uid}, gid {gid}")


class AgentFS:
    """Runs blocking file operations with the agent's file permissions.

    Args:
        uid: The agent's uid, or None to run as the current user (tests, non-root use).
        gid: The agent's gid.
        workers: Threads kept for ordinary use.
        max_threads: Hard cap on threads, counting those still busy with abandoned calls.
    """

    def __init__(self, uid: int | None, gid: int | None, workers: int = 4, max_threads: int = 32):
        self.uid, self.gid = uid, gid
        self._switch = uid is not None and os.geteuid() == 0
        self.workers, self.max_threads = workers, max_threads
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0  # alive
        self._idle = 0  # waiting for a job
        self._pending = 0  # queued, not yet taken by a thread
        self._closed = False

    def _worker(self) -> None:
        try:
            if self._switch:
                assert self.uid is not None and self.gid is not None, "the agent's uid without its gid"
                _become(self.uid, self.gid)
        except Exception:
            log.exception("agentfs thread could not take the agent's ids")
            with self._lock:
                self._threads -= 1
                self._idle -= 1
            return
        while True:
            try:
                job = self._jobs.get(timeout=60)
            except queue.Empty:
                with self._lock:  # shrink back to ``workers`` after a burst
                    if self._threads > self.workers:
                        self._threads -= 1
                        self._idle -= 1
                        return
                continue
            with self._lock:
                self._idle -= 1
                if job is not None:
                    self._pending -= 1
            if job is None:
                with self._lock:
                    self._threads -= 1
                return
            fn, args, fut, loop = job
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the caller
                loop.call_soon_threadsafe(_settle, fut, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, fut, result, None)
            finally:
                del job, fn, args
            with self._lock:
                self._idle += 1

    def _submit(self, job: tuple) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("AgentFS is closed")
            self._pending += 1
            self._jobs.put(job)
            # Busy threads (a slow or abandoned call) are not idle: a job that no idle thread
            # can take gets a new thread, so stuck calls cannot starve the ones after them.
            if self._pending <= self._idle or self._threads >= self.max_threads:
                return
            self._threads += 1
            self._idle += 1
        threading.Thread(target=self._worker, name="agentfs", daemon=True).start()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` in a thread that has the agent's file permissions.

        Raises:
            RuntimeError: after close.
            Exception: whatever ``fn`` raised.
        """
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._submit((fn, args, fut, loop))
        return await fut

    @property
    def threads(self) -> int:
        """Threads alive now (busy or idle)."""
        return self._threads

    def close(self) -> None:
        """Stop the idle threads; busy ones stop when their call ends."""
        with self._lock:
            self._closed = True
            n = self._threads
        for _ in range(n):
            self._jobs.put(None)


def _settle(fut: asyncio.Future, result: Any, exc: BaseException | None) -> None:
    if fut.cancelled():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)
