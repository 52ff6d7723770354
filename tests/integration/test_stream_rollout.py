"""A streaming rollout over real sandboxes with the tiny hf model on CPU: the first group is handed
over while the second is still running, the trainer updates the weights with the second
group's episodes paused at a turn boundary, and their trajectories record the version change."""

from __future__ import annotations

import asyncio
import textwrap

import pytest

from cowork.rollouts.runner import RolloutRunner
from cowork.spec.loader import load_spec

torch = pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")
pytestmark = pytest.mark.docker

CALL = '<tool_call>\n{{"name": "read_file", "arguments": {{"path": "{path}"}}}}\n</tool_call>'


def _task(root, name):
    d = root / name
    (d / "workspace").mkdir(parents=True)
    (d / "workspace" / "notes.txt").write_text("quarterly numbers: 42\n")
    (d / "task.yaml").write_text(textwrap.dedent(f"""\
        id: {name}
        title: Read a note
        prompt: Read notes.txt and tell me the number.
        tools: [read_file]
        checks: [{{id: read, type: tool_called, tool: read_file}}]
        oracle: [{{tool: read_file, args: {{path: notes.txt}}}}]
        """))
    return load_spec(d)


class HeldAt:
    """An episode's policy that stops before turn ``turn`` until ``go`` is set (where the trainer
    steps), telling ``arrived``; everything else is the hf policy's."""

    def __init__(self, inner, turn, arrived, go):
        self.inner, self.turn, self.arrived, self.go, self.calls = inner, turn, arrived, go, 0
        self.name, self.sampling = inner.name, inner.sampling

    def token_trajectory(self):
        return self.inner.token_trajectory()

    async def act(self, messages, tools):
        self.calls += 1
        if self.calls == self.turn:
            self.arrived.release()
            await self.go.wait()
        return await self.inner.act(messages, tools)


async def test_groups_stream_and_a_weight_update_lands_between_turns(tmp_path, no_leftovers):
    from cowork.agents.tiny import tiny_engine

    engine = tiny_engine(seed=3)
    quick, slow = _task(tmp_path, "quick-read"), _task(tmp_path, "slow-read")
    arrived, go = asyncio.Semaphore(0), asyncio.Event()

    def policy(spec):
        if spec.id == "quick-read":
            return engine.policy(forced=[CALL.format(path="notes.txt"), "The number is 42."])
        inner = engine.policy(forced=[CALL.format(path="notes.txt")] * 3 + ["The number is 42."])
        return HeldAt(inner, 3, arrived, go)

    async with RolloutRunner(concurrency=4, pool_size=4) as runner:
        async with runner.stream([quick, slow], policy, group_size=2, max_staleness=1,
                                 version=lambda: engine.version) as groups:
            first = await groups.__anext__()
            assert first.task == "quick-read" and groups.stats.finished == 2
            for _ in range(2):  # the slow group's episodes are mid-way, at turn 3's boundary
                await asyncio.wait_for(arrived.acquire(), 120)
            await engine.pause()
            state = {k: v + 0.1 * torch.randn_like(v) for k, v in engine.model.state_dict().items()}
            assert engine.load_weights(state) == 1
            engine.resume()
            go.set()
            second = await groups.__anext__()
            with pytest.raises(StopAsyncIteration):
                await groups.__anext__()

    assert [s.reward for s in first.samples] == [1.0, 1.0]
    assert all(s.policy_version == 0 for s in first.samples)
    for s in second.samples:
        t = s.trajectory.tokens
        t.check()
        assert s.status == "completed" and s.reward == 1.0 and s.policy_version == 0
        assert [span.policy_version for span in t.turns] == [0, 0, 1, 1]  # the update landed between turns 2 and 3
        assert s.row()["policy_version"] == 0
    assert groups.stats.stale_dropped == 0  # one version behind: within max_staleness=1
