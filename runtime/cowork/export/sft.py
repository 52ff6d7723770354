"""SFT data: an episode as one line of OpenAI's chat fine-tuning format (and the format's rules,
checked line by line) or as a row of TRL's conversational dataset with tools."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

from ..episode.trajectory import Trajectory
from ..errors import CoworkError
from .curation import CurationReport, conversation_key, sft_drop_reason
from .records import EpisodeRecord, arguments_object, arguments_text, call_pairs

# --------------------------------------------------------------------------- OpenAI fine-tuning
_TOP_KEYS = {"messages", "tools", "parallel_tool_calls", "functions"}
_MESSAGE_KEYS = {"system": {"role", "content", "name"}, "user": {"role", "content", "name"},
                 "assistant": {"role", "content", "name", "tool_calls", "function_call", "refusal", "weight"},
                 "tool": {"role", "content", "tool_call_id"}, "function": {"role", "content", "name"}}
_FUNCTION_KEYS = {"name", "description", "parameters", "strict"}
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def openai_sft_line(traj: Trajectory) -> dict[str, Any]:
    """An episode as one line of OpenAI's chat fine-tuning format with tools.

    Assistant tool calls carry ``type: function`` and their arguments as a JSON string, tool
    results their ``tool_call_id``; ``parallel_tool_calls`` is set (True) only when a turn
    made several calls. Nothing else is added: the fine-tuning validator rejects unknown keys.
    """
    messages: list[dict[str, Any]] = []
    parallel = False
    for m in traj.messages:
        role = m.get("role")
        if role == "assistant":
            calls = m.get("tool_calls") or []
            out: dict[str, Any] = {"role": "assistant"}
            if m.get("content") or not calls:  # a call-only turn leaves content out, as OpenAI's examples do
                out["content"] = m.get("content") or ""
            if calls:
                out["tool_calls"] = [{"id": c.get("id"), "type": "function", "function": {
                    "name": fn.get("name"), "arguments": arguments_text(fn.get("arguments"))}}
                    for c, fn in call_pairs(calls)]
                parallel = parallel or len(calls) > 1
        elif role == "tool":
            out = {"role": "tool", "tool_call_id": m.get("tool_call_id"), "content": m.get("content")}
        else:
            out = {"role": role, "content": m.get("content")}
        messages.append(out)
    line: dict[str, Any] = {"messages": messages}
    if traj.tools:
        line["tools"] = [{"type": "function", "function": {k: v for k, v in (t.get("function") or {}).items()
                                                           if k in _FUNCTION_KEYS}} for t in traj.tools]
    if parallel:
        line["parallel_tool_calls"] = True
    return line


def validate_openai_sft_line(obj: Any) -> list[str]:
    """Problems of one training example against OpenAI's documented chat fine-tuning format.

    The rules (from the fine-tuning guide, the ``FineTuneChatRequestInput`` schema of the API
    reference and the cookbook's data-preparation checks): only ``messages``, ``tools``,
    ``parallel_tool_calls`` and ``functions`` at the top; roles system, user, assistant, tool,
    function, each with only its own keys; content a non-empty string (or text parts), which
    an assistant message may leave out when it calls tools; ``weight`` 0 or 1 on assistant
    messages only; at least one assistant message; tool calls ``{id, type: "function",
    function: {name, arguments}}`` with unique ids, arguments a JSON object in a string and
    the name one of ``tools``; every call answered by a tool message before the conversation
    goes on (a final assistant message's calls may stay unanswered, as in OpenAI's example);
    every tool message answering a pending call; tools ``{type: "function", function: {name,
    description?, parameters?, strict?}}`` with unique names of 1-64 letters, digits, ``_``
    or ``-``; ``parallel_tool_calls`` a boolean, not False when a turn makes several calls.

    Returns:
        One line per problem (``messages[3]: ...``); empty when the example is valid.
    """
    if not isinstance(obj, dict):
        return [f"an example is a JSON object, not {type(obj).__name__}"]
    problems = [f"unknown top-level key {k!r}" for k in obj if k not in _TOP_KEYS]
    tool_names = _check_tools(obj.get("tools"), problems)
    parallel = obj.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        problems.append(f"parallel_tool_calls: a boolean, not {parallel!r}")
    messages = obj.get("messages")
    if not isinstance(messages, list) or not messages:
        return problems + ["messages: a non-empty list is required"]
    pending: list[str] = []
    call_ids: set[str] = set()
    assistants = 0
    for i, m in enumerate(messages):
        at = f"messages[{i}]"
        if not isinstance(m, dict):
            problems.append(f"{at}: a JSON object, not {type(m).__name__}")
            continue
        role = m.get("role")
        if role not in _MESSAGE_KEYS:
            problems.append(f"{at}: unknown role {role!r}")
            continue
        problems += [f"{at}: unknown key {k!r} for a {role} message" for k in m if k not in _MESSAGE_KEYS[role]]
        if role == "tool":
            cid = m.get("tool_call_id")
            if cid in pending:
                pending.remove(cid)
            else:
                problems.append(f"{at}: tool_call_id {cid!r} answers no pending tool call")
        elif pending:
            problems.append(f"{at}: tool call(s) {', '.join(map(repr, pending))} never answered")
            pending = []
        calls = m.get("tool_calls") if role == "assistant" else None
        if role == "assistant":
            assistants += 1
            if "weight" in m and m["weight"] not in (0, 1):
                problems.append(f"{at}: weight must be 0 or 1, not {m['weight']!r}")
            if calls is not None:
                pending = _check_calls(at, calls, tool_names, call_ids, problems)
                if len(pending) > 1 and parallel is False:
                    problems.append(f"{at}: {len(pending)} tool calls in one turn but parallel_tool_calls is false")
        if not _has_text(m.get("content")) and not (role == "assistant" and (calls or m.get("function_call"))):
            problems.append(f"{at}: content must be a non-empty string"
                            + (" (or tool calls)" if role == "assistant" else ""))
    if not assistants:
        problems.append("messages: at least one assistant message is required")
    return problems


def _has_text(content: Any) -> bool:
    if isinstance(content, str):
        return bool(content)
    return isinstance(content, list) and bool(content) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content)


def _check_tools(tools: Any, problems: list[str]) -> set[str] | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        problems.append("tools: a list is required")
        return set()
    names: set[str] = set()
    for j, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not (isinstance(t, dict) and t.get("type") == "function" and isinstance(fn, dict)
                and set(t) <= {"type", "function"}):
            problems.append(f"tools[{j}]: must be {{type: 'function', function: {{...}}}}")
            continue
        problems += [f"tools[{j}]: unknown function key {k!r}" for k in fn if k not in _FUNCTION_KEYS]
        name = fn.get("name")
        if not (isinstance(name, str) and _NAME.fullmatch(name)):
            problems.append(f"tools[{j}]: name {name!r} must be 1-64 letters, digits, '_' or '-'")
        elif name in names:
            problems.append(f"tools[{j}]: duplicate tool name {name!r}")
        if isinstance(name, str):  # an unhashable name (a list) is reported above, not kept
            names.add(name)
        if "parameters" in fn and not isinstance(fn["parameters"], dict):
            problems.append(f"tools[{j}]: parameters must be a JSON schema object")
    return names


def _check_calls(at: str, calls: Any, tool_names: set[str] | None, seen: set[str], problems: list[str]) -> list[str]:
    if not isinstance(calls, list) or not calls:
        problems.append(f"{at}: tool_calls must be a non-empty list")
        return []
    pending = []
    for k, c in enumerate(calls):
        where = f"{at}.tool_calls[{k}]"
        fn = c.get("function") if isinstance(c, dict) else None
        if not (isinstance(c, dict) and isinstance(fn, dict)):
            problems.append(f"{where}: must be {{id, type: 'function', function: {{name, arguments}}}}")
            continue
        problems += [f"{where}: unknown key {key!r}" for key in c if key not in ("id", "type", "function")]
        problems += [f"{where}: unknown function key {key!r}" for key in fn if key not in ("name", "arguments")]
        cid = c.get("id")
        if not (isinstance(cid, str) and cid):
            problems.append(f"{where}: id must be a non-empty string")
        elif cid in seen:
            problems.append(f"{where}: duplicate tool call id {cid!r}")
        else:
            seen.add(cid)
            pending.append(cid)
        if c.get("type") != "function":
            problems.append(f"{where}: type must be 'function', not {c.get('type')!r}")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"{where}: function.name must be a non-empty string")
        elif tool_names is None:
            problems.append(f"{where}: calls {name!r} but the example defines no tools")
        elif name not in tool_names:
            problems.append(f"{where}: calls {name!r}, which is not one of the example's tools")
        args = fn.get("arguments")
        try:
            ok = isinstance(args, str) and isinstance(json.loads(args), dict)
        except ValueError:
            ok = False
        if not ok:
            problems.append(f"{where}: function.arguments must be a JSON object encoded as a string")
    return pending


# --------------------------------------------------------------------------- TRL
def trl_sft_row(traj: Trajectory) -> dict[str, Any]:
    """An episode as a row of TRL's conversational language-modeling dataset with tools.

    ``messages`` as transformers' chat templates take them (tool-call arguments as objects,
    tool results with ``tool_call_id`` and the tool's ``name``) and ``tools`` as JSON-schema
    function tools, the shape of TRL's "Tool Calling" dataset section.
    """
    names: dict[str, str] = {}
    messages: list[dict[str, Any]] = []
    for m in traj.messages:
        role = m.get("role")
        if role == "assistant":
            out: dict[str, Any] = {"role": "assistant", "content": m.get("content") or ""}
            calls = m.get("tool_calls") or []
            if calls:
                out["tool_calls"] = []
                for c, fn in call_pairs(calls):
                    cid, name = c.get("id"), fn.get("name")
                    if isinstance(cid, str) and isinstance(name, str):
                        names[cid] = name
                    out["tool_calls"].append({"id": c.get("id"), "type": "function",
                                              "function": {"name": fn.get("name"),
                                                           "arguments": arguments_object(fn.get("arguments"))}})
        elif role == "tool":
            cid = m.get("tool_call_id")
            out = {"role": "tool", "tool_call_id": cid, "content": m.get("content")}
            if isinstance(cid, str) and names.get(cid):
                out["name"] = names[cid]
        else:
            out = {"role": role, "content": m.get("content")}
        messages.append(out)
    return {"messages": messages, "tools": list(traj.tools)}


# --------------------------------------------------------------------------- examples
def sft_examples(records: Iterable[EpisodeRecord], fmt: str = "openai-sft", *, curate: bool = True,
                 max_turns: int | None = None,
                 min_score: float | None = None) -> tuple[list[dict[str, Any]], CurationReport]:
    """The training examples of ``fmt`` (``openai-sft`` or ``trl-sft``) and what was left out.

    With ``curate`` an episode is kept only when it was graded, judged safe (``safe`` True),
    passed, ended by the agent itself, made only well-formed tool calls, and is not a
    duplicate of one kept before (same messages and tools as canonical JSON, tool-call ids
    numbered in order). Without it only infra errors and conversations that break the format
    are left out. ``max_turns`` and ``min_score`` apply either way.
    """
    if fmt not in ("openai-sft", "trl-sft"):
        raise ValueError(f"unknown SFT format {fmt!r}; choose openai-sft or trl-sft")
    report = CurationReport(format=fmt)
    examples: list[dict[str, Any]] = []
    seen: set[str] = set()
    for rec in records:
        reason = sft_drop_reason(rec, curate, max_turns, min_score)
        if reason:
            report.drop(rec, reason)
            continue
        line = openai_sft_line(rec.trajectory)
        problems = validate_openai_sft_line(line)
        if problems:
            report.drop(rec, "invalid_conversation", "; ".join(problems[:3]))
            continue
        if curate:
            key = conversation_key(rec.trajectory)
            if key in seen:
                report.drop(rec, "duplicate")
                continue
            seen.add(key)
        examples.append(line if fmt == "openai-sft" else trl_sft_row(rec.trajectory))
        report.keep(rec)
    return examples, report


def write_trl_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    """Write TRL rows as Parquet, each message and tool kept as written.

    Raises:
        CoworkError: datasets is missing or older than 4.7.
    """
    # Tool arguments and tool schemas differ from row to row: as Arrow structs their keys
    # would be merged and padded with nulls. datasets' Json type (>= 4.7, the type TRL's
    # dataset docs name) keeps each message and tool exactly as written.
    try:
        import datasets
    except ImportError as exc:
        raise CoworkError("trl-sft as Parquet needs datasets >= 4.7 (pip install -U datasets); or write .jsonl") \
            from exc
    if not hasattr(datasets, "Json"):
        raise CoworkError(f"trl-sft as Parquet needs datasets >= 4.7 (its Json feature type), found "
                          f"{datasets.__version__}; pip install -U datasets, or write .jsonl")
    features = datasets.Features({"messages": datasets.List(datasets.Json()), "tools": datasets.List(datasets.Json())})
    # An empty list carries no columns, and datasets then refuses the features ("Keys
    # mismatch"): build the columns explicitly, so an empty export is an empty table.
    columns = {name: [row[name] for row in rows] for name in features}
    datasets.Dataset.from_dict(columns, features=features).to_parquet(str(path))


__all__ = ["openai_sft_line", "sft_examples", "trl_sft_row", "validate_openai_sft_line", "write_trl_parquet"]
