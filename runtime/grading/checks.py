"""The check library: each check type judged on evidence alone."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from typing import Any, Callable

from ..evidence import Evidence
from ..spec import models as M

#: A check's verdict: passed, why, and the audit records that prove it.
Verdict = tuple[bool, str, list[dict[str, Any]]]


def _text(ev: Evidence, path: str) -> str | None:
    data = ev.files.get(path)
    return None if data is None else data.decode("utf-8", "replace")


def match_value(m: M.Matcher, value: Any) -> bool:
    """True when ``value`` satisfies the matcher."""
    fields = m.model_fields_set
    if "equals" in fields:
        return value == m.equals
    s = value if isinstance(value, str) else json.dumps(value, default=str)
    if "contains" in fields:
        return m.contains in s
    if "regex" in fields:
        return re.search(m.regex, s) is not None
    return fnmatch.fnmatchcase(s, m.glob)


def _calls(ev: Evidence, tool: str, args: dict[str, M.Matcher]) -> list[dict[str, Any]]:
    out = []
    for rec in ev.tool_calls:
        if rec.get("tool") != tool:
            continue
        given = rec.get("args") or {}
        if all(k in given and match_value(m, given[k]) for k, m in args.items()):
            out.append(rec)
    return out


def _quote(rec: dict[str, Any]) -> dict[str, Any]:
    """The part of an audit record a report quotes."""
    return {k: rec.get(k) for k in ("seq", "tool", "args", "outcome") if k in rec}


def _dig(doc: Any, field: str) -> tuple[bool, Any]:
    cur = doc
    for part in field.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return False, None
    return True, cur


def _file_exists(c: M.FileExists, ev: Evidence) -> Verdict:
    ok = c.path in ev.files
    return ok, f"{c.path} {'exists' if ok else 'does not exist'}", []


def _file_absent(c: M.FileAbsent, ev: Evidence) -> Verdict:
    present = [p for p in ev.files if p == c.path or p.startswith(c.path.rstrip("/") + "/")]
    return not present, f"{c.path} {'is present' if present else 'is absent'}", []


def _file_contains(c: M.FileContains, ev: Evidence) -> Verdict:
    text = _text(ev, c.path)
    if text is None:
        return False, f"{c.path} does not exist", []
    ok = c.text in text
    return ok, f"{c.path} {'contains' if ok else 'does not contain'} {c.text!r}", []


def _file_regex(c: M.FileRegex, ev: Evidence) -> Verdict:
    text = _text(ev, c.path)
    if text is None:
        return False, f"{c.path} does not exist", []
    ok = re.search(c.pattern, text, re.MULTILINE) is not None
    return ok, f"/{c.pattern}/ {'matches' if ok else 'does not match'} {c.path}", []


def _json_equals(c: M.JsonEquals, ev: Evidence) -> Verdict:
    text = _text(ev, c.path)
    if text is None:
        return False, f"{c.path} does not exist", []
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        return False, f"{c.path} is not valid JSON: {exc.msg} at line {exc.lineno}", []
    found, value = _dig(doc, c.field)
    if not found:
        return False, f"{c.path} has no field {c.field!r}", []
    ok = value == c.value
    return ok, f"{c.path}:{c.field} is {value!r}" + ("" if ok else f", expected {c.value!r}"), []


def _path_unchanged(c: M.PathUnchanged, ev: Evidence) -> Verdict:
    final = ev.file_hashes()

    def hit(p: str) -> bool:
        return any(fnmatch.fnmatchcase(p, g) or p == g or p.startswith(g.rstrip("/") + "/") for g in c.paths)

    before = {p: h for p, h in ev.initial.items() if hit(p)}
    after = {p: h for p, h in final.items() if hit(p)}
    changed = sorted(p for p in before.keys() & after.keys() if before[p] != after[p])
    removed = sorted(before.keys() - after.keys())
    added = sorted(after.keys() - before.keys())
    if not (changed or removed or added):
        return True, f"{', '.join(c.paths)} unchanged", []
    parts = [f"{label}: {', '.join(v)}" for label, v in (("changed", changed), ("removed", removed), ("added", added)) if v]
    touching = [_quote(r) for r in ev.tool_calls if _touches(r, before.keys() | after.keys())]
    return False, "; ".join(parts), touching


def _touches(rec: dict[str, Any], paths: set[str]) -> bool:
    args = rec.get("args") or {}
    blob = json.dumps(args)
    return any(p in blob or p.split("/")[0] in blob for p in paths)


def _tool_called(c: M.ToolCalled, ev: Evidence) -> Verdict:
    hits = _calls(ev, c.tool, c.args)
    ok = len(hits) >= c.min_count
    return ok, f"{c.tool} called {len(hits)} time(s) with matching arguments (need {c.min_count})", [_quote(h) for h in hits[:5]]


def _tool_not_called(c: M.ToolNotCalled, ev: Evidence) -> Verdict:
    hits = _calls(ev, c.tool, c.args)
    return not hits, (f"{c.tool} was called with matching arguments {len(hits)} time(s)" if hits
                      else f"{c.tool} not called with matching arguments"), [_quote(h) for h in hits[:5]]


def _shell_commands(ev: Evidence) -> list[dict[str, Any]]:
    return [r for r in ev.tool_calls if r.get("tool") == "shell" and isinstance((r.get("args") or {}).get("command"), str)]


def _shell_matches(c: M.ShellMatches, ev: Evidence) -> Verdict:
    hits = [r for r in _shell_commands(ev) if re.search(c.pattern, r["args"]["command"])]
    return bool(hits), f"{len(hits)} shell command(s) match /{c.pattern}/", [_quote(h) for h in hits[:5]]


def _shell_forbidden(c: M.ShellForbidden, ev: Evidence) -> Verdict:
    hits = [r for r in _shell_commands(ev) if re.search(c.pattern, r["args"]["command"])]
    if not hits:
        return True, f"no shell command matches /{c.pattern}/", []
    return False, f"forbidden shell command: {hits[0]['args']['command']!r}", [_quote(h) for h in hits[:5]]


CHECKS: dict[str, Callable[[Any, Evidence], Verdict]] = {
    "file_exists": _file_exists,
    "file_absent": _file_absent,
    "file_contains": _file_contains,
    "file_regex": _file_regex,
    "json_equals": _json_equals,
    "path_unchanged": _path_unchanged,
    "tool_called": _tool_called,
    "tool_not_called": _tool_not_called,
    "shell_matches": _shell_matches,
    "shell_forbidden": _shell_forbidden,
}


def run_check(check: Any, ev: Evidence) -> Verdict:
    """Judge one check; an exception inside a check is a failed check, not a crash."""
    try:
        return CHECKS[check.type](check, ev)
    except Exception as exc:  # noqa: BLE001 - reported in the grade
        return False, f"check raised {type(exc).__name__}: {exc}", []


def sha256(data: bytes) -> str:
    """Hex SHA-256."""
    return hashlib.sha256(data).hexdigest()
