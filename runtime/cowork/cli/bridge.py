"""``cowork connect``: a running sandbox's MCP server bridged to stdio (to be written, issue 11)."""

from __future__ import annotations


def connect(ref: str) -> int:
    from .commands import connect as old_connect

    return old_connect(ref)  # type: ignore[return-value]
