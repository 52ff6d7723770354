"""A small in-memory server for one test's own seed (the session's rich seed stays untouched)."""

from __future__ import annotations

from typing import Any

from fastmcp import FastMCP

from cowork.services.base import ServiceContext, open_db
from cowork.services.names import ALL_SERVICE_TOOLS
from cowork.services.registry import ServicesSeed, register_all, seed_all

from .support import Env


def small_env(seed: dict[str, Any], tools: set[str] | None = None, files: Any = None) -> Env:
    """Services seeded with ``seed``, serving ``tools`` (default: every service tool)."""
    records: list[dict[str, Any]] = []
    ctx = ServiceContext(db=open_db(), audit=records.append, files=files)
    parsed = ServicesSeed.model_validate(seed)
    seed_all(ctx, parsed)
    mcp = FastMCP("small")
    register_all(mcp, ctx, tools if tools is not None else set(ALL_SERVICE_TOOLS))
    return Env(ctx, mcp, parsed, records)
