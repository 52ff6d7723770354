"""The host's end of a sandbox's control socket: one JSON request, one JSON answer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from ..errors import SandboxError
from ..formats import CONTROL_SOCKET


async def control_request(run_dir: Path, op: str, timeout: float = 30.0, **fields: Any) -> dict[str, Any]:
    """Send one request on the sandbox's control socket.

    Raises:
        SandboxError: when the socket does not answer or the request failed.
    """
    path = str(run_dir / CONTROL_SOCKET)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(path), timeout)
        try:
            writer.write((json.dumps({"op": op, **fields}) + "\n").encode())
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), timeout)
        finally:
            writer.close()
    except (OSError, asyncio.TimeoutError) as exc:
        raise SandboxError(f"control socket {path} did not answer {op!r}: {exc!r}") from exc
    if not line:
        raise SandboxError(f"control socket {path} closed without answering {op!r}")
    resp = json.loads(line)
    if not resp.get("ok"):
        raise SandboxError(f"control request {op!r} failed: {resp.get('error')}")
    return resp
