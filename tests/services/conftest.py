"""Fixtures: one in-memory MCP server with every service, reset to the rich seed before each test."""

from __future__ import annotations

import tempfile
from typing import Any

import pytest
from fastmcp import Client, FastMCP

from cowork.server.fs.agentfs import AgentFS
from cowork.server.tools.documents import AgentFiles
from cowork.server.tools.workspace import WorkspaceConfig, WorkspaceTools
from cowork.services.base import ServiceContext, open_db
from cowork.services.names import ALL_SERVICE_TOOLS
from cowork.services.registry import ServicesSeed, register_all, reset, seed_all

from .support import SEED_DATA, Env


@pytest.fixture(scope="session")
def env() -> Env:
    seed = ServicesSeed.model_validate(SEED_DATA)
    records: list[dict[str, Any]] = []
    # Mail attachments move to and from a real workspace folder, through the server's own
    # agent-file access (as the current user here).
    root = tempfile.mkdtemp(prefix="cowork-services-ws-")
    files = AgentFiles(WorkspaceTools(WorkspaceConfig(root=root), AgentFS(None, None)))
    ctx = ServiceContext(db=open_db(), audit=records.append, files=files)
    seed_all(ctx, seed)
    mcp = FastMCP("services-test")
    register_all(mcp, ctx, set(ALL_SERVICE_TOOLS))
    return Env(ctx, mcp, seed, records)


@pytest.fixture(scope="session")
async def client(env: Env):
    async with Client(env.mcp) as c:
        yield c


@pytest.fixture(autouse=True)
def _fresh(env: Env) -> None:
    reset(env.ctx, env.seed)
    env.audit.clear()
