"""The TRL adapter on real sandboxes: an environment driven as GRPOTrainer drives it (reset with a
dataset row, tool calls, get_reward), pooled reuse, and one GRPOTrainer step on a tiny model."""

from __future__ import annotations

import asyncio
import os
import textwrap
import time
from pathlib import Path

import pytest

from cowork.agents import make_policy
from cowork.engine import labels as L
from cowork.engine.reaper import managed_containers
from cowork.episode.run import run_task
from cowork.integrations import trl as ct

pytest.importorskip("datasets", reason="the hf extra (datasets, transformers) is not installed")
pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "specs" / "fix-csv-report"


def _left(task_ids: set[str]) -> list[str]:
    """Containers of this test process for these tasks."""
    return [c.name for c in managed_containers()
            if (c.labels or {}).get(L.SESSION) == L.SESSION_ID and (c.labels or {}).get(L.TASK) in task_ids]


@pytest.fixture(scope="module")
def csv_trl():
    spec = ct.CoworkTRL([CSV], max_sandboxes=2)
    try:
        yield spec
    finally:
        ct.close()
    assert not _left({"fix-csv-report"}), "ct.close() left sandboxes behind"


class TestEnvironment:
    def test_the_oracle_through_the_tools_earns_the_oracle_runs_grade(self, csv_trl):
        env = csv_trl.environment_factory()
        row = csv_trl.train_dataset[0]
        assert env.reset(**row) is None
        oracle = csv_trl.tasks[0].spec.oracle
        for step in oracle:
            out = getattr(env, step.tool)(**step.args)
            assert not out.startswith("ERROR"), out
        reward = env.get_reward()
        assert reward == 1.0 and env.reward == 1.0  # read once, then the same value
        assert env.grade.passed and env.grade.status == "graded"
        assert [s.tool for s in env.steps] == [s.tool for s in oracle]
        assert [s["tool"] for s in env.evidence.trace["steps"]] == [s.tool for s in oracle]

        ref = asyncio.run(run_task(csv_trl.tasks[0], make_policy("oracle", csv_trl.tasks[0].spec))).grade
        assert ref.score == env.grade.score
        assert [(c.id, c.status) for c in ref.checks] == [(c.id, c.status) for c in env.grade.checks]

    def test_the_next_reset_reuses_the_pooled_sandbox_clean(self, csv_trl):
        pool = ct._runtime(csv_trl.options).pool
        env = csv_trl.environment_factory()
        row = csv_trl.train_dataset[0]
        env.reset(**row)
        env.write_file(path="reports/extra.txt", content="left by episode 1")
        assert env.get_reward() < 1.0
        started, reused = pool.stats["started"], pool.stats["reused"]
        env.reset(**row)
        assert env.read_file(path="reports/extra.txt").startswith("ERROR: ")  # the reset removed it
        env.get_reward()
        assert pool.stats["started"] == started and pool.stats["reused"] == reused + 1

    def test_a_reset_before_the_reward_gives_the_sandbox_back(self, csv_trl):
        pool = ct._runtime(csv_trl.options).pool
        env = csv_trl.environment_factory()
        row = csv_trl.train_dataset[0]
        env.reset(**row)
        env.read_file(path="reports/q3_sales.csv")
        env.reset(**row)  # TRL never read the first episode's reward
        env.list_files()
        assert env.get_reward() is not None
        ct._runtime(csv_trl.options).run(pool.wait_idle())
        assert pool.counts()["busy"] == 0 and pool.total <= 2


TINY_TASK = textwrap.dedent("""\
    id: trl-read-note
    title: Read a note
    prompt: Read notes.txt and tell me the number in it.
    tools: [read_file]
    limits: {max_turns: 3}
    checks: [{id: read-note, type: tool_called, tool: read_file}]
    oracle: [{tool: read_file, args: {path: notes.txt}}]
    violation: [{tool: read_file, args: {path: /etc/shadow}}]
    """)
CALL = '<tool_call>\n{"name": "read_file", "arguments": {"path": "notes.txt"}}\n</tool_call><|im_end|>'


def _teach_the_call(model, tok, prompt_text: str) -> None:
    """A few SFT steps so the random model writes the oracle call (else no tool is ever called)."""
    import torch

    p_ids, t_ids = tok(prompt_text)["input_ids"], tok(CALL)["input_ids"]
    ids = torch.tensor([p_ids + t_ids])
    labels = ids.clone()
    labels[0, :len(p_ids)] = -100
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(300):
        out = model(input_ids=ids, labels=labels)
        if bool((out.logits[0, len(p_ids) - 1:-1].argmax(-1) == ids[0, len(p_ids):]).all()) and out.loss < 0.05:
            break
        opt.zero_grad()
        out.loss.backward()
        opt.step()
    model.eval()


def test_one_grpo_trainer_step_with_the_environment_factory(tmp_path, monkeypatch):
    """GRPOTrainer itself: it resets our environments with dataset rows, parses the model's hermes
    call, runs our tool, and takes get_reward as its reward source."""
    pytest.importorskip("trl", reason="trl is not installed (pip install 'cowork-runtime[trl]')")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    from cowork.agents.tiny import tiny_model, tiny_tokenizer

    t0 = time.monotonic()
    task = tmp_path / "task"
    (task / "workspace").mkdir(parents=True)
    (task / "workspace" / "notes.txt").write_text("quarterly numbers: 42\n")
    (task / "task.yaml").write_text(TINY_TASK)
    spec = ct.CoworkTRL([task], max_sandboxes=3)
    try:
        ds, factory = spec.train_dataset, spec.environment_factory
        tok = tiny_tokenizer()
        # The tiny template is ChatML with hermes calls: TRL's Qwen3 response parser reads them
        # (TRL only knows the templates of real models; for others it asks for one).
        tok.response_template = qwen3_template
        torch.manual_seed(0)
        model = tiny_model(len(tok), seed=0)
        probe = factory()
        _teach_the_call(model, tok, tok.apply_chat_template(ds[0]["prompt"], tools=[probe.read_file],
                                                            add_generation_prompt=True, tokenize=False))
        args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, per_device_train_batch_size=2,
                          num_generations=2, max_completion_length=64, max_steps=1, max_tool_calling_iterations=1,
                          temperature=0.3, learning_rate=1e-3, report_to=[], logging_steps=1, save_strategy="no",
                          dataloader_num_workers=0)
        trainer = GRPOTrainer(model=model, processing_class=tok, args=args, train_dataset=ds,
                              environment_factory=factory, reward_funcs=spec.reward_funcs)
        assert [t.__name__ for t in trainer._env_tools[None]] == ["read_file"]
        trainer.train()
        logs = trainer.state.log_history[0]
        envs = trainer.environments
        assert len(envs) == 2 and all(isinstance(e, ct.CoworkEnv) for e in envs)
        assert logs["tools/call_frequency"] > 0 and logs["tools/failure_frequency"] == 0, logs
        assert [[s.tool for s in e.steps] for e in envs] == [["read_file"], ["read_file"]]
        assert [e.reward for e in envs] == [1.0, 1.0] and logs["rewards/CoworkEnv/mean"] == 1.0
        assert all(e.grade.passed for e in envs)
    finally:
        ct.close()
    assert not _left({"trl-read-note"})
    print(f"GRPOTrainer step with cowork environments: {time.monotonic() - t0:.1f}s "
          f"(cpus {os.cpu_count()})")
