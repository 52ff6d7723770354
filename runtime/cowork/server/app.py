"""Builds the in-container tool host: allowed tools behind the audit middleware."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..formats import PYTHON_TOOL, WORKSPACE_TOOLS
from .agentfs import AgentFS
from .audit import AuditLog, AuditMiddleware
from .forkfs import ForkFS, per_thread_fsuid_works
from .host import ToolHost
from .workspace_tools import WorkspaceConfig, WorkspaceTools


@dataclass
class ServerConfig:
    """Everything the in-container server is told by the task image."""

    task_id: str = "task"
    tools: list[str] = field(default_factory=lambda: list(WORKSPACE_TOOLS))
    workspace: WorkspaceConfig = field(default_factory=WorkspaceConfig)


def build_app(cfg: ServerConfig, audit: AuditLog) -> tuple[ToolHost, AgentFS | ForkFS]:
    """Create the tool host for one sandbox (``host.fastmcp()`` is the same as a FastMCP app).

    Args:
        cfg: Which tools to serve and how.
        audit: The log every tool call is written to.

    Returns:
        The tool host and the file-access pool it uses (close it at shutdown): AgentFS
        where threads can take the agent's filesystem ids, ForkFS where they cannot (gVisor).
    """
    mcp = ToolHost(
        name=f"cowork:{cfg.task_id}",
        instructions="Tools of a cowork sandbox. Files live under /workspace.",
    )
    mcp.add_middleware(AuditMiddleware(audit))
    uid, gid = cfg.workspace.agent_uid, cfg.workspace.agent_gid
    if uid is not None and gid is not None and not per_thread_fsuid_works(uid, gid):
        fs = ForkFS(uid, gid, child_timeout_s=cfg.workspace.tool_timeout_s + 5)  # gVisor: no setfsuid
    else:
        fs = AgentFS(uid, gid)
    workspace = WorkspaceTools(cfg.workspace, fs)
    workspace.register(mcp, set(cfg.tools))
    if PYTHON_TOOL in cfg.tools:
        from .progtool import ProgTool  # its code's calls go through this app, middleware and all

        ProgTool(workspace, mcp).register(mcp)
    return mcp, fs
