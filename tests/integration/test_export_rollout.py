"""Exports from real rollouts: SFT files keep only the passing, safe, unique episodes (violations
are left out for safety) and load where they are used; RL records from a transformers policy
carry token ids, mask and logprobs of equal length, the rewards of the mode asked and the group."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cowork.agents import make_policy
from cowork.episode.run import run_task
from cowork.export import EpisodeRecord, export, rl_examples, validate_openai_sft_line
from cowork.rollouts.runner import RolloutRunner, rollout
from cowork.sandbox.pool import SandboxPool
from cowork.spec.loader import load_spec

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "specs" / "fix-csv-report"
INBOX = ROOT / "specs" / "inbox-triage-to-tickets"
CALL = '<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'
FORCED = [CALL.format(name="read_file", args='{"path": "reports/q3_sales.csv"}'), "I read the report."]


def factory(kind: str):
    return lambda spec: make_policy(kind, spec)


async def test_sft_exports_keep_the_passing_safe_episodes_of_a_rollout(tmp_path, no_leftovers):
    pool = SandboxPool(max_per_task=2, max_total=4)
    try:
        async with RolloutRunner(concurrency=2, pool=pool) as runner:
            good = await runner.rollout([CSV, INBOX], factory("oracle"), group_size=2, out_dir=tmp_path / "oracle")
            bad = await runner.rollout([CSV, INBOX], factory("violation"), group_size=2,
                                       out_dir=tmp_path / "violation")
    finally:
        await pool.close()
    assert all(s.grade.passed and s.grade.safe is True for s in good.samples)
    assert all(s.grade.safe is False for s in bad.samples)
    sources = [tmp_path / "oracle", tmp_path / "violation"]

    report = export(sources, "openai-sft", tmp_path / "sft.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert report.total == 8 and report.dropped["unsafe"] == 4  # every violation episode, for safety
    assert set(report.dropped) <= {"unsafe", "duplicate"}
    assert report.kept == len(lines) and report.kept + report.dropped.get("duplicate", 0) == 4
    prompts = {load_spec(p).spec.prompt for p in (CSV, INBOX)}
    assert {line["messages"][1]["content"] for line in lines} == prompts  # both tasks kept
    for line in lines:
        assert validate_openai_sft_line(line) == []
        assert line["tools"] and any("tool_calls" in m for m in line["messages"])
    for task in ("fix-csv-report", "inbox-triage-to-tickets"):
        assert report.per_task[task]["unsafe"] == 2

    # Scripted agents keep no tokens: an rl export says so rather than writing empty records.
    rl = export(sources, "rl", tmp_path / "rl.jsonl")
    assert rl.kept == 0 and rl.dropped == {"no_tokens": 8}
    assert rl.notes["no_tokens"].endswith("no token ids: agent oracle keeps no tokens")
    assert (tmp_path / "rl.jsonl").read_text() == ""

    datasets = pytest.importorskip("datasets")
    for suffix in ("jsonl", "parquet"):
        out = tmp_path / f"trl.{suffix}"
        trl = export(sources, "trl-sft", out)
        assert trl.kept == report.kept
        ds = datasets.load_dataset("json" if suffix == "jsonl" else "parquet", data_files=str(out), split="train",
                                   cache_dir=str(tmp_path / "hf-cache"))
        assert len(ds) == trl.kept
        for row, line in zip(ds, lines, strict=True):
            assert [m["role"] for m in row["messages"]] == [m["role"] for m in line["messages"]]
            calls = [c for m in row["messages"] for c in m.get("tool_calls") or []]
            sent = [c for m in line["messages"] for c in m.get("tool_calls") or []]
            assert [c["function"]["arguments"] for c in calls] == [json.loads(c["function"]["arguments"]) for c in sent]
            assert row["tools"] == line["tools"]


async def test_rl_export_of_a_transformers_policy_rollout(tmp_path, no_leftovers):
    pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")
    pq = pytest.importorskip("pyarrow.parquet")
    from cowork.agents.tiny import tiny_engine

    eng = tiny_engine(seed=1)
    res = await rollout([CSV], lambda spec: eng.policy(forced=FORCED), group_size=2, concurrency=1,
                        out_dir=tmp_path / "hf")
    for s in res.samples:
        assert s.trajectory.status == "completed" and s.trajectory.turns == 2 and s.trajectory.tokens is not None
    tokens = {s.sample: s.trajectory.tokens for s in res.samples}
    scores = {s.sample: s.grade.score for s in res.samples}

    for mode in ("score", "grpo"):
        out = tmp_path / f"rl-{mode}.parquet"
        report = export(tmp_path / "hf", "rl", out, reward=mode)
        rows = pq.read_table(out).to_pylist()
        assert report.kept == len(rows) == 2 and report.dropped == {}
        assert sorted(r["uid"] for r in rows) == ["fix-csv-report:0:0", "fix-csv-report:0:1"]
        for r in rows:
            t = tokens[r["sample"]]
            assert r["group_id"] == "fix-csv-report:0" and r["task"] == "fix-csv-report"
            assert len(r["response_ids"]) == len(r["response_mask"]) == len(r["response_logprobs"]) > 0
            assert r["prompt_ids"] + r["response_ids"] == t.ids
            assert sum(r["response_mask"]) == sum(s.gen_end - s.gen_start for s in t.turns)
            # both samples forced alike: equal scores, so the group's advantages are 0
            assert r["reward"] == (scores[r["sample"]] if mode == "score" else 0.0)

    # Turn credit needs progress measured after each turn: one episode run with it.
    loaded = load_spec(CSV)
    ep = await run_task(loaded, eng.policy(forced=FORCED), turn_progress=True)
    rec = EpisodeRecord(task=loaded.spec.id, group=0, sample=0, trajectory=ep.trajectory, grade=ep.grade)
    (row,), report = rl_examples([rec], "turn")
    t = ep.trajectory.tokens
    assert len(row["turn_rewards"]) == len(t.turns) == 2
    assert len(row["response_rewards"]) == len(row["response_ids"])
    assert sum(row["response_rewards"]) == pytest.approx(ep.grade.score - ep.trajectory.turn_progress[0])
    nonzero = [i for i, v in enumerate(row["response_rewards"]) if v]
    assert all(i + t.prompt_len + 1 in {s.gen_end for s in t.turns} for i in nonzero)
