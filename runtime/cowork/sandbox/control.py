"""The host's end of a sandbox's control socket: one JSON request, one JSON answer.

:func:`control_request` opens a connection per request. A :class:`ControlChannel` (one per
:class:`~cowork.sandbox.Sandbox`) keeps one open and sends its requests one after another on
it: an episode's health check, export and reset cost a line each way instead of a connect and
a close each (the server answers any number of requests on a connection).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from ..errors import SandboxError
from ..formats import CONTROL_SOCKET


def _answer(path: str, op: str, line: bytes) -> dict[str, Any]:
    if not line:
        raise SandboxError(f"control socket {path} closed without answering {op!r}")
    resp: dict[str, Any] = json.loads(line)
    if not resp.get("ok"):
        raise SandboxError(f"control request {op!r} failed: {resp.get('error')}")
    return resp


def _line(op: str, fields: dict[str, Any]) -> bytes:
    return (json.dumps({"op": op, **fields}) + "\n").encode()


async def control_request(run_dir: Path, op: str, timeout: float = 30.0, **fields: Any) -> dict[str, Any]:
    """Send one request on the sandbox's control socket, on a connection of its own.

    Raises:
        SandboxError: when the socket does not answer or the request failed.
    """
    path = str(run_dir / CONTROL_SOCKET)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(path), timeout)
        try:
            writer.write(_line(op, fields))
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), timeout)
        finally:
            writer.close()
    except (OSError, asyncio.TimeoutError) as exc:
        raise SandboxError(f"control socket {path} did not answer {op!r}: {exc!r}") from exc
    return _answer(path, op, line)


class ControlChannel:
    """One kept-open connection to a sandbox's control socket, bound to the event loop that
    opened it.

    Requests go one at a time on it. One asked while another is under way (a health check
    during a long export), or from another event loop, gets a connection of its own, as
    :func:`control_request` gives: nothing waits behind another request. A request that
    fails, times out or is cancelled closes the kept connection (a late answer on it would be
    read as the next request's); the next request opens a new one.
    """

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self._conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._busy = False
        #: Connections this channel opened (a test counts them).
        self.opened = 0

    @property
    def path(self) -> str:
        """The control socket's path on the host."""
        return str(self.run_dir / CONTROL_SOCKET)

    async def request(self, op: str, timeout: float = 30.0, **fields: Any) -> dict[str, Any]:
        """Send one request and return its answer (see :func:`control_request`).

        Raises:
            SandboxError: when the socket does not answer or the request failed.
        """
        loop = asyncio.get_running_loop()
        if self._busy or (self._conn is not None and self._loop is not loop):
            return await control_request(self.run_dir, op, timeout, **fields)
        self._busy = True
        try:
            try:
                if self._conn is None or self._conn[0].at_eof() or self._conn[1].is_closing():
                    self.close()
                    self._conn = await asyncio.wait_for(asyncio.open_unix_connection(self.path), timeout)
                    self._loop = loop
                    self.opened += 1
                reader, writer = self._conn
                writer.write(_line(op, fields))
                await writer.drain()
                line = await asyncio.wait_for(reader.readline(), timeout)
            except BaseException as exc:  # its state unknown (an answer may still come): never reused
                self.close()
                if isinstance(exc, (OSError, asyncio.TimeoutError)):
                    raise SandboxError(f"control socket {self.path} did not answer {op!r}: {exc!r}") from exc
                raise
            if not line:
                self.close()
        finally:
            self._busy = False
        return _answer(self.path, op, line)

    def close(self) -> None:
        """Close the kept connection, if any (a connection of a closed event loop is dropped)."""
        conn, loop, self._conn = self._conn, self._loop, None
        if conn is None or loop is None or loop.is_closed():
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            conn[1].close()
        else:  # another thread's loop: close it there
            try:
                loop.call_soon_threadsafe(conn[1].close)
            except RuntimeError:  # closed meanwhile
                pass
