"""The Claw-Eval-format fixture checkout works on its own terms (host Python, no Docker)."""

from __future__ import annotations

import importlib
import json
import sys
import types
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "claw_eval_checkout"
TASKS = CHECKOUT / "tasks"
TASK_IDS = [
    "T901zh_notes_cleanup",
    "T902en_notes_cleanup",
    "C901_trip_budget",
    "T903_status_digest",
    "M901_photo_count",
]


@pytest.fixture
def ce(monkeypatch):
    """The fixture's claw_eval package on sys.path; every claw_eval module is dropped afterwards."""
    monkeypatch.syspath_prepend(str(CHECKOUT / "src"))
    for name in [n for n in sys.modules if n == "claw_eval" or n.startswith("claw_eval.")]:
        monkeypatch.delitem(sys.modules, name)
    ns = types.SimpleNamespace(
        task=importlib.import_module("claw_eval.models.task"),
        trace=importlib.import_module("claw_eval.models.trace"),
        scoring=importlib.import_module("claw_eval.models.scoring"),
        registry=importlib.import_module("claw_eval.graders.registry"),
        reader=importlib.import_module("claw_eval.trace.reader"),
        cli=importlib.import_module("claw_eval.cli"),
    )
    yield ns
    for name in [n for n in sys.modules if n == "claw_eval" or n.startswith("claw_eval.")]:
        sys.modules.pop(name, None)
    for name in [n for n in sys.modules if n.startswith(("task_grader_", "peer_grader_", "openai"))]:
        sys.modules.pop(name, None)


def _grade(ce, task_id, messages=(), dispatches=(), audit=None, judge=None):
    task = ce.task.TaskDefinition.from_yaml(TASKS / task_id / "task.yaml")
    grader = ce.registry.get_grader(task_id, TASKS)
    scores, calls = ce.cli._grade_with_optional_params(
        grader, list(messages), list(dispatches), task, audit_data=audit or {}, judge=judge, media_events=[]
    )
    return scores, calls


def _msg(ce, role, text):
    return ce.trace.TraceMessage(trace_id="t", message={"role": role, "content": text})


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_each_task_loads_and_grades_an_empty_trace(ce, task_id):
    task = ce.task.TaskDefinition.from_yaml(TASKS / task_id / "task.yaml")
    assert task.task_id == task_id
    scores, calls = _grade(ce, task_id)
    assert scores.completion == 0.0
    assert scores.safety == 1.0
    assert calls == []
    assert ce.scoring.compute_task_score(scores) < 0.75


def test_service_task_scores_from_audit_and_dispatches(ce):
    dispatch = ce.trace.ToolDispatch(
        trace_id="t", tool_use_id="c1", tool_name="notes_list", endpoint_url="http://localhost:9131/notes/list"
    )
    audit = {"notes": {"deleted": [{"id": "note-3"}], "calls": []}}
    done = [_msg(ce, "user", "x"), _msg(ce, "assistant", "已删除 Q1 计划草稿")]
    scores, _ = _grade(ce, "T901zh_notes_cleanup", done, [dispatch], audit)
    assert (scores.completion, scores.safety, scores.robustness) == (1.0, 1.0, 1.0)
    assert ce.scoring.is_pass(ce.scoring.compute_task_score(scores))

    bad = {"notes": {"deleted": [{"id": "note-3"}, {"id": "note-2"}]}}
    scores, _ = _grade(ce, "T901zh_notes_cleanup", done, [dispatch], bad)
    assert scores.safety == 0.0
    assert ce.scoring.compute_task_score(scores) == 0.0


def test_english_variant_reuses_its_peer_with_english_words(ce):
    audit = {"notes": {"deleted": [{"id": "note-3"}]}}
    english = [_msg(ce, "assistant", "I deleted the Q1 plan draft.")]
    chinese = [_msg(ce, "assistant", "已删除")]
    assert _grade(ce, "T902en_notes_cleanup", english, audit=audit)[0].completion == 0.8
    assert _grade(ce, "T902en_notes_cleanup", chinese, audit=audit)[0].completion == 0.6
    assert _grade(ce, "T901zh_notes_cleanup", chinese, audit=audit)[0].completion == 0.8


class _FakeJudge:
    """Answers evaluate() and raw chat completions with a fixed score, logging each call."""

    def __init__(self, score):
        self.model_id = "fake-judge"
        self.score = score
        self.log: list = []
        reply = types.SimpleNamespace(
            choices=[types.SimpleNamespace(message=types.SimpleNamespace(content=json.dumps({"score": score})))]
        )

        def create(**kwargs):
            self.log.append(kwargs)
            return reply

        self.client = types.SimpleNamespace(
            chat=types.SimpleNamespace(completions=types.SimpleNamespace(create=create))
        )

    def evaluate(self, task_prompt, conversation, actions_summary, rubric):
        self.log.append(rubric)
        return types.SimpleNamespace(score=self.score, reasoning="fake")

    def reset_call_log(self):
        self.log.clear()

    def get_call_log(self):
        return list(self.log)


def test_judge_graded_tasks_use_the_judge(ce):
    talk = [_msg(ce, "user", "trip?"), _msg(ce, "assistant", "Fare?"), _msg(ce, "user", "[user_agent]\n45 GBP")]
    scores, calls = _grade(ce, "C901_trip_budget", talk, judge=_FakeJudge(0.9))
    assert scores.completion == 0.9 and len(calls) == 1

    audit = {
        "kb": {"calls": [{"endpoint": "/notes/get", "request_body": {"note_id": i}} for i in ("note-1", "note-2")]}
    }
    digest = [_msg(ce, "assistant", "Billing migration: done. Search reindex: blocked.")]
    judge = _FakeJudge(0.6)
    scores, calls = _grade(ce, "T903_status_digest", digest, audit=audit, judge=judge)
    assert scores.completion == 0.8
    assert calls[0]["model"] == "fake-judge"
    assert _grade(ce, "T903_status_digest", digest, audit=audit)[0].completion == 0.5


def test_llm_judge_builds_an_openai_client_and_parses_the_reply(ce, monkeypatch):
    made = {}

    class OpenAI:
        def __init__(self, api_key=None, base_url=None):
            made.update(api_key=api_key, base_url=base_url)
            content = 'Sure:\n```json\n{"score": 0.7, "reasoning": "ok"}\n```'
            reply = types.SimpleNamespace(
                choices=[types.SimpleNamespace(message=types.SimpleNamespace(content=content))]
            )
            completions = types.SimpleNamespace(create=lambda **kw: reply)
            self.chat = types.SimpleNamespace(completions=completions)

    monkeypatch.setitem(sys.modules, "openai", types.SimpleNamespace(OpenAI=OpenAI))
    llm_judge = importlib.import_module("claw_eval.graders.llm_judge")
    judge = llm_judge.LLMJudge("m", api_key="k", base_url="http://judge/v1")
    assert made == {"api_key": "k", "base_url": "http://judge/v1"}
    result = judge.evaluate("p", "c", "a", "r")
    assert (result.score, result.reasoning) == (0.7, "ok")
    assert len(judge.get_call_log()) == 1
    judge.reset_call_log()
    assert judge.get_call_log() == []
    with pytest.raises(ValueError, match="no JSON"):
        llm_judge.parse_judge_reply("no verdict")


def test_trace_reader_partitions_events(ce, tmp_path):
    lines = [
        {"type": "trace_start", "trace_id": "t", "task_id": "T901zh_notes_cleanup", "model": "m"},
        {"type": "message", "trace_id": "t", "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]}},
        {
            "type": "message",
            "trace_id": "t",
            "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "notes_list"}]},
        },
        {
            "type": "tool_dispatch",
            "trace_id": "t",
            "tool_use_id": "c1",
            "tool_name": "notes_list",
            "endpoint_url": "http://localhost:9131/notes/list",
            "response_status": 503,
        },
        {
            "type": "audit_snapshot",
            "trace_id": "t",
            "service_name": "notes",
            "audit_url": "u",
            "audit_data": {"calls": []},
        },
        {"type": "trace_end", "trace_id": "t", "total_turns": 1},
    ]
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    start, messages, dispatches, media, end, audit = ce.reader.load_trace(path)
    assert start.task_id == "T901zh_notes_cleanup" and end.total_turns == 1
    assert [m.message.role for m in messages] == ["user", "assistant"]
    assert dispatches[0].response_status == 503 and media == [] and audit == {"notes": {"calls": []}}
    result = ce.cli.cmd_grade(str(path), str(TASKS / "T901zh_notes_cleanup" / "task.yaml"))
    assert result["scores"]["robustness"] == 0.0 and result["passed"] is False

    path.write_text(json.dumps({"type": "nonsense"}) + "\n")
    with pytest.raises(ValueError, match="trace.jsonl:1"):
        ce.reader.load_trace(path)
