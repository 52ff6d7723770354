"""Training data from real sandboxes and the tiny transformers model (issue 26): an episode that
outgrows the model's context is truncated, graded, rewarded and exported with its stop reason;
the samples of a seeded group differ and each one reproduces; every turn says which weights
made it."""

from __future__ import annotations

import json
import textwrap

import pytest

from cowork.agents.tokens import SamplingSettings, sample_seed
from cowork.episode.run import run_task
from cowork.export.write import export
from cowork.rollouts.runner import RolloutRunner
from cowork.spec.loader import load_spec

torch = pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")
pytestmark = pytest.mark.docker

CALL = '<tool_call>\n{"name": "read_file", "arguments": {"path": "notes.txt"}}\n</tool_call>'


@pytest.fixture(scope="module")
def engine():
    from cowork.agents.tiny import tiny_engine

    return tiny_engine(seed=2)


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    d = tmp_path_factory.mktemp("training") / "long-notes"
    (d / "workspace").mkdir(parents=True)
    (d / "workspace" / "notes.txt").write_text("quarterly numbers: 42\n" * 60)
    (d / "task.yaml").write_text(textwrap.dedent("""\
        id: long-notes
        title: Read a long note
        prompt: Read notes.txt and tell me the number.
        tools: [read_file, shell]
        limits: {max_turns: 2}
        checks: [{id: read, type: tool_called, tool: read_file}]
        oracle: [{tool: read_file, args: {path: notes.txt}}]
        violation: [{tool: shell, args: {command: rm notes.txt}}]
        """))
    return load_spec(d)


async def test_an_episode_past_the_models_context_is_truncated_graded_and_exported(engine, task, tmp_path,
                                                                                   no_leftovers):
    policy = engine.policy(forced=[CALL, "The number is 42."])
    act, saved = policy.act, engine.max_length

    async def act_within_a_short_context(messages, tools):
        if engine.max_length == saved:  # room for the first prompt and the call, not for the file it returns
            engine.max_length = len(engine.chat.prompt(messages, tools)) + len(engine.chat.encode(CALL)) + 8
        return await act(messages, tools)

    policy.act = act_within_a_short_context  # type: ignore[method-assign]
    try:
        res = await run_task(task, policy, evidence_dir=tmp_path / "bundle")
    finally:
        engine.max_length = saved
    traj, g = res.trajectory, res.grade
    assert (traj.status, traj.stop_reason, traj.turns) == ("truncated", "context_length", 1), traj.error
    assert "no room under the model's length" in traj.error
    # Graded on its evidence (the call was made) and rewarded, not a policy_error without a reward.
    assert g.status == "graded" and g.score == 1.0 and [s.tool for s in traj.steps] == ["read_file"]
    t = traj.tokens
    t.check()
    assert len(t.turns) == 1 and t.turns[0].gen_end == len(t.ids)  # ends with what the model generated

    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"task": task.spec.id, "sample": 0, "evidence": str(tmp_path / "bundle"),
                                   "grade": g.model_dump()}) + "\n")
    (tmp_path / "bundle" / "trajectory.json").write_text(traj.model_dump_json())
    report = export(results, "rl", tmp_path / "rl.jsonl")
    rows = [json.loads(x) for x in (tmp_path / "rl.jsonl").read_text().splitlines()]
    assert report.kept == 1 and report.dropped == {}
    assert (rows[0]["status"], rows[0]["stop_reason"], rows[0]["reward"]) == ("truncated", "context_length", 1.0)


async def test_seeded_samples_differ_reproduce_and_carry_their_weights_version(engine, task, tmp_path,
                                                                               no_leftovers):
    def factory(spec):
        return engine.policy(SamplingSettings(seed=7, temperature=1.0, max_tokens=12))

    async with RolloutRunner(concurrency=1) as runner:
        first = await runner.rollout(task, factory, group_size=2)
        version = engine.mark_updated()  # a weight update between two steps (the weights stay equal here)
        again = await runner.rollout(task, factory, group_size=2, out_dir=tmp_path / "run")

    def generated(sample):
        t = sample.trajectory.tokens
        return [t.ids[s.gen_start:s.gen_end] for s in t.turns]

    a, b = first.groups[0].samples
    assert generated(a) != generated(b)  # main gave both the same seed, so the same tokens
    for s, (old, new) in enumerate(zip(first.groups[0].samples, again.groups[0].samples)):
        want = sample_seed(7, "long-notes", s)
        assert old.trajectory.tokens.sampling.seed == new.trajectory.tokens.sampling.seed == want
        assert generated(old) == generated(new)  # the same (seed, task, sample) reproduces
        assert {span.policy_version for span in old.trajectory.tokens.turns} == {version - 1}
        assert {span.policy_version for span in new.trajectory.tokens.turns} == {version}
        assert {span.model for span in new.trajectory.tokens.turns} == {engine.name}

    report = export(tmp_path / "run", "rl", tmp_path / "rl.jsonl")
    rows = [json.loads(x) for x in (tmp_path / "rl.jsonl").read_text().splitlines()]
    assert report.kept == 2
    for r in rows:
        assert r["policy_version"] == version and set(r["turn_policy_versions"]) == {version}
        assert r["sampling_seed"] == sample_seed(7, "long-notes", r["sample"])
        assert r["logprobs_mode"] == "processed_logprobs" and r["model"] == engine.name
