"""Builds the in-container tool host: allowed tools behind the audit middleware."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from ..formats import DOCUMENT_TOOL, PYTHON_TOOL, WORKSPACE_TOOLS
from ..toolhost.catalog import list_wire, set_catalog_builder
from ..toolhost.hidden import HiddenArguments, hidden_map
from ..toolhost.host import ToolHost
from .fs.agentfs import AgentFS
from .fs.forkfs import ForkFS, per_thread_fsuid_works
from .state.audit import AuditLog, AuditMiddleware
from .tools.workspace import WorkspaceConfig, WorkspaceTools


@dataclass
class ServerConfig:
    """Everything the in-container server is told by the task image."""

    task_id: str = "task"
    tools: list[str] = field(default_factory=lambda: list(WORKSPACE_TOOLS))
    workspace: WorkspaceConfig = field(default_factory=WorkspaceConfig)
    hidden_args: dict[str, list[str]] = field(default_factory=dict)
    """Arguments hidden per tool (the spec's ``tool_options``): not listed, refused when sent."""


def build_app(cfg: ServerConfig, audit: AuditLog) -> tuple[ToolHost, AgentFS | ForkFS]:
    """Create the tool host for one sandbox (``host.fastmcp()`` is the same as a FastMCP app).

    Args:
        cfg: Which tools to serve and how.
        audit: The log every tool call is written to.

    Returns:
        The tool host and the file-access pool it uses (close it at shutdown): AgentFS
        where threads can take the agent's filesystem ids, ForkFS where they cannot (gVisor).
    """
    set_catalog_builder(build_catalog)  # only used where the image's catalog file is missing
    mcp = ToolHost(
        name=f"cowork:{cfg.task_id}",
        instructions="Tools of a cowork sandbox. Files live under /workspace.",
    )
    mcp.add_middleware(AuditMiddleware(audit))
    if cfg.hidden_args:  # inside the audit: a refused call is written as a failed call
        mcp.hidden = hidden_map(cfg.hidden_args)
        mcp.add_middleware(HiddenArguments(mcp.hidden))
    uid, gid = cfg.workspace.agent_uid, cfg.workspace.agent_gid
    fs: AgentFS | ForkFS
    if uid is not None and gid is not None and not per_thread_fsuid_works(uid, gid):
        fs = ForkFS(uid, gid, child_timeout_s=cfg.workspace.tool_timeout_s + 5)  # gVisor: no setfsuid
    else:
        fs = AgentFS(uid, gid)
    workspace = WorkspaceTools(cfg.workspace, fs)
    workspace.register(mcp, set(cfg.tools))
    if PYTHON_TOOL in cfg.tools:
        from .tools.python_tool import (
            ProgTool,  # its code's calls go through this app, middleware and all
        )

        ProgTool(workspace, mcp).register(mcp)
    if DOCUMENT_TOOL in cfg.tools:
        from .tools.documents import DocumentTool

        DocumentTool(workspace).register(mcp)
    return mcp, fs


def full_host(tmp: str) -> tuple[Any, Any, Any]:
    """A tool host with every tool registered (workspace, ``python``, every service), its
    file-access pool and its audit log (close both); ``tmp`` holds the workspace and the log."""
    # The services cost ~0.1 s of start-up: imported only when a catalog is built here.
    from ..services.base import ServiceContext, open_db
    from ..services.names import ALL_SERVICE_TOOLS
    from ..services.registry import register_all

    audit = AuditLog(os.path.join(tmp, "audit.jsonl"))
    host, fs = build_app(ServerConfig(tools=[*WORKSPACE_TOOLS, PYTHON_TOOL, DOCUMENT_TOOL],
                                      workspace=WorkspaceConfig(root=tmp)), audit)
    register_all(host, ServiceContext(db=open_db(), audit=audit.append), set(ALL_SERVICE_TOOLS))
    return host, fs, audit


def build_catalog() -> dict[str, dict[str, Any]]:
    """Every tool's tools/list entry, by name (imports fastmcp)."""
    with tempfile.TemporaryDirectory(prefix="cowork-catalog-") as tmp:  # nothing of it stays in the image
        host, fs, audit = full_host(tmp)
        try:
            return {t["name"]: t for t in list_wire(host)}
        finally:
            fs.close()
            audit.close()
