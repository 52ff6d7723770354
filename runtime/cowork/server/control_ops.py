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
from .tools.jobs import job_logs, list_jobs
from .tools.procs import agent_processes_stopped
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
                 stop: asyncio.Event, services: Any, reseed: Callable[[], Awaitable[None]],
                 http_services: Any = None) -> None:
        self.cfg = cfg
        self.raw = raw
        self.run_dir = run_dir
        self.audit = audit
        self.fs = fs
        self.http = http
        self.stop = stop
        self.services = services
        self.started = time.time()
        self.http_services = http_services
        ws = cfg.workspace
        both = services
        if http_services is not None:  # a reset and the state hash take in the task's HTTP services
            from .http_services import WithHttp

            both = WithHttp(services, http_services)
        self.episodes = Episodes(workspace=ws.root, agent_uid=ws.agent_uid, audit=audit, reseed=reseed,
                                 services=both, drain_timeout_s=ws.tool_timeout_s + 5)
        self.actors = Actors(WorkspaceTools(ws, fs), fs, ws.root, audit, services, self.episodes.drain,
                             agent_uid=ws.agent_uid, keep_jobs=ws.background_jobs)

    @property
    def disk_mb(self) -> int:
        """The task's disk limit in MB (64 when it sets none)."""
        return int(self.raw.get("limits", {}).get("disk_mb", 64))

    async def ping(self, _: dict) -> dict:
        """The server is up: its task, whether HTTP is loaded, where the audit chain stands."""
        return {"task": self.cfg.task_id, "mcp_ready": True, "http_loaded": self.http.server is not None,
                "audit_count": self.audit.count, "audit_last_hash": self.audit.last_hash,
                "uptime_s": time.time() - self.started}

    async def export(self, req: dict) -> dict:
        """Write the workspace to ``export/workspace.tar`` once no call runs.

        ``keep_jobs`` (a turn boundary): where the task allows background jobs, hold them stopped
        during the export instead of killing them, so they run on into the next turn and day.
        With background jobs the answer lists them (``jobs``, see server.tools.jobs).
        ``dump_state``: also write the services' seed and final dumps (as ``dump_state`` does)
        before calls resume. The answer says where the audit chain stands once every call has
        drained (``audit_count``, ``audit_last_hash``): the log the host reads next holds exactly
        those records.
        """
        dest = os.path.join(self.run_dir, EXPORT_DIR, "workspace.tar")
        # No call may still run (its effect would land after the export, and a reset would
        # then drop its record): new calls wait out the export, running ones are drained.
        # The host reads the audit log after this export: a reset may start a new chain over
        # these records (see reset.Episodes).
        self.audit.paused = True
        try:
            await self.episodes.drain()
            self.audit.exported_at = self.audit.count
            # Every agent process is killed first (held stopped, at a boundary of a task with
            # background jobs): nothing may change files while they are read.
            out = await self._export(dest, bool(req.get("keep_jobs")))
            if req.get("dump_state") and self.services is not None:  # the services' state, while calls are held
                out = {**out, **await self.services.dump({})}
            # Where the chain stands with every call drained (the host reads the log next).
            return {**out, "audit_count": self.audit.count, "audit_last_hash": self.audit.last_hash}
        finally:
            self.audit.paused = False

    async def _export(self, dest: str, keep_jobs: bool) -> dict:
        ws = self.cfg.workspace
        limits = ExportLimits.for_disk(self.disk_mb)
        if not ws.background_jobs or ws.agent_uid is None or os.geteuid() != 0:
            return await asyncio.to_thread(export_workspace, ws.root, dest, limits, ws.agent_uid)
        with agent_processes_stopped(ws.agent_uid):  # the jobs and their logs as they stand, not mid-write
            jobs = await asyncio.to_thread(list_jobs, ws.agent_uid)
            logs = await self.fs.run(job_logs, [j["pid"] for j in jobs]) if jobs else []
            jobs = [{**j, "log": log, "log_tail": tail} for j, (log, tail) in zip(jobs, logs)]
            if keep_jobs:
                return {**await asyncio.to_thread(export_workspace, ws.root, dest, limits), "jobs": jobs}
        return {**await asyncio.to_thread(export_workspace, ws.root, dest, limits, ws.agent_uid), "jobs": jobs}

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
        if self.http_services is not None:  # its seed, its dump, and no checkpoints
            ops.update(self.http_services.handlers())
        return ops
