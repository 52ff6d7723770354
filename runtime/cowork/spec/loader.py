"""Load task specs from YAML with errors that name the file, the line and the field."""

from __future__ import annotations

import base64
import concurrent.futures
import difflib
import logging
import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from ..errors import SpecError
from . import fastyaml
from .http_services import file_problems
from .models import TaskSpec, WorkspaceFile
from .toolnames import known_tools

log = logging.getLogger(__name__)

SPEC_FILE = "task.yaml"


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec with the folder it came from."""

    spec: TaskSpec
    path: Path
    """The task.yaml file."""

    @property
    def root(self) -> Path:
        """The task folder."""
        return self.path.parent

    def workspace_files(self) -> list[tuple[str, bytes, int, str]]:
        """The initial workspace as ``(path, content, mode, owner)``, sorted by path."""
        files: dict[str, tuple[bytes, int, str]] = {}
        ws = self.spec.workspace
        if ws.dir:
            base = self.root / ws.dir
            if not base.resolve().is_relative_to(self.root.resolve()):  # refused by load_spec too
                raise SpecError(f"{self.path}: workspace.dir {ws.dir!r} is outside the task folder")
            if base.is_dir():
                for p in sorted(base.rglob("*")):
                    if p.is_file():
                        files[p.relative_to(base).as_posix()] = (p.read_bytes(), 0o644, "agent")
        for f in ws.files:
            if f.content is not None:
                data = f.content.encode()
            elif f.source is not None:
                data = (self.root / f.source).read_bytes()
            else:
                data = files[f.path][0]
            files[f.path] = (data, int(f.mode, 8), f.owner)
        return [(p, *files[p]) for p in sorted(files)]


class _LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """A SafeLoader (libyaml's parser when PyYAML has it) that rejects duplicate keys."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "mapping keys must be plain strings, not lists or mappings", key_node.start_mark
            ) from None
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {seen[key]})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=deep)


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _line_map(node: yaml.Node, prefix: tuple = (), out: dict | None = None) -> dict[tuple, int]:
    """Map every field path in a composed YAML tree to its 1-based line."""
    out = {} if out is None else out
    out.setdefault(prefix, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else f"<{k.id} key>"
            out[prefix + (key,)] = k.start_mark.line + 1
            _line_map(v, prefix + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out[prefix + (i,)] = item.start_mark.line + 1
            _line_map(item, prefix + (i,), out)
    return out


def _field(loc: tuple) -> str:
    parts: list[str] = []
    for p in loc:
        if isinstance(p, int):
            parts.append(f"[{p}]")
        else:
            parts.append(("." if parts else "") + str(p))
    return "".join(parts) or "(top level)"


def _clean_loc(loc: tuple) -> tuple:
    # Tagged unions add the tag name (e.g. 'file_exists') to the location; drop it so the
    # location is the field path the author wrote.
    return tuple(p for p in loc if not (isinstance(p, str) and p.startswith(("function-", "tagged-union"))))


def _describe(err: ErrorDetails, data: Any = None) -> str:
    kind = err["type"]
    msg = err["msg"]
    if kind == "extra_forbidden":
        loc = _error_loc(err, data)
        guess = _did_you_mean(str(loc[-1]), _fields_at(loc[:-1], data)) if loc else ""
        return "unknown field; remove it or check its spelling" + (f" ({guess})" if guess else "")
    if kind == "missing":
        return "required field is missing"
    if kind == "union_tag_invalid":
        ctx = err.get("ctx") or {}
        tag = str(ctx.get("tag"))
        guess = _did_you_mean(tag, _check_types())
        return f"unknown check type {tag!r}{f' ({guess})' if guess else ''}; expected one of {ctx.get('expected_tags', '')}"
    if kind == "union_tag_not_found":
        return "required field is missing; give the check type, one of " + ", ".join(_check_types())
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    got = err.get("input")
    if kind not in ("value_error",) and not isinstance(got, (dict, list)):
        msg = f"{msg} (got {got!r})"
    return msg


def _fields_at(loc: tuple, data: Any) -> list[str]:
    """The field names the spec's schema allows in the mapping at ``loc`` (a check's by its
    ``type``); [] when the schema does not tell (a free-form mapping)."""
    schema = TaskSpec.model_json_schema()
    defs = schema.get("$defs", {})

    def pick(node: Any, value: Any) -> Any:
        for _ in range(20):  # $refs and unions, resolved against the data at this place
            if not isinstance(node, dict):
                return {}
            if "$ref" in node:
                node = defs.get(node["$ref"].rsplit("/", 1)[-1], {})
            elif "discriminator" in node and isinstance(value, dict):
                ref = node["discriminator"].get("mapping", {}).get(value.get("type"))
                node = {"$ref": ref} if ref else {}
            elif "anyOf" in node or "oneOf" in node:
                options = node.get("anyOf") or node.get("oneOf") or []
                want = "object" if isinstance(value, dict) else "array" if isinstance(value, list) else None
                node = next((o for o in options if want and (o.get("type") == want or "$ref" in o
                                                            or "discriminator" in o)), {})
            else:
                return node
        return {}

    try:
        node, value = pick(schema, data), data
        for part in loc:
            value = value[part] if isinstance(value, (dict, list)) and not isinstance(part, bool) else None
            if isinstance(part, int):
                node = pick(node.get("items", {}), value)
            else:
                props = node.get("properties") or {}
                node = pick(props[part] if part in props else node.get("additionalProperties", {}), value)
        return list(node.get("properties") or [])
    except (KeyError, IndexError, TypeError, AttributeError):
        return []


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    """``did you mean 'x'?`` with the closest choices (those nearly as close as the best), or ''."""
    scored = sorted(((difflib.SequenceMatcher(None, word, c).ratio(), c) for c in choices), reverse=True)
    close = [c for r, c in scored[:3] if r >= 0.6 and r >= scored[0][0] - 0.1]
    return f"did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def _check_types() -> list[str]:
    from typing import get_args

    from .checks import Check

    union = get_args(Check)[0]
    return sorted(m.model_fields["type"].annotation.__args__[0] for m in get_args(union))


def _error_loc(err: ErrorDetails, data: Any) -> tuple:
    loc = _strip_tags(_clean_loc(err["loc"]), data)
    if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
        loc = loc + ("type",)  # the fault is the check's type field
    return loc


def _strip_tags(loc: tuple, data: Any) -> tuple:
    """Drop discriminator tags that pydantic inserts after list indexes of checks."""
    out: list = []
    cur = data
    for p in loc:
        if isinstance(cur, dict):
            if p in cur:
                out.append(p)
                cur = cur[p]
            # else: a tag such as 'file_exists' or an unknown key: keep unknown keys
            elif not (isinstance(p, str) and isinstance(cur.get("type"), str) and p == cur.get("type")):
                out.append(p)
                cur = None
        elif isinstance(cur, list) and isinstance(p, int) and p < len(cur):
            out.append(p)
            cur = cur[p]
        else:
            out.append(p)
            cur = None
    return tuple(out)


def resolve_spec_path(path: str | os.PathLike) -> Path:
    """Accept a task folder or its task.yaml; return the task.yaml path.

    Raises:
        SpecError: when neither exists.
    """
    p = Path(path)
    if p.is_dir():
        p = p / SPEC_FILE
    if not p.is_file():
        raise SpecError(f"{path}: no {SPEC_FILE} found; give a task folder or its {SPEC_FILE}")
    return p


def load_spec(path: str | os.PathLike) -> LoadedSpec:
    """Load and validate one task spec.

    Args:
        path: A task folder or its task.yaml.

    Returns:
        The validated spec with its location.

    Raises:
        SpecError: listing every problem as ``file:line: field: what was expected``.
    """
    file = resolve_spec_path(path)
    return _load_fast(file) or _load_strict(file)


def _nowhere(loc: tuple) -> int:
    return 0


def _load_fast(file: Path) -> LoadedSpec | None:
    """The spec at ``file`` read without the line map (:mod:`cowork.spec.fastyaml`), or None
    when anything is amiss: :func:`_load_strict` then reads it again and says what, exactly as
    it always has. A spec loaded here passes every check the strict path makes, on the same data."""
    root = file.parent
    try:
        data = fastyaml.load(file.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            return None
        if (_duplicates(data, _nowhere, "") or _service_files(data, root, _nowhere, "")
                or _attachment_files(data, root, _nowhere, "")):
            return None
        spec = TaskSpec.model_validate(data)
        if _check_files(spec, root, data, _nowhere, ""):
            return None
    except fastyaml.NotPlain:
        return None
    except Exception as exc:  # noqa: BLE001 - whatever it is, the strict path reports it as it always has
        log.debug("%s: fast load gave up (%s: %s)", file, type(exc).__name__, exc)
        return None
    return LoadedSpec(spec, file)


def _load_strict(file: Path) -> LoadedSpec:
    """Load ``file`` with a line for every field, and report every problem with its line.

    Raises:
        SpecError: listing every problem as ``file:line: field: what was expected``.
    """
    shown = _shown(file)
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = file.read_bytes()[:exc.start].count(b"\n") + 1
        raise SpecError(f"{shown}:{line}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    loader = _LineLoader(text)
    try:
        node = loader.get_single_node()  # parsed once: the lines come from this tree, the data too
    except yaml.MarkedYAMLError as exc:
        raise SpecError(f"{shown}:{_yaml_line(exc, text)}: invalid YAML: {exc.problem or exc}") from exc
    except yaml.reader.ReaderError as exc:  # a raw control character: YAML wants it written as an escape
        raise SpecError(f"{shown}:{text.count(chr(10), 0, exc.position) + 1}: invalid YAML: character "
                        f"#x{exc.character:04x} is not allowed in YAML; write it as an escape (\\x{exc.character:02x}) "
                        "in a double-quoted string") from exc
    lines = _line_map(node) if node is not None else {}

    def where(loc: tuple) -> int:
        for n in range(len(loc), -1, -1):
            if loc[:n] in lines:
                return lines[loc[:n]]
        return 1

    try:
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        line = _yaml_line(exc, text)
        at = max((p for p, n in lines.items() if n == line and p), key=len, default=None)
        field = f"{_field(at)}: " if at else ""
        raise SpecError(f"{shown}:{line}: {field}{exc.problem or exc}") from exc
    except TypeError as exc:  # e.g. a list used as a mapping key
        raise SpecError(f"{shown}:1: (top level): mapping keys must be plain strings ({exc})") from exc
    if not isinstance(data, dict):
        raise SpecError(f"{shown}:1: (top level): expected a mapping of spec fields")

    problems = _duplicates(data, where, shown) + _service_files(data, file.parent, where, shown)
    problems += _attachment_files(data, file.parent, where, shown)
    if not problems:
        try:
            spec = TaskSpec.model_validate(data)
        except ValidationError as exc:
            for err in exc.errors():
                loc = _error_loc(err, data)
                located = _http_located(err) if not loc else []
                problems += [f"{shown}:{where(at)}: {_field(at)}: {msg}" for at, msg in located]
                if not located:
                    problems.append(f"{shown}:{where(loc)}: {_field(loc)}: {_describe(err, data)}")
        else:
            problems = _check_files(spec, file.parent, data, where, shown)
    if problems:
        problems.sort(key=lambda p: int(p.split(":")[1]) if p.split(":")[1].isdigit() else 0)
        raise SpecError(f"{shown}: invalid task spec\n  " + "\n  ".join(problems), problems)
    return LoadedSpec(spec, file)


def _http_located(err: ErrorDetails) -> list[tuple[tuple, str]]:
    """The problems of a spec's HTTP services and tools (TaskSpec raises them together, each
    with its field) as ``(location, message)``; [] for any other error."""
    from .http_services import HttpSpecError

    exc = (err.get("ctx") or {}).get("error")
    return list(exc.problems) if isinstance(exc, HttpSpecError) else []


def _service_files(data: dict, root: Path, where, shown: str) -> list[str]:
    """Replace ``services: {mail: fixtures/mail.yaml}`` by that file's records (YAML or JSON)."""
    services = data.get("services")
    if not isinstance(services, dict):
        return []
    problems = []
    for name, value in list(services.items()):
        if not isinstance(value, str):
            continue
        loc = ("services", name)
        path = (root / value).resolve()
        if not path.is_relative_to(root.resolve()) or not path.is_file():
            problems.append(f"{shown}:{where(loc)}: {_field(loc)}: seed file {value!r} not found in the task folder")
            continue
        try:
            services[name] = yaml.load(path.read_text(encoding="utf-8"), Loader=_LineLoader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            problems.append(f"{shown}:{where(loc)}: {_field(loc)}: seed file {value}"
                            f"{f' line {mark.line + 1}' if mark else ''}: {getattr(exc, 'problem', exc)}")
    return problems


def _attachment_files(data: dict, root: Path, where, shown: str) -> list[str]:
    """Read each mail attachment's ``source`` (a file beside task.yaml) into its base64 ``data``,
    so the seed that goes into the task image carries the file itself."""
    mail = (data.get("services") or {}).get("mail") if isinstance(data.get("services"), dict) else None
    messages = mail.get("messages") if isinstance(mail, dict) else None
    if not isinstance(messages, list):
        return []
    problems = []
    for i, msg in enumerate(messages):
        attachments = msg.get("attachments") if isinstance(msg, dict) else None
        for j, att in enumerate(attachments if isinstance(attachments, list) else []):
            if not isinstance(att, dict) or not isinstance(att.get("source"), str) or "data" in att:
                continue  # a wrong shape or both fields: the model's validation says so
            loc = ("services", "mail", "messages", i, "attachments", j, "source")
            path = (root / att["source"]).resolve()
            if not path.is_relative_to(root.resolve()) or not path.is_file():
                problems.append(f"{shown}:{where(loc)}: {_field(loc)}: file {att['source']!r} not found in the task folder")
                continue
            att["data"] = base64.b64encode(path.read_bytes()).decode()
            del att["source"]
    return problems


def _yaml_line(exc: yaml.MarkedYAMLError, text: str) -> int:
    """The 1-based line of a YAML error; an error at end of input points where the construct opened."""
    mark = exc.problem_mark or exc.context_mark
    if mark is None:
        return 1
    total = len(text.splitlines()) or 1
    if mark.line + 1 > total and exc.context_mark is not None:
        mark = exc.context_mark
    return min(mark.line + 1, total)


def _duplicates(data: dict, where, shown: str) -> list[str]:
    """Duplicate check ids and workspace paths, located at the second use."""
    problems: list[str] = []
    seen: dict[str, tuple] = {}
    for group in ("checks", "safety"):
        items = data.get(group)
        if not isinstance(items, list):
            continue
        for i, c in enumerate(items):
            if not isinstance(c, dict):
                continue
            cid = c.get("id") or (f"{c.get('type')}-{i}" if group == "checks" else f"safety-{c.get('type')}-{i}")
            loc: tuple[str | int, ...] = (group, i, "id") if "id" in c else (group, i)
            if cid in seen:
                first = seen[cid]
                problems.append(f"{shown}:{where(loc)}: {_field(loc)}: duplicate check id {cid!r} "
                                f"(first used by {_field(first)}, line {where(first)})")
            else:
                seen[cid] = loc
    for group in ("checks", "safety"):
        items = data.get(group)
        for i, c in enumerate(items if isinstance(items, list) else []):
            for loc, judge in _nested_judges(c, (group, i)):
                jid = judge.get("id")
                if not jid:
                    problems.append(f"{shown}:{where(loc)}: {_field(loc)}: a judge inside a combinator needs its own "
                                    "id (its verdict is looked up by it); give it one")
                elif jid in seen:
                    first = seen[jid]
                    problems.append(f"{shown}:{where(loc + ('id',))}: {_field(loc + ('id',))}: duplicate check id "
                                    f"{jid!r} (first used by {_field(first)}, line {where(first)})")
                else:
                    seen[jid] = loc + ("id",)
    files = (data.get("workspace") or {}).get("files") if isinstance(data.get("workspace"), dict) else None
    if isinstance(files, list):
        paths: dict[str, int] = {}
        for i, f in enumerate(files):
            if isinstance(f, dict) and isinstance(f.get("path"), str):
                norm = posixpath.normpath(f["path"])
                if norm in paths:
                    loc = ("workspace", "files", i, "path")
                    problems.append(f"{shown}:{where(loc)}: {_field(loc)}: {f['path']!r} is listed twice "
                                    f"(first at workspace.files[{paths[norm]}])")
                else:
                    paths[norm] = i
    return problems


def _nested_judges(check: Any, loc: tuple) -> list[tuple[tuple, dict]]:
    """``(location, check)`` of every judge a combinator written as data holds, at any depth."""
    if not isinstance(check, dict):
        return []
    def items(value: Any) -> list[Any]:
        return value if isinstance(value, list) else []

    subs: list[tuple[tuple, Any]] = []
    if isinstance(check.get("check"), dict):
        subs.append((loc + ("check",), check["check"]))
    subs += [(loc + ("checks", j), sub) for j, sub in enumerate(items(check.get("checks")))]
    for t, tier in enumerate(items(check.get("tiers"))):
        found = items(tier.get("checks")) if isinstance(tier, dict) else []
        subs += [(loc + ("tiers", t, "checks", j), sub) for j, sub in enumerate(found)]
    out: list[tuple[tuple, dict]] = []
    for sub_loc, sub in subs:
        if isinstance(sub, dict) and sub.get("type") == "judge":
            out.append((sub_loc, sub))
        out += _nested_judges(sub, sub_loc)
    return out


def _check_files(spec: TaskSpec, root: Path, data: dict, where, shown: str) -> list[str]:
    problems: list[str] = []
    ws = spec.workspace
    base = root / ws.dir if ws.dir else None
    dir_set = "dir" in ws.model_fields_set
    if base is not None and not base.resolve().is_relative_to(root.resolve()):
        # A spec from elsewhere (a download, a model's answer) must not copy host files
        # (`dir: ../../etc`) into its image.
        problems.append(f"{shown}:{where(('workspace', 'dir'))}: workspace.dir: {ws.dir!r} is outside the task folder")
        base = None
    elif dir_set and base is not None and not base.is_dir():
        problems.append(f"{shown}:{where(('workspace', 'dir'))}: workspace.dir: folder {ws.dir!r} not found beside {SPEC_FILE}")
    for i, f in enumerate(ws.files):
        loc: tuple[str | int, ...] = ("workspace", "files", i)
        if f.source is not None:
            src = (root / f.source).resolve()
            if not src.is_relative_to(root.resolve()):
                problems.append(f"{shown}:{where(loc + ('source',))}: workspace.files[{i}].source: {f.source!r} is outside the task folder")
            elif not src.is_file():
                problems.append(f"{shown}:{where(loc + ('source',))}: workspace.files[{i}].source: file {f.source!r} not found beside {SPEC_FILE}")
        elif f.content is None and not (base is not None and (base / f.path).is_file()):
            problems.append(
                f"{shown}:{where(loc + ('path',))}: workspace.files[{i}].path: {f.path!r} has no content, no source, "
                f"and is not in the workspace folder {ws.dir!r}"
            )
    if base is not None and base.is_dir():
        for p in base.rglob("*"):
            if p.is_symlink():
                problems.append(f"{shown}:{where(('workspace',))}: workspace: {p.relative_to(root)} is a symlink; copy the file instead")
    for key in ("checks", "safety"):
        for i, c in enumerate(getattr(spec, key)):
            if c.type != "verifier":
                continue
            loc = (key, i, "files")
            vdir = (root / c.files).resolve()
            if not vdir.is_relative_to(root.resolve()) or not vdir.is_dir():
                problems.append(f"{shown}:{where(loc)}: {_field(loc)}: verifier folder {c.files!r} not found in the task folder")
            elif base is not None and base.is_dir() and vdir.is_relative_to(base.resolve()):
                problems.append(f"{shown}:{where(loc)}: {_field(loc)}: verifier folder {c.files!r} lies inside the "
                                f"workspace folder and would be visible to the agent; move it beside task.yaml")
    if spec.original_grader is not None:
        problems += _original_grader_problems(spec, root, base, where, shown)
    for loc, msg in file_problems(spec, root, ws.dir):
        problems.append(f"{shown}:{where(loc)}: {_field(loc)}: {msg}")
    for group in ("oracle", "violation"):
        for i, step in enumerate(getattr(spec, group)):
            if step.tool is None or step.tool in spec.tools or step.tool in spec.http_tool_names:
                continue
            at = f"{shown}:{where((group, i, 'tool'))}: {group}[{i}].tool: "
            if step.tool not in known_tools():  # no such tool at all, allowed or not: say so, and the closest
                guess = _did_you_mean(str(step.tool), known_tools())
                problems.append(at + f"unknown tool {step.tool!r} ("
                                + (guess or "every tool: docs/services.md, `cowork spec schema`") + ")")
            else:
                problems.append(at + f"{step.tool!r} is not in the spec's tools allow-list")
    return problems + _tool_option_problems(spec, where, shown)


def _original_grader_problems(spec: TaskSpec, root: Path, workspace: Path | None, where, shown: str) -> list[str]:
    """The original grader's folder: in the task folder, and apart from what enters the image
    (the workspace folder, the HTTP services' folders), so the agent never reads the grader."""
    og = spec.original_grader
    assert og is not None
    loc = ("original_grader", "files")
    at = f"{shown}:{where(loc)}: original_grader.files: "
    folder = (root / og.files).resolve()
    if not folder.is_relative_to(root.resolve()) or folder == root.resolve() or not folder.is_dir():
        return [at + f"folder {og.files!r} not found in the task folder (it holds the benchmark's src/ and tasks/)"]
    shared = [("the workspace folder", workspace)] if workspace is not None and workspace.is_dir() else []
    shared += [(f"http service {s.name!r}'s folder", root / s.files) for s in spec.http_services if s.files]
    for what, other in shared:
        other = other.resolve()
        if folder.is_relative_to(other) or other.is_relative_to(folder):
            return [at + f"{og.files!r} overlaps {what}, whose files go into the sandbox; keep the grader's "
                         "folder beside them"]
    grader = folder / "tasks" / og.task_id / "grader.py"
    if not grader.is_file():
        return [at + f"{og.files!r} has no tasks/{og.task_id}/grader.py (original_grader.task_id names the task "
                     "folder there)"]
    if not (folder / "src" / "claw_eval").is_dir():
        return [at + f"{og.files!r} has no src/claw_eval/ (the benchmark's package the grader imports)"]
    return []


def _tool_option_problems(spec: TaskSpec, where, shown: str) -> list[str]:
    """``tool_options`` for a tool the spec does not allow, and an oracle that sends an argument
    its tool hides (the sandbox would refuse that call)."""
    problems = []
    for tool in spec.tool_options:
        if tool not in spec.tools:
            problems.append(f"{shown}:{where(('tool_options', tool))}: tool_options.{tool}: "
                            f"{tool!r} is not in the spec's tools allow-list")
    for i, step in enumerate(spec.oracle):
        hidden = set(spec.tool_options[step.tool].hide_args) if step.tool in spec.tool_options else set()
        for arg in sorted(hidden & set(step.args)):
            problems.append(f"{shown}:{where(('oracle', i, 'args', arg))}: oracle[{i}].args.{arg}: "
                            f"tool_options hides {arg!r} of {step.tool}, so the sandbox refuses this call")
    return problems


def load_specs(paths: Sequence[str | os.PathLike[str]]) -> list[LoadedSpec]:
    """Load several specs; a folder without task.yaml is searched for task folders.

    Raises:
        SpecError: for the first invalid spec, when two specs share an id, or when a folder
            holds no task.yaml, in it or in its subfolders.
    """
    files: list[Path] = []
    for path in paths:
        p = Path(path)
        if p.is_dir() and not (p / SPEC_FILE).is_file():
            found = sorted(p.glob(f"*/{SPEC_FILE}"))
            if not found:
                raise SpecError(f"{_shown(p)}: no {SPEC_FILE} in this folder or in its subfolders; give a task folder, "
                                f"its {SPEC_FILE}, or a folder of task folders")
            files.extend(found)
        else:
            files.append(resolve_spec_path(p))
    loaded = [load_spec(f) for f in files]
    seen: dict[str, Path] = {}
    for item in loaded:
        if item.spec.id in seen:
            raise SpecError(
                f"{_shown(item.path)}:{_id_line(item.path)}: id: duplicate task id {item.spec.id!r}, "
                f"also used by {_shown(seen[item.spec.id])}"
            )
        seen[item.spec.id] = item.path
    return loaded


#: From this many specs, :func:`load_each` loads them in a process per core (at most 8).
PARALLEL_FROM = 200


def load_each(paths: Sequence[str | os.PathLike[str]]) -> list[LoadedSpec | SpecError]:
    """Load every spec, each to its :class:`LoadedSpec` or the :class:`SpecError` that refuses
    it, in the order given; from :data:`PARALLEL_FROM` specs on, in worker processes.

    Parsing is the cost of a big generated spec and a loaded spec comes back pickled in a
    fraction of it: 2,000 generated specs load in 44 s instead of 73 s on 2 cores when the
    cache is cold (from the cache, 23.5 s against 21 s: validation is then the cost, and
    unpickling costs nearly as much). Other errors than a SpecError propagate, as from
    :func:`load_spec`.
    """
    workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8)
    if len(paths) < PARALLEL_FROM or workers < 2:
        return [_spec_or_error(p) for p in paths]
    with concurrent.futures.ProcessPoolExecutor(workers) as pool:
        return list(pool.map(_spec_or_error, paths, chunksize=8))


def _spec_or_error(path: str | os.PathLike[str]) -> LoadedSpec | SpecError:
    try:
        return load_spec(path)
    except SpecError as exc:
        return exc


def _shown(path: Path) -> str:
    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else str(path)


def _id_line(path: Path) -> int:
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if line.startswith("id:"):
            return n
    return 1


__all__ = ["LoadedSpec", "WorkspaceFile", "load_each", "load_spec", "load_specs", "resolve_spec_path"]
