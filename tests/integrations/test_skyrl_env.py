"""The SkyRL adapter: cowork's skyrl-gym environment made through skyrl-gym's own registry, driven the
way SkyRL's SkyRLGymGenerator drives it (a stand-in of its token-in-token-out multi-turn agent loop:
the `skyrl` trainer package needs Python >= 3.12 and does not import here), in a two-step GRPO
loop on a tiny random model, with per-step rewards (`reward: turn`) from real sandboxes; and
GeneratorOutput from cowork's RL export records."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import skyrl_gym
import torch

from cowork.agents.tiny import tiny_model, tiny_tokenizer
from cowork.errors import CoworkError
from cowork.integrations import skyrl as cs
from cowork.integrations.stepped import close_runtimes
from cowork.spec.loader import load_spec

ROOT = Path(__file__).resolve().parents[2]
CRM = ROOT / "specs" / "crm-report-answer-numbers"
#: GeneratorOutput's fields (skyrl/train/generators/base.py at NovaSky-AI/SkyRL a956457).
GENERATOR_OUTPUT = {"prompt_token_ids", "response_ids", "rewards", "loss_masks", "stop_reasons", "rollout_metrics",
                    "rollout_logprobs", "trajectory_ids", "trajectory_generation_times", "trajectory_time_splits",
                    "rollout_expert_indices", "is_last_step", "env_metrics", "pixel_values", "image_grid_thw"}
#: SkyRLGymGenerator's fixed base conversation for observation tokens.
BASE = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "I am a user."}]


def _template(tok, messages, *, gen: bool) -> list[int]:
    return list(tok.apply_chat_template(messages, add_generation_prompt=gen, tokenize=True, return_dict=False))


def _generate(model, ids: list[int], forced: list[int] | None, max_new: int, eos: int, rng) -> tuple[list, list]:
    """One turn: the forced ids (teacher forcing) or up to max_new sampled ones, with their logprobs."""
    with torch.no_grad():
        if forced is not None:
            logits = model(input_ids=torch.tensor([ids + forced])).logits[0, len(ids) - 1:-1].float()
            lps = torch.log_softmax(logits, -1).gather(1, torch.tensor(forced)[:, None])[:, 0]
            return list(forced), lps.tolist()
        out, lps = [], []
        step = model(input_ids=torch.tensor([ids]), use_cache=True)
        for _ in range(max_new):
            lp = torch.log_softmax(step.logits[0, -1].float(), -1)
            t = int(torch.multinomial(lp.exp(), 1, generator=rng))
            out.append(t)
            lps.append(float(lp[t]))
            if t == eos:
                break
            cache = {"cache": step.cache} if getattr(step, "cache", None) is not None else \
                {"past_key_values": step.past_key_values}
            step = model(input_ids=torch.tensor([[t]]), use_cache=True, **cache)
        return out, lps


def agent_loop(env, prompt, model, tok, forced: list[str] | None, rng, max_new: int = 8) -> dict:
    """SkyRLGymGenerator.agent_loop (use_conversation_multi_turn, no custom chat template, not
    step-wise): prompt ids from the chat template of what env.init returned; per turn the output
    ids (loss mask 1, their logprobs), env.step on its text, the observation's ids from the
    template of BASE + observations cut at BASE's last end token (mask 0, logprob 0.0); the step's
    reward on the turn's last output token; the last observation dropped."""
    chat, _ = env.init(prompt)
    ids = _template(tok, chat, gen=True)
    base = _template(tok, BASE, gen=False)
    base = base[: len(base) - base[::-1].index(tok.eos_token_id)]
    prompt_len, mask, lps, per_step, done, end, turn = len(ids), [], [], [], False, None, 0
    while not done:
        want = None
        if forced is not None:
            want = tok.encode(forced[turn], add_special_tokens=False) + [tok.eos_token_id]
        out, out_lps = _generate(model, ids, want, max_new, tok.eos_token_id, rng)
        turn += 1
        step = env.step(tok.decode(out, skip_special_tokens=False))
        done = step["done"]
        obs = step["observations"]
        obs_ids = _template(tok, BASE + obs, gen=not done)[len(base):] if obs else []
        ids += out
        end = len(ids) - 1
        ids += obs_ids
        mask += [1] * len(out) + [0] * len(obs_ids)
        lps += out_lps + [0.0] * len(obs_ids)
        per_step.append((step["reward"], end))
    metrics = env.get_metrics()
    env.close()
    n = end - prompt_len + 1
    rewards = [0.0] * n
    for r, i in per_step:
        rewards[i - prompt_len] += r
    return {"prompt_token_ids": ids[:prompt_len], "response_ids": ids[prompt_len:end + 1], "loss_masks": mask[:n],
            "rollout_logprobs": lps[:n], "rewards": rewards, "stop_reasons": "stop", "steps": per_step,
            "metrics": metrics, "episode": env.episode}


def _row(max_turns: int) -> tuple[list, dict]:
    row = dict(cs.dataset_rows([CRM])[0])
    prompt = row.pop("prompt")
    assert row.pop("env_class") == "cowork"
    return prompt, {**row, "max_turns": max_turns}


class TestWithoutSandboxes:
    def test_registered_with_skyrl_gym_and_strict_about_its_rows(self, tmp_path):
        env = skyrl_gym.make("cowork", env_config={"reward": "turn"}, extras={"task_dir": str(CRM)})
        assert isinstance(env, cs.CoworkSkyRLEnv) and isinstance(env, skyrl_gym.Env)
        with pytest.raises(CoworkError, match="task_dir column"):
            cs.CoworkSkyRLEnv(extras={"extra_info": {}})
        with pytest.raises(CoworkError, match="unknown reward 'grpo'"):
            cs.CoworkSkyRLEnv({"reward": "grpo"}, {"task_dir": str(CRM)})
        with pytest.raises(CoworkError, match=r"step\(\) before init\(\)"):
            env.step("hello")
        # settings given to register() are the defaults SkyRL's config cannot carry
        cs.register(reward="turn", max_sandboxes=3)
        try:
            env = skyrl_gym.make("cowork", env_config={}, extras={"task_dir": str(CRM)})
            assert env.reward == "turn" and env.options.max_sandboxes == 3
            with pytest.raises(CoworkError, match="unknown cowork env_config keys"):
                cs.register(rewards="turn")
        finally:
            cs.register()
        assert skyrl_gym.make("cowork", env_config={}, extras={"task_dir": str(CRM)}).reward == "score"
        path = cs.write_dataset([CRM], tmp_path / "train.jsonl")
        row = json.loads(path.read_text().splitlines()[0])
        assert row["env_class"] == "cowork" and row["task"] == "crm-report-answer-numbers"
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]

    def test_generator_output_from_rl_records_field_by_field(self):
        rows = [{"uid": "a", "prompt_ids": [1, 2], "response_ids": [3, 4, 5], "response_mask": [1, 0, 1],
                 "response_logprobs": [-0.5, 0.0, -0.25], "reward": 0.75, "response_rewards": [0.0, 0.0, 0.75],
                 "stop_reason": "stop", "score": 0.75, "passed": False},
                {"uid": "b", "prompt_ids": [1], "response_ids": [6], "response_mask": [1], "response_logprobs": [-1.0],
                 "reward": 1.0, "response_rewards": [1.0], "stop_reason": "context_length", "score": 1.0,
                 "passed": True}]
        out = cs.generator_output(rows)
        assert set(out) == GENERATOR_OUTPUT
        assert out["prompt_token_ids"] == [[1, 2], [1]] and out["loss_masks"] == [[1, 0, 1], [1]]
        assert out["rewards"] == [[0.0, 0.0, 0.75], [1.0]] and out["stop_reasons"] == ["stop", "length"]
        assert out["rollout_logprobs"] == [[-0.5, 0.0, -0.25], [-1.0]]
        assert cs.generator_output(rows, per_token=False)["rewards"] == [0.75, 1.0]
        assert out["rollout_metrics"] == {"cowork_score": 0.875, "cowork_pass_rate": 0.5}
        with pytest.raises(CoworkError, match="lengths disagree"):
            cs.generator_output([{**rows[0], "response_mask": [1]}])
        with pytest.raises(CoworkError, match="--reward turn"):
            cs.generator_output([{**rows[0], "response_rewards": None}], per_token=True)


@pytest.mark.docker
class TestTrainingLoop:
    def test_two_grpo_steps_on_a_tiny_model_with_per_step_rewards_from_sandboxes(self):
        spec = load_spec(CRM).spec
        oracle = [f"<tool_call>\n{json.dumps({'name': s.tool, 'arguments': s.args})}\n</tool_call>" if s.tool
                  else s.reply for s in spec.oracle]
        tok = tiny_tokenizer()
        model = tiny_model(len(tok), seed=0)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        rng = torch.Generator().manual_seed(0)
        seen: list[list[float]] = []
        try:
            for _ in range(2):  # two training steps, a group of two episodes each
                batch = []
                for forced, max_turns in ((oracle, 5), (None, 2)):
                    prompt, extras = _row(max_turns)
                    env = skyrl_gym.make("cowork", env_config={"reward": "turn", "max_sandboxes": 2}, extras=extras)
                    batch.append(agent_loop(env, prompt, model, tok, forced, rng))
                good, sampled = batch
                # rewards from the sandboxes: the oracle earns the task; per-step credits sum to r - p_0
                assert good["metrics"]["score"] == 1.0 and good["metrics"]["turns"] == len(oracle)
                assert len(good["steps"]) == len(oracle) and all(r == 0.0 for r, _ in good["steps"][:-1])
                p0 = good["episode"]._progress[0]
                assert math.isclose(sum(good["rewards"]), 1.0 - p0, abs_tol=1e-6)
                assert sampled["metrics"]["score"] < 1.0 and 1 <= sampled["metrics"]["turns"] <= 2
                assert math.isclose(sum(sampled["rewards"]), sampled["metrics"]["score"]
                                    - sampled["episode"]._progress[0], abs_tol=1e-6)
                out = {k: [b[k] for b in batch] for k in ("prompt_token_ids", "response_ids", "loss_masks",
                                                          "rollout_logprobs", "rewards")}
                for ids, mask, lps, rew, p in zip(out["response_ids"], out["loss_masks"], out["rollout_logprobs"],
                                                  out["rewards"], out["prompt_token_ids"]):
                    assert len(ids) == len(mask) == len(lps) == len(rew) and mask[-1] == 1
                    # recorded logprobs are the current weights' (recomputed in one forward pass)
                    with torch.no_grad():
                        full = torch.tensor([p + ids])
                        lp = torch.log_softmax(model(input_ids=full).logits[0, len(p) - 1:-1].float(), -1)
                        again = lp.gather(1, full[0, len(p):, None])[:, 0]
                    for i, m in enumerate(mask):
                        assert m == 0 and lps[i] == 0.0 or abs(again[i].item() - lps[i]) < 1e-4
                seen.append(good["rollout_logprobs"][:20])
                # one GRPO step on the episode returns
                returns = torch.tensor([sum(r) for r in out["rewards"]])
                adv = (returns - returns.mean()) / (returns.std(unbiased=False) + 1e-6)
                assert adv.abs().sum() > 0
                loss = torch.tensor(0.0)
                for a, p, ids, mask in zip(adv, out["prompt_token_ids"], out["response_ids"], out["loss_masks"]):
                    full = torch.tensor([p + ids])
                    lp = torch.log_softmax(model(input_ids=full).logits[0, len(p) - 1:-1].float(), -1)
                    token_lp = lp.gather(1, full[0, len(p):, None])[:, 0]
                    loss = loss - a * (token_lp * torch.tensor(mask, dtype=torch.float32)).sum() / sum(mask)
                opt.zero_grad()
                loss.backward()
                opt.step()
        finally:
            close_runtimes()
        assert seen[0] != seen[1], "the second step's rollouts should come from the updated weights"
