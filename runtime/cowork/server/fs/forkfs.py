"""File access as the agent by a fork per call, for kernels without per-thread fsuid.

AgentFS switches a thread's filesystem uid, which Linux supports and gVisor does not
(``setfsuid`` is not implemented there). Under such a kernel the file tools run in a child
forked from the server that drops to the agent's ids before it touches a file, so they get
exactly the agent's permissions as they do under AgentFS, at the cost of a fork per call.

The child answers in JSON, never pickle: it runs as the agent, and nothing the agent could
influence is ever unpickled by the root server. An alarm bounds the child's life.
"""

from __future__ import annotations

import asyncio
import builtins
import ctypes
import json
import logging
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

#: Exceptions a child may report, rebuilt by name in the server; anything else becomes OSError.
_KNOWN = {"ToolError", "PermissionError", "FileNotFoundError", "IsADirectoryError", "NotADirectoryError",
          "FileExistsError", "TimeoutError", "ValueError", "OSError"}


def per_thread_fsuid_works(uid: int, gid: int) -> bool:
    """True when a thread can take ``uid``/``gid`` as its filesystem ids (Linux; not gVisor)."""
    if os.geteuid() != 0:
        return True  # nothing to switch: tests and non-root use run as the current user
    libc = ctypes.CDLL(None, use_errno=True)
    result: list[bool] = []

    def probe() -> None:
        libc.setfsgid(gid)
        libc.setfsuid(uid)
        ok = libc.setfsuid(uid) == uid and libc.setfsgid(gid) == gid
        libc.setfsuid(0)
        libc.setfsgid(0)
        result.append(ok)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return bool(result and result[0])


def _rebuild(kind: str, message: str) -> BaseException:
    if kind == "ToolError":
        from ...toolhost.errors import ToolError

        return ToolError(message)
    if kind in _KNOWN:
        return getattr(builtins, kind)(message)
    return OSError(f"{kind}: {message}")


class ForkFS:
    """Runs blocking file operations in a child with the agent's ids (same interface as AgentFS).

    Args:
        uid: The agent's uid.
        gid: The agent's gid.
        workers: Calls in flight at once.
        child_timeout_s: Seconds before a child is killed by its own alarm.
    """

    def __init__(self, uid: int, gid: int, workers: int = 8, child_timeout_s: float = 60.0):
        self.uid, self.gid = uid, gid
        self.child_timeout_s = child_timeout_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="forkfs")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` in a forked child that holds the agent's ids."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._call, fn, args)

    def _call(self, fn: Callable[..., T], args: tuple) -> T:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: drop to the agent, run, answer, exit without cleanup
            code = 0
            try:
                os.close(r)
                signal.alarm(max(1, int(self.child_timeout_s)))
                os.setgroups([])
                os.setresgid(self.gid, self.gid, self.gid)
                os.setresuid(self.uid, self.uid, self.uid)
                try:
                    answer = {"ok": True, "value": fn(*args)}
                except BaseException as exc:  # reported to the server, which re-raises it
                    answer = {"ok": False, "kind": type(exc).__name__, "message": str(exc)}
                data = json.dumps(answer).encode()
                view = memoryview(data)
                while view:
                    view = view[os.write(w, view):]
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        chunks = []
        try:
            while chunk := os.read(r, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(r)
            os.waitpid(pid, 0)
        if not chunks:
            raise OSError("the file operation's process ended without an answer (killed or timed out)")
        answer = json.loads(b"".join(chunks))
        if answer["ok"]:
            return answer["value"]
        raise _rebuild(answer["kind"], answer["message"])

    def close(self) -> None:
        """Stop the threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)
