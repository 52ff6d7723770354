"""``judge`` checks graded inside Inspect: the model bound to the scorer's role (``grader``)
answers the questions ``cowork run --judge-model`` asks, through Inspect's model API; with no
model bound they stay not graded (the evaluated model never judges itself), and a judge that
fails is an error, never a pass. Inspect's mock model stands in for a provider (no daemon)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("inspect_ai", reason="the inspect extra is not installed (pip install 'cowork-runtime[inspect]')")

from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402

from cowork.engine.original_grader import JudgeRelay  # noqa: E402
from cowork.errors import PolicyError  # noqa: E402
from cowork.evidence import Evidence  # noqa: E402
from cowork.grading import grade  # noqa: E402
from cowork.grading.judge import LLMJudge, judge_evidence  # noqa: E402
from cowork.integrations.inspect.judge import InspectChatClient, role_judge  # noqa: E402
from cowork.spec.models import TaskSpec  # noqa: E402
from fakes import tar_of  # noqa: E402

SPEC = TaskSpec.model_validate({
    "id": "judged", "title": "Judged", "prompt": "When is the meeting?", "tools": ["read_file"],
    "checks": [{"id": "summary", "type": "judge", "rubric": "Does the reply say Friday?"}],
    "oracle": [{"reply": "Friday."}]})


def _ev(reply: str) -> Evidence:
    return Evidence(audit_text="", audit_count=0, workspace_tar=tar_of({"a.txt": "a"}), initial={},
                    trace={"messages": [{"role": "user", "content": SPEC.prompt}, {"role": "assistant", "content": reply}]})


def _mock(*answers: str):
    """Inspect's mock model answering ``answers`` in order, noting what it was asked."""
    asked: list = []

    def answer(input, tools, tool_choice, config):
        asked.append((input, config))
        out = ModelOutput.from_content("mockllm/model", answers[len(asked) - 1])
        # With its usage given, the mock does not count tokens with tiktoken (which downloads).
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    return get_model("mockllm/model", custom_outputs=answer, memoize=False), asked


async def test_the_judge_asks_an_inspect_model_and_its_verdict_grades_the_check(tmp_path):
    model, asked = _mock(json.dumps({"passed": True, "reason": "says Friday"}),
                         json.dumps({"passed": False, "reason": "no day"}))
    judge = LLMJudge(model=str(model), client=InspectChatClient(model), cache_dir=tmp_path)
    good, bad = _ev("It is on Friday."), _ev("I do not know.")
    await judge_evidence(judge, SPEC, good)
    await judge_evidence(judge, SPEC, bad)
    assert grade(SPEC, good).passed and not grade(SPEC, bad).passed
    assert grade(SPEC, bad).not_graded == []
    # Asked as the OpenAI-compatible judge asks: system, then the material with the rubric
    # last; deterministic and short.
    (messages, config), _ = asked
    assert [m.role for m in messages] == ["system", "user"] and "Does the reply say Friday?" in messages[1].text
    assert config.temperature == 0.0 and config.max_tokens == 300


async def test_an_unreadable_verdict_leaves_the_check_not_graded(tmp_path):
    model, _ = _mock("I think it is fine.")
    ev = _ev("It is on Friday.")
    await judge_evidence(LLMJudge(model=str(model), client=InspectChatClient(model), cache_dir=tmp_path), SPEC, ev)
    g = grade(SPEC, ev)
    assert not g.passed and g.not_graded == ["summary"]


async def test_a_failing_model_is_a_judge_error_not_a_verdict():
    def broken(input, tools, tool_choice, config):
        raise RuntimeError("provider down")

    client = InspectChatClient(get_model("mockllm/model", custom_outputs=broken, memoize=False))
    with pytest.raises(PolicyError, match="provider down"):
        await client.complete([{"role": "user", "content": "x"}])


def test_no_model_bound_to_the_role_means_no_judge():
    assert role_judge("grader") is None  # outside an eval nothing is bound
    assert role_judge(None) is None


def test_the_original_grader_relay_refuses_a_judge_without_an_endpoint(tmp_path):
    """An imported task's grader sends raw chat-completions requests; an Inspect model cannot
    take them, so they fail (the grade is then not graded), never answered by something else."""
    model, _ = _mock("{}")
    relay = JudgeRelay(tmp_path, LLMJudge(model=str(model), client=InspectChatClient(model), cache_dir=tmp_path))
    status, body = relay.answer(json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode())
    assert status == 503 and "endpoint" in body["error"]["message"]
    assert relay.report()["judge_failures"] == 1  # counted: the grade is then not graded
