"""cowork evidence as Claw-Eval trace parts: the messages, tool dispatches and service audit
data its graders read, as plain dicts (the grader container builds its own objects from them).

Claw-Eval's loop writes, per episode: the user's request; each assistant message as text and
``tool_use`` blocks; after each assistant turn one user message holding a ``tool_result`` block
per call (its text the JSON the service answered, ``is_error`` when the status was 400 or more);
a simulated user's reply as a user message, ``[user_agent]`` on a line of its own before it; one
``tool_dispatch`` per call (status, request and response body); and each service's ``/audit``
answer. The system prompt is not in the trace, and neither is it here.

What the agent did is read from the audit log (calls, arguments, results: what the sandbox
recorded, not what the policy claims), and what it said from the trajectory's messages.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...evidence import Evidence
from ...spec.models import TaskSpec
from .sandbox_names import claw_call

#: What a service's error answer looks like once the tool host has relayed it.
_HTTP_ERROR = re.compile(r"^HTTP (\d{3}) ([^:\n]*): ?(.*)\Z", re.DOTALL)
#: An injected fault (services.faults): ``429 Too Many Requests: ...``.
_FAULT = re.compile(r"^(\d{3}) [A-Za-z][A-Za-z ]*: ")
#: The prefix Claw-Eval puts before a simulated user's reply.
USER_AGENT_PREFIX = "[user_agent]\n"
#: Status of a call cowork refused before it reached the service (bad arguments): what a
#: FastAPI service answers to a body its schema refuses.
REFUSED_STATUS = 422


def _text_of(content: Any) -> str:
    """The text of an OpenAI message's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _json_or(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _error_answer(rec: dict[str, Any]) -> tuple[int, Any]:
    """``(status, body)`` of a call that failed, as Claw-Eval's dispatcher would have logged it."""
    text = str(rec.get("error") or "")
    if rec.get("outcome") == "unknown":
        return 500, {"error": "the call did not finish (the sandbox stopped answering)"}
    m = _HTTP_ERROR.match(text)
    if m:
        body = _json_or(m.group(3))
        return int(m.group(1)), body if body is not None else {"error": m.group(3)}
    if rec.get("error_type") == "ToolDenied":
        return 404, {"error": text}
    if rec.get("error_type") == "ArgumentsRefused" or text.startswith("Invalid arguments for "):
        return REFUSED_STATUS, {"error": text}
    m = _FAULT.match(text)
    if m and 400 <= int(m.group(1)) <= 599:
        return int(m.group(1)), {"error": text}
    return 500, {"error": text}


def _ok_body(rec: dict[str, Any]) -> Any:
    """The body a successful call answered: its text as JSON (the service's key order), else
    its structured content (the audit keeps it with sorted keys), else the text."""
    text = rec.get("result")
    body = _json_or(text) if isinstance(text, str) else None
    if body is not None:
        return body
    if isinstance(rec.get("structured"), (dict, list)):
        return rec["structured"]
    return text


def _endpoints(spec: TaskSpec) -> dict[str, str]:
    """The URL each HTTP tool called, as Claw-Eval's ``tool_endpoints`` wrote it."""
    ports = {s.name: s.port for s in spec.http_services}
    return {t.name: f"http://localhost:{ports.get(t.service, 0)}{t.path}" for t in spec.http_tools}


def dispatch_of(rec: dict[str, Any], tool_use_id: str, url: str) -> dict[str, Any]:
    """A Claw-Eval ``tool_dispatch`` (without ``type`` and ``trace_id``) for one audited call."""
    if rec.get("outcome") == "ok":
        status, body = 200, _ok_body(rec)
    else:
        status, body = _error_answer(rec)
    given = rec.get("args")
    name, args = claw_call(str(rec.get("tool")), given if isinstance(given, dict) else {})
    return {"tool_use_id": tool_use_id, "tool_name": name, "endpoint_url": url,
            "request_body": args, "response_status": status,
            "response_body": body, "latency_ms": float(rec.get("duration_ms") or 0.0)}


def _result_text(body: Any) -> str:
    return body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)


def _match_calls(messages: list[dict[str, Any]], calls: list[dict[str, Any]]) -> dict[str, int]:
    """Each trace tool call id -> the index of its audited call: in order, by tool name. A call
    the host refused before it reached the sandbox has none; an audited call no trace call
    claims (another agent's) stays unmatched."""
    wanted = [(str(c.get("id")), str((c.get("function") or {}).get("name")))
              for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    out: dict[str, int] = {}
    cursor = 0
    for call_id, name in wanted:
        for j in range(cursor, len(calls)):
            if calls[j].get("tool") == name:
                out[call_id] = j
                cursor = j + 1
                break
    return out


def _call_seq(rec: dict[str, Any]) -> int:
    seq = rec.get("call_seq")
    return seq if isinstance(seq, int) else -1


def _user_agent_messages(trace: dict[str, Any]) -> set[int]:
    """Indices of the user messages a (scripted or simulated) user wrote after the request."""
    return {int(e["message"]) for e in trace.get("conversation") or []
            if e.get("kind") == "user" and (e.get("turn") or 1) > 1 and e.get("source") != "day"
            and isinstance(e.get("message"), int)}


def claw_trace(spec: TaskSpec, ev: Evidence) -> dict[str, Any]:
    """Claw-Eval's view of an episode.

    Returns:
        ``{"task_id", "trace_id", "model", "messages": [Message dicts], "dispatches": [ToolDispatch
        dicts without type/trace_id], "audit_data": {original service name: audit JSON},
        "totals": {...}}``. Services are renamed by ``original_grader.services``; a service
        whose audit could not be collected is left out, as Claw-Eval's harness leaves out an
        audit it could not fetch.
    """
    og = spec.original_grader
    trace = ev.trace or {}
    messages_in: list[dict[str, Any]] = [m for m in trace.get("messages") or [] if isinstance(m, dict)]
    calls = sorted(ev.tool_calls, key=_call_seq)
    urls = _endpoints(spec)
    matched = _match_calls(messages_in, calls)
    by_call = {j: cid for cid, j in matched.items()}
    dispatches = [dispatch_of(rec, by_call.get(j, f"cowork-call-{rec.get('call_seq')}"), urls.get(str(rec.get("tool")), ""))
                  for j, rec in enumerate(calls)]
    answers = {d["tool_use_id"]: d for d in dispatches}
    user_turns = _user_agent_messages(trace)

    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []

    def flush() -> None:
        if results:
            out.append({"role": "user", "content": list(results)})
            results.clear()

    for n, m in enumerate(messages_in):
        role = m.get("role")
        if role == "tool":
            call_id = str(m.get("tool_call_id"))
            d = answers.get(call_id)
            if d is not None:
                text, error = _result_text(d["response_body"]), d["response_status"] >= 400
            else:  # never reached the sandbox: what the agent was told
                raw = _text_of(m.get("content"))
                error = raw.startswith("ERROR: ")
                text = _result_text({"error": raw.removeprefix("ERROR: ")} if error else raw)
            results.append({"type": "tool_result", "tool_use_id": call_id,
                            "content": [{"type": "text", "text": text}], "is_error": error})
            continue
        flush()
        if role == "user":
            text = _text_of(m.get("content"))
            out.append({"role": "user", "content": [{"type": "text",
                                                     "text": USER_AGENT_PREFIX + text if n in user_turns else text}]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            text = _text_of(m.get("content"))
            if text:
                blocks.append({"type": "text", "text": text})
            for c in m.get("tool_calls") or []:
                fn = c.get("function") or {}
                args = fn.get("arguments")
                parsed = _json_or(args) if isinstance(args, str) else args
                name, given = claw_call(str(fn.get("name")), parsed if isinstance(parsed, dict) else {})
                blocks.append({"type": "tool_use", "id": str(c.get("id")), "name": name, "input": given})
            msg: dict[str, Any] = {"role": "assistant", "content": blocks}
            reasoning = m.get("reasoning_content") or m.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                msg["reasoning_content"] = reasoning
            out.append(msg)
        # system messages: Claw-Eval's trace does not hold the system prompt
    flush()

    rename = og.services if og is not None else {}
    final = ((ev.meta.get("http_audit") or {}).get("final") or {})
    audit = {rename.get(name, name): data for name, data in final.items() if isinstance(data, dict)}
    totals = {"total_turns": int(trace.get("turns") or 0),
              "wall_time_s": float(trace.get("duration_s") or 0.0),
              "tool_time_s": round(sum(d["latency_ms"] for d in dispatches) / 1000, 3),
              "user_agent_rounds": len(user_turns)}
    return {"task_id": og.task_id if og is not None else spec.id, "trace_id": f"cowork-{spec.id}",
            "model": str(trace.get("agent") or "cowork"), "messages": out, "dispatches": dispatches,
            "audit_data": audit, "totals": totals}
