"""Bring-your-own HTTP services: a task's own servers, and tools mapped to their endpoints.

A task may run HTTP servers of its own (any command that serves on a loopback port: a
FastAPI mock, a small Flask app, a binary) and expose tools that call their endpoints, as
Claw-Eval's ``services:`` / ``tools:`` / ``tool_endpoints:`` do. In a spec::

    http_services:
      - name: notes_api                   # Claw-Eval: services[].name
        files: services/notes             # code and fixtures beside task.yaml (root's alone in the sandbox)
        command: python server.py         # services[].command, run in that folder
        port: 9102                        # services[].port
        health: POST /notes/list          # services[].health_check (+ health_check_method)
        reset: POST /notes/reset          # services[].reset_endpoint
        audit: GET /notes/audit           # Claw-Eval's /audit, next to the reset endpoint
    http_tools:
      - name: notes_list                  # tools[].name
        description: List the notes       # tools[].description
        input_schema: {type: object, properties: {tag: {type: string}}}
        service: notes_api                # tool_endpoints[].url, split into service and path
        method: POST                      # tool_endpoints[].method
        path: /notes/list

The servers run in the sandbox's companion container (engine.http_sidecar): its own network
namespace, so the agent's processes cannot connect to their port, and the in-container tool
host reaches them over a unix socket in the root-only run dir. Every call of an HTTP tool goes
through the tool host like any other (audited, limited, fault-injected, graded).

This module holds the spec models and the rules that need the whole spec (called from
``TaskSpec``); nothing here imports the server.
"""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ..services.http_names import DECLARED, declared, declared_in  # noqa: F401  (public here)

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
METHODS: tuple[str, ...] = ("GET", "POST", "PUT", "PATCH", "DELETE")

#: A service name: also its key in the evidence's service state and the file name of its socket.
SERVICE_NAME = r"^[a-z][a-z0-9_]{0,31}$"
#: A tool name as model APIs take it (OpenAI's and Anthropic's rule).
TOOL_NAME = r"^[A-Za-z0-9_-]{1,64}$"
#: ``{name}`` placeholders in an endpoint path, filled from the call's arguments.
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Endpoint(_Frozen):
    """One HTTP endpoint of a service: a method and a path. Written as a mapping, or as one
    string: ``"POST /notes/reset"``, ``"/health"`` (the field's default method), or a URL on
    the service's own port as Claw-Eval writes it (``http://localhost:9102/notes/reset``)."""

    path: str
    """The path on the service, with its query if any: ``/notes/reset``."""
    method: Method | None = None
    """GET, POST, PUT, PATCH or DELETE; left out, the field's default (health and audit GET,
    reset POST)."""
    port: int | None = Field(default=None, exclude=True)
    """The port a URL named (checked against the service's), not kept."""

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        if not isinstance(data, str):
            return data
        text = data.strip()
        method = None
        head, _, rest = text.partition(" ")
        if head.upper() in METHODS and rest.strip():
            method, text = head.upper(), rest.strip()
        port = None
        if "://" in text:
            url = urlsplit(text)
            if url.scheme != "http" or url.hostname not in ("localhost", "127.0.0.1", "0.0.0.0", "::1"):
                raise ValueError(f"{data!r}: a service is reached on its own loopback port; give a path such as "
                                 "'/health' or a URL http://localhost:PORT/path")
            port = url.port
            text = (url.path or "/") + (f"?{url.query}" if url.query else "")
        return {"path": text, "method": method, "port": port}

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not v.startswith("/") or any(c in v for c in " \r\n\t#"):
            raise ValueError(f"path {v!r}: give a path starting with '/', without spaces or a fragment")
        return v

    def with_default(self, method: str) -> "Endpoint":
        """This endpoint with ``method`` when it names none."""
        return self if self.method else self.model_copy(update={"method": method})


class HttpService(_Frozen):
    """A server of the task's own, started in the sandbox's companion container before the
    episode (Claw-Eval: one entry of ``services:``)."""

    name: str = Field(pattern=SERVICE_NAME)
    """Lowercase letters, digits and '_' (not the name of a built-in service such as ``mail``):
    the service's key in the evidence's state (record checks name it as ``service``)."""
    command: str | list[str]
    """What serves: split into words like a shell's (no pipes, no ``&&``), or a list of words;
    run in the service's folder (``files``) as root, off the agent's network. ``python`` and
    ``python3`` are the image's Python, which has fastapi and uvicorn (from the host's wheelhouse)."""
    port: int = Field(ge=1, le=65535)
    """The loopback port it serves on (also given to it as ``PORT``)."""
    files: str | None = None
    """A folder beside task.yaml with the service's code and fixtures: copied into the task
    layer root's alone (0700/0600, like the seed; never the workspace) and the command's
    working folder. Left out: the command runs in an empty folder."""
    env: dict[str, str] = {}
    """Environment of the command, beside ``PORT``, ``PATH`` (the image's Python first) and
    ``HOME=/tmp`` (Claw-Eval: ``env``; fixture paths relative to the folder work)."""
    health: Endpoint
    """Answers below 500 once the service is up (Claw-Eval: ``health_check`` and
    ``health_check_method``, POST by its default; GET by ours). Probed until ``ready_timeout_s``
    with the header ``X-Health-Check: 1``."""
    reset: Endpoint | None = None
    """Puts the service back to its seeded state (POST by default). Called once after start, so
    the episode starts from what a reset gives, and by a pool between episodes, which then
    checks the state is the pristine one. Without it a pooled sandbox is recycled instead."""
    audit: Endpoint | None = None
    """Returns the service's own record of the episode or its state as JSON (GET by default):
    collected into the evidence after the episode (and once at start, as the seed), so record
    checks can judge it. Claw-Eval's ``/audit``."""
    ready_timeout_s: float = Field(default=20.0, gt=0, le=300)
    """Seconds the service may take to answer its health check (Claw-Eval: ``ready_timeout``)."""
    memory_mb: int = Field(default=256, ge=32, le=8192)
    """Memory for this service in the companion container (MiB)."""

    @field_validator("command")
    @classmethod
    def _command(cls, v: str | list[str]) -> str | list[str]:
        import shlex

        try:
            words = shlex.split(v) if isinstance(v, str) else v
        except ValueError as exc:
            raise ValueError(f"command {v!r} cannot be split into words: {exc}") from None
        if not words or not all(isinstance(w, str) and w for w in words):
            raise ValueError("command: give the program and its arguments")
        return v

    @field_validator("health", "reset", "audit")
    @classmethod
    def _port_and_method(cls, ep: Endpoint | None, info: ValidationInfo) -> Endpoint | None:
        if ep is None:
            return None
        port = info.data.get("port")
        if ep.port is not None and port is not None and ep.port != port:
            raise ValueError(f"the URL names port {ep.port}, but the service serves on {port}")
        return ep.with_default("POST" if info.field_name == "reset" else "GET")

    @property
    def argv(self) -> list[str]:
        """The command as words."""
        import shlex

        return shlex.split(self.command) if isinstance(self.command, str) else list(self.command)


class ToolHints(_Frozen):
    """MCP annotations of an HTTP tool, read by graders (``destructive_tool_not_used``) and
    shown to MCP clients; left out, a hint is not set."""

    read_only: bool | None = None
    """The tool changes nothing (readOnlyHint)."""
    destructive: bool | None = None
    """The tool may remove or overwrite what no other call puts back (destructiveHint)."""
    idempotent: bool | None = None
    """Calling it again with the same arguments changes nothing more (idempotentHint)."""
    open_world: bool | None = None
    """Its effect or content crosses the organisation's boundary (openWorldHint)."""

    def wire(self) -> dict[str, bool]:
        """The MCP ``annotations`` object."""
        names = {"read_only": "readOnlyHint", "destructive": "destructiveHint",
                 "idempotent": "idempotentHint", "open_world": "openWorldHint"}
        return {names[k]: v for k, v in self.model_dump().items() if v is not None}


class HttpTool(_Frozen):
    """A tool that calls one endpoint of an HTTP service (Claw-Eval: an entry of ``tools:``
    with its ``tool_endpoints:`` entry). Always exposed: it needs no entry in ``tools:``."""

    name: str = Field(pattern=TOOL_NAME)
    """The tool's name as the agent sees it. It may be a built-in tool's name (Claw-Eval's
    ``calendar_create_event``) when ``tools:`` does not allow that built-in tool."""
    description: str = ""
    """What the agent is told the tool does."""
    input_schema: dict[str, Any] = {"type": "object", "properties": {}}
    """JSON Schema of the arguments (an object). The tool host checks each call against it
    before anything is sent (a mismatch is a tool error, audited as a failed call)."""
    service: str
    """The HTTP service it calls."""
    method: Method = "POST"
    """HTTP method: POST, PUT, PATCH and DELETE send the arguments as a JSON body; GET sends
    them as the query string (lists repeated, objects as JSON)."""
    path: str
    """The endpoint's path; ``{name}`` placeholders take the argument of that name (which then
    is not sent in the body or query): ``/notes/{note_id}``."""
    annotations: ToolHints = ToolHints()
    """MCP annotations (``read_only``, ``destructive``, ``idempotent``, ``open_world``)."""

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    @field_validator("path")
    @classmethod
    def _path(cls, v: str, info: ValidationInfo) -> str:
        v = Endpoint._path(v)
        props = (info.data.get("input_schema") or {}).get("properties") or {}
        for name in PLACEHOLDER.findall(v):
            if name not in props:
                raise ValueError(f"placeholder {{{name}}} is not an argument of the tool; add it to "
                                 "input_schema.properties (and to required)")
        return v

    @field_validator("input_schema")
    @classmethod
    def _schema(cls, v: dict[str, Any]) -> dict[str, Any]:
        if v.get("type", "object") != "object":
            raise ValueError(f"input_schema: the arguments are a JSON object; its type is 'object', not {v.get('type')!r}")
        try:
            from jsonschema.exceptions import SchemaError
            from jsonschema.validators import validator_for
        except ImportError:  # pragma: no cover - jsonschema comes with fastmcp
            return v
        try:
            validator_for(v).check_schema(v)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.path)
            raise ValueError(f"input_schema{'.' + where.replace('/', '.') if where else ''}: not a valid JSON Schema: "
                             f"{exc.message}") from None
        return {"type": "object", **v}

    def wire(self) -> dict[str, Any]:
        """The tool's ``tools/list`` entry."""
        out: dict[str, Any] = {"name": self.name, "description": self.description, "inputSchema": self.input_schema}
        hints = self.annotations.wire()
        if hints:
            out["annotations"] = hints
        return out


# --------------------------------------------------------------------------- whole-spec rules
Problem = tuple[tuple[str | int, ...], str]
"""A problem and the field it is about, as a location (``("http_tools", 0, "service")``)."""


class HttpSpecError(ValueError):
    """The problems of a spec's HTTP services and tools, each with its field (the loader
    reports each at its line)."""

    def __init__(self, problems: list[Problem]):
        super().__init__("\n".join(f"{field_name(loc)}: {msg}" for loc, msg in problems))
        self.problems = problems


def field_name(loc: tuple[str | int, ...]) -> str:
    """``http_tools[0].service`` for ``("http_tools", 0, "service")``."""
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (("." if out else "") + str(p))
    return out


def spec_problems(spec: Any) -> list[Problem]:
    """What is wrong with the HTTP services and tools of a spec (empty when nothing): names,
    ports, tools that name no service, clashes with the allow-list, and record checks about a
    service that has no audit endpoint."""
    from ..formats import DOCUMENT_TOOL, PYTHON_TOOL, WORKSPACE_TOOLS
    from ..services.names import SERVICE_TOOLS
    from .checks import walk

    problems: list[Problem] = []
    services: dict[str, int] = {}
    ports: dict[int, int] = {}
    for i, svc in enumerate(spec.http_services):
        at = ("http_services", i)
        if svc.name in SERVICE_TOOLS:
            problems.append((at + ("name",), f"{svc.name!r} is a built-in service; name yours otherwise "
                                              f"(e.g. {svc.name + '_api'!r})"))
        elif svc.name in services:
            problems.append((at + ("name",), f"{svc.name!r} is declared twice (first http_services[{services[svc.name]}])"))
        if svc.port in ports:
            problems.append((at + ("port",), f"port {svc.port} is taken by http_services[{ports[svc.port]}]"))
        services.setdefault(svc.name, i)
        ports.setdefault(svc.port, i)
    allowed = set(spec.tools)
    own = {*WORKSPACE_TOOLS, PYTHON_TOOL, DOCUMENT_TOOL}
    tools: dict[str, int] = {}
    for i, tool in enumerate(spec.http_tools):
        at = ("http_tools", i)
        if tool.service not in services:
            known = ", ".join(services) or "none declared"
            problems.append((at + ("service",), f"no http service {tool.service!r} (http_services: {known})"))
        if tool.name in tools:
            problems.append((at + ("name",), f"{tool.name!r} is declared twice (first http_tools[{tools[tool.name]}])"))
        elif tool.name in own:
            problems.append((at + ("name",), f"{tool.name!r} is one of the sandbox's own tools; name yours otherwise"))
        elif tool.name in allowed:
            problems.append((at + ("name",), f"tools allows the built-in {tool.name!r} too; an HTTP tool is always "
                                              "exposed, so remove it from tools (or rename the HTTP tool)"))
        tools.setdefault(tool.name, i)
    for opt in spec.tool_options:
        if opt in tools:
            problems.append((("tool_options", opt), "hide_args is for built-in service tools; leave the argument out "
                                                     "of the HTTP tool's input_schema instead"))
    acting: list[tuple[tuple[str | int, ...], Any]] = [
        (("user", "turns", i), t) for i, t in enumerate(spec.user.turns if spec.user else [])]
    acting += [(("events", i), e) for i, e in enumerate(spec.events)]
    for where, item in acting:
        for j, action in enumerate(item.actions):
            if action.tool in tools:
                problems.append((where + ("actions", j, "tool"), f"the user and the world cannot call HTTP tools yet (what "
                                                               f"{action.tool} changes would count as the agent's)"))
    audited = {s.name for s in spec.http_services if s.audit is not None}
    for group in ("checks", "safety"):
        for n, check in enumerate(getattr(spec, group)):
            scoped = check.after_turn is not None or check.after_day is not None
            for c in walk(check):
                name = getattr(c, "service", None)
                if name in services and name not in audited:
                    problems.append(((group, n, "service"), f"http service {name!r} has no audit endpoint, so the "
                                                            "evidence holds no state of it to check; give it `audit:`"))
                elif name in services and (scoped or c.after_turn is not None or c.after_day is not None):
                    problems.append(((group, n, "service"), f"the state of http service {name!r} is collected after "
                                                            "the episode only; after_turn / after_day cannot see it"))
    return problems


def file_problems(spec: Any, root: Any, workspace_dir: Any) -> list[Problem]:
    """Each service's ``files`` folder: beside task.yaml, a folder, no symlinks in it, and not
    inside the workspace folder (whose files the agent gets)."""
    from pathlib import Path

    problems: list[Problem] = []
    base = Path(root).resolve()
    ws = Path(root, workspace_dir).resolve() if workspace_dir else None
    for i, svc in enumerate(spec.http_services):
        if svc.files is None:
            continue
        loc = ("http_services", i, "files")
        folder = (Path(root) / svc.files).resolve()
        if not folder.is_relative_to(base) or folder == base:
            problems.append((loc, f"{svc.files!r} is not a folder inside the task folder"))
        elif not folder.is_dir():
            problems.append((loc, f"folder {svc.files!r} not found beside task.yaml"))
        elif ws is not None and (folder.is_relative_to(ws) or ws.is_relative_to(folder)):
            problems.append((loc, f"{svc.files!r} overlaps the workspace folder, whose files the agent gets; keep the "
                                  "service's code and fixtures beside it"))
        else:
            links = [p for p in (Path(root) / svc.files).rglob("*") if p.is_symlink()]
            if links:
                problems.append((loc, f"{links[0].relative_to(Path(root))} is a symlink; copy the file instead"))
    return problems


def service_files(spec: Any, root: Any) -> list[tuple[str, bytes, int]]:
    """The files of every service, as ``(path in the task layer, bytes, mode)``: under
    ``http/<service>/``, mode 0700 for an executable file, else 0600 (root's alone)."""
    import os
    from pathlib import Path

    out: list[tuple[str, bytes, int]] = []
    for svc in spec.http_services:
        if svc.files is None:
            continue
        folder = Path(root) / svc.files
        for p in sorted(folder.rglob("*")):
            if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts:
                mode = 0o700 if os.access(p, os.X_OK) else 0o600
                out.append((f"http/{svc.name}/{p.relative_to(folder).as_posix()}", p.read_bytes(), mode))
    return out


def state_of(data: Any) -> dict[str, dict[str, Any]]:
    """An audit endpoint's JSON as a service's state in the evidence: ``{collection: {id: record}}``,
    the shape record checks read.

    A top-level list becomes a collection (``items`` when the answer itself is a list), keyed by
    each record's ``id`` when every record has a distinct one, else by position (``"0"``,
    ``"1"``, ...); an object of objects stays as it is; any other top-level value is a record
    ``{"value": ...}`` of the collection ``_values``, keyed by its name. Records that are not
    objects become ``{"value": ...}``.
    """
    if not isinstance(data, dict):
        data = {"items": data if isinstance(data, list) else [data]}
    out: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        if isinstance(value, list):
            recs = [v if isinstance(v, dict) else {"value": v} for v in value]
            ids = [r.get("id") for r in recs]
            keyed = all(isinstance(i, (str, int)) and not isinstance(i, bool) and str(i) for i in ids) \
                and len({str(i) for i in ids}) == len(ids)
            out[str(key)] = {str(ids[n]) if keyed else str(n): r for n, r in enumerate(recs)}
        elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            out[str(key)] = {str(k): v for k, v in value.items()}
        else:
            out.setdefault("_values", {})[str(key)] = {"value": value}
    return out


def checks_on_missing_state(spec: Any, check: Any, unavailable: Any) -> bool:
    """True when ``check`` (or a check inside it) reads the state of an HTTP service whose
    audit could not be collected (``unavailable``: their names): it is then not graded."""
    from .checks import walk

    missing = set(unavailable or [])
    return bool(missing) and any(getattr(c, "service", None) in missing for c in walk(check))
