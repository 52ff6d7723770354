"""File access as the unprivileged agent user, without a fork per call.

Linux keeps the filesystem uid (fsuid) per thread, and a thread whose fsuid leaves 0
loses its filesystem capabilities. A small thread pool whose threads set fsuid/fsgid to
the agent's ids therefore reads and writes files with exactly the agent's permissions,
while the server's other threads stay root for the audit log and control paths.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

T = TypeVar("T")

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
        workers: Threads in the pool.
    """

    def __init__(self, uid: int | None, gid: int | None, workers: int = 4):
        self.uid = uid
        init = (lambda: _become(uid, gid)) if uid is not None and os.geteuid() == 0 else None
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agentfs", initializer=init)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` in a thread that has the agent's file permissions."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        """Stop the threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)
