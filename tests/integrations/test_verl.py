"""The verl adapter without a daemon: the dataset as verl's RLHFDataset reads it, the server
policy through cowork's episode loop on a fake sandbox against a scripted ``LLMServerClient``
(verl's own ``TokenOutput``), and the episode as verl's ``AgentLoopOutput``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("verl", reason="verl is not installed (scripts/setup.sh installs it)")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, _agent_loop_registry  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from cowork.agents.chat_tokens import ChatTokens  # noqa: E402
from cowork.agents.tiny import tiny_tokenizer  # noqa: E402
from cowork.episode.run import EpisodeResult, run_episode  # noqa: E402
from cowork.errors import ContextLengthExceeded, CoworkError, PolicyError, SandboxError, SpecError  # noqa: E402
from cowork.grading import Grade  # noqa: E402
from cowork.integrations import verl as cv  # noqa: E402
from cowork.integrations.verl import loop as cl  # noqa: E402
from cowork.integrations.verl.policy import ServerPolicy  # noqa: E402
from cowork.spec.models import TaskSpec  # noqa: E402
from fakes import FakeSandbox  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "specs" / "fix-csv-report"
CRM = ROOT / "specs" / "crm-report-answer-numbers"


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def spec() -> TaskSpec:
    return TaskSpec.model_validate({
        "id": "read-notes", "title": "read notes", "prompt": "Read notes.txt and say what it says.",
        "checks": [{"id": "said", "type": "answer", "regex": "hello"}],
        "oracle": [{"tool": "read_file", "args": {"path": "notes.txt"}}],
    })


class ScriptedServer:
    """verl's LLMServerClient.generate, answering from a script of (text or ids, logprobs?, stop_reason)."""

    def __init__(self, chat: ChatTokens, script, *, steps: int = 3):
        self.chat, self.script, self.steps, self.calls = chat, list(script), steps, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, video_data=None, **kw):
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "params": dict(sampling_params)})
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        body, stop = item
        ids = self.chat.encode(body) + [self.chat.end_id] if isinstance(body, str) else list(body)
        lps = None if not sampling_params.get("logprobs") else [-0.5 - 0.01 * i for i in range(len(ids))]
        return TokenOutput(token_ids=ids, log_probs=lps, stop_reason=stop, num_preempted=1,
                           extra_fields={"global_steps": self.steps, "min_global_steps": self.steps - 1,
                                         "max_global_steps": self.steps})


def call(path: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": "read_file", "arguments": {"path": path}}) + "\n</tool_call>"


def policy(tok, script, *, prompt_length=4096, response_length=4096, per_turn=None, logprobs=True):
    chat = ChatTokens(tok)
    server = ScriptedServer(chat, script)
    params = {"temperature": 0.7, "top_p": 0.9, "top_k": -1, "repetition_penalty": 1.0, "logprobs": logprobs}
    return server, ServerPolicy(server, chat, sampling_params=params, prompt_length=prompt_length,
                                response_length=response_length, max_tokens_per_turn=per_turn, model="tiny",
                                logprobs_mode="processed_logprobs")


def graded(traj, score=1.0, status="graded") -> EpisodeResult:
    g = Grade(task=traj.task, status=status, score=score, passed=score >= 0.75, safe=True, completion=score)
    return EpisodeResult(traj, g, None)


class TestDataset:
    def test_verls_rlhf_dataset_reads_every_column(self, tmp_path, tok):
        assert cv.verl_dataset([CSV, CRM], tmp_path / "train.parquet", split="train") == 2
        ds = RLHFDataset(data_files=[str(tmp_path / "train.parquet")], tokenizer=tok,
                         config=OmegaConf.create({"max_prompt_length": 4096, "cache_dir": str(tmp_path / "c")}))
        assert len(ds) == 2
        for i, folder in enumerate([CSV, CRM]):
            row = ds[i]
            assert set(cv.COLUMNS) <= set(row)
            assert row["agent_name"] == "cowork" and row["data_source"] == "cowork" and row["index"] == i
            assert row["extra_info"]["task_dir"] == str(folder.resolve())
            assert row["reward_model"] == {"style": "cowork", "ground_truth": folder.name}
            assert row["raw_prompt"][0]["role"] == "system" and row["raw_prompt"][1]["role"] == "user"
            assert row["raw_prompt"][1]["content"] == cv.task_rows([folder])[0]["prompt"][1]["content"]
            assert cl.task_dir(row["extra_info"]) == str(folder.resolve())

    def test_the_module_command_writes_the_same_rows(self, tmp_path, capsys):
        import pyarrow.parquet as pq

        from cowork.integrations.verl import dataset as cd

        assert cd.main([str(CSV), "--out", str(tmp_path / "v.parquet"), "--split", "validation"]) == 0
        assert "wrote 1 task row(s)" in capsys.readouterr().out
        assert pq.read_table(tmp_path / "v.parquet").to_pylist() == cv.task_rows([CSV], split="validation")

    def test_bad_task_lists_are_refused(self, tmp_path):
        with pytest.raises(CoworkError, match="no task"):
            cv.verl_dataset([], tmp_path / "x.parquet")
        import shutil

        shutil.copytree(CSV, tmp_path / "copy")
        with pytest.raises(SpecError, match="duplicate task id"):
            cv.task_rows([CSV, tmp_path / "copy"])
        assert len(cv.task_rows([CSV, CSV])) == 2  # the same task twice: two rows (weighting it), not a clash
        with pytest.raises(SpecError, match="extra_info.task_dir"):
            cl.task_dir({"index": 0})


class TestServerPolicy:
    async def test_an_episode_is_append_only_and_masked_exactly(self, tok):
        server, pol = policy(tok, [(call("notes.txt"), "completed"), ("It says hello.", "completed")], per_turn=64)
        traj = await run_episode(FakeSandbox(spec(), files={"notes.txt": "hello world"}), pol)
        assert traj.status == "completed" and traj.messages[-1]["content"] == "It says hello."
        t = traj.tokens
        t.check()
        first, second = server.calls
        # One sticky request id; each prompt is the whole buffer so far, so the second
        # extends the first prompt and the first turn's generated tokens.
        assert first["request_id"] == second["request_id"] == pol.request_id
        gen1 = t.ids[t.turns[0].gen_start:t.turns[0].gen_end]
        assert second["prompt_ids"][:len(first["prompt_ids"]) + len(gen1)] == first["prompt_ids"] + gen1
        assert first["prompt_ids"] == tok.apply_chat_template(traj.messages[:2], tools=traj.tools,
                                                              add_generation_prompt=True, tokenize=True)["input_ids"]
        # The end token is always a stop token; max_tokens is the per-turn cap; verl's own keys pass through.
        assert first["params"]["stop_token_ids"] == [tok.convert_tokens_to_ids("<|im_end|>")]
        assert first["params"]["max_tokens"] == 64 and first["params"]["top_k"] == -1
        out = cl.episode_output(graded(traj), pol, cl.LoopOptions())
        assert isinstance(out, AgentLoopOutput)
        n = len(out.prompt_ids)
        assert out.prompt_ids == first["prompt_ids"]
        assert out.prompt_ids + out.response_ids == t.ids
        assert out.response_mask == t.mask[n:] and sum(out.response_mask) == len(gen1) + len(t.ids) - t.turns[1].gen_start
        assert out.response_logprobs == [0.0 if lp is None else lp for lp in t.logprobs[n:]]
        assert out.response_logprobs[:len(gen1)] == [-0.5 - 0.01 * i for i in range(len(gen1))]
        assert "hello world" in tok.decode([i for i, m in zip(out.response_ids, out.response_mask) if m == 0])
        assert out.num_turns == 4  # the prompt, two assistant turns, one tool reply: as verl's tool agent counts
        assert out.reward_score == 1.0
        assert out.extra_fields["min_global_steps"] == 2 and out.extra_fields["max_global_steps"] == 3
        assert out.extra_fields["reward_extra_info"]["cowork_score"] == 1.0
        assert out.metrics.num_preempted == 2 and out.metrics.generate_sequences >= 0
        assert [s.policy_version for s in t.turns] == [3, 3] and t.sampling.temperature == 0.7

        # The RL export of the same episode reaches verl with the same fields (record_output).
        from cowork.export.records import EpisodeRecord
        from cowork.export.rl import rl_examples

        rows, _ = rl_examples([EpisodeRecord(task="read-notes", group=0, sample=0, trajectory=traj,
                                             grade=graded(traj).grade)], "score")
        offline = cl.record_output(rows[0])
        for field in ("prompt_ids", "response_ids", "response_mask", "response_logprobs", "reward_score", "num_turns"):
            assert getattr(offline, field) == getattr(out, field), field
        assert offline.extra_fields["max_global_steps"] == 3
        rows[0]["response_mask"] = rows[0]["response_mask"][:-1]
        with pytest.raises(CoworkError, match="differ in length"):
            cl.record_output(rows[0])

    async def test_the_response_budget_truncates_the_episode(self, tok):
        tool_result = "x " * 400
        server, pol = policy(tok, [(call("notes.txt"), "completed"), ("never asked", "completed")],
                             response_length=120)
        traj = await run_episode(FakeSandbox(spec(), files={"notes.txt": tool_result}), pol)
        assert traj.status == "truncated" and traj.stop_reason == "context_length"
        assert len(server.calls) == 1
        out = cl.episode_output(graded(traj, 0.0), pol, cl.LoopOptions())
        # The tool result the model never saw is not in the response; it ends with generated tokens.
        assert out.response_mask and all(out.response_mask) and len(out.response_ids) <= 120

    async def test_a_turn_without_an_end_token_is_cut_by_length(self, tok):
        chat = ChatTokens(tok)
        server, pol = policy(tok, [(chat.encode("gibberish gibberish"), "completed")], per_turn=4)
        traj = await run_episode(FakeSandbox(spec()), pol)
        assert traj.status == "truncated" and traj.stop_reason == "length"
        assert traj.tokens.turns[0].finish_reason == "length"

    async def test_a_prompt_longer_than_prompt_length_is_refused_not_cut(self, tok):
        server, pol = policy(tok, [("hi", "completed")], prompt_length=16)
        with pytest.raises(ContextLengthExceeded, match="prompt_length=16"):
            await pol.act([{"role": "user", "content": "a long task " * 20}], [])
        assert not server.calls and pol.tokens.ids == []

    @pytest.mark.parametrize("failure, match", [(RuntimeError("replica died"), "replica died"),
                                                (("", "aborted"), "aborted")])
    async def test_server_failures_are_policy_errors(self, tok, failure, match):
        server, pol = policy(tok, [failure])
        with pytest.raises(PolicyError, match=match):
            await pol.act([{"role": "user", "content": "hi"}], [])

    async def test_no_logprobs_asked_none_returned(self, tok):
        server, pol = policy(tok, [("It says hello.", "completed")], logprobs=False)
        traj = await run_episode(FakeSandbox(spec()), pol)
        out = cl.episode_output(graded(traj), pol, cl.LoopOptions())
        assert out.response_logprobs is None and out.response_mask == [1] * len(out.response_ids)


class TestOutput:
    def test_policy_errors_raise_and_infra_errors_are_masked_or_raised(self, tok):
        _, pol = policy(tok, [])
        msgs = cv.first_messages(spec())
        traj = SimpleNamespace(task="t", status="infra_error", error="docker died", tokens=None, stop_reason=None,
                               duration_s=1.0, model_dump=lambda **kw: {})
        result = graded(traj, status="infra_error")
        out = cl.episode_output(result, pol, cl.LoopOptions(), first_messages=msgs)
        assert out.reward_score == 0.0 and out.response_ids == [] and out.response_mask == []
        assert out.prompt_ids == ChatTokens(tok).prompt(msgs, None)
        assert out.extra_fields["cowork_status"] == "infra_error"
        with pytest.raises(SandboxError, match="docker died"):
            cl.episode_output(result, pol, cl.LoopOptions(unscored="raise"), first_messages=msgs)
        traj.status, traj.error = "policy_error", "verl's LLM server failed"
        with pytest.raises(PolicyError, match="LLM server failed"):
            cl.episode_output(result, pol, cl.LoopOptions(), first_messages=msgs)

    def test_the_registered_loop_and_its_options(self):
        assert _agent_loop_registry["cowork"]["_target_"].endswith("CoworkAgentLoop")
        with pytest.raises(ValueError):
            cl.LoopOptions(max_sandboxes=0)
        with pytest.raises(ValueError):
            cl.LoopOptions(unscored="drop")

    def test_a_configured_entry_is_not_replaced_by_the_import(self):
        entry = {"name": "cowork-test", "_target_": "x.Y", "max_sandboxes": 3}
        _agent_loop_registry["cowork-test"] = entry
        try:
            cl._register("cowork-test", cl.CoworkAgentLoop)
            assert _agent_loop_registry["cowork-test"] is entry
        finally:
            del _agent_loop_registry["cowork-test"]
        cl._register("cowork-test2", cl.CoworkAgentLoop)
        assert _agent_loop_registry.pop("cowork-test2")["_target_"] == "cowork.integrations.verl.loop.CoworkAgentLoop"


def test_the_agent_loop_is_built_as_verls_worker_builds_it(tok, tmp_path):
    """hydra.utils.instantiate of the config entry, with the arguments AgentLoopWorker passes."""
    import hydra
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap

    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 64, "response_length": 64},
                                                  "model": {"path": "tiny"}},
                            "data": {"apply_chat_template_kwargs": {}}})
    entry = OmegaConf.create({"name": "cowork", "_target_": "cowork.integrations.verl.CoworkAgentLoop",
                              "max_sandboxes": 3, "reward": "pass"})
    loop = hydra.utils.instantiate(entry, trainer_config=DictConfigWrap(cfg), server_manager=None, tokenizer=tok,
                                   processor=None, hf_model_type=None, dataset_cls=RLHFDataset,
                                   data_config=DictConfigWrap(cfg.data), tools=ToolListWrap([]))
    assert isinstance(loop, cl.CoworkAgentLoop)
    assert loop.options.max_sandboxes == 3 and loop.options.reward == "pass"
    assert asyncio.iscoroutinefunction(loop.run)
