"""The transformers backend on a tiny random model, in a real sandbox: append-only tokens,
an exact loss mask, tool outputs in the environment's spans, logprobs a forward pass agrees with."""

from __future__ import annotations

import math
import textwrap

import pytest

from cowork.episode.run import run_episode
from cowork.sandbox.sandbox import Sandbox
from cowork.spec.loader import load_spec

torch = pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")
pytestmark = pytest.mark.docker

CALL = '<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


@pytest.fixture(scope="module")
def engine():
    from cowork.agents.tiny import tiny_engine

    return tiny_engine(seed=1)


@pytest.fixture
def task(tmp_path):
    d = tmp_path / "hf-task"
    (d / "workspace").mkdir(parents=True)
    (d / "workspace" / "notes.txt").write_text("quarterly numbers: 42\n")
    (d / "task.yaml").write_text(textwrap.dedent("""\
        id: hf-task
        title: Read a note
        prompt: Read notes.txt and tell me the number.
        tools: [read_file, shell]
        checks: [{id: read, type: tool_called, tool: read_file}]
        oracle: [{tool: read_file, args: {path: notes.txt}}]
        violation: [{tool: shell, args: {command: rm notes.txt}}]
        """))
    return load_spec(d)


def _recording(engine):
    """Wrap engine.generate to keep each turn's prompt and generated ids."""
    seen: list[tuple[list[int], list[int]]] = []
    original = engine.generate

    def generate(ids, sampling, forced=None, **kw):
        out = original(ids, sampling, forced, **kw)
        seen.append((list(ids), list(out[0])))
        return out

    engine.generate = generate
    return seen, lambda: setattr(engine, "generate", original)


async def test_a_multi_turn_episode_gives_append_only_tokens_with_an_exact_mask(engine, task, no_leftovers):
    forced = [CALL.format(name="read_file", args='{"path": "notes.txt"}'),
              CALL.format(name="shell", args='{"command": "echo $((6 * 7)) && ls"}'),
              "The number is 42."]
    policy = engine.policy(forced=forced)
    seen, restore = _recording(engine)
    try:
        async with await Sandbox.start(task) as sb:
            traj = await run_episode(sb, policy)
    finally:
        restore()
    assert traj.status == "completed" and traj.turns == 3 and len(traj.steps) == 2
    assert [s.tool for s in traj.steps] == ["read_file", "shell"] and not any(s.is_error for s in traj.steps)
    t = traj.tokens
    t.check()

    # Append-only: each turn's prompt starts with exactly the previous prompt and generation.
    for (p0, g0), (p1, _) in zip(seen, seen[1:]):
        assert p1[:len(p0) + len(g0)] == p0 + g0
    assert t.ids[:len(seen[-1][0]) + len(seen[-1][1])] == seen[-1][0] + seen[-1][1]

    # The mask covers exactly the generated tokens, turn by turn.
    generated = [g for _, g in seen]
    assert sum(t.mask) == sum(len(g) for g in generated)
    for span, g in zip(t.turns, generated):
        assert t.ids[span.gen_start:span.gen_end] == g and set(t.mask[span.gen_start:span.gen_end]) == {1}
    assert t.mask[: t.prompt_len] == [0] * t.prompt_len

    # The environment's spans decode to the tool outputs the agent was shown.
    spans = t.env_spans()
    assert len(spans) == 2
    decoded = [engine.tokenizer.decode(t.ids[a:b]) for a, b in spans]
    assert traj.steps[0].output in decoded[0] and "quarterly numbers: 42" in decoded[0]
    assert traj.steps[1].output in decoded[1] and "42" in decoded[1]

    # Logprobs: finite, None exactly on environment tokens, equal to a separate forward pass.
    full = engine.token_logprobs(t.ids).tolist()
    for i, (lp, m) in enumerate(zip(t.logprobs, t.mask)):
        if m:
            assert math.isfinite(lp) and lp <= 0 and abs(lp - full[i - 1]) < 1e-4, i
        else:
            assert lp is None
    rl = t.rl_view()
    assert len(rl["response_ids"]) == len(rl["response_mask"]) == len(rl["response_logprobs"])


async def test_malformed_and_truncated_generations_end_cleanly(engine, task, no_leftovers):
    from cowork.agents.tokens import SamplingSettings

    forced = ['<tool_call>\n{"name": "read_file", "arguments": "[1]"}\n</tool_call>',
              '<tool_call>\n{"name": "read_file", "argu']
    policy = engine.policy(SamplingSettings(max_tokens=6, temperature=1.0, seed=3), forced=forced)
    async with await Sandbox.start(task) as sb:
        traj = await run_episode(sb, policy)
    # A non-object argument and a cut-off call are the model's tool errors; the sampled turn
    # after them reaches the token limit: a truncated episode, never a crash.
    assert [s.is_error for s in traj.steps[:2]] == [True, True]
    assert "__invalid_json__" in traj.steps[0].output or "Refused" in traj.steps[0].output
    assert traj.status in ("truncated", "completed", "max_turns"), traj.error
    assert traj.tokens.turns[2].finish_reason in ("length", "stop", "tool_calls")
    traj.tokens.check()


def test_teacher_forcing_scores_a_finished_conversation(engine):
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Read notes.txt"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "notes.txt"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "quarterly numbers: 42"},
                {"role": "assistant", "content": "It is 42."}]
    t = engine.score(messages, None)
    t.check()
    assert len(t.turns) == 2
    assert engine.tokenizer.decode(t.ids[t.turns[1].gen_start:t.turns[1].gen_end]) == "It is 42.<|im_end|>"
    full = engine.token_logprobs(t.ids).tolist()
    assert all(abs(lp - full[i - 1]) < 1e-4 for i, lp in enumerate(t.logprobs) if lp is not None)
    # The whole rendered conversation tokenizes to the same ids (this template is prefix-stable).
    assert engine.chat.encode(engine.chat.render(messages, None, False)).__len__() >= len(t.ids)


async def test_a_simulated_users_message_joins_the_tokens_as_environment(engine, tmp_path, no_leftovers):
    """Multi-turn task: the user's reply after the model's question is appended like a tool
    output: the sequence only grows, and the reply's tokens are masked out."""
    d = tmp_path / "hf-user"
    (d / "workspace").mkdir(parents=True)
    (d / "workspace" / "notes.txt").write_text("quarterly numbers: 42\n")
    (d / "task.yaml").write_text(textwrap.dedent("""\
        id: hf-user
        title: Ask, then read
        prompt: Tell me the number.
        tools: [read_file]
        user: {turns: [{when: {reply_matches: "\\\\?"}, say: "The one in notes.txt, please."}]}
        checks: [{id: read, type: tool_called, tool: read_file}]
        oracle: [{reply: "Which one?"}, {tool: read_file, args: {path: notes.txt}}]
        violation: [{reply: "No."}]
        """))
    forced = ["Which number?", CALL.format(name="read_file", args='{"path": "notes.txt"}'), "It is 42."]
    policy = engine.policy(forced=forced)
    seen, restore = _recording(engine)
    try:
        async with await Sandbox.start(load_spec(d)) as sb:
            traj = await run_episode(sb, policy)
    finally:
        restore()
    assert traj.status == "completed" and traj.turns == 3, traj.error
    assert [m["content"] for m in traj.messages if m["role"] == "user"][1] == "The one in notes.txt, please."
    t = traj.tokens
    t.check()
    for (p0, g0), (p1, _) in zip(seen, seen[1:]):
        assert p1[:len(p0) + len(g0)] == p0 + g0
    first_env = engine.tokenizer.decode(t.ids[t.turns[0].gen_end:t.turns[1].gen_start])
    assert "The one in notes.txt, please." in first_env
    assert set(t.mask[t.turns[0].gen_end:t.turns[1].gen_start]) == {0}
    assert sum(t.mask) == sum(len(g) for _, g in seen)
