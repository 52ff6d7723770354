"""RL data: one record per episode with token ids, the response mask, logprobs and the reward of
the chosen mode (turn-level credit on each turn's last generated token)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..agents.tokens import TokenTrajectory
from ..errors import CoworkError
from ..rollouts.rewards import MODES, process_rewards
from .curation import CurationReport
from .records import EpisodeRecord


def rl_examples(records: Iterable[EpisodeRecord], reward: str = "score") -> tuple[list[dict[str, Any]], CurationReport]:
    """One record per episode with token ids: ``prompt_ids``, ``response_ids``,
    ``response_mask``, ``response_logprobs`` (see ``TokenTrajectory.rl_view``), ``reward`` by
    ``reward`` mode (:func:`cowork.rollouts.rewards.process_rewards`, groups by ``group_id``), and for
    ``turn`` also ``turn_rewards`` and ``response_rewards`` (each turn's credit on its last
    generated token, 0 elsewhere).

    Each record also says how the episode ended (``status``, ``stop_reason``) and what
    generated it: ``model``, ``policy_version`` (the oldest weights version of any of its
    turns), ``logprobs_mode``, ``response_raw_logprobs`` (where recorded), the sampling
    settings (``temperature``, ``top_p``, ``top_k``, ``sampling_seed``) and per generated turn
    its span in the response (``turn_spans``), ``turn_policy_versions``, ``turn_models``,
    ``turn_finish_reasons`` and ``turn_stop_reasons`` (docs/exports.md), and which agent of a
    harness episode it is (``agent``: ``main``; each subagent whose tokens were kept gets a
    record of its own: see :func:`_subagent_records`).

    No pass filter: every episode with a reward and tokens is kept (agent_broke_sandbox and
    evidence_invalid at the reward :func:`cowork.rollouts.rewards.reward_for` gives them); infra
    errors and episodes without usable tokens are counted and left out.

    Raises:
        ValueError: ``reward`` is not one of :data:`cowork.rollouts.rewards.MODES`.
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
            out += _subagent_records(rec, value, turn=reward == "turn")
            report.keep(rec)
    return out, report


def _subagent_records(rec: EpisodeRecord, value: Any, *, turn: bool) -> list[dict[str, Any]]:
    """A harness episode's subagents (``Trajectory.agents``), one record each whose backend kept
    its tokens: its own prompt and turns, the episode's reward, and who it was (``agent``,
    ``parent``, ``assignment``, ``agent_status``), so a trainer can train the main agent, the
    subagents, or one model on both. A subagent's tokens that do not check are left out (the
    episode's own record stands).

    With ``turn`` (``value`` is the main agent's per-turn credits), a subagent gets the credit
    of each main turn during which it acted, on the last of its own turns that began in that
    main turn (``AgentRecord.main_turns``), 0 on its others; a subagent whose turns cannot be
    placed (no ``main_turns`` for every generated turn) is left out."""
    out = []
    for aid, agent in (rec.trajectory.agents or {}).items():
        raw = agent.get("token_trajectory") if aid != "main" else None
        if not raw:
            continue
        try:
            tokens = TokenTrajectory.model_validate(raw)
            tokens.check()
            if not tokens.turns:
                continue
        except ValueError:
            continue
        credits: list[float] | None = None
        if turn:
            credits = _subagent_credits(agent.get("main_turns") or [], len(tokens.turns), value)
            if credits is None:
                continue
        g = rec.grade
        item = {"uid": f"{rec.uid}/{aid}", "group_id": rec.group_id, "task": rec.task, "sample": rec.sample,
                "reward": float(sum(credits)) if credits is not None else float(value), **tokens.rl_view(),
                "score": float(g.score), "passed": bool(g.passed), "status": rec.trajectory.status,
                "grade_status": g.status, **_token_provenance(tokens, stop_reason(rec)), "agent": aid,
                "parent": agent.get("parent"), "assignment": agent.get("assignment"), "agent_status": agent.get("status")}
        if credits is not None:
            item["turn_rewards"] = credits
            item["response_rewards"] = _per_token(tokens, credits)
        out.append(item)
    return out


def _subagent_credits(main_turns: list[Any], generated: int, main_credits: Sequence[float]) -> list[float] | None:
    """Per generated turn of a subagent, the credit of the main turn it began in, on the last of
    its turns in that main turn (None when the turns cannot be placed)."""
    if generated == 0 or len(main_turns) < generated or not main_credits:
        return None
    placed = [int(m) for m in main_turns[:generated]]
    if any(m < 1 for m in placed):
        return None
    out = [0.0] * generated
    for k, m in enumerate(placed):
        if k == generated - 1 or placed[k + 1] != m:  # its last turn in main turn m
            out[k] = float(main_credits[min(m, len(main_credits)) - 1])
    return out


def _rl_record(rec: EpisodeRecord, value: Any, *, turn: bool) -> dict[str, Any]:
    tokens, g = rec.trajectory.tokens, rec.grade
    assert tokens is not None  # episodes without tokens were left out
    item: dict[str, Any] = {"uid": rec.uid, "group_id": rec.group_id, "task": rec.task, "sample": rec.sample,
                            "reward": float(sum(value)) if turn else float(value), **tokens.rl_view(),
                            "score": float(g.score), "passed": bool(g.passed), "status": rec.trajectory.status,
                            "grade_status": g.status, **_provenance(rec), "agent": "main", "parent": None,
                            "assignment": None, "agent_status": "main"}
    if turn:
        item["turn_rewards"] = [float(c) for c in value]
        item["response_rewards"] = _per_token(tokens, value)
    return item


def stop_reason(rec: EpisodeRecord) -> str:
    """Why the episode ended, one word: ``stop`` (the agent finished), ``length``,
    ``context_length`` or ``max_turns`` (cut short by a limit: graded and rewarded all the
    same), else the trajectory's status (``timeout``, ``agent_broke_sandbox``)."""
    t = rec.trajectory
    if t.stop_reason:
        return t.stop_reason
    if t.status == "truncated":  # trajectories written before stop_reason was recorded
        return "length"
    return "stop" if t.status == "completed" else t.status


def _provenance(rec: EpisodeRecord) -> dict[str, Any]:
    """How the episode ended and what generated its tokens, per episode and per generated turn."""
    tokens = rec.trajectory.tokens
    assert tokens is not None  # episodes without tokens were left out
    return _token_provenance(tokens, stop_reason(rec))


def _token_provenance(tokens: TokenTrajectory, stopped: str) -> dict[str, Any]:
    p, s = tokens.prompt_len, tokens.sampling
    versions = [t.policy_version for t in tokens.turns]
    known = [v for v in versions if v is not None]
    raw = tokens.raw_logprobs
    return {"stop_reason": stopped, "model": tokens.model,
            "policy_version": min(known) if known else tokens.policy_version,
            "logprobs_mode": tokens.logprobs_mode,
            "response_raw_logprobs": None if raw is None else [0.0 if lp is None else lp for lp in raw[p:]],
            "temperature": None if s is None else s.temperature, "top_p": None if s is None else s.top_p,
            "top_k": None if s is None else s.top_k, "sampling_seed": None if s is None else s.seed,
            "turn_spans": [[t.gen_start - p, t.gen_end - p] for t in tokens.turns],
            "turn_policy_versions": versions,
            "turn_models": [t.model or tokens.model for t in tokens.turns],
            "turn_finish_reasons": [t.finish_reason for t in tokens.turns],
            "turn_stop_reasons": [None if t.stop_reason is None else str(t.stop_reason) for t in tokens.turns]}


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


def _with_padded_progress(rec: EpisodeRecord) -> EpisodeRecord:
    """The episode with one progress value per generated turn: a turn during which the
    episode ended (timeout, error) was not measured and counts as no change, so the outcome
    term lands on the last turn that generated."""
    t = rec.trajectory
    p = list(t.turn_progress or [])
    p += [p[-1]] * (len(t.tokens.turns) + 1 - len(p)) if t.tokens else []
    return dataclasses.replace(rec, trajectory=t.model_copy(update={"turn_progress": p}))


def _per_token(tokens: TokenTrajectory, credits: Sequence[float]) -> list[float]:
    start = tokens.prompt_len
    out = [0.0] * (len(tokens.ids) - start)
    for span, credit in zip(tokens.turns, credits, strict=True):
        out[span.gen_end - 1 - start] += float(credit)
    return out


def write_rl_parquet(rows: list[dict[str, Any]], path: Path, *, turn: bool) -> None:
    """Write RL records as Parquet (``turn``: with the per-turn reward columns).

    Raises:
        CoworkError: pyarrow is not installed.
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise CoworkError("Parquet needs pyarrow (pip install pyarrow); or write .jsonl") from exc
    ids, floats = pa.list_(pa.int32()), pa.list_(pa.float64())
    cols = [("uid", pa.string()), ("group_id", pa.string()), ("task", pa.string()), ("sample", pa.int64()),
            ("reward", pa.float64()), ("prompt_ids", ids), ("response_ids", ids),
            ("response_mask", pa.list_(pa.int8())), ("response_logprobs", floats), ("score", pa.float64()),
            ("passed", pa.bool_()), ("status", pa.string()), ("grade_status", pa.string()),
            ("stop_reason", pa.string()), ("model", pa.string()), ("policy_version", pa.int64()),
            ("logprobs_mode", pa.string()), ("response_raw_logprobs", floats), ("temperature", pa.float64()),
            ("top_p", pa.float64()), ("top_k", pa.int64()), ("sampling_seed", pa.int64()),
            ("turn_spans", pa.list_(pa.list_(pa.int64()))), ("turn_policy_versions", pa.list_(pa.int64())),
            ("turn_models", pa.list_(pa.string())), ("turn_finish_reasons", pa.list_(pa.string())),
            ("turn_stop_reasons", pa.list_(pa.string())), ("agent", pa.string()), ("parent", pa.string()),
            ("assignment", pa.string()), ("agent_status", pa.string())]
    if turn:
        cols += [("turn_rewards", floats), ("response_rewards", floats)]
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(cols)), path)


__all__ = ["rl_examples", "stop_reason", "write_rl_parquet"]
