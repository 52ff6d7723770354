"""Append-only, hash-chained audit log of every tool call, and the middleware that feeds it."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from fastmcp.server.middleware import Middleware

from ..formats import GENESIS_HASH, canonical_json, seal

#: Longest tool output kept in an audit record; graders see it, the log stays small.
RESULT_LIMIT = 8192


class AuditLog:
    """One JSON line per event, each carrying the hash of the line before it.

    The file is opened once with O_APPEND, owned by root and mode 0600; the agent user
    can neither read nor write it.
    """

    def __init__(self, path: str):
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(self._fd, 0o600)
        self._lock = threading.Lock()
        self.count = 0
        self.last_hash = GENESIS_HASH

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Seal ``record`` into the chain and write it; returns the sealed record."""
        with self._lock:
            sealed = seal({"seq": self.count, "time": time.time(), **record}, self.last_hash)
            os.write(self._fd, (canonical_json(sealed) + "\n").encode())
            self.count += 1
            self.last_hash = sealed["hash"]
            return sealed

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)


def _result_text(result: Any) -> str:
    parts = []
    for block in getattr(result, "content", None) or []:
        text = getattr(block, "text", None)
        parts.append(text if text is not None else f"<{getattr(block, 'type', 'content')}>")
    text = "\n".join(parts)
    return text if len(text) <= RESULT_LIMIT else text[:RESULT_LIMIT] + f"... [{len(text) - RESULT_LIMIT} more chars]"


class AuditMiddleware(Middleware):
    """Writes one audit record per tool call: tool, arguments, outcome, duration."""

    def __init__(self, log: AuditLog):
        self.log = log

    async def on_call_tool(self, context, call_next):
        name = context.message.name
        args = dict(context.message.arguments or {})
        start = time.perf_counter()
        try:
            result = await call_next(context)
        except Exception as exc:
            self.log.append({
                "kind": "tool_call", "tool": name, "args": args, "outcome": "error",
                "error": str(exc)[:RESULT_LIMIT], "error_type": type(exc).__name__,
                "duration_ms": round((time.perf_counter() - start) * 1000, 3),
            })
            raise
        self.log.append({
            "kind": "tool_call", "tool": name, "args": args, "outcome": "ok",
            "result": _result_text(result),
            "structured": _structured(result),
            "duration_ms": round((time.perf_counter() - start) * 1000, 3),
        })
        return result


def _structured(result: Any) -> Any:
    data = getattr(result, "structured_content", None)
    if data is None:
        return None
    text = json.dumps(data, default=str)
    return data if len(text) <= RESULT_LIMIT else None
