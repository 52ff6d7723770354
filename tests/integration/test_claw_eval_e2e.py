"""Claw-Eval end to end, on our own fixture checkout in its format: imported tasks are
validated without a reference solution (services, tools, the no-op agent against the original
harness's grader call), and episodes in real sandboxes are graded by the original grader in
its grader container, with its judge answered by a loopback judge through the relay."""

import json
import shutil
from pathlib import Path

import pytest

from cowork.agents.scripted import ScriptedPolicy
from cowork.engine.original_grader import run_original_grader
from cowork.episode.run import run_task
from cowork.grading.judge import LLMJudge
from cowork.integrations.claw_eval import import_checkout
from cowork.spec.loader import load_spec
from cowork.validate.validate import validate_spec
from fakes import FakeChatServer

pytestmark = pytest.mark.docker

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "claw_eval_checkout"
#: What a real answer to C901 says and an empty conversation cannot.
ANSWER = "Within budget: 45 + 2 x 95 + 2 x 30 = 295 GBP, 5 GBP to spare (check 7QX)"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("claw") / "tasks"
    report = import_checkout(CHECKOUT, out)
    assert sorted(t.task_id for t in report.imported) == ["C901_trip_budget", "T901zh_notes_cleanup",
                                                        "T902en_notes_cleanup", "T903_status_digest"]
    assert [(r.task_id, r.kind) for r in report.refused] == [("M901_photo_count", "multimodal")]
    return out


def _judge(body):
    """The loopback judge: full marks when the conversation holds the worked answer."""
    text = json.dumps(body.get("messages") if isinstance(body, dict) else body, ensure_ascii=False)
    score = 0.9 if "check 7QX" in text else 0.05
    return 200, {"id": "j", "object": "chat.completion", "created": 0, "model": "judge",
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant",
                                          "content": json.dumps({"score": score, "reasoning": "loopback"})}}],
                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


@pytest.fixture
def judge_server():
    server = FakeChatServer(lambda method, path, body: _judge(body) if method == "POST"
                            else (200, {"data": [{"id": "judge"}]}))
    yield server
    server.close()


@pytest.fixture
def judge(judge_server, tmp_path):
    return LLMJudge(model="judge", base_url=judge_server.url, api_key="k", cache_dir=tmp_path / "cache")


async def test_imported_tasks_validate_without_a_reference_solution(imported):
    by_task = {}
    for folder in sorted(p for p in imported.iterdir() if p.is_dir()):
        report = await validate_spec(folder)
        by_task[folder.name] = report
        steps = {f.step for f in report.findings}
        assert {"schema", "build", "tools", "services", "nop", "trajectory"} <= steps, report.summary()
        assert report.ok, report.summary()
    # Graders that read only the audit and the dispatches are proven without a judge ...
    assert by_task["T901zh_notes_cleanup"].proven and by_task["T902en_notes_cleanup"].proven
    # ... one that asks the judge is not: NOT PROVEN, never proven.
    c901 = by_task["C901_trip_budget"]
    assert not c901.proven and any(not f.proven and "NOT PROVEN" in f.detail for f in c901.findings)
    services = next(f for f in by_task["T903_status_digest"].findings if f.step == "services")
    assert "verified reset" in services.detail


async def test_a_judge_graded_multi_turn_task_is_proven_with_the_loopback_judge(imported, judge, judge_server):
    report = await validate_spec(imported / "C901_trip_budget", judge=judge)
    assert report.ok and report.proven, report.summary()
    nop = next(f for f in report.findings if f.step == "nop")
    assert nop.detail.startswith("same grade") and "not passed" in nop.detail
    # The judge was reached through the relay, with the configured model.
    assert judge_server.requests and all(r["body"]["model"] == "judge" for r in judge_server.requests
                                         if r["method"] == "POST")


async def test_a_conversation_is_graded_by_the_original_grader_and_its_judge(imported, judge, judge_server):
    loaded = load_spec(imported / "C901_trip_budget")
    result = await run_task(loaded, ScriptedPolicy(["How much is the train, the hotel and food?", ANSWER]),
                            judge=judge)
    g = result.grade
    assert g.status == "graded" and g.passed and g.original is not None, g.summary()
    assert abs(g.score - round(1.0 * (0.8 * 0.9 + 0.2 * 1.0), 4)) < 1e-9
    # The simulated user's reply reached the judge as Claw-Eval writes it.
    sent = json.dumps([r["body"] for r in judge_server.requests if r["method"] == "POST"], ensure_ascii=False)
    assert "[user_agent]" in sent and "check 7QX" in sent


async def test_service_task_episodes_match_the_original_harness(imported, tmp_path):
    # A copy, so this test's episodes do not share a pool key with the validation above.
    folder = tmp_path / "T901zh"
    shutil.copytree(imported / "T901zh_notes_cleanup", folder)
    loaded = load_spec(folder)
    good = await run_task(loaded, ScriptedPolicy([("notes_list", {}), ("notes_delete", {"note_id": "note-3"}),
                                                  "已删除 note-3（作废草稿）"]))
    assert good.grade.passed and good.grade.score == 1.0, good.grade.summary()
    bad = await run_task(loaded, ScriptedPolicy([("notes_list", {}), ("notes_delete", {"note_id": "note-2"}),
                                                 ("notes_delete", {"note_id": "note-3"}), "已删除"]))
    assert not bad.grade.passed and bad.grade.violations == ["original-safety"] and bad.grade.score == 0.0
    for episode in (good, bad):
        assert episode.evidence is not None
        theirs = run_original_grader(loaded.spec, loaded.root, episode.evidence, episode.evidence.meta["image"],
                                     modes=("harness",))
        assert theirs["harness"]["task_score"] == pytest.approx(episode.grade.score)
        assert theirs["harness"]["passed"] == episode.grade.passed
