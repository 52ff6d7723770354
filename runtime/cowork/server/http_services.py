"""A task's own HTTP services, as the in-container server sees them: tools, seed, reset, state.

The services themselves run in the sandbox's companion container (server.http_supervisor, started
by the host: engine.http_sidecar), on a network namespace of their own, so nothing the agent
runs can connect to them; each is reached through its unix socket in the root-only run dir
(``/run/cowork/http/<name>.sock``). This side:

- registers every HTTP tool on the tool host (toolhost.http_tools), so each call is audited,
  checked against its schema, fault-injected, limited and graded like any other tool;
- takes the seed (control op ``http_seed``: each service's audit endpoint right after start,
  once the companion has reset it) and the final state (``dump_http``: the same endpoints
  after the episode, written to ``export/http_state.json`` for the evidence);
- resets the services between a pooled sandbox's episodes through their reset endpoints and
  says whether the state is the seed's again (the hash the pool verifies), or refuses when a
  service has no reset endpoint (the pool recycles such a sandbox instead).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from typing import Any, Awaitable, Callable

from ..formats import EXPORT_DIR, canonical_json
from ..toolhost.http_tools import HttpTool, request, socket_path

#: Largest answer of an audit endpoint kept (bytes); a longer one is not evidence (its service's
#: checks are then not graded).
MAX_AUDIT_BYTES = 8 << 20
#: Seconds a reset, audit or health request may take.
CONTROL_TIMEOUT_S = 15.0
#: The companion's status file, in the shared socket folder.
STATUS_FILE = "status.json"

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class HttpServices:
    """The HTTP services of one sandbox and their control operations.

    Args:
        services: ``http_services`` of task.json.
        run_dir: The server's run dir (the sockets are in its ``http`` folder).
        faults: The episode's fault injector (shared with the built-in services), or None.
        episode_seed: The fault seed the sandbox started with.
    """

    def __init__(self, services: list[dict[str, Any]], run_dir: str, faults: Any = None,
                 episode_seed: int | None = None):
        self.specs = {s["name"]: s for s in services}
        self.run_dir = run_dir
        self.faults = faults
        self.own_faults = False
        self.episode_seed = episode_seed
        self.seed: dict[str, Any] = {}
        self.seed_hash: str | None = None

    # ------------------------------------------------------------------ requests
    def _request(self, name: str, endpoint: dict[str, Any], max_bytes: int = MAX_AUDIT_BYTES) -> Any:
        spec = self.specs[name]
        return request(socket_path(self.run_dir, name), int(spec["port"]), endpoint["method"], endpoint["path"],
                       body=b"" if endpoint["method"] != "GET" else None, timeout=CONTROL_TIMEOUT_S,
                       max_bytes=max_bytes, headers={"X-Health-Check": "1"})

    def why_down(self, name: str) -> str | None:
        """What the companion says of a service that does not answer (exited, never ready), or None."""
        try:
            with open(os.path.join(self.run_dir, "http", STATUS_FILE)) as fh:
                entry = (json.load(fh).get("services") or {}).get(name) or {}
        except (OSError, ValueError):
            return "the services' container does not answer"
        state, detail = entry.get("state"), str(entry.get("detail") or "")
        if state in (None, "ready"):
            return None
        return detail if detail.startswith(str(state)) else f"{state}: {detail}".rstrip(": ")

    def audit_of(self, name: str) -> Any:
        """A service's audit endpoint's answer now (JSON).

        Raises:
            RuntimeError: the service has no audit endpoint, does not answer, answers an error
                status, or not JSON, or more than MAX_AUDIT_BYTES.
        """
        endpoint = self.specs[name].get("audit")
        if not endpoint:
            raise RuntimeError(f"http service {name!r} has no audit endpoint")
        try:
            answer = self._request(name, endpoint)
        except OSError as exc:
            raise RuntimeError(f"http service {name!r} does not answer ({self.why_down(name) or exc})") from None
        if answer.status >= 400:
            raise RuntimeError(f"http service {name!r}: {endpoint['method']} {endpoint['path']} answered "
                               f"{answer.status}: {answer.text()[:300]}")
        if answer.cut:
            raise RuntimeError(f"http service {name!r}: its audit is over {MAX_AUDIT_BYTES} bytes")
        try:
            return answer.json()
        except ValueError:
            raise RuntimeError(f"http service {name!r}: its audit is not JSON: {answer.text()[:300]!r}") from None

    def _health(self, name: str) -> int:
        endpoint = self.specs[name]["health"]
        return self._request(name, endpoint, max_bytes=1 << 16).status

    # ------------------------------------------------------------------ state
    def _digest(self, name: str) -> str:
        """One service's part of the state hash: its audit's, else its health answer's status."""
        try:
            if self.specs[name].get("audit"):
                return hashlib.sha256(canonical_json(self.audit_of(name)).encode()).hexdigest()
            return f"health {self._health(name)}"
        except (RuntimeError, OSError, ValueError) as exc:
            return f"unavailable: {exc}"

    def current_hash(self) -> str:
        """The hash of every service's state now (blocking: call it in a thread)."""
        parts = [f"{name} {self._digest(name)}" for name in sorted(self.specs)]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

    async def take_seed(self, _: dict) -> dict:
        """Control op ``http_seed``: record each service's audit as the episode's seed, and the
        state hash a reset must give again. The host calls it once the companion is ready."""
        seed: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for name, spec in self.specs.items():
            if spec.get("audit"):
                try:
                    seed[name] = await asyncio.to_thread(self.audit_of, name)
                except RuntimeError as exc:
                    errors[name] = str(exc)
        if errors:
            raise RuntimeError("; ".join(errors.values()))
        self.seed = seed
        self.seed_hash = await asyncio.to_thread(self.current_hash)
        return {"hash": self.seed_hash, "services": sorted(self.specs)}

    async def dump(self, _: dict) -> dict:
        """Control op ``dump_http``: each service's audit now, with the seed, written to
        ``export/http_state.json`` (``{"seed", "final", "unavailable"}``, by service)."""
        final: dict[str, Any] = {}
        unavailable: dict[str, str] = {}
        for name, spec in self.specs.items():
            if not spec.get("audit"):
                continue
            try:
                final[name] = await asyncio.to_thread(self.audit_of, name)
            except RuntimeError as exc:
                unavailable[name] = str(exc)
        path = os.path.join(self.run_dir, EXPORT_DIR, "http_state.json")
        with open(path, "w") as fh:
            json.dump({"seed": self.seed, "final": final, "unavailable": unavailable}, fh, sort_keys=True)
        os.chmod(path, 0o600)
        return {"path": path, "unavailable": sorted(unavailable)}

    async def reset(self, req: dict) -> dict:
        """Call every service's reset endpoint, then hash the state: ``matches_seed`` says
        whether it is the seed's again.

        Raises:
            RuntimeError: a service has no reset endpoint (recycle the sandbox instead), or its
                reset failed.
        """
        for name, spec in self.specs.items():
            endpoint = spec.get("reset")
            if not endpoint:
                raise RuntimeError(f"http service {name!r} has no reset endpoint; the sandbox cannot be reset "
                                   "(recycle it instead)")
            try:
                answer = await asyncio.to_thread(self._request, name, endpoint)
            except OSError as exc:
                raise RuntimeError(f"http service {name!r} does not answer its reset "
                                   f"({self.why_down(name) or exc})") from None
            if answer.status >= 300:
                raise RuntimeError(f"http service {name!r}: reset answered {answer.status}: {answer.text()[:300]}")
        if self.own_faults:
            self.set_fault_seed(req.get("seed"))
        h = await asyncio.to_thread(self.current_hash)
        return {"hash": h, "matches_seed": h == self.seed_hash}

    def set_fault_seed(self, seed: int | None) -> None:
        """Restart the HTTP tools' fault sequence (only when they have an injector of their own)."""
        if self.own_faults and self.faults is not None:
            self.faults.reset(self.episode_seed if seed is None else int(seed))

    async def refuse_checkpoint(self, _: dict) -> dict:
        """Checkpoints cannot hold a task's HTTP services (their state is in their own processes)."""
        raise RuntimeError("checkpoints are not supported for tasks with http_services: the services' state lives "
                           "in their own processes, which a snapshot cannot hold")

    def handlers(self) -> dict[str, Handler]:
        """Control operations: ``http_seed``, ``dump_http``, and refusals of checkpoints."""
        return {"http_seed": self.take_seed, "dump_http": self.dump,
                "checkpoint": self.refuse_checkpoint, "restore": self.refuse_checkpoint}


class WithHttp:
    """The built-in services (or None) and the HTTP services, as one for the episodes' reset
    and state hash (server.state.reset.Episodes)."""

    def __init__(self, builtin: Any, http: HttpServices):
        self.builtin = builtin
        self.http = http

    def current_hash(self) -> str:
        """Both parts' hash."""
        own = self.builtin.current_hash() if self.builtin is not None else "-"
        return hashlib.sha256(f"{own}\n{self.http.current_hash()}".encode()).hexdigest()

    async def reset(self, req: dict) -> dict:
        """Reset both; ``matches_seed`` when both are their seeds again."""
        ok = True
        if self.builtin is not None:
            ok = bool((await self.builtin.reset(req)).get("matches_seed"))
        theirs = await self.http.reset(req)
        return {"hash": await asyncio.to_thread(self.current_hash), "matches_seed": ok and theirs["matches_seed"]}

    def set_fault_seed(self, seed: int | None) -> None:
        """Restart the fault sequence (shared by both, or the HTTP tools' own)."""
        if self.builtin is not None:
            self.builtin.set_fault_seed(seed)
        self.http.set_fault_seed(seed)


def setup_http(mcp: Any, raw: dict[str, Any], run_dir: str, audit: Any, builtin: Any = None) -> HttpServices:
    """Register the task's HTTP tools on ``mcp`` and return its HTTP services.

    The tools share the built-in services' fault injector when there is one (one seed, one
    sequence per episode); else they get their own from the task's ``faults``.
    """
    from ..services.faults import FaultConfig, FaultInjector
    from ..services.http_names import declared, declared_in

    env_seed = os.environ.get("COWORK_EPISODE_SEED")
    episode_seed = int(env_seed) if env_seed else None
    faults = getattr(getattr(builtin, "ctx", None), "faults", None)
    own = False
    if faults is None and raw.get("faults"):
        with declared(*declared_in(raw)):
            faults = FaultInjector(FaultConfig.model_validate(raw["faults"]), seed=episode_seed)
        own = True
    services = HttpServices(raw.get("http_services") or [], run_dir, faults, episode_seed)
    services.own_faults = own
    limits = raw.get("limits") or {}
    tools = raw.get("http_tools") or []
    if faults is not None:  # the built-in middleware leaves these to the tools themselves
        faults.foreign = frozenset(faults.foreign | {t["name"] for t in tools})
    for cfg in tools:
        spec = services.specs[cfg["service"]]
        tool = HttpTool(cfg, int(spec["port"]), socket_path(run_dir, cfg["service"]),
                        timeout_s=float(limits.get("tool_timeout_s", 30)),
                        output_limit=int(limits.get("output_limit_bytes", 16384)),
                        faults=faults, audit=audit.append, down=services.why_down)
        mcp.listed_tool(tool.wire(), tool)
    return services
