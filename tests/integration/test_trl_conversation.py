"""TRL episodes graded on what the model said, with the task's user in the loop: TRL 1.16's own
GRPOTrainer (its response parser, tool loop and reward calls) drives cowork environments on real
sandboxes, with the model's turns scripted from the spec's oracle; the rewards equal run_task's."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import pytest

from cowork.agents import make_policy
from cowork.episode.run import run_task
from cowork.errors import EndpointUnavailable
from cowork.integrations import trl as ct
from cowork.rollouts.runner import reward_for

pytest.importorskip("trl", reason="trl is not installed (pip install 'cowork-runtime[trl]')")
pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
CRM = ROOT / "specs" / "crm-report-answer-numbers"  # graded on the final reply (answer checks)
MEETING = ROOT / "specs" / "mt-clarify-meeting-slot"  # a scripted user answers the agent's question
# Two days: the user edits the report and answers, an event drops a file overnight, day 2's request.
WEEKLY = ROOT / "specs" / "md-weekly-report-two-days"
END = "<|im_end|>"


def oracle_turns(spec) -> list[str]:
    """The spec's oracle as the model's generations, in the hermes format TRL parses: each call
    its own turn, a reply that ends a turn a call of the user channel, the last reply plain."""
    steps = list(spec.oracle)
    turns = []
    for n, step in enumerate(steps):
        if step.tool is not None:
            call = {"name": step.tool, "arguments": step.args}
        elif n < len(steps) - 1:
            call = {"name": ct.USER_TOOL, "arguments": {"message": step.reply}}
        else:
            turns.append(step.reply + END)
            continue
        turns.append(f"<tool_call>\n{json.dumps(call)}\n</tool_call>{END}")
    if steps[-1].tool is not None:
        turns.append("Done." + END)
    return turns


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    """A GRPOTrainer on a tiny model whose generations are the oracle's turns, and the spec."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    from cowork.agents.tiny import tiny_model, tiny_tokenizer

    spec = ct.CoworkTRL([CRM, MEETING, WEEKLY], max_sandboxes=4)
    tok = tiny_tokenizer()
    tok.response_template = qwen3_template  # hermes calls, as Qwen's templates write them
    args = GRPOConfig(output_dir=str(tmp_path_factory.mktemp("grpo")), use_cpu=True, bf16=False,
                      per_device_train_batch_size=2, num_generations=2, max_completion_length=12000, max_steps=1,
                      report_to=[], save_strategy="no", logging_steps=1)
    trainer = GRPOTrainer(model=tiny_model(len(tok)), processing_class=tok, args=args,
                          train_dataset=spec.train_dataset, environment_factory=spec.environment_factory,
                          reward_funcs=spec.reward_funcs)
    scripts = {ld.spec.prompt: oracle_turns(ld.spec) for ld in spec.tasks}

    def generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        """The model: the next oracle turn of the task whose prompt it is shown."""
        out = []
        for ids in prompt_ids:
            text = tok.decode(ids)
            turns = next(t for p, t in scripts.items() if p in text)
            out.append(tok(turns[text.count("<|im_start|>assistant") - 1])["input_ids"])
        return out, None

    trainer._generate_single_turn = generate
    try:
        yield trainer, spec
    finally:
        ct.close()
        mp.undo()


def _reference(loaded) -> float | None:
    result = asyncio.run(run_task(loaded, make_policy("oracle", loaded.spec)))
    assert result.grade.status == "graded", result.grade.error
    return reward_for(result.grade, "score")


class TestTheOracleThroughGRPOTrainer:
    def test_rewards_equal_run_tasks(self, trainer):
        trainer, spec = trainer
        rows = list(spec.train_dataset)
        assert [r["task"] for r in rows] == ["crm-report-answer-numbers", "mt-clarify-meeting-slot",
                                             "md-weekly-report-two-days"]
        trainer._generate_and_score_completions(rows + rows[2:])  # two of the two-day task: a group of 2
        envs = trainer.environments
        got = {e.task_id: e for e in envs}
        assert sorted(e.task_id for e in envs) == sorted(r["task"] for r in rows + rows[2:])
        for ld in spec.tasks:
            env = got[ld.spec.id]
            assert env.grade.status == "graded", env.grade.error
            failed = [(c.id, c.detail) for c in env.grade.checks if not c.passed]
            assert env.reward == _reference(ld) == 1.0, failed
        assert envs[3].reward == 1.0 and envs[3].evidence.trace["messages"] == envs[2].evidence.trace["messages"]

        # What was graded: the final reply, and the user's answer as a user message after the question.
        crm = got["crm-report-answer-numbers"].evidence.trace
        assert crm["messages"][-1]["role"] == "assistant" and "Total: 352,750" in crm["messages"][-1]["content"]
        meeting = got["mt-clarify-meeting-slot"].evidence
        roles = [m["role"] for m in meeting.trace["messages"]]
        asked = roles.index("user", 2)
        assert meeting.trace["messages"][asked - 1]["content"].startswith("I found more than one Daniel")
        assert meeting.trace["messages"][asked]["content"].startswith("Sorry, I mean Daniel Price")
        assert [b["turn"] for b in meeting.boundaries] == [1, 2]
        users = [e for e in meeting.trace["conversation"] if e.get("kind") == "user"]
        assert [(e["turn"], e["message"]) for e in users] == [(1, 1), (2, asked)]
        # The booking came after the answer: in turn 2 of the trace, as in run_task's.
        booking = next(s for s in meeting.trace["steps"] if s["tool"] == "calendar_create_event")
        assert booking["turn"] > next(s for s in meeting.trace["steps"] if s["tool"] == "contacts_search")["turn"]
        assert ct.USER_TOOL not in {s["tool"] for s in meeting.trace["steps"]}

        # Two days: the user's answer, then day 2's request, each as the user message of its turn.
        weekly = got["md-weekly-report-two-days"].evidence
        users = [e for e in weekly.trace["conversation"] if e.get("kind") == "user"]
        assert [(e["turn"], e["day"], e.get("source")) for e in users] == [(1, 1, "prompt"), (2, 1, "scripted"),
                                                                          (3, 2, "day")]
        said = [weekly.trace["messages"][e["message"]] for e in users]
        assert said[1]["content"].startswith("Thanks! I added a short note") and said[2]["content"].startswith("Morning!")
        assert [(b["turn"], b["day"]) for b in weekly.boundaries] == [(1, 1), (2, 1), (3, 2)]
        assert [w["actor"] for w in weekly.meta["world"]] == ["user", "world", "world"]  # note; next day; east.csv

    def test_the_model_is_told_how_to_talk_to_the_user(self, trainer):
        trainer, spec = trainer
        rows = {r["task"]: r for r in spec.train_dataset}
        assert ct.USER_TOOL in rows["mt-clarify-meeting-slot"]["prompt"][0]["content"]
        assert ct.USER_TOOL not in rows["crm-report-answer-numbers"]["prompt"][0]["content"]
        tools = {name: sorted(t.__name__ for t in ts) for name, ts in trainer._env_tools.items()}
        assert ct.USER_TOOL in tools["mt-clarify-meeting-slot"]
        assert ct.USER_TOOL not in tools["crm-report-answer-numbers"]



SIMULATED = """\
id: trl-simulated-user
title: A simulated user with hidden facts
prompt: Please book my trip to the Berlin office.
tools: [write_file]
user:
  llm:
    persona: Sam, a sales manager who writes short messages.
    goal: Get the Berlin trip written down in trip.txt.
    facts: ["leaving on 2026-03-10", "budget is 900 EUR"]
  turns:
    - {when: {reply_matches: "(?i)when"}, say: "On 2026-03-10, budget 900 EUR."}
checks:
  - {id: dates, type: file_contains, path: trip.txt, text: "2026-03-10"}
oracle:
  - {reply: "When do you leave?"}
  - {tool: write_file, args: {path: trip.txt, content: "2026-03-10, 900 EUR"}}
  - {reply: "Written down."}
violation:
  - {reply: "No."}
"""


def test_a_simulated_user_answers_through_the_channel(tmp_path):
    """The user model gets the agent's messages (the last one, the final reply, when the reward is
    read) and its answer comes back as the channel's result."""
    from fakes import FakeChatServer

    task = tmp_path / "task"
    (task / "workspace").mkdir(parents=True)
    (task / "task.yaml").write_text(textwrap.dedent(SIMULATED))

    def said(text):
        return 200, {"choices": [{"message": {"role": "assistant", "content": text}}], "usage": {"total_tokens": 7}}

    answers = [said("Leaving 2026-03-10, and keep it under 900 EUR."), said("Great, thanks! ###STOP###")]
    server = FakeChatServer(lambda method, path, body: answers.pop(0) if answers else (401, {"error": "bad key"}))
    spec = ct.CoworkTRL([task], max_sandboxes=1, user_model="user-sim", user_base_url=server.url)
    try:
        env, row = spec.environment_factory(), spec.train_dataset[0]
        env.reset(**row)
        answer = env.message_user(message="When do you leave?")
        assert answer == "The user answers:\n\nLeaving 2026-03-10, and keep it under 900 EUR."
        wrote = env.write_file(path="trip.txt", content="2026-03-10, 900 EUR")
        completion = [
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": ct.USER_TOOL, "arguments": {"message": "When do you leave?"}}}]},
            {"role": "tool", "name": ct.USER_TOOL, "content": answer},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "write_file", "arguments": {
                    "path": "trip.txt", "content": "2026-03-10, 900 EUR"}}}]},
            {"role": "tool", "name": "write_file", "content": wrote},
            {"role": "assistant", "content": "Written down."}]
        ct.record_conversation(env, row["prompt"], completion)
        assert env.get_reward() == 1.0
        trace = env.evidence.trace
        asked = [r["body"]["messages"][-1]["content"] for r in server.requests]

        # The user model refuses the key: not the agent's doing, so the episode is not scored.
        env.reset(**row)
        with pytest.raises(EndpointUnavailable):
            env.message_user(message="When do you leave?")
        assert env.message_user(message="Hello?").startswith("ERROR: the simulated user's model failed")
        assert env.get_reward() is None and env.grade.status == "policy_error"
    finally:
        server.close()
        ct.close()
    assert asked == ["When do you leave?", "Written down."]
    assert [e.get("source") for e in trace["conversation"] if e["kind"] == "user"] == ["prompt", "llm"]
    assert [e["stop"] for e in trace["conversation"] if e["kind"] == "simulated_user"] == [False, True]
    assert [m["content"] for m in trace["messages"] if m["role"] == "user"][1:] == [
        "Leaving 2026-03-10, and keep it under 900 EUR."]


JUDGED = """
id: trl-judged-summary
title: Say when the meeting is
prompt: Read note.txt and tell me when the meeting is.
workspace:
  dir: null
  files: [{path: note.txt, content: "Planning meeting: Friday 10:00.\\n"}]
tools: [read_file]
checks:
  - {id: read, type: tool_called, tool: read_file}
  - {id: says-friday, type: judge, rubric: "Does the assistant say the meeting is on Friday?"}
oracle:
  - {tool: read_file, args: {path: note.txt}}
  - {reply: "It is on Friday at 10:00."}
"""


@pytest.mark.parametrize("reply, reward", [("It is on Friday at 10:00.", 1.0), ("I could not tell.", 0.5)])
def test_a_judge_named_in_the_options_grades_the_reply(tmp_path, monkeypatch, reply, reward):
    """``CoworkTRL(..., judge_model=M)``: the judge reads the recorded conversation and its
    verdict is part of the reward (without one the check is not graded and never paid)."""
    from cowork import settings
    from cowork.grading.judge import _shared_judge
    from fakes import FakeChatServer

    monkeypatch.setenv("COWORK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    settings.reload()
    _shared_judge.cache_clear()
    task = tmp_path / "task"
    task.mkdir()
    (task / "task.yaml").write_text(textwrap.dedent(JUDGED))

    def verdict(method, path, body):
        shown = body["messages"][-1]["content"].split("<transcript>", 1)[-1].split("</transcript>", 1)[0]
        said = " ".join(line for line in shown.splitlines() if line.startswith("[assistant]"))
        return 200, {"choices": [{"message": {"role": "assistant", "content": json.dumps(
            {"passed": "Friday" in said, "reason": "read the reply"})}}]}

    server = FakeChatServer(verdict)
    spec = ct.CoworkTRL([task], max_sandboxes=1, judge_model="judge", judge_base_url=server.url)
    try:
        env, row = spec.environment_factory(), spec.train_dataset[0]
        env.reset(**row)
        read = env.read_file(path="note.txt")
        completion = [
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "read_file", "arguments": {"path": "note.txt"}}}]},
            {"role": "tool", "name": "read_file", "content": read},
            {"role": "assistant", "content": reply}]
        ct.record_conversation(env, row["prompt"], completion)
        assert env.get_reward() == reward
        assert [r["body"]["model"] for r in server.requests if r["method"] == "POST"] == ["judge"]
    finally:
        server.close()
        ct.close()
        settings.get.cache_clear()
        _shared_judge.cache_clear()
