"""The verl agent loop on real sandboxes, driven by verl's own classes on CPU.

verl 0.9.1's ``AgentLoopWorker`` (the class verl runs as a Ray actor) is built here from verl's
generated trainer config, with the loop registered through ``agent_loop_config_path`` as the
docs say; the dataset is written by ``verl_dataset`` and read by verl's ``RLHFDataset`` and
``collate_fn`` into a ``DataProto``, repeated into GRPO groups as verl's trainer does. The one
stand-in is the LLM server: :class:`StandInServer` implements ``LLMServerClient.generate`` on a
tiny random model (returning verl's own ``TokenOutput``), teacher-forcing the task's oracle in
the first episode of each group and sampling in the second. Two steps: rollout, a GRPO update
of the model (verl's advantage and policy loss), rollout again with the new weights.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl is not installed (scripts/setup.sh installs it)")
pytestmark = pytest.mark.docker

import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from cowork.agents.hf import HFEngine  # noqa: E402
from cowork.agents.tiny import tiny_model, tiny_tokenizer  # noqa: E402
from cowork.agents.tokens import SamplingSettings  # noqa: E402
from cowork.engine import labels as L  # noqa: E402
from cowork.engine.reaper import managed_containers  # noqa: E402
from cowork.integrations import verl as cv  # noqa: E402
from cowork.spec.loader import load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "specs" / "crm-report-answer-numbers"
PROMPT_LEN, RESPONSE_LEN, PER_TURN = 4096, 4096, 1024
#: Tokens a sampling turn of the stand-in writes (the tiny model's gibberish; it rarely samples an end token).
SAMPLED = 24


def oracle_texts(spec) -> list[str]:
    """The oracle's turns as the model would write them (hermes tool calls, then the reply)."""
    return [s.reply if s.tool is None else
            "<tool_call>\n" + json.dumps({"name": s.tool, "arguments": s.args}) + "\n</tool_call>"
            for s in spec.oracle]


class StandInServer:
    """verl's ``LLMServerClient.generate`` on an HFEngine: what a vLLM replica returns, on CPU.

    The first episode (request id) of each distinct first prompt is teacher-forced through the
    oracle's turns, the next one samples, and so on alternately. Every call is recorded."""

    def __init__(self, engine: HFEngine, oracle: list[str]):
        self.engine = engine
        self.oracle = oracle
        self.global_steps = 0
        self.calls: list[dict] = []
        self.modes: dict[str, str] = {}
        self._seen: dict[tuple, int] = {}

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, video_data=None,
                       audio_data=None, mm_processor_kwargs=None, **kwargs) -> TokenOutput:
        if request_id not in self.modes:
            n = self._seen.setdefault(tuple(prompt_ids), 0)
            self._seen[tuple(prompt_ids)] = n + 1
            self.modes[request_id] = "oracle" if n % 2 == 0 else "sample"
        turn = sum(1 for c in self.calls if c["request_id"] == request_id)
        limit = sampling_params["max_tokens"]
        settings = SamplingSettings(temperature=sampling_params["temperature"], top_p=sampling_params["top_p"],
                                    top_k=max(sampling_params["top_k"], 0), max_tokens=min(limit, SAMPLED))
        if self.modes[request_id] == "oracle":
            # Teacher-forced: the model's own logprobs of the oracle's text, from one forward pass.
            chat = self.engine.chat
            text = self.oracle[turn] if turn < len(self.oracle) else "Done."
            ids = (chat.encode(text) + [chat.end_id])[:limit]
            every = await asyncio.to_thread(self.engine.token_logprobs, list(prompt_ids) + ids)
            lps = every[-len(ids):].tolist()
        else:
            ids, lps, _ = await asyncio.to_thread(self.engine.generate, list(prompt_ids), settings)
        out = TokenOutput(token_ids=ids, log_probs=lps if sampling_params.get("logprobs") else None,
                          stop_reason="completed", num_preempted=0,
                          extra_fields={"global_steps": self.global_steps, "min_global_steps": self.global_steps,
                                        "max_global_steps": self.global_steps})
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "params": dict(sampling_params),
                           "ids": ids, "logprobs": lps})
        return out


def _mine(task_id: str) -> list[str]:
    return [c.name for c in managed_containers()
            if (c.labels or {}).get(L.SESSION) == L.SESSION_ID and (c.labels or {}).get(L.TASK) == task_id]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verl")
    tok = tiny_tokenizer()
    model = tiny_model(len(tok))
    model.save_pretrained(tmp / "model")
    tok.save_pretrained(tmp / "model")
    (tmp / "agent_loops.yaml").write_text(
        f"- name: cowork\n  _target_: cowork.integrations.verl.CoworkAgentLoop\n  max_sandboxes: 2\n"
        f"  max_tokens_per_turn: {PER_TURN}\n  keep_trajectory: true\n")
    import verl

    cfg = OmegaConf.load(os.path.join(os.path.dirname(verl.__file__), "trainer/config/_generated_ppo_trainer.yaml"))
    cfg.actor_rollout_ref.model.path = str(tmp / "model")
    cfg.actor_rollout_ref.rollout.name = "vllm"
    cfg.actor_rollout_ref.rollout.n = 2
    cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path = str(tmp / "agent_loops.yaml")
    cfg.data.max_prompt_length, cfg.data.max_response_length = PROMPT_LEN, RESPONSE_LEN
    loaded = load_spec(TASK)
    server = StandInServer(None, oracle_texts(loaded.spec))  # type: ignore[arg-type]
    worker = AgentLoopWorker(cfg, llm_client=server)
    # The worker's tokenizer is verl's (loaded from the model folder): the model samples with it too.
    server.engine = HFEngine(model, worker.tokenizer, name=str(tmp / "model"))
    assert cv.verl_dataset([TASK], tmp / "train.parquet") == 1
    dataset = RLHFDataset(data_files=[str(tmp / "train.parquet")], tokenizer=worker.tokenizer, config=cfg.data)
    try:
        yield cfg, worker, server, dataset, loaded
    finally:
        cv.close()
        assert not _mine(loaded.spec.id), "cv.close() left sandboxes behind"


def _batch(dataset, n: int) -> DataProto:
    """A training batch as verl's trainer makes one: collated rows, a uid per prompt, n samples each."""
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
    batch.non_tensor_batch["uid"] = np.array([uuid.uuid4().hex for _ in range(len(batch))], dtype=object)
    return batch.repeat(repeat_times=n, interleave=True)


def _unpad(out: DataProto, i: int) -> tuple[list[int], list[int], list[int], list[float]]:
    """Sample i's prompt ids, response ids, mask and rollout logprobs without verl's padding."""
    b = out.batch
    p = b["prompts"].shape[1]
    attn = b["attention_mask"][i]
    prompt = b["prompts"][i][attn[:p].bool()].tolist()
    n = int(attn[p:].sum())
    return (prompt, b["responses"][i][:n].tolist(), b["response_mask"][i][:n].tolist(),
            b["rollout_log_probs"][i][:n].tolist())


def _check_step(out: DataProto, server: StandInServer, engine: HFEngine, calls_before: int, version: int,
                tools_prompt: dict) -> list[float]:
    """Everything verl got for one step, checked against the server's record and the sandbox's grade."""
    ours = server.calls[calls_before:]
    rewards = []
    assert len(out) == 2 and "rm_scores" in out.batch.keys()
    assert list(out.non_tensor_batch["agent_name"]) == ["cowork", "cowork"]
    for i in range(len(out)):
        traj = out.non_tensor_batch["cowork_trajectory"][i]
        grade = out.non_tensor_batch["cowork_grade"][i]
        prompt, response, mask, lps = _unpad(out, i)
        rid = out.non_tensor_batch["cowork_request_id"][i]
        turns = [c for c in ours if c["request_id"] == rid]
        assert turns and len(turns) == len(traj["tokens"]["turns"])
        # The first prompt is the chat template over the episode's first messages and its tools.
        first = traj["messages"][:2]
        expected = engine.tokenizer.apply_chat_template(first, tools=traj["tools"], add_generation_prompt=True,
                                                        tokenize=True)
        expected = expected["input_ids"] if hasattr(expected, "keys") else expected
        assert prompt == list(expected)
        tools_prompt[i] = len(prompt)
        # Append-only: each turn's prompt is everything before it; what the server generated
        # is masked 1 with its logprobs, everything between (tool results) is masked 0.
        seq = prompt + response
        want_mask, want_lp = [], []
        for c in turns:
            assert seq[:len(c["prompt_ids"])] == c["prompt_ids"]
            gap = len(c["prompt_ids"]) - len(prompt) - len(want_mask)
            want_mask += [0] * gap + [1] * len(c["ids"])
            want_lp += [0.0] * gap + c["logprobs"]
            assert seq[len(c["prompt_ids"]):len(c["prompt_ids"]) + len(c["ids"])] == c["ids"]
            assert c["params"]["max_tokens"] <= PER_TURN and c["params"]["logprobs"] is True
        assert mask == want_mask and len(response) == len(mask) == len(lps)
        assert np.allclose(lps, want_lp, atol=1e-6)
        # The logprobs are the current weights' (a forward pass over the whole sequence).
        recomputed = engine.token_logprobs(seq).tolist()
        for j, m in enumerate(mask):
            if m:
                assert abs(lps[j] - recomputed[len(prompt) + j - 1]) < 1e-4
        # Tool results are environment tokens: each tool message's text is in a masked-0 span.
        env_text = engine.tokenizer.decode([t for t, m in zip(response, mask) if m == 0])
        for msg in traj["messages"]:
            if msg["role"] == "tool":
                assert msg["content"][:200] in env_text
        # The reward is the sandbox's grade, at the last response token.
        reward = float(out.batch["rm_scores"][i].sum())
        assert reward == pytest.approx(grade["score"]) and grade["status"] == "graded"
        assert out.batch["rm_scores"][i][len(response) - 1] == pytest.approx(reward)
        assert out.non_tensor_batch["__num_turns__"][i] == 1 + len(turns) + sum(
            1 for a, b in zip(mask, mask[1:]) if a == 1 and b == 0)
        assert out.non_tensor_batch["max_global_steps"][i] == version
        rewards.append(reward)
    return rewards


def _grpo_update(out: DataProto, engine: HFEngine, actor_cfg, lr: float = 0.05) -> float:
    """One GRPO step on the rollout, with verl's advantage estimator and PPO loss."""
    b = out.batch
    adv, _ = core_algos.compute_grpo_outcome_advantage(b["rm_scores"], b["response_mask"],
                                                       out.non_tensor_batch["uid"])
    model = engine.model
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    # verl pads every row to prompt_length + response_length; each row goes through the model
    # unpadded (on CPU, the tiny model's attention over 8k padded positions takes most of a minute).
    rows = [_unpad(out, i) for i in range(len(out))]
    n = max(len(r[1]) for r in rows)
    new_lp = torch.zeros(len(rows), n)
    for i, (prompt, response, _, _) in enumerate(rows):
        logits = model(input_ids=torch.tensor([prompt + response])).logits[0, len(prompt) - 1:-1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(response).unsqueeze(-1)).squeeze(-1)
        new_lp = new_lp.index_put((torch.tensor([i]), torch.arange(len(response))), lp)
    loss, _ = core_algos.compute_policy_loss_vanilla(b["rollout_log_probs"][:, :n], new_lp, adv[:, :n],
                                                     b["response_mask"][:, :n], config=actor_cfg)
    opt.zero_grad()
    loss.backward()
    opt.step()
    model.eval()
    engine.mark_updated()
    return loss.item()


@pytest.mark.timeout(240)
async def test_two_steps_of_grpo_through_verls_agent_loop_worker(setup):
    cfg, worker, server, dataset, loaded = setup
    engine = server.engine
    before = {n: t.detach().clone() for n, t in engine.model.named_parameters()}
    lengths: dict[int, int] = {}

    out1 = await worker.generate_sequences(_batch(dataset, cfg.actor_rollout_ref.rollout.n))
    rewards1 = _check_step(out1, server, engine, 0, 0, lengths)
    statuses = sorted(out1.non_tensor_batch["cowork_status"])
    # The oracle episode passes on the real sandbox's evidence (its reply is graded too: the
    # task's checks are `answer` checks); the sampling one is cut by the response budget.
    assert sorted(rewards1)[-1] == 1.0 and sorted(rewards1)[0] < 1.0, rewards1
    assert "completed" in statuses

    cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 2
    loss = _grpo_update(out1, engine, omega_conf_to_dataclass(cfg.actor_rollout_ref.actor))
    assert loss == loss and loss != 0.0  # a finite, non-zero policy loss: the group's rewards differ

    server.global_steps = 1
    changed = [n for n, t in engine.model.named_parameters() if not torch.equal(t, before[n])]
    assert changed, "the GRPO step changed no weight"

    calls = len(server.calls)
    out2 = await worker.generate_sequences(_batch(dataset, cfg.actor_rollout_ref.rollout.n))
    rewards2 = _check_step(out2, server, engine, calls, 1, lengths)
    assert sorted(rewards2)[-1] == 1.0
    assert len(server.modes) == 4  # two episodes per step, one request id each
