"""The in-container server's control operations, and the table of every op the host may call."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..formats import EXPORT_DIR
from ..toolhost.control import Handler
from .app import ServerConfig
from .fs.agentfs import AgentFS
from .state.actors import Actors
from .state.audit import AuditLog
from .state.reset import Episodes
from .state.workspace_export import ExportLimits, export_workspace
from .tools.workspace import WorkspaceTools

if TYPE_CHECKING:
    from .fs.forkfs import ForkFS


class _Http(Protocol):
    """What ``ping`` reads of the lazily loaded HTTP app (``__main__.LazyHttp``)."""

    server: Any


class ControlOps:
    """The server's own ops (``ping``, ``export_workspace``, ``shutdown``) and the parts that
    bring theirs: episodes (reset), the user's and world's actors, services and checkpoints.

    Args:
        cfg: The task's server config.
        raw: The task's public config (task.json) as read.
        run_dir: The root-only folder of the sockets, the audit log and the exports.
        audit: The episode's audit log.
        fs: The agent's file system gate.
        http: The streamable HTTP app, loaded when a client first connects.
        stop: Set to stop the server.
        services: The task's services, if it has any.
        reseed: Seeds the workspace again (for a reset).
    """

    def __init__(self, *, cfg: ServerConfig, raw: dict, run_dir: str, audit: AuditLog, fs: AgentFS | ForkFS, http: _Http,
                 stop: asyncio.Event, services: Any, reseed: Callable[[], Awaitable[None]]) -> None:
        self.cfg = cfg
        self.raw = raw
        self.run_dir = run_dir
        self.audit = audit
        self.fs = fs
        self.http = http
        self.stop = stop
        self.services = services
        self.started = time.time()
        ws = cfg.workspace
        self.episodes = Episodes(workspace=ws.root, agent_uid=ws.agent_uid, audit=audit, reseed=reseed,
                                 services=services, drain_timeout_s=ws.tool_timeout_s + 5)
        self.actors = Actors(WorkspaceTools(ws, fs), fs, ws.root, audit, services, self.episodes.drain,
                             agent_uid=ws.agent_uid)

    @property
    def disk_mb(self) -> int:
        """The task's disk limit in MB (64 when it sets none)."""
        return int(self.raw.get("limits", {}).get("disk_mb", 64))

    async def ping(self, _: dict) -> dict:
        """The server is up: its task, whether HTTP is loaded, where the audit chain stands."""
        return {"task": self.cfg.task_id, "mcp_ready": True, "http_loaded": self.http.server is not None,
                "audit_count": self.audit.count, "audit_last_hash": self.audit.last_hash,
                "uptime_s": time.time() - self.started}

    async def export(self, _: dict) -> dict:
        """Write the workspace to ``export/workspace.tar`` once no call runs."""
        dest = os.path.join(self.run_dir, EXPORT_DIR, "workspace.tar")
        # No call may still run (its effect would land after the export, and a reset would
        # then drop its record): new calls wait out the export, running ones are drained.
        # The host reads the audit log after this export: a reset may start a new chain over
        # these records (see reset.Episodes).
        self.audit.paused = True
        try:
            await self.episodes.drain()
            self.audit.exported_at = self.audit.count
            # Every agent process is killed first: nothing may change files while they are read.
            return await asyncio.to_thread(
                export_workspace, self.cfg.workspace.root, dest,
                ExportLimits.for_disk(self.disk_mb), self.cfg.workspace.agent_uid)
        finally:
            self.audit.paused = False

    async def shutdown(self, _: dict) -> dict:
        """Stop the server (as SIGTERM does)."""
        self.stop.set()
        return {}

    def handlers(self) -> dict[str, Handler]:
        """Every control op by name: these, then the episodes', actors', services' and checkpoints'."""
        ops = {"ping": self.ping, "export_workspace": self.export, "shutdown": self.shutdown,
               **self.episodes.handlers(), **self.actors.handlers()}
        if self.services is not None:
            ops.update(self.services.handlers())
        from .state.checkpoint import Checkpoints

        ops.update(Checkpoints(run_dir=self.run_dir, workspace=self.cfg.workspace.root, audit=self.audit,
                               episodes=self.episodes, services=self.services, fs=self.fs,
                               disk_mb=self.disk_mb).handlers())
        return ops
