"""``cowork import claw-eval``: a Claw-Eval checkout's tasks as cowork task folders.

Each ``tasks/<id>/`` of the checkout becomes ``OUT/<id>/`` holding:

- ``task.yaml``: the request, language (a tag), limits, the tools as ``http_tools`` (name,
  schema, method and the path of their endpoint's URL), the services as ``http_services``, a
  simulated ``user`` for user-agent tasks, and ``original_grader`` (the task's own grader.py
  grades it); with ``--native`` also the checks translated from its declared scoring
  components (``native.py``);
- ``services/<name>/``: what each service needs, at the paths it has in the checkout
  (``mock_services/_base.py``, ``mock_services/<svc>/...``, the fixtures its ``env`` names),
  so its command and environment work unchanged from the folder as from the checkout's root;
- ``workspace/``: the task's ``sandbox_files`` (what Claw-Eval copies into /workspace);
- ``claw_eval/``: the grader's files: ``src/claw_eval/`` (the package, without its runner),
  ``tasks/<id>/`` and the task folder of every peer grader it loads.

A task cowork cannot run faithfully is refused with the reason, never written half-way:
attachments or media files (multimodal), a service that reaches the live web or needs
credentials, a service or grader importing a package the images lack, harness features cowork
does not provide (sandbox tools without an endpoint, environment snapshots, grader files
pushed into the sandbox), and an unreadable or invalid task.yaml (with its file and field).
Every written spec is loaded back with cowork's loader; one that does not load is refused too.
"""

from __future__ import annotations

import ast
import logging
import re
import shlex
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import yaml
from pydantic import ValidationError

from ...errors import SpecError
from ...formats import DOCUMENT_TOOL, WORKSPACE_TOOLS
from ...services.names import SERVICE_TOOLS
from .report import ImportedTask, ImportReport, Refusal, RefusalKind
from .sandbox_names import SANDBOX_TOOLS
from .service_code import LIVE_WEB, SECRET_WORDS, follow_imports, read_service
from .task_format import ClawTask

log = logging.getLogger(__name__)

#: The parts of ``src/claw_eval/`` a grader uses (its runner and sandbox stay behind).
GRADER_PARTS = ("__init__.py", "cli.py", "config.py", "models", "graders", "trace")
#: What the grader container's Python has beside the standard library (``openai`` is the
#: judge relay's stand-in, installed by grader_main).
GRADER_AVAILABLE = frozenset({"pydantic", "pydantic_core", "yaml", "typing_extensions", "annotated_types", "openai"})
#: Files the agent would have to see or hear: cowork gives the agent text only.
MEDIA_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff", ".heic",
                            ".mp4", ".mov", ".avi", ".mkv", ".webm", ".mp3", ".wav", ".flac", ".m4a", ".ogg"})
#: Prompt attachments the harness passes as text (the rest are images, audio or video).
TEXT_ATTACHMENTS = frozenset({".txt", ".md", ".csv", ".json", ".xml", ".yaml", ".yml", ".html", ".htm", ".log"})
#: Media references the harness finds in a prompt's text (``[media attached: ...]``).
_MEDIA_TOKEN = re.compile(r"\[(?:media attached[^\]:]*|(?:image|audio|video):\s*source):[^\]]*\]", re.IGNORECASE)
#: Files the ``read_document`` tool reads (given to the agent when the task seeds one).
DOCUMENT_SUFFIXES = frozenset({".pdf", ".docx", ".xlsx", ".md", ".txt"})
#: Task fields for harness features cowork does not provide, with why.
UNSUPPORTED_FIELDS = {
    "env_snapshot_files": "the grader reads files collected from the sandbox after the run (env_snapshot), "
                          "which cowork's grader call does not provide",
    "env_snapshot_commands": "the grader reads the output of commands run in the sandbox after the run "
                             "(env_snapshot), which cowork's grader call does not provide",
    "sandbox_grader_files": "grader files are pushed into the sandbox after the run",
    "local_grader_files": "the grader reads files from the harness machine",
}
_LFS_POINTER = b"version https://git-lfs.github.com/spec"
_LOOPBACK = ("localhost", "127.0.0.1", "0.0.0.0", "::1")
_SERVICE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_DIFFICULTY = {"easy": "easy", "simple": "easy", "medium": "medium", "hard": "hard"}
#: What the scripted fallback user says (no user model): nothing of the persona's hidden facts.
_FALLBACK_SAY = {"zh": "我能告诉你的就这些了，请根据现有信息继续。",
                 "en": "That is all I can tell you; please go ahead with what you have."}


class Refused(Exception):
    """A task cannot be imported (carries the refusal)."""

    def __init__(self, kind: RefusalKind, reason: str, *, file: str | None = None, field: str | None = None):
        super().__init__(reason)
        self.kind, self.reason, self.file, self.field = kind, reason, file, field


@dataclass
class _Plan:
    """What one task becomes: the spec and the files to write beside it."""

    spec: dict[str, Any]
    files: dict[str, Path] = field(default_factory=dict)  # path under the task folder -> source file
    entry: ImportedTask | None = None


def import_checkout(path: str | Path, out: str | Path, *, native: bool = False, only: Sequence[str] | None = None,
                    judge_model: str | None = None, judge_base_url: str | None = None) -> ImportReport:
    """Convert the tasks of the Claw-Eval checkout at ``path`` into cowork task folders under
    ``out`` and write ``out/import-report.json``.

    Args:
        path: The checkout's root (``tasks/`` and ``src/claw_eval/`` in it).
        out: The folder to write ``<task id>/`` folders and the report into (created).
        native: Also translate the tasks' declared scoring components into cowork checks.
        only: Import only these tasks (by task id or folder name).
        judge_model: The judge model the original graders' judge is to use (recorded in the
            report and its next-step command; the judge is chosen when a task runs).
        judge_base_url: Its OpenAI-compatible endpoint.

    Returns:
        The report: the tasks imported, and those refused with why.

    Raises:
        SpecError: ``path`` is not a Claw-Eval checkout, or ``out`` lies inside it.
    """
    root = Path(path).resolve()
    if not (root / "tasks").is_dir() or not (root / "src" / "claw_eval").is_dir():
        raise SpecError(f"{path}: not a Claw-Eval checkout (it needs tasks/ and src/claw_eval/); give the "
                        "repository's root folder")
    dest = Path(out).resolve()
    if dest.is_relative_to(root):
        raise SpecError(f"--out {out}: inside the checkout {path}; write the import elsewhere")
    dest.mkdir(parents=True, exist_ok=True)
    report = ImportReport(source=str(root), out=str(out), native=native, judge_model=judge_model,
                          judge_base_url=judge_base_url)
    wanted = set(only or ())
    seen: set[str] = set()
    for folder in sorted(p for p in (root / "tasks").iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        if wanted and folder.name not in wanted and _declared_id(folder) not in wanted:
            continue
        seen.add(folder.name)
        task_id = folder.name
        try:
            task = _read_task(root, folder)
            task_id = task.task_id
            seen.add(task_id)
            plan = _plan(root, folder, task, native)
            _write(dest, folder.name, plan)
            assert plan.entry is not None
            report.imported.append(plan.entry)
        except Refused as r:
            report.refused.append(Refusal(task_id=task_id, kind=r.kind, reason=r.reason, file=r.file, field=r.field))
        except Exception as exc:  # one task's surprise must not stop the others; reported as an error
            log.exception("import of %s failed", folder.name)
            shutil.rmtree(dest / folder.name, ignore_errors=True)
            report.refused.append(Refusal(task_id=task_id, kind="error", file=f"tasks/{folder.name}",
                                          reason=f"the importer failed on it ({type(exc).__name__}: {exc})"))
    for name in sorted(wanted - seen):
        report.refused.append(Refusal(task_id=name, kind="invalid", reason=f"--only {name}: no such task under "
                                      f"{root / 'tasks'}", field="--only"))
    report.write(dest)
    return report


def _declared_id(folder: Path) -> str | None:
    """The task_id a task.yaml declares, read cheaply (None when it cannot be read)."""
    try:
        data = yaml.safe_load((folder / "task.yaml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    value = data.get("task_id") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


# --------------------------------------------------------------------------- reading
def _read_task(root: Path, folder: Path) -> ClawTask:
    """The task.yaml of ``folder``, validated; a problem is a refusal naming the file and field."""
    rel = f"tasks/{folder.name}/task.yaml"
    path = folder / "task.yaml"
    if not path.is_file():
        raise Refused("invalid", "no task.yaml in the task folder", file=f"tasks/{folder.name}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as exc:
        line = f"line {exc.problem_mark.line + 1}: " if exc.problem_mark else ""
        raise Refused("invalid", f"{line}not valid YAML: {exc.problem or exc}", file=rel) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise Refused("invalid", f"cannot be read: {exc}", file=rel) from None
    if not isinstance(data, dict):
        raise Refused("invalid", f"holds {type(data).__name__}, not a mapping of task fields", file=rel)
    try:
        return ClawTask.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        where = [_loc(e["loc"]) for e in errors]
        reason = "; ".join(f"{w}: {e['msg']}" for w, e in zip(where, errors, strict=True))
        raise Refused("invalid", reason, file=rel, field=where[0]) from None


def _loc(loc: Iterable[Any]) -> str:
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (("." if out else "") + str(p))
    return out


# --------------------------------------------------------------------------- planning
def _plan(root: Path, folder: Path, task: ClawTask, native: bool) -> _Plan:
    """Decide everything about one task (refusing it when something cannot be run)."""
    rel = f"tasks/{folder.name}/task.yaml"
    prompt = _prompt(root, folder, task, rel)
    for key, why in UNSUPPORTED_FIELDS.items():
        if getattr(task, key):
            raise Refused("unsupported", f"{key}: {why}", file=rel, field=key)
    seeded = task.sandbox_files or task.environment.fixtures
    seeded_field = "sandbox_files" if task.sandbox_files else "environment.fixtures"
    for n, name in enumerate(seeded):
        if Path(name).suffix.lower() in MEDIA_SUFFIXES:
            raise Refused("multimodal", f"{name} is an image, audio or video file the agent would have to see or "
                          "hear; cowork gives the agent text only", file=rel, field=f"{seeded_field}[{n}]")
    endpoints = {e.tool_name: (i, e) for i, e in enumerate(task.tool_endpoints)}
    sandbox = {name for name, _ in SANDBOX_TOOLS.values()}
    for i, tool in enumerate(task.tools):
        if tool.name not in endpoints and tool.name not in sandbox:
            raise Refused("unsupported", f"tool {tool.name!r} has no tool_endpoints entry (a tool of the harness's "
                          "own sandbox other than its shell and file tools), which cowork does not map", file=rel,
                          field=f"tools[{i}]")
    declared = {t.name for t in task.tools}
    for name, (i, _) in endpoints.items():
        if name not in declared:
            raise Refused("invalid", f"tool_endpoints names {name!r}, which tools does not declare", file=rel,
                          field=f"tool_endpoints[{i}].tool_name")

    plan = _Plan(spec={})
    services, ports = _services(root, folder, task, plan)
    http_tools = [_tool(task, t, endpoints[t.name], ports, rel) for t in task.tools if t.name in endpoints]
    peers = _grader_files(root, folder, plan)
    workspace_tools = _workspace(root, folder, plan, seeded, seeded_field, rel)
    # The harness's shell and file tools (Bash, Read, ...) are cowork's workspace tools; the
    # trajectory's translation gives the grader their calls under the harness's names.
    wanted = [cowork for cowork, (name, _) in SANDBOX_TOOLS.items() if name in declared and name not in endpoints]
    workspace_tools += [t for t in wanted if t not in workspace_tools]
    renames = {s["name"]: original for s, original in services}
    spec: dict[str, Any] = {
        "id": _spec_id(task.task_id),
        "title": task.task_name.strip() or task.task_id,
        "tags": _unique(["claw-eval", *task.tags, task.category, f"lang-{task.prompt.language}"]),
    }
    if task.difficulty.lower() in _DIFFICULTY:
        spec["difficulty"] = _DIFFICULTY[task.difficulty.lower()]
    spec["prompt"] = prompt
    if task.user_agent.enabled and task.user_agent.system_prompt_suffix.strip():
        spec["system_prompt"] = task.user_agent.system_prompt_suffix.strip()
    spec["tools"] = workspace_tools
    if seeded:
        spec["workspace"] = {"dir": "workspace"}
    spec["limits"] = {"max_turns": max(1, min(task.environment.max_turns, 1000)),
                      "episode_timeout_s": float(task.environment.timeout_seconds)}
    if services:
        spec["http_services"] = [s for s, _ in services]
        spec["http_tools"] = http_tools
    if task.user_agent.enabled:
        spec["user"] = _user(task, rel)
    spec["original_grader"] = {"kind": "claw_eval", "files": "claw_eval", "task_id": folder.name,
                               "services": renames, "timeout_s": 600}
    entry = ImportedTask(task_id=task.task_id, spec_id=spec["id"], folder=folder.name,
                         tools=[t["name"] for t in http_tools] + workspace_tools, services=renames,
                         user_agent=task.user_agent.enabled, peers=peers)
    if native:
        from .native import translate

        made = translate(task, {t["name"] for t in http_tools}, set(renames))
        if made.checks:
            spec["checks"] = made.checks
        if made.safety:
            spec["safety"] = made.safety
        entry.native, entry.unmapped = made.ids, made.unmapped
    plan.spec, plan.entry = spec, entry
    return plan


def _prompt(root: Path, folder: Path, task: ClawTask, rel: str) -> str:
    """The request: the prompt's text, with each attached text document after it as Claw-Eval's
    harness gives it (``[attached document: NAME]`` and the text); media are refused."""
    token = _MEDIA_TOKEN.search(task.prompt.text)
    if token:
        raise Refused("multimodal", f"the prompt references media ({token.group(0)}); cowork gives the agent text "
                      "only", file=rel, field="prompt.text")
    parts = [task.prompt.text]
    for n, name in enumerate(task.prompt.attachments):
        where = f"prompt.attachments[{n}]"
        if Path(name).suffix.lower() not in TEXT_ATTACHMENTS:
            raise Refused("multimodal", f"the prompt attaches {name}, which the agent would have to see or hear; "
                          "cowork gives the agent text only", file=rel, field=where)
        # the harness looks in its working folder (the checkout's root) first, then the task folder
        src = next((p for p in (root / name, folder / name) if p.resolve().is_relative_to(root) and p.is_file()),
                   None)
        if src is None:
            raise Refused("invalid", f"attachment {name} not found in the checkout or the task folder", file=rel,
                          field=where)
        _not_lfs(root, src, rel, where)
        text = src.read_bytes().decode("utf-8", errors="replace").strip()
        if not text:
            raise Refused("invalid", f"attachment {name} is empty", file=rel, field=where)
        parts.append(f"[attached document: {src.name}]\n{text}")
    return "\n".join(parts)


def _spec_id(task_id: str) -> str:
    out = re.sub(r"[^a-z0-9._-]+", "-", task_id.lower()).strip("-._")
    return (out or "task")[:64]


def _unique(items: Iterable[str]) -> list[str]:
    out: list[str] = []
    for item in items:
        if item and item not in out:
            out.append(item)
    return out


def _url(url: str, rel: str, where: str) -> tuple[int | None, str]:
    """(port, path with query) of a service URL; a host other than loopback is the live web."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refused("invalid", f"{url!r} is not an http URL", file=rel, field=where)
    if parts.hostname not in _LOOPBACK:
        raise Refused("live_web", f"{url} is on {parts.hostname}, not a local mock service", file=rel, field=where)
    try:
        port = parts.port
    except ValueError:
        raise Refused("invalid", f"{url!r} has no valid port", file=rel, field=where) from None
    return port, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _services(root: Path, folder: Path, task: ClawTask, plan: _Plan) -> tuple[list[tuple[dict, str]], dict[int, str]]:
    """The http_services entries (with each one's original name) and port -> cowork name."""
    rel = f"tasks/{folder.name}/task.yaml"
    out: list[tuple[dict, str]] = []
    ports: dict[int, str] = {}
    names: set[str] = set()
    for i, svc in enumerate(task.services):
        at = f"services[{i}]"
        secrets = [k for k in svc.env if any(w in k.upper() for w in SECRET_WORDS)]
        if secrets:
            raise Refused("live_web", f"service {svc.name!r} needs credentials for an outside API ({secrets[0]})",
                          file=rel, field=f"{at}.env.{secrets[0]}")
        name = re.sub(r"[^a-z0-9_]", "_", svc.name.lower())
        if not name[:1].isalpha():
            name = "svc_" + name
        name = name[:28]
        if name in SERVICE_TOOLS:
            name += "_api"  # cowork's built-in service of that name would clash
        if name in names or not _SERVICE_NAME.match(name):
            raise Refused("invalid", f"service name {svc.name!r} clashes with another service once made a cowork "
                          f"name ({name!r})", file=rel, field=f"{at}.name")
        names.add(name)
        script = _script(root, svc.command, rel, f"{at}.command")
        code = read_service(root, script)
        if code.unreadable:
            raise Refused("invalid", f"service {svc.name!r}: cannot parse {code.unreadable[0]}", file=rel,
                          field=f"{at}.command")
        web = sorted(code.missing & LIVE_WEB)
        if web:
            raise Refused("live_web", f"service {svc.name!r} reaches the live web (its code imports "
                          f"{', '.join(web)}); cowork's services have no network", file=rel, field=f"{at}.command")
        if code.missing:
            raise Refused("missing_dependency", f"service {svc.name!r} imports {', '.join(sorted(code.missing))}, "
                          "which the sandbox image lacks (it has fastapi, uvicorn, pydantic, starlette, yaml and the "
                          "standard library)", file=rel, field=f"{at}.command")
        base = f"services/{name}"
        for p in code.files:
            plan.files[f"{base}/{p.relative_to(root).as_posix()}"] = p
        for p in _default_fixtures(root, code.files):
            plan.files[f"{base}/{p.relative_to(root).as_posix()}"] = p
        for key, value in svc.env.items():
            for p in _env_files(root, value, rel, f"{at}.env.{key}"):
                plan.files[f"{base}/{p.relative_to(root).as_posix()}"] = p
        health_port, health = _url(svc.health_check, rel, f"{at}.health_check")
        entry: dict[str, Any] = {"name": name, "files": base, "command": svc.command, "port": svc.port}
        if svc.env:
            entry["env"] = dict(svc.env)
        if health_port not in (None, svc.port):
            raise Refused("invalid", f"health_check is on port {health_port}, the service on {svc.port}", file=rel,
                          field=f"{at}.health_check")
        entry["health"] = {"method": svc.health_check_method.upper(), "path": health}
        if svc.reset_endpoint:
            reset_port, reset = _url(svc.reset_endpoint, rel, f"{at}.reset_endpoint")
            if reset_port not in (None, svc.port):
                raise Refused("invalid", f"reset_endpoint is on port {reset_port}, the service on {svc.port}",
                              file=rel, field=f"{at}.reset_endpoint")
            entry["reset"] = {"method": "POST", "path": reset}
            if "/reset" in reset:  # Claw-Eval reads /audit where /reset is, for services that have one
                entry["audit"] = {"method": "GET", "path": reset.replace("/reset", "/audit", 1)}
        # a fresh container starts slower than a warm harness machine: at least cowork's default
        entry["ready_timeout_s"] = min(max(float(svc.ready_timeout), 20.0), 300.0)
        if svc.port in ports:
            raise Refused("invalid", f"port {svc.port} is taken by service {ports[svc.port]!r}", file=rel,
                          field=f"{at}.port")
        ports[svc.port] = name
        out.append((entry, svc.name))
    return out, ports


def _script(root: Path, command: str, rel: str, where: str) -> Path:
    """The Python script a service command runs (``python mock_services/x/server.py``)."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise Refused("invalid", f"command {command!r} cannot be split into words: {exc}", file=rel,
                      field=where) from None
    if len(argv) < 2 or Path(argv[0]).name not in ("python", "python3") or not argv[1].endswith(".py"):
        raise Refused("unsupported", f"command {command!r}: only `python <script>.py` services are imported",
                      file=rel, field=where)
    script = (root / argv[1]).resolve()
    if not script.is_relative_to(root) or not script.is_file():
        raise Refused("invalid", f"command {command!r}: {argv[1]} not found in the checkout", file=rel, field=where)
    return script


#: A path into a task folder written in a service's code: ``"tasks" / "T011zh_x"`` or "tasks/T011zh_x/".
_TASK_PATH = re.compile(r"""["']tasks["']\s*/\s*["']([A-Za-z0-9_.-]+)["']|["']tasks/([A-Za-z0-9_.-]+)/""")


def _default_fixtures(root: Path, code_files: Iterable[Path]) -> list[Path]:
    """The fixtures a service reads by default from a path relative to the checkout
    (``tasks/<id>/fixtures/...``, often another task's, when the task sets no variable for
    it): every file under ``tasks/<id>/fixtures`` of each task folder its code names, so that
    the same path resolves beside the copied service."""
    out: list[Path] = []
    for f in sorted(code_files):
        if f.suffix != ".py":
            continue
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for m in _TASK_PATH.finditer(text):
            name = m.group(1) or m.group(2)
            fixtures = root / "tasks" / name / "fixtures"
            if name in (".", "..") or not fixtures.is_dir() or not fixtures.resolve().is_relative_to(root.resolve()):
                continue
            out += [p for p in sorted(fixtures.rglob("*")) if p.is_file() and not p.is_symlink()]
    return out


def _env_files(root: Path, value: str, rel: str, where: str) -> list[Path]:
    """The checkout files an environment value names (a fixture file or folder), if it names one."""
    if not value or "://" in value or value.startswith("/") or any(c.isspace() for c in value):
        return []
    if "/" not in value:
        return []  # a plain value (a rate, a file name the service resolves itself)
    target = (root / value).resolve()
    if not target.is_relative_to(root):
        raise Refused("invalid", f"{value!r} points outside the checkout", file=rel, field=where)
    if not target.exists():
        raise Refused("invalid", f"fixture {value!r} not found in the checkout", file=rel, field=where)
    files = [target] if target.is_file() else sorted(p for p in target.rglob("*") if p.is_file())
    for f in files:
        _not_lfs(root, f, rel, where)
    return files


def _not_lfs(root: Path, path: Path, rel: str, where: str) -> None:
    with path.open("rb") as fh:
        if fh.read(len(_LFS_POINTER)) == _LFS_POINTER:
            raise Refused("invalid", f"{path.relative_to(root)} is a Git LFS pointer, not the file; fetch it "
                          "(git lfs pull) and import again", file=rel, field=where)


def _tool(task: ClawTask, tool: Any, ep: tuple[int, Any], ports: dict[int, str], rel: str) -> dict[str, Any]:
    """The http_tools entry of one tool."""
    i, endpoint = ep
    where = f"tool_endpoints[{i}].url"
    port, path = _url(endpoint.url, rel, where)
    if port is None or port not in ports:
        raise Refused("invalid", f"{endpoint.url}: no service of the task serves port {port}", file=rel, field=where)
    method = endpoint.method.upper()
    if method not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        raise Refused("invalid", f"method {endpoint.method!r} is not an HTTP method cowork sends", file=rel,
                      field=f"tool_endpoints[{i}].method")
    out: dict[str, Any] = {"name": tool.name, "description": tool.description}
    if tool.input_schema:
        out["input_schema"] = tool.input_schema
    out.update({"service": ports[port], "method": method, "path": path})
    return out


def _workspace(root: Path, folder: Path, plan: _Plan, seeded: list[str], seeded_field: str,
               rel: str) -> list[str]:
    """Copy the seeded files into ``workspace/``; the workspace tools the agent then gets."""
    if not seeded:
        return []
    documents = False
    for n, name in enumerate(seeded):
        where = f"{seeded_field}[{n}]"
        target = PurePosixPath(name)
        if target.is_absolute() or ".." in target.parts:
            raise Refused("invalid", f"{name}: give a path inside the task folder", file=rel, field=where)
        # relative to the task folder, or (a file another task holds) to the checkout's root
        src = next((p for p in (folder / name, root / name) if p.is_file()), None)
        if src is None:
            raise Refused("invalid", f"{name} not found in the task folder or the checkout", file=rel, field=where)
        _not_lfs(root, src, rel, where)
        plan.files[f"workspace/{target.as_posix()}"] = src
        documents |= src.suffix.lower() in DOCUMENT_SUFFIXES
    return list(WORKSPACE_TOOLS) + ([DOCUMENT_TOOL] if documents else [])


def _user(task: ClawTask, rel: str) -> dict[str, Any]:
    """The spec's ``user``: the persona simulated by the user model, a scripted fallback."""
    ua = task.user_agent
    persona = ua.persona.strip()
    if not persona:
        raise Refused("invalid", "user_agent is enabled without a persona", file=rel, field="user_agent.persona")
    facts = [line.strip()[1:].strip() for line in persona.splitlines() if line.strip().startswith(("-", "*", "•"))]
    lang = "zh" if task.prompt.language.lower().startswith("zh") else "en"
    llm: dict[str, Any] = {"persona": persona, "goal": task.prompt.text.strip(), "stop": "[DONE]"}
    if facts:
        llm["facts"] = [f for f in facts if f]
    return {"max_turns": ua.max_rounds, "llm": llm, "turns": [{"say": _FALLBACK_SAY[lang]}]}


def _grader_files(root: Path, folder: Path, plan: _Plan) -> list[str]:
    """Plan ``claw_eval/``: the package, the task folder and its peers' folders; the peer ids."""
    rel = f"tasks/{folder.name}/grader.py"
    package = root / "src" / "claw_eval"
    for part in GRADER_PARTS:
        src = package / part
        for p in ([src] if src.is_file() else sorted(src.rglob("*")) if src.is_dir() else []):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
                plan.files[f"claw_eval/{p.relative_to(root).as_posix()}"] = p
    peers: list[str] = []
    todo = [folder.name]
    while todo:
        name = todo.pop()
        task_dir = root / "tasks" / name
        grader = task_dir / "grader.py"
        if not grader.is_file():
            what = "no grader.py" if name == folder.name else f"its grader loads the peer {name!r}, which has no grader.py"
            raise Refused("invalid", what, file=rel if name != folder.name else f"tasks/{folder.name}")
        code = follow_imports(root, grader, [task_dir, root / "src"], GRADER_AVAILABLE)
        if code.unreadable:
            raise Refused("invalid", f"cannot parse {code.unreadable[0]}", file=rel)
        if code.missing:
            raise Refused("missing_dependency", f"the grader imports {', '.join(sorted(code.missing))}, which the "
                          "grader container lacks (it has pydantic, yaml and the standard library)", file=rel)
        for p in sorted(task_dir.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                plan.files[f"claw_eval/{p.relative_to(root).as_posix()}"] = p
        for p in code.files:  # modules it imports from elsewhere in the checkout
            plan.files.setdefault(f"claw_eval/{p.relative_to(root).as_posix()}", p)
        for peer in _peer_ids(grader):
            if peer not in peers and peer != folder.name:
                peers.append(peer)
                todo.append(peer)
    return peers


def _peer_ids(grader: Path) -> list[str]:
    """The task ids a grader passes to ``load_peer_grader("...")``."""
    tree = ast.parse(grader.read_text(encoding="utf-8"), filename=str(grader))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
            if name == "load_peer_grader":
                out.append(node.args[0].value)
    return out


# --------------------------------------------------------------------------- writing
def _write(dest: Path, name: str, plan: _Plan) -> None:
    """Write the task folder next to its final place, load it back, then move it in."""
    from ...spec.loader import load_spec

    staging = dest / f".{name}.importing"
    final = dest / name
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for relpath, src in sorted(plan.files.items()):
            target = staging / relpath
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
        header = f"# Imported from Claw-Eval task {plan.spec['original_grader']['task_id']} by `cowork import claw-eval`.\n"
        (staging / "task.yaml").write_text(header + dump_yaml(plan.spec), encoding="utf-8")
        try:
            load_spec(staging)
        except SpecError as exc:
            why = str(exc).replace(str(staging), name)
            raise Refused("unsupported", f"the converted spec does not load: {why}") from None
        shutil.rmtree(final, ignore_errors=True)
        staging.rename(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class _Dumper(yaml.SafeDumper):
    """Writes multi-line text as literal blocks, so a persona or rubric reads as it was written."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def dump_yaml(data: Any) -> str:
    """``data`` as YAML in the order given, multi-line strings as literal blocks."""
    return yaml.dump(data, Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=110)
