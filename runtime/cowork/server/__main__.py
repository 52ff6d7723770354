"""Entry point of the in-container server: seed the workspace, then serve MCP and control.

Run as root inside the sandbox (``python -m cowork.server``). Never imports Docker or
host-side modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import json
import logging
import os
import signal
import socket
import sys
import time
import warnings

from .. import __version__
from .. import formats as F
from ..toolhost.control import serve_control
from ..toolhost.rpc import RpcServer
from .app import ServerConfig, build_app
from .fs.agentfs import AgentFS
from .state.actors import Actors
from .state.audit import AuditLog, audit_budget
from .state.reset import Episodes
from .state.workspace_export import ExportLimits, export_workspace
from .tools.workspace import WorkspaceConfig, WorkspaceTools

log = logging.getLogger("cowork.server")


def load_config(path: str) -> tuple[ServerConfig, dict]:
    """Read the task's public config (task.json) baked into the image."""
    try:
        with open(path) as fh:
            raw = json.load(fh)
    except FileNotFoundError:
        # The bare sandbox image (no task layer): every workspace tool, an empty workspace.
        raw = {}
    limits = raw.get("limits", {})
    agent = os.geteuid() == 0
    ws = WorkspaceConfig(
        root=raw.get("workspace_root", F.WORKSPACE_DIR),
        tool_timeout_s=float(limits.get("tool_timeout_s", 30)),
        output_limit=int(limits.get("output_limit_bytes", 16384)),
        agent_uid=F.AGENT_UID if agent else None,
        agent_gid=F.AGENT_GID if agent else None,
        background_jobs=bool(limits.get("background_jobs", False)),
    )
    return ServerConfig(task_id=raw.get("id", "task"), tools=raw.get("tools", list(F.WORKSPACE_TOOLS)), workspace=ws), raw


def _read_seed(path: str) -> bytes:
    # As root: the task layer is root-only (0700/0600), so the agent's threads cannot read it.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def _write_seed(dst: str, data: bytes) -> None:
    # As the agent: the file and any folder made for it start out the agent's.
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst, "wb") as fh:
        fh.write(data)


def _protect_folders(root: str, rel_paths: list[str]) -> None:
    """Make every folder from ``root`` down to a root-owned file root's, mode 1777.

    A root-owned file in a folder the agent owns can be swapped out without writing it:
    rename the folder (or the file) away and put a forgery in its place. In a folder that root
    owns with the sticky bit, only root may rename or remove root's entries, the folders on
    the way included, while the agent still creates, edits and removes its own files there.
    """
    folders = {root}
    for rel in rel_paths:
        parts = rel.split("/")[:-1]
        folders.update(os.path.join(root, *parts[:i]) for i in range(1, len(parts) + 1))
    for folder in sorted(folders):
        os.chown(folder, 0, 0, follow_symlinks=False)  # CHOWN first: as owner, root may then chmod
        os.chmod(folder, 0o1777)


async def seed_workspace(raw: dict, fs: AgentFS, root: str, seed_dir: str) -> None:
    """Copy the seed files into the workspace as the agent, then apply owner and mode.

    Runs before the agent's first call, so nothing else touches the workspace meanwhile.
    """
    protected = []
    for entry in raw.get("files", []):
        dst = os.path.join(root, entry["path"])
        data = await asyncio.to_thread(_read_seed, os.path.join(seed_dir, entry["path"]))
        await fs.run(_write_seed, dst, data)
        mode = int(entry["mode"], 8)
        if entry.get("owner") == "root" and os.geteuid() == 0:
            os.chown(dst, 0, 0)
            await asyncio.to_thread(os.chmod, dst, mode)
            protected.append(entry["path"])
        else:
            await fs.run(os.chmod, dst, mode)
    if protected:
        await asyncio.to_thread(_protect_folders, root, protected)


def _use_pidfd_watcher() -> None:
    """Wait for shell commands with a pidfd on the event loop instead of a thread per child."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):  # old kernel or a sandboxed one (gVisor): keep the default
        return
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(asyncio.get_running_loop())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.set_child_watcher(watcher)


def _settle() -> None:
    """After start-up: freeze what the imports built, and give freed heap back.

    ``gc.freeze`` moves the ~300k objects of the imported modules out of the collector's
    generations, so a full collection during an episode no longer walks them (tail
    latency); ``malloc_trim`` returns the heap that import-time garbage left free.
    """
    gc.collect()
    gc.freeze()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _bind_unix(path: str) -> socket.socket:
    """The HTTP listening socket, bound here rather than by uvicorn: uvicorn chmods it to 0666,
    which gVisor's host sockets refuse; the run dir around it is root-only (0700) anyway."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    with contextlib.suppress(PermissionError):
        os.chmod(path, 0o600)
    return sock


class LazyHttp:
    """Streamable HTTP on ``mcp.sock`` for external clients, loaded when the first one connects.

    The listening socket is bound and listening from the start, so a client's connection
    waits in the backlog; the first one makes the server import fastmcp and uvicorn (in a
    thread, ~0.6 s, while the host's calls go on over rpc.sock), build the FastMCP app from
    the same tool host and serve the socket from then on. A sandbox no external client
    touches never imports them: start-up and idle memory are the tool host's alone.
    """

    def __init__(self, host, listener: socket.socket):
        self.host = host
        self.listener = listener
        self.server = None
        self._task: asyncio.Task | None = None

    def arm(self) -> None:
        self.listener.setblocking(False)
        asyncio.get_running_loop().add_reader(self.listener.fileno(), self._first)

    def _first(self) -> None:
        asyncio.get_running_loop().remove_reader(self.listener.fileno())
        self._task = asyncio.create_task(self._serve())

    async def _serve(self) -> None:
        try:
            await asyncio.to_thread(_import_http)
            import uvicorn

            # json_response: a tool call's answer comes back as one JSON body instead of an SSE
            # stream; sessions stay stateful. Named implementations instead of "auto": no probing
            # for uvloop/httptools, no websockets import; no proxy headers on a private socket.
            app = self.host.fastmcp().http_app(path="/mcp", json_response=True)
            self.server = uvicorn.Server(uvicorn.Config(
                app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1, access_log=False,
                loop="asyncio", http="h11", ws="none", proxy_headers=False,
            ))
            # startup/main_loop/shutdown rather than serve(): serve() would take over SIGTERM.
            config = self.server.config
            config.load()
            self.server.lifespan = config.lifespan_class(config)
            await self.server.startup(sockets=[self.listener])
            await self.server.main_loop()
            await self.server.shutdown(sockets=[self.listener])
        except Exception:  # noqa: BLE001 - the host's path stays up; the client sees its connection fail
            log.exception("the streamable HTTP app could not start")
            self.listener.close()  # waiting clients see the connection refused rather than hang

    async def close(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, 3)
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(self.listener.fileno())
        self.listener.close()


def _import_http() -> None:
    import fastmcp  # noqa: F401
    import uvicorn  # noqa: F401


async def main() -> int:
    """Start the server and run until SIGTERM."""
    logging.basicConfig(level=os.environ.get("COWORK_LOG_LEVEL", "WARNING"), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run_dir = os.environ.get("COWORK_RUN_DIR", F.RUN_DIR)
    cfg, raw = load_config(os.environ.get("COWORK_TASK_CONFIG", F.TASK_CONFIG))
    if os.geteuid() == 0:
        os.setgroups([])
    os.makedirs(run_dir, exist_ok=True)
    os.chmod(run_dir, 0o700)
    os.makedirs(os.path.join(run_dir, F.EXPORT_DIR), mode=0o700, exist_ok=True)

    _use_pidfd_watcher()
    # A quarter of the task's disk_mb: past it records lose their bulk (see audit.AuditLog).
    audit = AuditLog(os.path.join(run_dir, F.AUDIT_LOG), max_bytes=audit_budget(raw.get("limits", {}).get("disk_mb")))
    mcp, fs = build_app(cfg, audit)
    services = None
    if raw.get("services") or set(cfg.tools) - set(F.WORKSPACE_TOOLS) - {F.PYTHON_TOOL}:
        # Imported only when the task uses services: the ten service modules cost ~0.1 s of start-up.
        from .services_setup import setup_services

        services = setup_services(mcp, raw, run_dir, audit, cfg.tools)
    await seed_workspace(raw, fs, cfg.workspace.root, os.environ.get("COWORK_SEED_DIR", F.SEED_DIR))
    audit.append({"kind": "session_start", "task": cfg.task_id, "tools": sorted(cfg.tools)})
    audit.exported_at = audit.count  # nothing of an episode to lose yet

    sock = os.path.join(run_dir, F.MCP_SOCKET)
    listener = _bind_unix(sock)
    listener.listen(128)  # connections queue until the HTTP app is up (see LazyHttp)
    http = LazyHttp(mcp, listener)
    rpc = RpcServer(mcp, version=__version__)
    await rpc.start(os.path.join(run_dir, F.RPC_SOCKET))
    stop = asyncio.Event()
    started = time.time()

    async def ping(_: dict) -> dict:
        return {"task": cfg.task_id, "mcp_ready": True, "http_loaded": http.server is not None,
                "audit_count": audit.count, "audit_last_hash": audit.last_hash, "uptime_s": time.time() - started}

    episodes: Episodes | None = None

    async def export(_: dict) -> dict:
        dest = os.path.join(run_dir, F.EXPORT_DIR, "workspace.tar")
        # No call may still run (its effect would land after the export, and a reset would
        # then drop its record): new calls wait out the export, running ones are drained.
        # The host reads the audit log after this export: a reset may start a new chain over
        # these records (see reset.Episodes).
        audit.paused = True
        try:
            await episodes.drain()
            audit.exported_at = audit.count
            # Every agent process is killed first: nothing may change files while they are read.
            return await asyncio.to_thread(
                export_workspace, cfg.workspace.root, dest,
                ExportLimits.for_disk(int(raw.get("limits", {}).get("disk_mb", 64))), cfg.workspace.agent_uid)
        finally:
            audit.paused = False

    async def shutdown(_: dict) -> dict:
        stop.set()
        return {}

    async def reseed() -> None:
        await seed_workspace(raw, fs, cfg.workspace.root, os.environ.get("COWORK_SEED_DIR", F.SEED_DIR))

    episodes = Episodes(workspace=cfg.workspace.root, agent_uid=cfg.workspace.agent_uid, audit=audit,
                        reseed=reseed, services=services, drain_timeout_s=cfg.workspace.tool_timeout_s + 5)
    actors = Actors(WorkspaceTools(cfg.workspace, fs), fs, cfg.workspace.root, audit, services, episodes.drain,
                    agent_uid=cfg.workspace.agent_uid)
    ops = {"ping": ping, "export_workspace": export, "shutdown": shutdown, **episodes.handlers(), **actors.handlers()}
    if services is not None:
        ops.update(services.handlers())
    from .state.checkpoint import Checkpoints

    ops.update(Checkpoints(run_dir=run_dir, workspace=cfg.workspace.root, audit=audit, episodes=episodes,
                           services=services, fs=fs, disk_mb=int(raw.get("limits", {}).get("disk_mb", 64))).handlers())
    control = await serve_control(os.path.join(run_dir, F.CONTROL_SOCKET), ops)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    http.arm()
    _settle()
    try:
        await stop.wait()
    finally:
        rpc.close()
        await http.close()
        control.close()
        fs.close()
        audit.close()
    return 0


if __name__ == "__main__":
    # Measured: uvloop and httptools made calls slower here (uvloop forks the whole server
    # for each shell command) and cost memory; plain asyncio with h11 is the fastest.
    sys.exit(asyncio.run(main()))
