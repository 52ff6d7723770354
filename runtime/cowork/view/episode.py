"""One episode as the page shows it: the timeline (messages, tool calls with arguments,
output and duration, the task's user turns, events and day changes), every check with the
audit entries that prove it, linked to the call that caused them, and the diffs."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ..errors import EvidenceError
from ..evidence import META_FILE, Evidence
from ..grading import Grade
from .diffs import state_diff, workspace_diff

log = logging.getLogger(__name__)

#: Largest tool output or message text kept whole in the page (the rest is cut, and said so).
OUTPUT_LIMIT = 32 * 1024


def _cut(text: Any) -> dict[str, Any]:
    text = "" if text is None else text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    return {"text": text[:OUTPUT_LIMIT], "cut": len(text) > OUTPUT_LIMIT}


def _args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        raise EvidenceError(f"{path}: unreadable JSON ({exc}); the bundle is damaged, rerun the episode") from exc


def call_anchors(calls: list[dict[str, Any]], records: list[dict[str, Any]], prefix: str) -> dict[int, str]:
    """Element id of the agent's call behind each audit seq.

    A merged call spans its ``call_seq`` .. its result's ``seq``; what the server recorded
    in between (service actions, injected faults) was caused by that call. Calls overlap
    only when the agent runs tools in parallel; then the earlier call keeps the seq.
    """
    out: dict[int, str] = {}
    for c in calls:
        start, end = c.get("call_seq", c.get("seq")), c.get("seq")
        if not isinstance(start, int) or not isinstance(end, int):
            continue
        anchor = f"{prefix}-call-{start}"
        for seq in range(start, end + 1):
            out.setdefault(seq, anchor)
    for r in records:  # a service action that names its call
        tc = r.get("tool_call")
        if isinstance(r.get("seq"), int) and isinstance(tc, dict) and tc.get("seq") in out:
            out.setdefault(r["seq"], out[tc["seq"]])
    return out


def _match_calls(steps: list[dict[str, Any]], calls: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """The audited call of each step: in start order, same tool, the same arguments where
    one has them (the host's step list and the server's log say the same thing twice)."""
    todo = sorted(calls, key=lambda c: c.get("call_seq", c.get("seq")) or 0)
    used: set[int] = set()
    out: list[dict[str, Any] | None] = []
    for st in steps:
        pick = None
        for exact in (True, False):
            for i, c in enumerate(todo):
                if i in used or c.get("tool") != st.get("tool"):
                    continue
                if exact and (c.get("args") or {}) != (st.get("args") or {}):
                    continue
                pick = i
                break
            if pick is not None:
                break
        if pick is not None:
            used.add(pick)
        out.append(todo[pick] if pick is not None else None)
    return out


def timeline(traj: dict[str, Any], calls: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    """The conversation in order, with each tool call merged with its step and its audit record."""
    messages = traj.get("messages") or []
    steps = traj.get("steps") or []
    audited = _match_calls(steps, calls)
    by_call_id: dict[str, list[int]] = {}
    for i, st in enumerate(steps):
        by_call_id.setdefault(str(st.get("call_id")), []).append(i)
    taken: set[int] = set()

    def step_for(call_id: str, tool: Any) -> int | None:
        for i in by_call_id.get(call_id, []):
            if i not in taken and steps[i].get("tool") == tool:
                taken.add(i)
                return i
        return None

    # Where the task's own entries go: before the user message that followed them.
    conv = traj.get("conversation") or []
    users = {e["message"]: e for e in conv if e.get("kind") == "user" and isinstance(e.get("message"), int)}
    before: dict[int, list[dict[str, Any]]] = {}
    pending: list[dict[str, Any]] = []
    for e in conv:
        if e.get("kind") == "user" and isinstance(e.get("message"), int):
            before.setdefault(e["message"], []).extend(pending)
            pending = []
        else:
            pending.append(e)

    items: list[dict[str, Any]] = []
    turn = 0
    for idx, m in enumerate(messages):
        for e in before.get(idx, []):
            items.append(_conversation_item(e))
        role = m.get("role")
        if role == "system":
            items.append({"kind": "system", **_cut(m.get("content"))})
        elif role == "user":
            u = users.get(idx, {})
            items.append({"kind": "user", "turn": u.get("turn"), "day": u.get("day"), "source": u.get("source"),
                          **_cut(m.get("content"))})
        elif role == "assistant":
            turn += 1
            if m.get("content"):
                items.append({"kind": "assistant", "turn": turn, **_cut(m.get("content"))})
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function") or {}
                items.append(_call_item(tc.get("id"), fn.get("name"), _args(fn.get("arguments")), turn,
                                        step_for(str(tc.get("id")), fn.get("name")), steps, audited, prefix))
        elif role == "tool":
            # The output is shown with its call; a tool message with no call (odd logs) stands alone.
            ids = {i.get("call_id") for i in items if i.get("kind") == "call"}
            if m.get("tool_call_id") not in ids:
                items.append({"kind": "tool_output", "call_id": m.get("tool_call_id"), **_cut(m.get("content"))})
            else:
                for it in items:
                    if it.get("kind") == "call" and it.get("call_id") == m.get("tool_call_id") and "output" not in it:
                        it["output"] = _cut(m.get("content"))
    for e in pending:
        items.append(_conversation_item(e))
    # Steps the messages did not show (a policy that failed mid-turn): keep them visible.
    for i, st in enumerate(steps):
        if i not in taken:
            items.append(_call_item(st.get("call_id"), st.get("tool"), st.get("args"), st.get("turn"), i, steps,
                                    audited, prefix))
    return items


def _call_item(call_id: Any, tool: Any, args: Any, turn: Any, step: int | None, steps: list[dict[str, Any]],
               audited: list[dict[str, Any] | None], prefix: str) -> dict[str, Any]:
    item: dict[str, Any] = {"kind": "call", "call_id": call_id, "tool": tool, "args": args, "turn": turn}
    if step is not None:
        st = steps[step]
        item.update(duration_ms=st.get("duration_ms"), is_error=bool(st.get("is_error")), output=_cut(st.get("output")))
        rec = audited[step]
        if rec is not None:
            start = rec.get("call_seq", rec.get("seq"))
            item.update(anchor=f"{prefix}-call-{start}", call_seq=start, seq=rec.get("seq"),
                        outcome=rec.get("outcome"), error_type=rec.get("error_type"))
    return item


def _conversation_item(e: dict[str, Any]) -> dict[str, Any]:
    kind = str(e.get("kind") or "event")
    item = {"kind": "task", "what": kind, "turn": e.get("turn"), "day": e.get("day"), "actor": e.get("actor")}
    if kind == "boundary":
        item["text"] = f"end of turn {e.get('turn')} (audit entries so far: {e.get('audit_count')})"
    elif kind == "simulated_user":
        item["text"] = json.dumps({k: v for k, v in e.items() if k != "kind"}, ensure_ascii=False, default=str)
    else:
        item["actions"] = e.get("actions") or []
        item["results"] = e.get("results") or []
    return item


def _agent_of(rec: dict[str, Any]) -> str | None:
    """The agent a harness episode's audit record names (``main``, ``sub-1``, ...), if any."""
    agent = rec.get("agent")
    return str(agent.get("id")) if isinstance(agent, dict) and agent.get("id") else None


# anchor_of is keyed by audit seq (int) and looked up by whatever a record holds there.
def _audit_table(records: list[dict[str, Any]], anchor_of: dict[Any, str], prefix: str) -> list[dict[str, Any]]:
    out = []
    for r in records:
        what = r.get("tool") or (f"{r.get('service')}.{r.get('action')}" if r.get("service") else "")
        out.append({"id": f"{prefix}-audit-{r.get('seq')}", "seq": r.get("seq"), "kind": r.get("kind"), "what": what, "actor": r.get("actor"),
                    "outcome": r.get("outcome"), "call_seq": r.get("call_seq"), "anchor": anchor_of.get(r.get("seq")),
                    "agent": _agent_of(r)})
    return out


def delegation_tree(traj: dict[str, Any], calls: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    """A harness episode's agents (``Trajectory.agents``), parents before children, each with
    its assignment, how it ended, and its calls as the audit log attributes them (an audited
    call names its agent; a call the host saw that the audit does not hold is shown from the
    agent's own steps). Empty for a single-agent episode."""
    agents = traj.get("agents") or {}
    if not isinstance(agents, dict) or not agents:
        return []
    audited: dict[str, list[dict[str, Any]]] = {}
    for c in calls:
        aid = _agent_of(c)
        if aid is not None:
            start = c.get("call_seq", c.get("seq"))
            audited.setdefault(aid, []).append({"tool": c.get("tool"), "args": c.get("args"), "outcome": c.get("outcome"),
                                                "kind": c.get("kind"), "anchor": f"{prefix}-audit-{start}"})
    order: list[str] = []

    def visit(aid: str, depth: int) -> None:
        if aid in order or depth > len(agents):
            return
        order.append(aid)
        for child, a in agents.items():
            if isinstance(a, dict) and a.get("parent") == aid:
                visit(child, depth + 1)

    for root in [k for k, a in agents.items() if not (isinstance(a, dict) and a.get("parent") in agents)]:
        visit(root, 0)
    out = []
    for aid in order + [k for k in agents if k not in order]:
        a = agents[aid] if isinstance(agents[aid], dict) else {}
        steps = [{"tool": st.get("tool"), "args": st.get("args"), "outcome": "error" if st.get("is_error") else "ok",
                  "kind": "step", "anchor": None} for st in a.get("steps") or [] if isinstance(st, dict)]
        out.append({"id": aid, "parent": a.get("parent"), "assignment": a.get("assignment"), "status": a.get("status"),
                    "task": _cut(a.get("task"))["text"], "tools": a.get("tools") or [], "turns": a.get("turns"),
                    "tokens": a.get("tokens"), "denied": a.get("denied") or [], "result": _cut(a.get("result")),
                    "calls": audited.get(aid) or steps})
    return out


def _checks(grade: Grade, anchor_of: dict[Any, str], prefix: str, seqs: set[int]) -> list[dict[str, Any]]:
    out = []
    for n, c in enumerate(grade.checks):
        proof = []
        for rec in c.evidence:
            seq = rec.get("seq")
            tc = rec.get("tool_call") if isinstance(rec.get("tool_call"), dict) else None
            anchor = anchor_of.get(seq) or (anchor_of.get(tc.get("seq")) if tc else None)
            proof.append({"seq": seq, "record": json.dumps(rec, ensure_ascii=False, sort_keys=True, default=str),
                          "anchor": anchor, "audit": f"{prefix}-audit-{seq}" if seq in seqs else None})
        out.append({"anchor": f"{prefix}-check-{n}", "id": c.id, "type": c.type, "group": c.group, "status": c.status, "weight": c.weight,
                    "detail": c.detail, "error": c.error, "evidence": proof})
    return out


def load_grade(folder: Path) -> Grade | None:
    """``grade.json`` of a bundle (None when there is none).

    Raises:
        EvidenceError: the file is not a Grade.
    """
    path = folder / "grade.json"
    if not path.exists():
        return None
    try:
        return Grade.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise EvidenceError(f"{path}: not a grade ({exc}); regrade the bundle with `cowork grade`") from exc


def episode_view(folder: Path, prefix: str) -> dict[str, Any]:
    """Everything the page shows of one bundle; ids of its elements start with ``prefix``.

    Raises:
        EvidenceError: a part of the bundle is missing or unreadable.
    """
    grade = load_grade(folder)
    traj = _read_json(folder / "trajectory.json") or _read_json(folder / "trace.json") or {}
    spec = _read_json(folder / "spec.json")
    out: dict[str, Any] = {"grade": grade.model_dump(mode="json", exclude={"checks"}) if grade else None,
                           "status": traj.get("status"), "agent": traj.get("agent"), "error": traj.get("error"),
                           "turns": traj.get("turns"), "duration_s": traj.get("duration_s"),
                           "title": (spec or {}).get("title"), "prompt": (spec or {}).get("prompt")}
    if not (folder / META_FILE).exists():  # no evidence (an infrastructure failure): what there is
        out.update(timeline=timeline(traj, [], prefix), checks=_checks(grade, {}, prefix, set()) if grade else [],
                   audit=[], workspace=None, state=[], chain=None, agents=delegation_tree(traj, [], prefix))
        return out
    ev = Evidence.load(folder)
    records = ev.chain.records
    calls = ev.tool_calls
    anchor_of = call_anchors(calls, records, prefix)
    seqs: set[int] = {r["seq"] for r in records if isinstance(r.get("seq"), int)}
    items = timeline(traj, calls, prefix)
    agent_at = {f"{prefix}-call-{c.get('call_seq', c.get('seq'))}": _agent_of(c) for c in calls}
    for it in items:  # colour each call by its agent
        if it.get("anchor") in agent_at:
            it["agent"] = agent_at[it["anchor"]]
    checks = _checks(grade, anchor_of, prefix, seqs) if grade else []
    by_anchor = {i["anchor"]: i for i in items if i.get("anchor")}
    for c in checks:  # links back from a call to the verdicts that quote it
        for p in c["evidence"]:
            cited = by_anchor.get(p["anchor"], {}).setdefault("cited_by", [])
            if p["anchor"] in by_anchor and not any(x["anchor"] == c["anchor"] for x in cited):
                cited.append({"id": c["id"], "status": c["status"], "group": c["group"], "anchor": c["anchor"]})
    out.update(
        timeline=items,
        checks=checks,
        audit=_audit_table(records, anchor_of, prefix),
        agents=delegation_tree(traj, calls, prefix),
        workspace=workspace_diff(ev, spec, anchor_of),
        state=state_diff(ev.state_seed, ev.state_final, ev.world_changes),
        chain={"valid": ev.chain.valid, "error": ev.chain.error},
        task_calls=[{"actor": c.get("actor"), "tool": c.get("tool"), "args": c.get("args"), "seq": c.get("seq")}
                    for c in ev.task_calls],
    )
    return out
