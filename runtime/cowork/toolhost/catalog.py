"""Every tool a sandbox may serve, as fastmcp lists it: generated once per image.

The tool host (toolhost.host) serves ``tools/list`` from this catalog instead of importing
fastmcp: the sandbox image's build runs ``python -m cowork.server.catalog_build`` with the same
code and packages the server runs, which registers every tool on a real FastMCP app and
keeps its ``tools/list`` answer per tool name (input and output schemas, annotations,
title, description). Without the file (the server run in-process on a host, in tests) the
catalog is built on first use the same way.
"""

from __future__ import annotations

import asyncio
import json
import os
from functools import lru_cache
from typing import Any, Callable

#: Where the image keeps the catalog (root-only, like the rest of /opt/cowork).
CATALOG_PATH = "/opt/cowork/catalog.json"


#: Builds the whole catalog when the image's file is missing; the in-container app sets it
#: (server.catalog_build), so this framework never imports the tools it serves.
_builder: Callable[[], dict[str, dict[str, Any]]] | None = None


def set_catalog_builder(builder: Callable[[], dict[str, dict[str, Any]]]) -> None:
    """Use ``builder`` for the catalog when the image's file is missing (once per process)."""
    global _builder
    if _builder is not builder:
        _builder = builder
        load_catalog.cache_clear()


@lru_cache(maxsize=1)
def load_catalog() -> dict[str, dict[str, Any]]:
    """``{tool name: its tools/list entry}`` from the image's file, or built now by the
    builder the app set (without one: empty, and the host lists its tools with fastmcp)."""
    path = os.environ.get("COWORK_TOOL_CATALOG", CATALOG_PATH)
    try:
        with open(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return _builder() if _builder is not None else {}


def list_wire(host: Any) -> list[dict[str, Any]]:
    """``host``'s tools as a real FastMCP app answers ``tools/list`` (imports fastmcp)."""
    from fastmcp import Client

    async def listing() -> list[dict[str, Any]]:
        async with Client(host.fastmcp()) as client:
            result = await client.list_tools_mcp()
        return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in result.tools]

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(listing())
    # Called from a running loop (a test's server in-process): list on a thread of our own.
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, listing()).result()
