"""Host-side handle of one sandbox: start, list and call tools over MCP, export evidence, stop."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from .. import settings
from ..errors import McpError, ResetMismatch, SandboxError, SandboxNotReady, SandboxStartTimeout
from ..evidence import Evidence
from ..formats import AUDIT_LOG, CONTROL_SOCKET, EXPORT_DIR, MCP_SOCKET, RPC_SOCKET
from ..spec.loader import LoadedSpec, load_spec
from . import attach
from .backend import get_backend
from .checkpoints import abandoned_evidence
from .checkpoints import checkpoint as checkpoint_sandbox
from .checkpoints import restore as restore_sandbox
from .control import ControlChannel, control_request
from .mcp import LeanMcpClient, RpcMcpClient, tool_annotations

if TYPE_CHECKING:
    from ..grading.grade import Grade
    from .backend import SandboxBackend

log = logging.getLogger(__name__)


class ToolResult(BaseModel):
    """The outcome of one tool call as the host saw it."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    """Tool name."""
    args: dict[str, Any]
    """Arguments sent."""
    is_error: bool
    """True when the tool reported an error (including timeouts)."""
    text: str
    """The text the agent sees."""
    structured: Any = None
    """Structured content, when the tool returned any."""
    duration_ms: float
    """Round trip measured on the host."""


#: What the export's answer holds beside the export's own figures (kept out of ``meta["export"]``).
_NOT_EXPORT_META = frozenset({"ok", "path", "audit_count", "audit_last_hash", "seed_path", "final_path", "seed_hash",
                              "final_hash"})


class Sandbox:
    """A running sandbox container reached over its MCP unix socket.

    Use ``async with await Sandbox.start(spec) as sb:`` or call :meth:`stop` yourself.
    """

    def __init__(self, loaded: LoadedSpec, image: str, container_id: str, name: str, run_dir: Path,
                 backend: "SandboxBackend | None" = None):
        self.loaded = loaded
        self.backend = backend or get_backend("docker")
        self.spec = loaded.spec
        self.image = image
        self.id = container_id
        self.name = name
        self.run_dir = run_dir
        self.started_at = time.time()
        self._client: RpcMcpClient | LeanMcpClient | None = None
        self._stack = contextlib.AsyncExitStack()
        #: The kept-open control connection (health checks, exports, resets).
        self._control = ControlChannel(run_dir)
        self._stopped = False
        self._tools: list | None = None
        self._initial: dict[str, str] | None = None
        self._seed_state: Any = None
        self._seed_text = ""
        #: The state recorded right after the first start (see :meth:`record_pristine`).
        self.pristine: dict[str, Any] | None = None
        #: Episodes begun in this sandbox (a pooled sandbox serves several, reset in between).
        self.uses = 0
        #: True from the first tool call until the evidence was exported.
        self.unexported = False
        #: An early health check (``begin_episode(early=True)``) until it answered well.
        self._begun: asyncio.Future | None = None

    @property
    def socket_path(self) -> Path:
        """The MCP socket on the host."""
        return self.run_dir / MCP_SOCKET

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    async def start(cls, spec: LoadedSpec | str | os.PathLike, *, image: str | None = None,
                    ready_timeout: float = 60.0, keep: bool = False, runtime: str | None = None,
                    seed: int | None = None, backend: "str | SandboxBackend | None" = None,
                    bundle: str | os.PathLike | None = None) -> "Sandbox":
        """Build the task image if needed, start a hardened container, wait until MCP answers.

        Args:
            spec: A loaded spec, or a task folder / task.yaml.
            image: Use this task image instead of building one.
            ready_timeout: Seconds to wait for the in-container server.
            keep: Label the container to survive this process (``cowork up``).
            runtime: Docker runtime, e.g. ``runsc`` (shorthand for a DockerBackend with it).
            backend: Where the container runs: a name from ``cowork.sandbox.backend`` (``docker``,
                ``gvisor``, or a registered one) or a backend instance; default
                ``settings.sandbox_backend``.
            seed: Episode seed for fault injection (default: the spec's fault seed).
            bundle: The task layer as a folder (``engine.images.write_task_bundle``), mounted
                read-only instead of built into an image; ``image`` is then the sandbox image.

        Raises:
            SpecError: the spec is invalid.
            ImageError: the image could not be built.
            SandboxStartTimeout: the server did not answer in time (logs attached).
            SandboxError: Docker refused to start the container, or the backend is unknown.
        """
        from ..engine.client import in_thread
        from ..engine.docker_backend import DockerBackend
        from ..engine.images import ensure_task_image
        from ..engine.reaper import reap

        engine = DockerBackend(runtime) if runtime is not None and backend is None else get_backend(backend)
        loaded = spec if isinstance(spec, LoadedSpec) else load_spec(spec)
        await _sweep_once(reap, in_thread)
        if bundle is not None and not image:
            raise SandboxError("a task bundle needs the sandbox image to start (image=...)")
        tag = image if image else await in_thread(ensure_task_image, loaded)
        extra: dict[str, Any] = {"task_bundle": os.fspath(bundle)} if bundle is not None else {}
        # Starting is CPU-bound (the server's imports): a bounded number at a time, so that a
        # burst of starts queues instead of every one of them running past its ready timeout.
        async with _start_slots():
            started = await in_thread(engine.start, tag, loaded.spec.id, loaded.spec.limits, keep=keep,
                                      environment={"COWORK_EPISODE_SEED": str(seed)} if seed is not None else None,
                                      **extra)
            sb = cls(loaded, tag, started.container_id, started.name, started.run_dir, backend=engine)
            try:
                companion = await sb._start_companion(keep, bundle) if loaded.spec.http_services else None
                await sb._wait_ready(ready_timeout)
                await sb._connect()
                if companion is not None:
                    await sb._http_ready(companion)
            except BaseException:
                await sb.stop()
                raise
        return sb

    async def _start_companion(self, keep: bool, bundle: str | os.PathLike | None) -> str:
        """Start the container of the task's HTTP services (engine.http_sidecar)."""
        from ..engine.client import in_thread
        from ..engine.docker_backend import DockerBackend
        from ..engine.http_sidecar import start_companion

        if not isinstance(self.backend, DockerBackend):
            raise SandboxError(f"task {self.spec.id}: http_services need the docker or gvisor backend "
                               f"(this sandbox runs on {getattr(self.backend, 'name', self.backend)!r})")
        return await in_thread(start_companion, self.image, self.name, self.run_dir, self.spec, keep=keep,
                               runtime=self.backend.runtime, task_bundle=bundle)

    async def _http_ready(self, companion: str) -> None:
        """Wait for every HTTP service, then have the server take their seed."""
        from ..engine.client import in_thread
        from ..engine.http_sidecar import wait_ready

        await in_thread(wait_ready, self.run_dir, self.spec, companion)
        await control_request(self.run_dir, "http_seed", timeout=60)

    async def _wait_ready(self, timeout: float) -> None:
        from ..engine.client import in_thread

        deadline = time.monotonic() + timeout
        delay = 0.01
        last: Exception | None = None
        while time.monotonic() < deadline:
            if (self.run_dir / CONTROL_SOCKET).exists():
                try:
                    resp = await control_request(self.run_dir, "ping", timeout=2)
                    if resp.get("mcp_ready"):
                        return
                except SandboxError as exc:
                    last = exc
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 0.02)
        logs = await in_thread(self.backend.logs, self.id)
        raise SandboxStartTimeout(
            f"sandbox {self.name} did not become ready within {timeout:g}s "
            f"(last error: {last}); container logs:\n{logs}"
        )

    async def _connect(self) -> None:
        # The host's own path (newline-delimited JSON-RPC, server.rpc); an image from before
        # it has only the streamable HTTP socket.
        rpc = self.run_dir / RPC_SOCKET
        client = RpcMcpClient(str(rpc)) if rpc.exists() else LeanMcpClient(str(self.socket_path))
        self._client = await self._stack.enter_async_context(client)

    def _session(self) -> RpcMcpClient | LeanMcpClient:
        if self._client is None:
            raise SandboxError(f"sandbox {self.name} has no MCP session (attached with connect=False)")
        return self._client

    async def stop(self) -> None:
        """Close the MCP session and remove the container and its run dir. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        from ..engine.client import in_thread
        self._drop_check()
        self._control.close()
        try:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._stack.aclose(), 5)
        finally:
            if self.spec.http_services:  # its HTTP services' container goes first, then the sandbox
                from ..engine.http_sidecar import remove_companion

                with contextlib.suppress(SandboxError):
                    await asyncio.shield(in_thread(remove_companion, self.name))
            await asyncio.shield(in_thread(self.backend.remove, self.id, self.run_dir))

    async def detach(self) -> None:
        """Close this process's MCP session but leave the container running (``cowork up``).

        Only useful for sandboxes started with ``keep=True``; others are reaped once this
        process exits.
        """
        self._stopped = True
        self._drop_check()
        self._control.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._stack.aclose(), 5)

    @classmethod
    async def attach(cls, ref: str, *, spec: "LoadedSpec | str | os.PathLike | None" = None,
                     connect: bool = True) -> "Sandbox":
        """A handle on a running sandbox this process did not start, found by id prefix or name
        (:func:`cowork.engine.reaper.find_container`).

        The spec is the one ``cowork up`` kept (``spec`` overrides it, and is needed for a sandbox
        started otherwise); the initial workspace hashes are the kept ones, else read from the
        container's own seed. :meth:`Sandbox.stop` removes the sandbox; :meth:`Sandbox.detach`
        leaves it running.

        Args:
            ref: The container's id (a prefix will do) or name.
            spec: The task's spec (a loaded one, or a task folder / task.yaml) instead of the kept one.
            connect: Open an MCP session (False: control socket and files only, for a sandbox
                whose server may be dead).

        Raises:
            CoworkError: no such sandbox, or no spec for it.
            SandboxError: its MCP server does not answer.
        """
        from ..engine.client import in_thread
        from ..engine.reaper import find_container

        container = await in_thread(find_container, ref)
        run_dir = attach.run_dir_of(container)
        saved = attach.read_record(run_dir)
        loaded = attach.loaded_spec(container, saved, spec)
        image = (saved or {}).get("image") or (container.attrs.get("Config") or {}).get("Image") or ""
        sb = cls(loaded, image, container.id, container.name, run_dir)
        if saved is not None and isinstance(saved.get("initial"), dict):
            sb._initial = dict(saved["initial"])
        else:
            sb._initial = await in_thread(attach.seed_hashes, sb.backend, container.id)  # None: from the spec folder
        if connect:
            try:
                await sb._connect()
            except Exception as exc:
                await sb.detach()
                raise SandboxError(f"sandbox {container.name}: its MCP server does not answer: {exc!r}") from exc
        return sb

    async def checkpoint(self) -> dict[str, Any]:
        """Snapshot the whole task state (workspace with owners and modes, services, audit
        position, clock); see :mod:`cowork.sandbox.checkpoints`."""
        await self._ready()
        return await checkpoint_sandbox(self)

    async def restore(self, snapshot: "dict[str, Any] | str") -> dict[str, Any]:
        """Return to a snapshot from :meth:`checkpoint`, as a new audited branch; the state
        hash is verified against the snapshot's. See :mod:`cowork.sandbox.checkpoints`."""
        await self._ready()
        return await restore_sandbox(self, snapshot)

    async def __aenter__(self) -> "Sandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    # ------------------------------------------------------------------ tools
    async def list_tools(self) -> list:
        """The MCP tools the sandbox serves (mcp.types.Tool objects), asked of the server."""
        await self._ready()
        self._tools = await self._session().list_tools()
        return self._tools

    async def tools(self) -> list:
        """The MCP tools, asked once per sandbox: they are fixed by its image, so a pooled
        sandbox's later episodes reuse the list."""
        return self._tools if self._tools is not None else await self.list_tools()

    async def call_tool(self, name: str, args: dict[str, Any] | None = None,
                        timeout: float | None = None, agent: dict[str, Any] | None = None) -> ToolResult:
        """Call a tool inside the sandbox.

        A tool error (bad arguments, failure, timeout) is returned with ``is_error`` set,
        never raised. The host waits at most ``timeout`` (default: the spec's tool timeout
        plus a 5 s grace, since the server cuts the call itself at the spec's limit).

        Arguments that no tool may receive (not a JSON object, NaN or infinity, over
        formats.MAX_ARGUMENTS_BYTES of JSON) are refused here as a tool error and never
        sent: they are the agent's mistake, not the sandbox's. The server applies the same
        rule to any client.

        ``agent`` names the agent making the call (a harness's: ``id``, ``parent``,
        ``assignment``, and ``tools``, its grant); the server writes it into the call's audit
        records and refuses a tool outside the grant (see cowork.agents.harness).

        Raises:
            SandboxError: when the sandbox itself stopped answering.
        """
        # The argument rule the server applies too; a mistake of the agent is its tool error.
        from ..formats import AGENT_META, INVALID_ARGUMENTS_KEY, ArgumentsRefused, check_arguments

        args = {} if args is None else args
        self.unexported = True
        try:
            check_arguments(args)
        except ArgumentsRefused as exc:
            shown = args if isinstance(args, dict) and all(isinstance(k, str) for k in args) \
                else {INVALID_ARGUMENTS_KEY: args}
            return ToolResult(tool=name, args=shown, is_error=True, text=f"Refused: {exc}. Nothing was done.",
                              duration_ms=0.0)
        args = dict(args)
        limit = timeout if timeout is not None else self.spec.limits.tool_timeout_s + 5
        await self._ready()
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(limit):  # no extra task per call, unlike wait_for
                r = await (self._session().call_tool(name, args) if agent is None else
                           self._session().call_tool(name, args, meta={AGENT_META: agent}))
        except asyncio.TimeoutError:
            return ToolResult(tool=name, args=args, is_error=True,
                              text=f"tool call timed out after {limit:g}s (host side)",
                              duration_ms=(time.perf_counter() - t0) * 1000)
        except McpError as exc:
            if exc.rpc_code is None:
                raise SandboxError(f"sandbox {self.name} failed during {name!r}: {exc}") from exc
            # A protocol-level refusal (unknown tool, invalid params) is the agent's mistake:
            # it gets it back as a tool error, like any other.
            return ToolResult(tool=name, args=args, is_error=True, text=str(exc),
                              duration_ms=(time.perf_counter() - t0) * 1000)
        except Exception as exc:
            raise SandboxError(f"sandbox {self.name} failed during {name!r}: {exc!r}") from exc
        text = "\n".join(b.get("text", f"<{b.get('type')}>") for b in r.get("content") or [])
        structured = r.get("structuredContent")
        if isinstance(structured, dict) and set(structured) == {"result"}:
            structured = structured["result"]
        return ToolResult(tool=name, args=args, is_error=bool(r.get("isError")), text=text,
                          structured=structured, duration_ms=(time.perf_counter() - t0) * 1000)

    # ------------------------------------------------------------------ evidence
    async def export_evidence(self, trace: dict[str, Any] | None = None, *, keep_jobs: bool = False) -> Evidence:
        """Collect the audit log and the final workspace from the running sandbox, with every
        branch a restore abandoned on the way (``Evidence.branches``; see docs/checkpoints.md).

        ``keep_jobs`` (a turn boundary): a task's background jobs are held stopped during the
        export and then run on, rather than killed; ``meta["export"]["jobs"]`` lists them.

        Raises:
            SandboxError: when the control socket does not answer.
        """
        await self._ready()
        # One request: the server drains running calls, writes the workspace and (with services)
        # both state dumps while calls are held, and says where the audit chain stands then.
        export = await self._control.request("export_workspace", timeout=60,
                                             **({"keep_jobs": True} if keep_jobs else {}),
                                             **({"dump_state": True} if self.uses_services else {}))
        tar = (self.run_dir / EXPORT_DIR / "workspace.tar").read_bytes()
        audit = (self.run_dir / AUDIT_LOG).read_text()
        initial = self._initial_hashes()
        annotations = tool_annotations(await self.tools())
        seed_state = final_state = None
        if self.uses_services:
            if self._seed_state is None:  # the seed never changes: read it once per sandbox
                self._seed_text = Path(self.run_dir / EXPORT_DIR / "state_seed.json").read_text()
                self._seed_state = json.loads(self._seed_text)
            # One parsed seed for every evidence of this sandbox: evidence is read-only to its
            # readers (state_before hands out the seed itself), and parsing it again per export
            # was most of an export's host time on a seeded world.
            seed_state = self._seed_state
            final_state = json.loads(Path(self.run_dir / EXPORT_DIR / "state_final.json").read_text())
        meta: dict[str, Any] = {}
        if self.spec.http_services:
            seed_state, final_state, meta = await self._http_state(seed_state, final_state)
        self.unexported = False
        ev = Evidence(
            audit_text=audit, audit_count=export["audit_count"], workspace_tar=tar, initial=initial,
            trace=trace or {}, meta={"task": self.spec.id, "image": self.image, "container": self.name,
                                     "tool_annotations": annotations,
                                     "export": {k: v for k, v in export.items() if k not in _NOT_EXPORT_META}, **meta},
            state_seed=seed_state, state_final=final_state,
        )
        return self._with_branches(ev)

    async def _http_state(self, seed: dict[str, Any] | None, final: dict[str, Any] | None
                          ) -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any]]:
        """The HTTP services' audits (seed and final) merged into the service state, and the
        evidence's meta about them (see cowork.spec.http_services.state_of).

        A service whose audit could not be had is named in ``meta["http_state_unavailable"]``
        (its checks are then not graded), never shown as an empty state.
        """
        from ..spec.http_services import state_of

        names = [s.name for s in self.spec.http_services if s.audit is not None]
        try:
            await control_request(self.run_dir, "dump_http", timeout=60)
            dumped = json.loads((self.run_dir / EXPORT_DIR / "http_state.json").read_text())
        except (SandboxError, OSError, ValueError) as exc:
            dumped = {"seed": {}, "final": {}, "unavailable": {n: f"not collected: {exc}" for n in names}}
        raw_seed, raw_final = dumped.get("seed") or {}, dumped.get("final") or {}
        unavailable = dict(dumped.get("unavailable") or {})
        unavailable.update({n: "no seed was taken" for n in names if n not in raw_seed and n not in unavailable})
        seed, final = dict(seed or {}), dict(final or {})
        for name in names:
            if name in unavailable or name not in raw_final:
                unavailable.setdefault(name, "not collected")
                continue
            seed[name], final[name] = state_of(raw_seed[name]), state_of(raw_final[name])
        meta: dict[str, Any] = {"http_audit": {"seed": raw_seed, "final": raw_final}}
        if unavailable:
            meta["http_state_unavailable"] = unavailable
        return seed, final, meta

    def _with_branches(self, ev: Evidence) -> Evidence:
        """``ev`` carrying the branches restores abandoned on the way to it (none: as it was)."""
        ev.branches, errors = abandoned_evidence(self, ev.audit_text, seed_state=self._seed_state or ev.state_seed,
                                                 annotations=ev.meta.get("tool_annotations") or {})
        if errors:
            ev.meta["branch_errors"] = errors
        return ev

    async def grade(self, trace: dict[str, Any] | None = None, judge: Any = None) -> "Grade":
        """Export the evidence now (:meth:`export_evidence`) and grade it (:meth:`grade_evidence`)."""
        return await self.grade_evidence(await self.export_evidence(trace), judge=judge)

    async def grade_evidence(self, ev: Evidence, judge: Any = None) -> "Grade":
        """Grade this sandbox's evidence with its spec: hidden verifiers first, the spec's judge
        checks, and the original grader of an imported task (their results go into ``ev.meta``;
        ``judge``, a grading.judge.LLMJudge, judges the checks and answers the original grader's
        judge calls; without one both stay not graded), then every check and rule, on the live
        state and on every branch a restore abandoned (a violation there keeps the grade unsafe;
        see docs/checkpoints.md).

        Raises:
            SandboxError: a verifier container could not be run.
        """
        from ..grading import grade

        if any(c.type == "verifier" for c in (*self.spec.checks, *self.spec.safety)):
            from ..engine.client import in_thread
            from ..engine.verifiers import run_verifiers

            ev.meta["verifiers"] = await in_thread(run_verifiers, self.spec, self.loaded.root, ev.workspace_tar,
                                                   self.image)
        from ..grading.judge import judge_evidence

        await judge_evidence(judge, self.spec, ev)
        if self.spec.original_grader is not None:  # never raises: a failure is recorded, graded not_graded
            from ..engine.client import in_thread
            from ..engine.original_grader import run_original_grader

            ev.meta["original_grader"] = await in_thread(run_original_grader, self.spec, self.loaded.root, ev,
                                                         self.image, judge)
        return grade(self.spec, ev)

    def _initial_hashes(self) -> dict[str, str]:
        if self._initial is None:
            self._initial = {p: hashlib.sha256(data).hexdigest() for p, data, _, _ in self.loaded.workspace_files()}
        return dict(self._initial)

    async def diagnose(self) -> tuple[str, str]:
        """Say who broke a sandbox that stopped answering, and how.

        Nothing inside a sandbox can remove its container or stop the Docker daemon, so a
        container that is gone, or a backend that does not answer, is an infrastructure
        failure. A container that still exists but whose server died, ran out of memory or
        stopped answering failed from the inside, and the only actor inside is the agent.

        Returns:
            ``("agent", cause)`` or ``("infra", cause)``.
        """
        from ..engine.client import in_thread

        try:
            st = await in_thread(self.backend.inspect, self.id)
        except SandboxError as exc:
            return "infra", str(exc)
        if not st.exists:
            return "infra", f"sandbox {self.name} disappeared ({st.detail})"
        if st.oom_killed:
            return "agent", "the sandbox ran out of memory and its server was killed (OOM)"
        if not st.running:
            return "agent", f"the sandbox's server exited ({st.detail}; exit code {st.exit_code})"
        return "agent", "the sandbox's server stopped answering"

    async def salvage_evidence(self, trace: dict[str, Any] | None = None) -> Evidence:
        """Collect what evidence can still be had from a sandbox the agent broke.

        The audit log lies in the host-side run dir and survives the server; a torn last
        line (the server died while writing it) is left out. The workspace comes from the
        server's export if it still answers, else from a root ``tar`` inside the container
        if it still runs; when neither works the evidence says ``workspace_unavailable``
        and graders must not judge the workspace. Never raises for what the sandbox lacks.
        """
        from ..engine.client import in_thread
        from ..formats import WORKSPACE_DIR

        log_path = self.run_dir / AUDIT_LOG
        audit = log_path.read_bytes().decode("utf-8", "replace") if log_path.exists() else ""
        if audit and not audit.endswith("\n"):
            audit = audit[: audit.rfind("\n") + 1]
        tar: bytes | None = None
        with contextlib.suppress(SandboxError, OSError):
            await control_request(self.run_dir, "export_workspace", timeout=10)
            tar = (self.run_dir / EXPORT_DIR / "workspace.tar").read_bytes()
        if tar is None:
            limit = 2 * self.spec.limits.disk_mb * 1024 * 1024 + (1 << 20)
            tar = await in_thread(self.backend.exec_archive, self.id, WORKSPACE_DIR, limit)
        seed_state = final_state = None
        if self.uses_services:
            with contextlib.suppress(SandboxError, OSError, ValueError):
                await control_request(self.run_dir, "dump_state", timeout=10)
                seed_state = json.loads((self.run_dir / EXPORT_DIR / "state_seed.json").read_text())
                final_state = json.loads((self.run_dir / EXPORT_DIR / "state_final.json").read_text())
        initial = self._initial_hashes()
        http_meta: dict[str, Any] = {}
        if self.spec.http_services:
            seed_state, final_state, http_meta = await self._http_state(seed_state, final_state)
        return self._with_branches(Evidence(
            audit_text=audit, audit_count=None, workspace_tar=tar if tar is not None else _EMPTY_TAR,
            initial=initial, trace=trace or {},
            meta={"task": self.spec.id, "image": self.image, "container": self.name,
                  "tool_annotations": tool_annotations(self._tools or []), "salvaged": True,
                  "workspace_unavailable": tar is None, "state_unavailable": self.uses_services and final_state is None,
                  **http_meta},
            state_seed=seed_state, state_final=final_state,
        ))

    @property
    def uses_services(self) -> bool:
        """True when the task seeds or exposes any mock service."""
        from ..services.names import ALL_SERVICE_TOOLS

        seeded = self.spec.services.model_dump(exclude_none=True)
        return bool(seeded) or bool(set(self.spec.tools) & set(ALL_SERVICE_TOOLS))

    @property
    def resettable(self) -> bool:
        """False when a service of the task's own has no reset endpoint: such a sandbox serves
        one episode (a pool replaces it instead of resetting it)."""
        return all(s.reset is not None for s in self.spec.http_services)

    async def reset_services(self, seed: int | None = None) -> str:
        """Restore the services' seeded state (fault sequence restarted, with ``seed`` if given).

        Returns:
            The canonical state hash after the reset (equal to the seed's).

        Raises:
            SandboxError: when the sandbox has no services or the reset failed.
        """
        await self._ready()
        resp = await self._control.request("reset_services", **({"seed": seed} if seed is not None else {}))
        if not resp.get("matches_seed"):
            raise SandboxError(f"reset of {self.name} did not restore the seeded state")
        return resp["hash"]


    # ------------------------------------------------------------------ reuse
    async def state(self) -> dict[str, Any]:
        """The sandbox's state hash now, with its parts (workspace tree, /tmp, services,
        non-root processes, IPC objects), computed by the in-container server.

        Raises:
            SandboxError: when the control socket does not answer.
        """
        await self._ready()
        resp = await self._control.request("state_hash", timeout=30)
        return {k: v for k, v in resp.items() if k != "ok"}

    async def act(self, actor: str, actions: list[dict[str, Any]]) -> dict[str, Any]:
        """Change the sandbox as the task's ``user`` or ``world`` (not the agent): each action
        is ``{"tool", "args"}``, ``{"add": {service: {collection: [records]}}}`` or
        ``{"clock": ISO}``; see server.actors. The agent's calls wait meanwhile; every audit
        record written carries ``actor``.

        Returns:
            ``results`` (one per action: ``ok``, ``text`` or ``error``), ``records`` and
            ``files`` the actions changed (their values afterwards), ``clock``, ``audit_count``.

        Raises:
            SandboxError: when the control socket does not answer.
        """
        timeout = 30 + len(actions) * (self.spec.limits.tool_timeout_s + 5)
        await self._ready()
        resp = await self._control.request("act", timeout=timeout, actor=actor, actions=actions)
        self.unexported = True
        return {k: v for k, v in resp.items() if k != "ok"}

    async def record_pristine(self) -> str:
        """Record the state of a sandbox nothing has touched yet; resets are checked against it."""
        self.pristine = await self.state()
        return self.pristine["hash"]

    async def begin_episode(self, seed: int | None = None, *, early: bool = False) -> "asyncio.Future[Any] | None":
        """Health check and start of an episode: the server answers and takes the episode's
        fault seed (None: the spec's own).

        With ``early`` it returns at once and the check runs on while the caller's model takes
        its first turn: whatever next talks to the server (a tool call, an export, an action,
        a tool listing, a checkpoint, a reset) waits for its answer first, so no call runs
        before the seed is set. A check that fails makes that first use raise
        :class:`~cowork.errors.SandboxNotReady`, an infrastructure failure: nothing of the
        episode reached the sandbox, so the agent is never blamed for it.

        Returns:
            With ``early``, the check still running (done callbacks may watch it); else None.

        Raises:
            SandboxError: when the server does not answer (without ``early``).
        """
        self._drop_check()
        if not early:
            await self._control.request("begin_episode", timeout=5, seed=seed)
            self.uses += 1
            return None
        self.uses += 1
        check = asyncio.ensure_future(self._control.request("begin_episode", timeout=5, seed=seed))
        check.add_done_callback(_retrieve)
        self._begun = check
        return check

    async def _ready(self) -> None:
        """Wait for an early health check (see :meth:`begin_episode`); raise if it failed.

        Raises:
            SandboxNotReady: the check failed or was dropped; every later use raises too.
        """
        check = self._begun
        if check is None:
            return
        if not check.done():
            await asyncio.wait((check,))  # a cancelled caller leaves the check running
        if check.cancelled() or check.exception() is not None:
            cause = "it was cancelled" if check.cancelled() else str(check.exception())
            raise SandboxNotReady(f"sandbox {self.name} (task {self.spec.id}) failed its health check at the start "
                                  f"of the episode: {cause}")
        self._begun = None

    def _drop_check(self) -> None:
        """Cancel an early health check still waiting for its answer (the sandbox is going)."""
        if self._begun is not None and not self._begun.done():
            self._begun.cancel()

    async def reset(self, seed: int | None = None, *, discard_evidence: bool = False) -> dict[str, Any]:
        """Return the sandbox to its pristine state and verify it.

        Kills every agent process, empties the workspace and ``/tmp``, seeds the workspace
        and the services again, restarts the fault sequence with ``seed`` and starts a new
        audit chain; then compares the server's state hash with the one recorded by
        :meth:`record_pristine`.

        Args:
            seed: The fault seed of the next episode (None: the spec's own).
            discard_evidence: Reset even though the episode's evidence was not exported
                (without it such a reset is refused, here and by the server).

        Returns:
            The state after the reset (``hash``, its parts, ``reset_ms``).

        Raises:
            SandboxError: the evidence was not exported (nothing changed); the reset failed;
                or the state after it differs from the pristine one (``ResetMismatch``).
        """
        if self.pristine is None:
            raise SandboxError(f"sandbox {self.name}: no pristine state recorded; call record_pristine() first")
        if not self.resettable:
            raise SandboxError(f"sandbox {self.name} (task {self.spec.id}) cannot be reset: an http service has no "
                               "reset endpoint; start a fresh sandbox instead (a pool recycles it)")
        if self.unexported and not discard_evidence:
            raise SandboxError(f"sandbox {self.name} (task {self.spec.id}): reset refused: the episode's evidence "
                               "was not exported; call export_evidence() first or pass discard_evidence=True")
        await self._ready()
        resp = await self._control.request("reset", timeout=self.spec.limits.tool_timeout_s + 30,
                                     seed=seed, task=self.spec.id, discard_evidence=discard_evidence)
        state = {k: v for k, v in resp.items() if k != "ok"}
        if state["hash"] != self.pristine["hash"]:
            differs = [k for k in ("workspace", "tmp", "services", "processes", "ipc")
                       if state.get(k) != self.pristine.get(k)]
            raise ResetMismatch(f"sandbox {self.name} (task {self.spec.id}): the state after the reset differs from "
                                f"the pristine one in: {', '.join(differs) or 'the hash'}; "
                                + "; ".join(f"{k}: {state.get(k)!r} (pristine {self.pristine.get(k)!r})"
                                            for k in differs if k in ("processes", "ipc")))
        self.unexported = False
        return state


def _empty_tar() -> bytes:
    import io
    import tarfile

    buf = io.BytesIO()
    tarfile.open(fileobj=buf, mode="w").close()
    return buf.getvalue()


_EMPTY_TAR = _empty_tar()
_swept = False
_slots: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]" = weakref.WeakKeyDictionary()


def _start_slots() -> asyncio.Semaphore:
    """Per-event-loop limit on sandboxes starting at once (settings.max_starting, default 2 x cores)."""
    loop = asyncio.get_running_loop()
    if loop not in _slots:
        n = settings.get().max_starting or 2 * (os.cpu_count() or 1)
        _slots[loop] = asyncio.Semaphore(n)
    return _slots[loop]


async def _sweep_once(reap, in_thread) -> None:
    """Remove orphans left by dead processes, once per process."""
    global _swept
    if not _swept:
        _swept = True
        try:
            await in_thread(reap)
        except Exception as exc:  # a sweep failure must not block starting a sandbox
            log.warning("orphan sweep failed: %s", exc)


def _retrieve(check: "asyncio.Future[Any]") -> None:
    """Mark an early health check's failure as seen (it is raised by ``Sandbox._ready``)."""
    if not check.cancelled():
        check.exception()
