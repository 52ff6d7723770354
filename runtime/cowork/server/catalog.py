"""Every tool a sandbox may serve, as fastmcp lists it: generated once per image.

The tool host (server.host) serves ``tools/list`` from this catalog instead of importing
fastmcp: the sandbox image's build runs ``python -m cowork.server.catalog`` with the same
code and packages the server runs, which registers every tool on a real FastMCP app and
keeps its ``tools/list`` answer per tool name (input and output schemas, annotations,
title, description). Without the file (the server run in-process on a host, in tests) the
catalog is built on first use the same way.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from functools import lru_cache
from typing import Any

#: Where the image keeps the catalog (root-only, like the rest of /opt/cowork).
CATALOG_PATH = "/opt/cowork/catalog.json"


@lru_cache(maxsize=1)
def load_catalog() -> dict[str, dict[str, Any]]:
    """``{tool name: its tools/list entry}`` from the image's file, or built now."""
    path = os.environ.get("COWORK_TOOL_CATALOG", CATALOG_PATH)
    try:
        with open(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return build_catalog()


def full_host(tmp: str) -> tuple[Any, Any, Any]:
    """A tool host with every tool registered (workspace, ``python``, every service), its
    file-access pool and its audit log (close both); ``tmp`` holds the workspace and the log."""
    from ..formats import PYTHON_TOOL, WORKSPACE_TOOLS
    from ..services.base import ServiceContext, open_db
    from ..services.catalog import ALL_SERVICE_TOOLS
    from ..services.registry import register_all
    from .app import ServerConfig, build_app
    from .audit import AuditLog
    from .workspace_tools import WorkspaceConfig

    audit = AuditLog(os.path.join(tmp, "audit.jsonl"))
    host, fs = build_app(ServerConfig(tools=[*WORKSPACE_TOOLS, PYTHON_TOOL],
                                      workspace=WorkspaceConfig(root=tmp)), audit)
    register_all(host, ServiceContext(db=open_db(), audit=audit.append), set(ALL_SERVICE_TOOLS))
    return host, fs, audit


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


def build_catalog() -> dict[str, dict[str, Any]]:
    """Every tool's tools/list entry, by name (imports fastmcp)."""
    with tempfile.TemporaryDirectory(prefix="cowork-catalog-") as tmp:  # nothing of it stays in the image
        host, fs, audit = full_host(tmp)
        try:
            return {t["name"]: t for t in list_wire(host)}
        finally:
            fs.close()
            audit.close()


def main(argv: list[str]) -> int:
    """``python -m cowork.server.catalog [OUT]``: write the catalog (default: the image's path)."""
    out = argv[1] if len(argv) > 1 else CATALOG_PATH
    catalog = build_catalog()
    with open(out, "w") as fh:
        json.dump(catalog, fh, sort_keys=True, separators=(",", ":"))
    print(f"{len(catalog)} tools -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
