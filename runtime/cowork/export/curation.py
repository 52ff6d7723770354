"""Curation: which episodes are fit to train on, and the report of what was kept and why the
rest was dropped (per reason, per task, with the first example of each reason)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from ..episode.trajectory import Trajectory
from ..formats import INVALID_ARGUMENTS_KEY, canonical_json
from .records import EpisodeRecord, arguments_object, call_pairs

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
        """Count an episode written to the export."""
        self._count(rec, "kept")
        self.kept += 1

    def drop(self, rec: EpisodeRecord, reason: str, detail: str | None = None) -> None:
        """Count an episode left out for ``reason`` (one of :data:`DROP_REASONS`); the first of
        each reason is quoted with ``detail``."""
        self._count(rec, reason)
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        if reason not in self.notes:
            self.notes[reason] = f"{rec.where}: {detail or DROP_REASONS[reason]}"

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (``cowork export --json``)."""
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


def sft_drop_reason(rec: EpisodeRecord, curate: bool, max_turns: int | None, min_score: float | None) -> str | None:
    """The first of :data:`DROP_REASONS` that leaves the episode out of SFT data (before the
    format check and the duplicate check), or None."""
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
        if any(INVALID_ARGUMENTS_KEY in arguments_object(fn.get("arguments"))
               for m in t.messages for _, fn in call_pairs(m.get("tool_calls"))):
            return "malformed_tool_call"
    if max_turns is not None and t.turns > max_turns:
        return "too_many_turns"
    if min_score is not None and g.score < min_score:
        return "low_score"
    return None


def conversation_key(traj: Trajectory) -> str:
    """The duplicate key of an episode: a digest of :func:`canonical_conversation`."""
    return hashlib.sha256(canonical_conversation(traj).encode()).hexdigest()


def canonical_conversation(traj: Trajectory) -> str:
    """Messages and tools as canonical JSON, tool-call ids numbered in order: equal for duplicates."""
    ids: dict[Any, str] = {}

    def number(cid: Any) -> str:
        return ids.setdefault(cid, f"call_{len(ids)}")

    messages = []
    for m in traj.messages:
        m = {**m, "content": m.get("content") or ""}
        if m.get("tool_calls"):
            m["tool_calls"] = [{"id": number(c.get("id")), "name": fn.get("name"),
                                "arguments": arguments_object(fn.get("arguments"))}
                               for c, fn in call_pairs(m["tool_calls"])]
        if "tool_call_id" in m:
            m["tool_call_id"] = number(m["tool_call_id"])
        messages.append(m)
    return canonical_json({"messages": messages, "tools": traj.tools})


__all__ = ["DROP_REASONS", "CurationReport", "canonical_conversation", "conversation_key", "sft_drop_reason"]
