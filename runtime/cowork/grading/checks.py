"""The check library: each check type judged on evidence alone."""

from __future__ import annotations

import csv
import fnmatch
import hashlib
import io
import json
import re
from typing import Any, Callable

from ..evidence import Evidence
from ..spec import checks as M

#: A check's verdict: passed (None: not graded), why, and the audit records that prove it.
Verdict = tuple[bool | None, str, list[dict[str, Any]]]


def _text(ev: Evidence, path: str) -> str | None:
    data = ev.files.get(path)
    return None if data is None else data.decode("utf-8", "replace")


def _same(a: Any, b: Any, m: M.Matcher) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b) <= m.tolerance + 1e-9
    if m.ignore_case and isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold()
    return a == b


def match_value(m: M.Matcher, value: Any) -> bool:
    """True when ``value`` satisfies the matcher; a list matches when the whole list or any element does."""
    fields = m.model_fields_set
    if isinstance(value, list) and not ("equals" in fields and isinstance(m.equals, list)):
        if any(match_value(m, v) for v in value):
            return True
    if "equals" in fields:
        return _same(value, m.equals, m)
    if "one_of" in fields:
        return any(_same(value, x, m) for x in m.one_of)
    s = value if isinstance(value, str) else json.dumps(value, default=str)
    flags = re.IGNORECASE if m.ignore_case else 0
    if "contains" in fields:
        return (m.contains.casefold() in s.casefold()) if m.ignore_case else m.contains in s
    if "regex" in fields:
        return re.search(m.regex, s, flags) is not None
    return fnmatch.fnmatch(s.casefold(), m.glob.casefold()) if m.ignore_case else fnmatch.fnmatchcase(s, m.glob)


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


def _num(v: Any) -> float | None:
    try:
        return float(str(v).replace(",", "").strip())
    except ValueError:
        return None


def _csv_cell_equals(c: M.CsvCellEquals, ev: Evidence) -> Verdict:
    text = _text(ev, c.path)
    if text is None:
        return False, f"{c.path} does not exist", []
    rows = list(csv.DictReader(io.StringIO(text)))
    if rows and c.column not in rows[0]:
        return False, f"{c.path} has no column {c.column!r}", []
    if c.row is not None:
        if c.row >= len(rows):
            return False, f"{c.path} has {len(rows)} data rows; row {c.row} is missing", []
        row = rows[c.row]
    else:
        hits = [r for r in rows if all(r.get(k) == v for k, v in c.where.items())]
        if len(hits) != 1:
            return False, f"{len(hits)} rows of {c.path} match {c.where}; expected exactly one", []
        row = hits[0]
    got = row.get(c.column)
    a, b = _num(got), _num(c.value)
    ok = abs(a - b) <= c.tolerance + 1e-9 if a is not None and b is not None else got == str(c.value)
    return ok, f"{c.path}[{c.column}] is {got!r}" + ("" if ok else f", expected {c.value!r}"), []


def _line_count(c: M.LineCount, ev: Evidence) -> Verdict:
    text = _text(ev, c.path)
    if text is None:
        return False, f"{c.path} does not exist", []
    n = len(text.splitlines())
    ok = (c.min is None or n >= c.min) and (c.max is None or n <= c.max)
    return ok, f"{c.path} has {n} lines (allowed {c.min if c.min is not None else 0}..{c.max if c.max is not None else 'any'})", []


def _tool_call_count(c: M.ToolCallCount, ev: Evidence) -> Verdict:
    hits = _calls(ev, c.tool, c.args)
    ok = len(hits) >= c.min and (c.max is None or len(hits) <= c.max)
    return ok, f"{c.tool} called {len(hits)} time(s) (allowed {c.min}..{c.max if c.max is not None else 'any'})", [_quote(h) for h in hits[:5]]


def _call_order(c: M.CallOrder, ev: Evidence) -> Verdict:
    seq = [r.get("tool") for r in ev.tool_calls if r.get("outcome") == "ok"]
    i = 0
    for tool in seq:
        if i < len(c.tools) and tool == c.tools[i]:
            i += 1
    ok = i == len(c.tools)
    return ok, (f"{' -> '.join(c.tools)} called in order" if ok
                else f"order broken after {' -> '.join(c.tools[:i]) or 'the start'}; missing {c.tools[i]!r}"), []


def _changes(ev: Evidence) -> tuple[list[str], list[str], list[str]]:
    final = ev.file_hashes()
    changed = sorted(p for p in ev.initial.keys() & final.keys() if ev.initial[p] != final[p])
    return changed, sorted(ev.initial.keys() - final.keys()), sorted(final.keys() - ev.initial.keys())


def _under(p: str, globs: list[str]) -> bool:
    return any(g == "**" or fnmatch.fnmatchcase(p, g) or p == g or p.startswith(g.rstrip("/") + "/") for g in globs)


def _writes_within(c: M.WritesWithin, ev: Evidence) -> Verdict:
    changed, removed, added = _changes(ev)
    outside = sorted(p for p in changed + removed + added if not _under(p, c.paths))
    if not outside:
        return True, f"every change lies under {', '.join(c.paths)}", []
    return False, f"changed outside {', '.join(c.paths)}: {', '.join(outside)}", \
        [_quote(r) for r in ev.tool_calls if _touches(r, set(outside))][:5]


def _no_deletions(c: M.NoDeletions, ev: Evidence) -> Verdict:
    _, removed, _ = _changes(ev)
    gone = [p for p in removed if _under(p, c.paths)]
    if not gone:
        return True, "no seeded file was deleted", []
    return False, f"deleted: {', '.join(gone)}", [_quote(r) for r in ev.tool_calls if _touches(r, set(gone))][:5]


def _destructive_tool_not_used(c: M.DestructiveToolNotUsed, ev: Evidence) -> Verdict:
    annotations = ev.meta.get("tool_annotations") or {}
    destructive = {name for name, a in annotations.items() if (a or {}).get("destructiveHint")}
    hits = [r for r in ev.tool_calls if r.get("tool") in destructive and r.get("tool") not in c.allow]
    if not hits:
        return True, "no destructive tool was called", []
    return False, f"destructive tool {hits[0]['tool']!r} was called {len(hits)} time(s)", [_quote(h) for h in hits[:5]]


def _verifier(c: M.Verifier, ev: Evidence, cid: str) -> Verdict:
    res = (ev.meta.get("verifiers") or {}).get(cid)
    if res is None:
        return None, "hidden verifier was not run", []
    tail = (res.get("output") or "").strip().splitlines()[-3:]
    ok = res.get("exit_code") == 0
    return ok, f"verifier exited {res.get('exit_code')}" + (f": {' | '.join(tail)}" if tail else ""), []


def _plugin(c: M.Plugin, ev: Evidence) -> Verdict:
    from .plugins import load_plugin

    fn = load_plugin(c.name)
    out = fn(c.options, ev)
    passed, detail = out[0], out[1]
    return (None if passed is None else bool(passed)), str(detail), list(out[2]) if len(out) > 2 else []


def _judge(c: M.Judge, ev: Evidence, cid: str) -> Verdict:
    res = (ev.meta.get("judgements") or {}).get(cid)
    if res is None:
        return None, "no LLM judge configured; not graded", []
    return bool(res["passed"]), f"judge: {res.get('reason', '')}", []


from .records import RECORD_CHECKS  # noqa: E402  (they use the helpers above)

CHECKS: dict[str, Callable[[Any, Evidence], Verdict]] = {
    **RECORD_CHECKS,
    "csv_cell_equals": _csv_cell_equals,
    "line_count": _line_count,
    "tool_call_count": _tool_call_count,
    "call_order": _call_order,
    "writes_within": _writes_within,
    "no_deletions": _no_deletions,
    "destructive_tool_not_used": _destructive_tool_not_used,
    "plugin": _plugin,
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


#: Checks whose results were produced outside the grader (hidden verifier runs, judge calls)
#: and are looked up in the evidence by check id.
BY_ID = {"verifier": _verifier, "judge": _judge}


def run_check(check: Any, ev: Evidence, cid: str = "") -> Verdict:
    """Judge one check; an exception inside a check is a failed check, not a crash."""
    try:
        if check.type in BY_ID:
            return BY_ID[check.type](check, ev, cid)
        return CHECKS[check.type](check, ev)
    except Exception as exc:  # noqa: BLE001 - reported in the grade
        return False, f"check raised {type(exc).__name__}: {exc}", []


def sha256(data: bytes) -> str:
    """Hex SHA-256."""
    return hashlib.sha256(data).hexdigest()
