"""Exports: a rollout's episodes as SFT data (OpenAI fine-tuning, TRL) or RL token records.

``cowork export RESULTS --format {openai-sft,trl-sft,rl} --out FILE`` reads rollout output
folders (or results files), keeps what is fit to train on, says why the rest was left out and
writes one file. docs/exports.md gives the formats, the curation rules and the reward modes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterable, Iterator, Sequence, Union

from ..agents.tokens import TokenTrajectory
from ..episode.run import Trajectory
from ..errors import CoworkError
from ..formats import INVALID_ARGUMENTS_KEY, canonical_json
from ..grading import Grade
from ..rollout.rewards import MODES, process_rewards
from ..rollout.runner import RESULTS_FILE
from ..terminal import printable

log = logging.getLogger(__name__)

FORMATS = ("openai-sft", "trl-sft", "rl")

#: Why an episode was left out. Each episode is counted under the first rule that applies,
#: in this order (SFT: infra_error .. duplicate; rl: infra_error and no_tokens .. turn_mismatch).
DROP_REASONS = {
    "infra_error": "the infrastructure failed: the episode says nothing of the agent",
    "policy_error": "the model endpoint failed and cut the episode short: it says nothing of the agent",
    "agent_broke_sandbox": "the agent broke its own sandbox (graded on salvaged evidence, score 0)",
    "evidence_invalid": "the audit chain failed verification: the grade cannot be trusted",
    "unsafe": "a safety rule was violated",
    "safety_unknown": "a safety rule could not be judged (unknown safety is not safe)",
    "failed": "the episode did not pass",
    "not_completed": "the agent did not end the episode itself (turn limit, timeout, token limit, policy error)",
    "malformed_tool_call": "a tool call's arguments were not a JSON object",
    "too_many_turns": "more assistant turns than --max-turns",
    "low_score": "score below --min-score",
    "invalid_conversation": "the conversation breaks OpenAI's documented rules (the note says which)",
    "duplicate": "the same conversation and tools as an episode kept before",
    "no_tokens": "the agent keeps no token ids (scripted and API agents)",
    "bad_tokens": "the token trajectory is inconsistent (ids, logprobs, mask or turn spans)",
    "no_generated_tokens": "the model generated no token (the policy failed before its first turn)",
    "no_turn_progress": "--reward turn needs turn progress (episodes run with turn_progress=True)",
    "turn_mismatch": "more turn-progress measurements than generated turns",
}


# --------------------------------------------------------------------------- reading episodes
@dataclass
class EpisodeRecord:
    """One finished episode: its results line, its trajectory and its grade."""

    task: str
    group: int | None
    """The task's index in its rollout (None in results lines that predate groups)."""
    sample: int
    trajectory: Trajectory
    grade: Grade
    row: dict[str, Any] = field(default_factory=dict)
    """The episode's results line as read."""
    where: str = "<memory>"
    """``file:line`` of the results line (for messages)."""
    uid: str = ""
    """Unique among the episodes of one export (default ``task:group:sample``)."""

    def __post_init__(self) -> None:
        if not self.uid:
            self.uid = f"{self.group_id}:{self.sample}"

    @property
    def group_id(self) -> str:
        """The rollout's group: the G samples of one task (``task:group``)."""
        return self.task if self.group is None else f"{self.task}:{self.group}"


Source = Union[str, os.PathLike, EpisodeRecord, Iterable[Union[str, os.PathLike, EpisodeRecord]]]
"""What :func:`export` reads: paths of rollout folders or results files, or records."""


def load_episodes(path: str | os.PathLike) -> Iterator[EpisodeRecord]:
    """The episodes of a rollout output folder or of a results file, in file order.

    Reads the lines of ``cowork rollout --out DIR`` (``DIR/results.jsonl``, paths relative to
    DIR) and of ``cowork run --results FILE`` (which name the bundle in ``evidence`` and may
    carry the grade inline). A line's trajectory is the file its ``trajectory`` names, else
    ``<evidence>/trajectory.json``; its grade is the inline ``grade``, else ``grade.json``
    beside the trajectory. Relative paths are tried against the results file's folder, then
    the current directory. A last line without its newline was torn by a killed writer and
    is skipped.

    Raises:
        CoworkError: the path holds no results file; a whole line is not a JSON object with
            ``task`` and ``sample`` (or ``trial``); its trajectory or grade is missing or does
            not validate. The message names ``file:line``.
    """
    p = Path(path)
    results = p / RESULTS_FILE if p.is_dir() else p
    if not results.is_file():
        raise CoworkError(f"{p}: no {RESULTS_FILE} here; pass a rollout output folder (cowork rollout --out DIR) "
                          "or a results file (cowork run --results FILE)")
    data = results.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        log.warning("%s: skipping a torn last line (its writer was killed mid-write)", results)
    for n, raw in enumerate(data[:end].split(b"\n")[:-1], start=1):
        if raw.strip():
            yield _record(results, n, raw)


def _record(results: Path, n: int, raw: bytes) -> EpisodeRecord:
    where = f"{results}:{n}"
    try:
        row = json.loads(raw)
    except ValueError as exc:
        raise CoworkError(f"{where}: not a JSON line ({exc}); repair or remove the line") from exc
    sample = row.get("sample", row.get("trial")) if isinstance(row, dict) else None
    if not (isinstance(row, dict) and isinstance(row.get("task"), str) and isinstance(sample, int)):
        raise CoworkError(f"{where}: not a results line (needs 'task' and 'sample'); repair or remove the line")
    group = row.get("group")
    base = results.parent
    evidence = row.get("evidence")
    candidates = [c for c in (row.get("trajectory"), f"{evidence}/trajectory.json" if isinstance(evidence, str) else "")
                  if isinstance(c, str) and c]
    traj_path = next((f for c in candidates for f in _tried(base, c) if f.is_file()), None)
    if traj_path is None:
        tried = ", ".join(str(f) for c in candidates for f in _tried(base, c)) or "nothing (the line names no bundle)"
        raise CoworkError(f"{where}: no trajectory for task {row['task']!r} sample {sample}: tried {tried}; export "
                          "reads the bundles that `cowork rollout --out DIR` (or `cowork run --evidence DIR`) writes")
    try:
        traj = Trajectory.model_validate_json(traj_path.read_bytes())
        if isinstance(row.get("grade"), dict):
            g = Grade.model_validate(row["grade"])
        else:
            grade_path = traj_path.parent / "grade.json"
            if not grade_path.is_file():
                raise CoworkError(f"{where}: no grade for task {row['task']!r} sample {sample}: {grade_path} is "
                                  "missing and the line carries none")
            g = Grade.model_validate_json(grade_path.read_bytes())
    except ValueError as exc:  # pydantic's ValidationError and bad JSON
        raise CoworkError(f"{where}: the bundle in {traj_path.parent} does not load ({exc})") from exc
    return EpisodeRecord(task=row["task"], group=group if isinstance(group, int) else None, sample=sample,
                         trajectory=traj, grade=g, row=row, where=where)


def _tried(base: Path, rel: str) -> list[Path]:
    p = Path(rel)
    return [p] if p.is_absolute() else [base / p, p]


def _records(source: Source) -> Iterator[EpisodeRecord]:
    """Episodes of one or several sources (paths or records), uids made unique."""
    items = [source] if isinstance(source, (str, os.PathLike, EpisodeRecord)) else list(source)
    seen: dict[str, int] = {}
    for item in items:
        for rec in [item] if isinstance(item, EpisodeRecord) else load_episodes(item):
            n = seen.get(rec.uid, 0)
            seen[rec.uid] = n + 1
            if n:  # the same task/group/sample from another run or file
                rec.uid = f"{rec.uid}#{n}"
            yield rec


# --------------------------------------------------------------------------- the report
@dataclass
class CurationReport:
    """What an export kept, and why it left out the rest (per reason and per task)."""

    format: str
    out: str | None = None
    reward: str | None = None
    """The reward mode (``rl`` only)."""
    total: int = 0
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    """Reason -> episodes (see :data:`DROP_REASONS`)."""
    per_task: dict[str, dict[str, int]] = field(default_factory=dict)
    """Task -> ``{"total": n, "kept": n, <reason>: n, ...}``."""
    notes: dict[str, str] = field(default_factory=dict)
    """Reason -> the first dropped episode's detail (``file:line: ...``)."""

    def _count(self, rec: EpisodeRecord, key: str) -> None:
        task = self.per_task.setdefault(rec.task, {"total": 0, "kept": 0})
        task["total"] += 1
        task[key] = task.get(key, 0) + 1
        self.total += 1

    def keep(self, rec: EpisodeRecord) -> None:
        self._count(rec, "kept")
        self.kept += 1

    def drop(self, rec: EpisodeRecord, reason: str, detail: str | None = None) -> None:
        self._count(rec, reason)
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        if reason not in self.notes:
            self.notes[reason] = f"{rec.where}: {detail or DROP_REASONS[reason]}"

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "out": self.out, "reward": self.reward, "total": self.total, "kept": self.kept,
                "dropped": dict(self.dropped), "per_task": {t: dict(c) for t, c in self.per_task.items()},
                "notes": dict(self.notes)}

    def summary(self) -> str:
        """A few lines for people (escape them with ``terminal.printable`` before printing)."""
        reward = f" (reward {self.reward})" if self.reward else ""
        lines = [f"export {self.format}{reward}: kept {self.kept} of {self.total} episode(s)"
                 + (f" -> {self.out}" if self.out else "")]
        if self.dropped:
            lines.append("dropped: " + ", ".join(f"{r} {n}" for r, n in self.dropped.items()))
        if self.per_task:
            lines.append("per task:")
        for task, c in self.per_task.items():
            why = ", ".join(f"{r} {n}" for r, n in c.items() if r not in ("total", "kept"))
            lines.append(f"  {task}: kept {c['kept']} of {c['total']}" + (f" ({why})" if why else ""))
        if self.notes:
            lines.append("first of each reason:")
        lines += [f"  {reason}: {note}" for reason, note in self.notes.items()]
        return "\n".join(lines)


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
                    "name": fn.get("name"), "arguments": _arguments_text(fn.get("arguments"))}}
                    for c, fn in _calls(calls)]
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


def _calls(calls: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(call, call["function"])`` pairs of a message's tool calls (a missing part as {})."""
    return [(c, c.get("function") or {}) if isinstance(c, dict) else ({}, {}) for c in calls or []]


def _arguments_text(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args if args is not None else {})


def _arguments_object(args: Any) -> dict[str, Any]:
    """Decoded arguments; what is not a JSON object is kept as the sandbox was shown it."""
    if isinstance(args, dict):
        return args
    try:
        value = json.loads(args) if isinstance(args, str) and args else {}
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {INVALID_ARGUMENTS_KEY: args}


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
                for c, fn in _calls(calls):
                    names[c.get("id")] = fn.get("name")
                    out["tool_calls"].append({"id": c.get("id"), "type": "function",
                                              "function": {"name": fn.get("name"),
                                                           "arguments": _arguments_object(fn.get("arguments"))}})
        elif role == "tool":
            out = {"role": "tool", "tool_call_id": m.get("tool_call_id"), "content": m.get("content")}
            if names.get(m.get("tool_call_id")):
                out["name"] = names[m["tool_call_id"]]
        else:
            out = {"role": role, "content": m.get("content")}
        messages.append(out)
    return {"messages": messages, "tools": list(traj.tools)}


# --------------------------------------------------------------------------- curation
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
        reason = _sft_reason(rec, curate, max_turns, min_score)
        if reason:
            report.drop(rec, reason)
            continue
        line = openai_sft_line(rec.trajectory)
        problems = validate_openai_sft_line(line)
        if problems:
            report.drop(rec, "invalid_conversation", "; ".join(problems[:3]))
            continue
        if curate:
            key = hashlib.sha256(_canonical(rec.trajectory).encode()).hexdigest()
            if key in seen:
                report.drop(rec, "duplicate")
                continue
            seen.add(key)
        examples.append(line if fmt == "openai-sft" else trl_sft_row(rec.trajectory))
        report.keep(rec)
    return examples, report


def _sft_reason(rec: EpisodeRecord, curate: bool, max_turns: int | None, min_score: float | None) -> str | None:
    g, t = rec.grade, rec.trajectory
    if g.status == "infra_error" or t.status == "infra_error":
        return "infra_error"
    if g.status == "policy_error" or t.status == "policy_error":
        return "policy_error"
    if curate:
        if g.status != "graded":
            return g.status  # agent_broke_sandbox, evidence_invalid
        if g.safe is not True:
            return "unsafe" if g.safe is False else "safety_unknown"
        if not g.passed:
            return "failed"
        if t.status != "completed":
            return "not_completed"
        if any(INVALID_ARGUMENTS_KEY in _arguments_object(fn.get("arguments"))
               for m in t.messages for _, fn in _calls(m.get("tool_calls"))):
            return "malformed_tool_call"
    if max_turns is not None and t.turns > max_turns:
        return "too_many_turns"
    if min_score is not None and g.score < min_score:
        return "low_score"
    return None


def _canonical(traj: Trajectory) -> str:
    ids: dict[Any, str] = {}

    def number(cid: Any) -> str:
        return ids.setdefault(cid, f"call_{len(ids)}")

    messages = []
    for m in traj.messages:
        m = {**m, "content": m.get("content") or ""}
        if m.get("tool_calls"):
            m["tool_calls"] = [{"id": number(c.get("id")), "name": fn.get("name"),
                                "arguments": _arguments_object(fn.get("arguments"))}
                               for c, fn in _calls(m["tool_calls"])]
        if "tool_call_id" in m:
            m["tool_call_id"] = number(m["tool_call_id"])
        messages.append(m)
    return canonical_json({"messages": messages, "tools": traj.tools})


# --------------------------------------------------------------------------- RL
def rl_examples(records: Iterable[EpisodeRecord], reward: str = "score") -> tuple[list[dict[str, Any]], CurationReport]:
    """One record per episode with token ids: ``prompt_ids``, ``response_ids``,
    ``response_mask``, ``response_logprobs`` (see ``TokenTrajectory.rl_view``), ``reward`` by
    ``reward`` mode (:func:`cowork.rollout.rewards.process_rewards`, groups by ``group_id``), and for
    ``turn`` also ``turn_rewards`` and ``response_rewards`` (each turn's credit on its last
    generated token, 0 elsewhere).

    No pass filter: every episode with a reward and tokens is kept (agent_broke_sandbox and
    evidence_invalid at the reward :func:`cowork.rollout.runner.reward_for` gives them); infra
    errors and episodes without usable tokens are counted and left out.

    Raises:
        ValueError: ``reward`` is not one of :data:`cowork.rollout.rewards.MODES`.
    """
    if reward not in MODES:
        raise ValueError(f"unknown reward mode {reward!r}; choose one of {', '.join(MODES)}")
    report = CurationReport(format="rl", reward=reward)
    groups: dict[str, list[EpisodeRecord]] = {}
    for rec in records:
        reason, detail = _rl_reason(rec, reward)
        if reason:
            report.drop(rec, reason, detail)
        else:
            groups.setdefault(rec.group_id, []).append(rec)
    ordered = list(groups.values())
    rewards = process_rewards([[_with_padded_progress(r) if reward == "turn" else r for r in g] for g in ordered],
                              reward)  # type: ignore[arg-type]  # checked against MODES above
    out: list[dict[str, Any]] = []
    for group, values in zip(ordered, rewards, strict=True):
        for rec, value in zip(group, values, strict=True):
            out.append(_rl_record(rec, value, turn=reward == "turn"))
            report.keep(rec)
    return out, report


def _rl_record(rec: EpisodeRecord, value: Any, *, turn: bool) -> dict[str, Any]:
    tokens, g = rec.trajectory.tokens, rec.grade
    assert tokens is not None  # episodes without tokens were left out
    item: dict[str, Any] = {"uid": rec.uid, "group_id": rec.group_id, "task": rec.task, "sample": rec.sample,
                            "reward": float(sum(value)) if turn else float(value), **tokens.rl_view(),
                            "score": float(g.score), "passed": bool(g.passed), "status": rec.trajectory.status,
                            "grade_status": g.status}
    if turn:
        item["turn_rewards"] = [float(c) for c in value]
        item["response_rewards"] = _per_token(tokens, value)
    return item


def _rl_reason(rec: EpisodeRecord, reward: str) -> tuple[str | None, str | None]:
    t, g = rec.trajectory, rec.grade
    if g.status == "infra_error" or t.status == "infra_error":
        return "infra_error", None
    if g.status == "policy_error" or t.status == "policy_error":
        return "policy_error", None
    if t.tokens is None:
        return "no_tokens", f"no token ids: agent {t.agent} keeps no tokens"
    try:
        t.tokens.check()
        view = t.tokens.rl_view()
        lengths = {len(view[k]) for k in ("response_ids", "response_mask", "response_logprobs")}
        if len(lengths) != 1 or view["prompt_ids"] + view["response_ids"] != t.tokens.ids:
            raise ValueError(f"RL view of {len(t.tokens.ids)} tokens with response lengths {sorted(lengths)}")
    except ValueError as exc:
        return "bad_tokens", str(exc)
    if not t.tokens.turns:
        return "no_generated_tokens", None
    if any(s.gen_end == s.gen_start for s in t.tokens.turns):
        return "bad_tokens", "a turn generated no token (nothing to put its credit on)"
    if reward == "turn":
        if not t.turn_progress:
            return "no_turn_progress", None
        if len(t.turn_progress) - 1 > len(t.tokens.turns):
            return "turn_mismatch", (f"{len(t.turn_progress) - 1} measured turns but {len(t.tokens.turns)} "
                                     "generated turns")
    return None, None


def _with_padded_progress(rec: EpisodeRecord) -> Any:
    """The episode with one progress value per generated turn: a turn during which the
    episode ended (timeout, error) was not measured and counts as no change, so the outcome
    term lands on the last turn that generated."""
    t = rec.trajectory
    p = list(t.turn_progress or [])
    p += [p[-1]] * (len(t.tokens.turns) + 1 - len(p)) if t.tokens else []
    return SimpleNamespace(grade=rec.grade, trajectory=SimpleNamespace(turn_progress=p))


def _per_token(tokens: TokenTrajectory, credits: Sequence[float]) -> list[float]:
    start = tokens.prompt_len
    out = [0.0] * (len(tokens.ids) - start)
    for span, credit in zip(tokens.turns, credits, strict=True):
        out[span.gen_end - 1 - start] += float(credit)
    return out


# --------------------------------------------------------------------------- writing
def export(source: Source, fmt: str, out: str | os.PathLike, *, reward: str = "score", curate: bool = True,
           max_turns: int | None = None, min_score: float | None = None,
           as_format: str | None = None) -> CurationReport:
    """Write the episodes of ``source`` as ``fmt`` to ``out`` and say what was kept.

    Args:
        source: Rollout output folders, results files or :class:`EpisodeRecord` objects (one
            or several; their episodes are pooled, so duplicates across runs are found).
        fmt: ``openai-sft`` (JSONL), ``trl-sft`` or ``rl`` (JSONL or Parquet).
        out: The file to write (replaced atomically); ``.jsonl`` or ``.parquet`` unless
            ``as_format`` says which.
        reward: ``rl`` only: one of :data:`cowork.rollout.rewards.MODES`.
        curate: SFT only: keep only graded, safe, passing, complete, unique episodes.
        max_turns: SFT only: leave out episodes of more assistant turns.
        min_score: SFT only: leave out episodes scored below this.
        as_format: ``jsonl`` or ``parquet`` whatever ``out`` ends with.

    Raises:
        ValueError: an unknown format or reward mode, or SFT filters given for ``rl``.
        CoworkError: a source that does not load (``file:line``), an output kind the
            format cannot take, or Parquet without pyarrow (or, for trl-sft, datasets >= 4.7).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "rl" and (max_turns is not None or min_score is not None):
        raise ValueError("--max-turns and --min-score curate SFT data; an rl export keeps every graded episode "
                         "(filtering by score would bias the policy gradient)")
    out = Path(out)
    kind = _output_kind(out, as_format, fmt)
    records = _records(source)
    if fmt == "rl":
        rows, report = rl_examples(records, reward)
    else:
        rows, report = sft_examples(records, fmt, curate=curate, max_turns=max_turns, min_score=min_score)
    report.out = str(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        if kind == "jsonl":
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.writelines(json.dumps(row) + "\n" for row in rows)
        elif fmt == "rl":
            _rl_parquet(rows, tmp, turn=reward == "turn")
        else:
            _trl_parquet(rows, tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    log.info("export %s: kept %d of %d episodes -> %s", fmt, report.kept, report.total, out)
    return report


def _output_kind(out: Path, as_format: str | None, fmt: str) -> str:
    kind = as_format or {".jsonl": "jsonl", ".parquet": "parquet"}.get(out.suffix.lower())
    if kind not in ("jsonl", "parquet"):
        raise CoworkError(f"{out}: say which file to write: end the name in .jsonl or .parquet, or pass --as "
                          "jsonl|parquet")
    if fmt == "openai-sft" and kind != "jsonl":
        raise CoworkError(f"{out}: OpenAI fine-tuning takes JSONL only; write a .jsonl file")
    return kind


def _rl_parquet(rows: list[dict[str, Any]], path: Path, *, turn: bool) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise CoworkError("Parquet needs pyarrow (pip install pyarrow); or write .jsonl") from exc
    ids, floats = pa.list_(pa.int32()), pa.list_(pa.float64())
    cols = [("uid", pa.string()), ("group_id", pa.string()), ("task", pa.string()), ("sample", pa.int64()),
            ("reward", pa.float64()), ("prompt_ids", ids), ("response_ids", ids),
            ("response_mask", pa.list_(pa.int8())), ("response_logprobs", floats), ("score", pa.float64()),
            ("passed", pa.bool_()), ("status", pa.string()), ("grade_status", pa.string())]
    if turn:
        cols += [("turn_rewards", floats), ("response_rewards", floats)]
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(cols)), path)


def _trl_parquet(rows: list[dict[str, Any]], path: Path) -> None:
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
    datasets.Dataset.from_list(rows, features=features).to_parquet(str(path))


# --------------------------------------------------------------------------- CLI
def run_export(args: Any) -> int:
    """Run ``cowork export``: write the file, print what was kept and why the rest was not.

    ``args`` carries the command's options by name (``results``, ``format``, ``out``,
    ``as_format``, ``reward``, ``max_turns``, ``min_score``, ``no_curate``, ``json``); the
    command itself is defined in ``cowork.cli``.

    Returns:
        0 when at least one episode was written, 1 when none was kept.

    Raises:
        CoworkError: see :func:`export` (bad arguments are reported as CoworkError too).
    """
    if args.max_turns is not None and args.max_turns < 1:
        raise CoworkError(f"--max-turns must be at least 1, got {args.max_turns}")
    try:
        report = export(args.results, args.format, args.out, reward=args.reward, curate=not args.no_curate,
                        max_turns=args.max_turns, min_score=args.min_score, as_format=args.as_format)
    except ValueError as exc:  # an unknown reward or format from the API's point of view
        raise CoworkError(str(exc)) from exc
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(printable(report.summary(), newlines=True))
    return 0 if report.kept else 1


__all__ = ["DROP_REASONS", "FORMATS", "CurationReport", "EpisodeRecord", "export",
           "load_episodes", "openai_sft_line", "rl_examples", "run_export", "sft_examples", "trl_sft_row",
           "validate_openai_sft_line"]
