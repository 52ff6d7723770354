"""The control channel: a root-only unix socket speaking one JSON object per line.

The host uses it for what the agent must never reach: readiness, the audit counter,
exporting the workspace. It is not MCP, so no MCP client (and no agent) sees it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


async def serve_control(path: str, handlers: dict[str, Handler]) -> asyncio.AbstractServer:
    """Start the control server on ``path`` (mode 0600)."""

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    req = json.loads(line)
                    handler = handlers[req["op"]]
                    resp = {"ok": True, **(await handler(req))}
                except KeyError as exc:
                    resp = {"ok": False, "error": f"unknown or incomplete request: {exc}"}
                except Exception as exc:  # reported to the host, never kills the server
                    log.exception("control request failed")
                    resp = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                writer.write((json.dumps(resp) + "\n").encode())
                await writer.drain()
        finally:
            writer.close()

    if os.path.exists(path):
        os.unlink(path)
    server = await asyncio.start_unix_server(client, path=path)
    try:
        os.chmod(path, 0o600)
    except PermissionError:
        # gVisor's host sockets take no chmod; the run dir around them is root-only (0700).
        log.info("could not chmod %s; relying on the run dir's 0700", path)
    return server
