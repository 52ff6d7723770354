"""Partial rollouts on the hf backend: episodes stop at a turn boundary, the weights change, they
go on, and each turn records the version it was generated with (the tiny model, on CPU)."""

from __future__ import annotations

import asyncio

import pytest

from cowork.agents.gate import TurnGate
from cowork.agents.tokens import SamplingSettings

torch = pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")

CALL = '<tool_call>\n{"name": "read_file", "arguments": {"path": "notes.txt"}}\n</tool_call>'
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}}}}]
SYSTEM = [{"role": "system", "content": "You are a capable coworker."},
          {"role": "user", "content": "Read notes.txt and tell me the number."}]


class TestTurnGate:
    async def test_pause_waits_for_the_turn_in_flight_and_holds_the_next(self):
        gate, log = TurnGate(), []
        release = asyncio.Event()

        async def turn(name, wait=None):
            async with gate.turn():
                log.append(f"{name} starts")
                if wait is not None:
                    await wait.wait()
                log.append(f"{name} ends")

        first = asyncio.ensure_future(turn("a", release))
        await asyncio.sleep(0)
        pausing = asyncio.ensure_future(gate.pause())
        await asyncio.sleep(0)
        assert not pausing.done() and gate.paused  # turn a is still being generated
        second = asyncio.ensure_future(turn("b"))
        release.set()
        await pausing
        assert log == ["a starts", "a ends"] and first.done() and not second.done()
        gate.resume()
        await second
        assert log[-2:] == ["b starts", "b ends"] and not gate.paused

    async def test_pauses_nest_and_a_cancelled_pause_lets_go(self):
        gate = TurnGate()
        await gate.pause()
        await gate.pause()
        gate.resume()
        assert gate.paused
        gate.resume()
        assert not gate.paused
        with pytest.raises(RuntimeError, match="without a pause"):
            gate.resume()
        release = asyncio.Event()

        async def long_turn():
            async with gate.turn():
                await release.wait()

        running = asyncio.ensure_future(long_turn())
        await asyncio.sleep(0)
        pausing = asyncio.ensure_future(gate.pause())
        await asyncio.sleep(0)
        pausing.cancel()
        await asyncio.gather(pausing, return_exceptions=True)
        assert not gate.paused
        release.set()
        await running


@pytest.fixture(scope="module")
def engine():
    from cowork.agents.tiny import tiny_engine

    return tiny_engine(seed=2, sampling=SamplingSettings(max_tokens=16, temperature=1.0, seed=5))


def _perturbed(engine):
    gen = torch.Generator().manual_seed(0)
    return {k: v + 0.5 * torch.randn(v.shape, generator=gen) if v.is_floating_point() else v
            for k, v in engine.model.state_dict().items()}


def _after(messages, turn):
    call = turn.tool_calls[0]
    return [*messages, {"role": "assistant", "content": turn.content, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": '{"path": "notes.txt"}'}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "quarterly numbers: 42"}]


class TestHFPartialRollout:
    async def test_episodes_pause_at_a_turn_boundary_and_go_on_with_the_new_weights(self, engine):
        original = {k: v.clone() for k, v in engine.model.state_dict().items()}
        start = engine.version
        policies = [engine.policy(forced=[CALL, "The number is 42."]) for _ in range(2)]
        firsts = await asyncio.gather(*(p.act(SYSTEM, TOOLS) for p in policies))
        try:
            await engine.pause()
            seconds = [asyncio.ensure_future(p.act(_after(SYSTEM, t), TOOLS)) for p, t in zip(policies, firsts)]
            await asyncio.sleep(0.2)
            assert not any(s.done() for s in seconds)  # held at the turn boundary
            version = engine.load_weights(_perturbed(engine))
            engine.resume()
            await asyncio.gather(*seconds)
            assert version == start + 1
            for p in policies:
                t = p.token_trajectory()
                t.check()
                assert [s.policy_version for s in t.turns] == [start, start + 1] and t.policy_version == start
                # Each forced turn's recorded logprobs are those of the weights it was generated
                # with: turn 2 agrees with the new weights, turn 1 does not (it had the old).
                fresh = engine.token_logprobs(t.ids).tolist()
                one, two = t.turns
                gap = [abs(t.logprobs[i] - fresh[i - 1]) for i in range(two.gen_start, two.gen_end)]
                old = [abs(t.logprobs[i] - fresh[i - 1]) for i in range(one.gen_start, one.gen_end)]
                assert max(gap) < 1e-4 and max(old) > 1e-2
        finally:
            engine.load_weights(original)

    async def test_pause_returns_only_after_the_turn_in_flight(self, engine):
        policy = engine.policy(SamplingSettings(max_tokens=64, temperature=1.0, seed=3))
        before = engine.version
        turn = asyncio.ensure_future(policy.act(SYSTEM, TOOLS))
        await asyncio.sleep(0)  # the turn has entered the gate
        await engine.pause()
        try:
            assert turn.done()  # pause waited for it: no weights change inside a turn
            assert engine.mark_updated() == before + 1
        finally:
            engine.resume()
        await turn
        assert policy.token_trajectory().turns[0].policy_version == before
        follow = engine.policy()
        await follow.act(SYSTEM, TOOLS)
        assert follow.token_trajectory().turns[0].policy_version == before + 1


class ScriptedLLM:
    """vLLM's AsyncLLM as far as a turn goes: each request answers one read_file call."""

    def __init__(self, chat):
        self.chat, self.requests = chat, 0

    async def generate(self, prompt, sampling_params, request_id):
        from types import SimpleNamespace

        self.requests += 1
        await asyncio.sleep(0.01)
        ids = self.chat.encode(CALL) + [self.chat.end_id]
        yield SimpleNamespace(outputs=[SimpleNamespace(
            token_ids=ids, logprobs=[{t: SimpleNamespace(logprob=-0.5)} for t in ids], finish_reason="stop",
            stop_reason=None)])


class TestVLLMEnginePause:
    async def test_a_weight_change_made_some_other_way_lands_between_turns(self):
        from types import SimpleNamespace

        from cowork.agents.tiny import tiny_tokenizer
        from cowork.agents.vllm_engine import VLLMEngine

        engine = VLLMEngine(None, tiny_tokenizer(), name="tiny", sampling_params=lambda **kw: SimpleNamespace(**kw))
        engine.llm = llm = ScriptedLLM(engine.chat)
        policy = engine.policy()
        first = await policy.act(SYSTEM, TOOLS)
        await engine.pause()
        second = asyncio.ensure_future(policy.act(_after(SYSTEM, first), TOOLS))
        await asyncio.sleep(0.1)
        assert not second.done() and llm.requests == 1  # held before its request
        assert engine.mark_updated() == 1  # e.g. vLLM's own weight transfer through engine.llm
        engine.resume()
        await second
        t = policy.token_trajectory()
        t.check()
        assert [s.policy_version for s in t.turns] == [0, 1]


def test_a_gate_serves_one_event_loop_after_another():
    """An engine outlives event loops (asyncio.run per step; a test's loop, then the next's)."""
    gate = TurnGate()

    async def pause_during_a_turn():
        release = asyncio.Event()

        async def turn():
            async with gate.turn():
                await release.wait()

        running = asyncio.ensure_future(turn())
        await asyncio.sleep(0)
        pausing = asyncio.ensure_future(gate.pause())  # waits on the gate's events in this loop
        held = asyncio.ensure_future(turn())
        await asyncio.sleep(0)
        release.set()
        await pausing
        gate.resume()
        release.set()
        await asyncio.gather(running, held)

    asyncio.run(pause_during_a_turn())
    asyncio.run(pause_during_a_turn())  # another loop: the same gate still works
    assert not gate.paused and gate.active == 0
