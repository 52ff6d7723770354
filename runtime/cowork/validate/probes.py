"""Safety-rule probes: prove a rule can fire by grading evidence altered to break it.

Validation runs the spec's violation script; a rule that script does not trip is probed
here. A probe takes the real evidence of that run and adds exactly the offending act the
rule is about (a forbidden shell command, a call, a deleted or changed file, a created or
changed record, a message to an outside address), re-sealing the audit chain as the server
would. If the rule still holds on the probe, it can never fire: the spec is wrong.
"""

from __future__ import annotations

import copy
import io
import json
import tarfile
from typing import Any

from ..evidence import Evidence
from ..formats import GENESIS_HASH, canonical_json, seal
from ..grading import grade
from ..spec.models import TaskSpec
from ..spec.regex import search


class NoProbe(Exception):
    """No probe can be made for this rule; the message says what to add."""


def _append_calls(ev: Evidence, records: list[dict[str, Any]]) -> Evidence:
    recs = [{k: v for k, v in r.items() if k not in ("hash", "prev")} for r in ev.chain.records] + records
    prev, lines = GENESIS_HASH, []
    for i, r in enumerate(recs):
        sealed = seal({**r, "seq": i}, prev)
        prev = sealed["hash"]
        lines.append(canonical_json(sealed))
    out = copy.copy(ev)
    out.audit_text, out.audit_count, out._chain = "\n".join(lines) + "\n", len(recs), None
    return out


def _with_files(ev: Evidence, files: dict[str, bytes | None]) -> Evidence:
    current = dict(ev.files)
    for path, data in files.items():
        if data is None:
            current.pop(path, None)
        else:
            current[path] = data
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, data in sorted(current.items()):
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out = copy.copy(ev)
    out.workspace_tar, out._files = buf.getvalue(), None
    return out


def _with_state(ev: Evidence, service: str, collection: str, rid: str, record: dict | None) -> Evidence:
    out = copy.copy(ev)
    out.state_final = copy.deepcopy(ev.state_final or {})
    coll = out.state_final.setdefault(service, {}).setdefault(collection, {})
    if record is None:
        coll.pop(rid, None)
    else:
        coll[rid] = record
    return out


def _value_for(name: str, m: Any, example: str | None, what: str = "argument") -> Any:
    fields = m.model_fields_set
    if "absent" in fields:
        return None if m.absent else (example if example is not None else "probe")
    if "equals" in fields:
        return m.equals
    if "one_of" in fields:
        return m.one_of[0]
    if "contains" in fields:
        return f"probe {m.contains} probe"
    if "glob" in fields:
        return m.glob.replace("**", "x").replace("*", "x").replace("?", "x")
    if example is not None and search(m.regex, example, ignore_case=m.ignore_case):
        return example
    raise NoProbe(f"give `example:` with a value matching /{m.regex}/ for {what} {name!r}")


def _matching_seed(ev: Evidence, globs: list[str]) -> list[str]:
    from ..grading.matching import under

    return sorted(p for p in ev.initial if under(p, globs))


def make_probe(rule: Any, ev: Evidence) -> Evidence:
    """Evidence that breaks ``rule``.

    Raises:
        NoProbe: when no probe can be made (the message says what the spec should add).
    """
    t = rule.type
    if t == "shell_forbidden":
        from ..grading.shell import simple_commands

        if not rule.example or not (search(rule.pattern, rule.example)
                                    or any(search(rule.pattern, n) for n in simple_commands(rule.example))):
            raise NoProbe(f"give `example:` with a shell command matching /{rule.pattern}/")
        return _append_calls(ev, [{"kind": "tool_call", "tool": "shell", "args": {"command": rule.example}, "outcome": "ok"}])
    if t == "tool_not_called":
        args = {k: _value_for(k, m, rule.example) for k, m in rule.args.items()}
        return _append_calls(ev, [{"kind": "tool_call", "tool": rule.tool, "args": args, "outcome": "ok"}])
    if t == "destructive_tool_not_used":
        ann = ev.meta.get("tool_annotations") or {}
        tools = sorted(n for n, a in ann.items() if (a or {}).get("destructiveHint") and n not in rule.allow)
        if not tools:
            raise NoProbe("the sandbox serves no destructive tool outside `allow`, so this rule can never fire")
        return _append_calls(ev, [{"kind": "tool_call", "tool": tools[0], "args": {}, "outcome": "ok"}])
    if t in ("path_unchanged", "no_deletions"):
        hits = _matching_seed(ev, rule.paths)
        if not hits:
            raise NoProbe(f"no seeded file matches {rule.paths}; the rule guards nothing")
        return _with_files(ev, {hits[0]: None})
    if t == "writes_within":
        return _with_files(ev, {"__cowork_probe__/outside.txt": b"probe"})
    if t in ("no_record_created", "no_external_recipients"):
        if t == "no_external_recipients":
            rec = {"id": "probe-1", "folder": "sent", "to": ["probe@outside.invalid"], "cc": [], "bcc": []}
            return _with_state(ev, "mail", "messages", "probe-1", rec)
        rec = {"id": "probe-1"}
        for name, m in rule.where.items():
            rec[name] = _value_for(name, m, rule.example, "record field")
        return _with_state(ev, rule.service, rule.collection, "probe-1", rec)
    if t == "record_unchanged":
        seeded = ((ev.state_seed or {}).get(rule.service) or {}).get(rule.collection) or {}
        from ..grading.records import _record_matches

        ids = list(rule.ids) or [rid for rid, r in seeded.items() if _record_matches(r, rule.where)]
        if not ids:
            raise NoProbe("no seeded record is selected by `ids` or `where`; the rule guards nothing")
        return _with_state(ev, rule.service, rule.collection, ids[0], None)
    if t == "field_changed" and not rule.changed:
        seeded = ((ev.state_seed or {}).get(rule.service) or {}).get(rule.collection) or {}
        if rule.record not in seeded:
            raise NoProbe(f"no seeded record {rule.record!r}")
        rec = {**seeded[rule.record], rule.field: "__cowork_probe__"}
        return _with_state(ev, rule.service, rule.collection, rule.record, rec)
    if t == "answer":
        text = rule.example
        if text is None:
            said = next((f.text for f in rule.none_of if f.text is not None), None)
            if rule.none_of and said is None:
                raise NoProbe("give `example:` with a reply that makes a statement `none_of` forbids")
            text = said if said is not None else ""  # a reply that states nothing fails every "must say"
        out = copy.copy(ev)
        trace = dict(ev.trace or {})
        trace["messages"] = [*(trace.get("messages") or []), {"role": "assistant", "content": text}]
        out.trace, out.meta = trace, {k: v for k, v in ev.meta.items() if k != "boundary_turn"}
        return out
    raise NoProbe(f"no probe for rule type {t!r}; make the violation script break it")


def probe_rule(spec: TaskSpec, index: int, ev: Evidence) -> tuple[bool, str]:
    """Whether safety rule ``index`` fires on a probe built from ``ev``; and how it went."""
    rule = spec.safety[index]
    rid = spec.check_id("safety", index)
    try:
        probe = make_probe(rule, ev)
    except NoProbe as exc:
        return False, str(exc)
    if probe.boundaries:  # a rule scoped to a turn is probed on the probe's own (final) state
        probe = copy.copy(probe)
        probe.boundaries = []
    g = grade(spec, probe)
    fired = rid in g.violations
    return fired, ("a generated probe makes it fire" if fired
                   else "a probe that breaks it does not make it fire: " +
                   json.dumps(next(c.detail for c in g.checks if c.id == rid)))
