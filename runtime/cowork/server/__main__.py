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
import warnings
from typing import TYPE_CHECKING

from .. import __version__, formats
from ..toolhost.control import serve_control
from ..toolhost.rpc import RpcServer
from .app import ServerConfig, build_app
from .control_ops import ControlOps
from .fs.agentfs import AgentFS
from .fs.forkfs import ForkFS
from .state.audit import AuditLog, audit_budget
from .tools.workspace import WorkspaceConfig

if TYPE_CHECKING:
    import uvicorn

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
        root=raw.get("workspace_root", formats.WORKSPACE_DIR),
        tool_timeout_s=float(limits.get("tool_timeout_s", 30)),
        output_limit=int(limits.get("output_limit_bytes", 16384)),
        agent_uid=formats.AGENT_UID if agent else None,
        agent_gid=formats.AGENT_GID if agent else None,
        background_jobs=bool(limits.get("background_jobs", False)),
    )
    tools = raw.get("tools", list(formats.WORKSPACE_TOOLS))
    hidden = {tool: list(opts.get("hide_args") or []) for tool, opts in (raw.get("tool_options") or {}).items()}
    return ServerConfig(task_id=raw.get("id", "task"), tools=tools, workspace=ws, hidden_args=hidden), raw


def _read_seed(path: str) -> bytes:
    # As root: the task layer is root-only (0700/0600), so the agent's threads cannot read it.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def _read_seeds(paths: list[str]) -> list[bytes]:
    return [_read_seed(p) for p in paths]


def _write_seed(dst: str, data: bytes) -> None:
    # As the agent: the file and any folder made for it start out the agent's.
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst, "wb") as fh:
        fh.write(data)


def _write_seeds(writes: list[tuple[str, bytes, int | None]]) -> None:
    # As the agent, in the seed's order: each file, then its mode (None: root takes it after).
    for dst, data, mode in writes:
        _write_seed(dst, data)
        if mode is not None:
            os.chmod(dst, mode)


def _protect(root: str, files: list[tuple[str, int]]) -> None:
    """As root: the root-owned seed files become root's with their mode, then their folders
    are protected (see :func:`_protect_folders`)."""
    for rel, mode in files:
        dst = os.path.join(root, rel)
        os.chown(dst, 0, 0)
        os.chmod(dst, mode)
    _protect_folders(root, [rel for rel, _ in files])


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


async def seed_workspace(raw: dict, fs: AgentFS | ForkFS, root: str, seed_dir: str) -> None:
    """Copy the seed files into the workspace as the agent, then apply owner and mode.

    Runs before the agent's first call (and in a reset, with no agent process alive), so
    nothing else touches the workspace meanwhile. One read as root and one write as the agent
    for all the files (a reset seeds the workspace again: a thread hop, or under gVisor a fork,
    per file and step added up).
    """
    entries = raw.get("files", [])
    if not entries:
        return
    datas = await asyncio.to_thread(_read_seeds, [os.path.join(seed_dir, e["path"]) for e in entries])
    as_root = os.geteuid() == 0
    writes = [(os.path.join(root, e["path"]), data, None if e.get("owner") == "root" and as_root
               else int(e["mode"], 8)) for e, data in zip(entries, datas)]
    await fs.run(_write_seeds, writes)
    protected = [(e["path"], int(e["mode"], 8)) for e in entries if e.get("owner") == "root" and as_root]
    if protected:
        await asyncio.to_thread(_protect, root, protected)


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


def _batch_scheduling() -> None:
    """Run the server (and what it starts) under SCHED_BATCH: a request the host sends then
    waits for the host to yield instead of preempting it on wake-up, so the host's send no
    longer stalls behind the whole request (no privilege needed; kept as is where refused)."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):
        log.info("SCHED_BATCH refused; the server keeps the default policy")


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
        self.server: uvicorn.Server | None = None
        self._task: asyncio.Task | None = None

    def arm(self) -> None:
        """Load and serve the app when the first client connects."""
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
            server = self.server = uvicorn.Server(uvicorn.Config(
                app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1, access_log=False,
                loop="asyncio", http="h11", ws="none", proxy_headers=False,
            ))
            # startup/main_loop/shutdown rather than serve(): serve() would take over SIGTERM.
            config = server.config
            config.load()
            server.lifespan = config.lifespan_class(config)
            await server.startup(sockets=[self.listener])
            await server.main_loop()
            await server.shutdown(sockets=[self.listener])
        except Exception:  # noqa: BLE001 - the host's path stays up; the client sees its connection fail
            log.exception("the streamable HTTP app could not start")
            self.listener.close()  # waiting clients see the connection refused rather than hang

    async def close(self) -> None:
        """Stop the app if it was loaded, and close the listening socket."""
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


def _seed_dir() -> str:
    return os.environ.get("COWORK_SEED_DIR", formats.SEED_DIR)


def _log_to_stderr() -> None:
    logging.basicConfig(level=os.environ.get("COWORK_LOG_LEVEL", "WARNING"), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _prepare_run_dir(run_dir: str) -> None:
    """Drop root's supplementary groups; make the run dir and its export folder root-only."""
    if os.geteuid() == 0:
        os.setgroups([])
    os.makedirs(run_dir, exist_ok=True)
    os.chmod(run_dir, 0o700)
    os.makedirs(os.path.join(run_dir, formats.EXPORT_DIR), mode=0o700, exist_ok=True)


def _services(mcp, raw: dict, run_dir: str, audit: AuditLog, cfg: ServerConfig, fs: AgentFS | ForkFS):
    """The task's services and their tools, or None when it uses none."""
    optional = {formats.PYTHON_TOOL, formats.DOCUMENT_TOOL}
    if not (raw.get("services") or set(cfg.tools) - set(formats.WORKSPACE_TOOLS) - optional):
        return None
    # Imported only when the task uses services: the ten service modules cost ~0.1 s of start-up.
    from ..services.http_names import declared, declared_in
    from .services_setup import setup_services
    from .tools.documents import AgentFiles
    from .tools.workspace import WorkspaceTools

    # Mail attachments move between the service and the workspace as the agent's files.
    files = AgentFiles(WorkspaceTools(cfg.workspace, fs))
    with declared(*declared_in(raw)):  # fault rules may name the task's HTTP tools and services
        return setup_services(mcp, raw, run_dir, audit, cfg.tools, files=files)


def _http_services(mcp, raw: dict, run_dir: str, audit: AuditLog, services):
    """The task's own HTTP services (in the companion container) and their tools, or None."""
    if not raw.get("http_services"):
        return None
    from .http_services import setup_http

    return setup_http(mcp, raw, run_dir, audit, services)


def _http(mcp, run_dir: str) -> LazyHttp:
    """The HTTP socket, listening already; the app behind it loads on the first client."""
    listener = _bind_unix(os.path.join(run_dir, formats.MCP_SOCKET))
    listener.listen(128)  # connections queue until the HTTP app is up (see LazyHttp)
    return LazyHttp(mcp, listener)


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


async def main() -> int:
    """Start the server and run until SIGTERM."""
    _log_to_stderr()
    run_dir = os.environ.get("COWORK_RUN_DIR", formats.RUN_DIR)
    cfg, raw = load_config(os.environ.get("COWORK_TASK_CONFIG", formats.TASK_CONFIG))
    _prepare_run_dir(run_dir)
    _batch_scheduling()
    _use_pidfd_watcher()
    # A quarter of the task's disk_mb: past it records lose their bulk (see audit.AuditLog).
    audit = AuditLog(os.path.join(run_dir, formats.AUDIT_LOG),
                     max_bytes=audit_budget(raw.get("limits", {}).get("disk_mb")))
    mcp, fs = build_app(cfg, audit)
    services = _services(mcp, raw, run_dir, audit, cfg, fs)
    http_services = _http_services(mcp, raw, run_dir, audit, services)

    async def reseed() -> None:
        await seed_workspace(raw, fs, cfg.workspace.root, _seed_dir())

    await reseed()
    audit.append({"kind": "session_start", "task": cfg.task_id, "tools": sorted(cfg.tools)})
    audit.exported_at = audit.count  # nothing of an episode to lose yet

    http = _http(mcp, run_dir)
    rpc = RpcServer(mcp, version=__version__)
    await rpc.start(os.path.join(run_dir, formats.RPC_SOCKET))
    stop = asyncio.Event()
    ops = ControlOps(cfg=cfg, raw=raw, run_dir=run_dir, audit=audit, fs=fs, http=http, stop=stop,
                     services=services, reseed=reseed, http_services=http_services)
    control = await serve_control(os.path.join(run_dir, formats.CONTROL_SOCKET), ops.handlers())
    _stop_on_signals(stop)
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
