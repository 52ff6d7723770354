"""``cowork grade`` and ``cowork down --evidence`` with ``--judge-model``: a saved bundle's or a
live sandbox's judge checks are judged (they stayed not graded, so a session an MCP client
drove on a judge-graded task could never pass); without a judge they stay not graded, never
passed. No Docker: a bundle built here, a loopback judge, and ``Sandbox.grade_evidence`` on a
stand-in of the sandbox."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from cowork import settings
from cowork.cli import main
from cowork.evidence import Evidence
from cowork.formats import GENESIS_HASH, canonical_json, seal
from cowork.grading.judge import LLMJudge
from cowork.sandbox.sandbox import Sandbox
from cowork.spec.models import TaskSpec
from fakes import FakeChatServer, tar_of

SPEC = {"id": "judged", "title": "Judged", "prompt": "Tell me what the note says.", "tools": ["read_file"],
        "checks": [{"id": "read", "type": "tool_called", "tool": "read_file"},
                   {"id": "summary", "type": "judge", "rubric": "Does the reply say the meeting is on Friday?"}],
        "oracle": [{"tool": "read_file", "args": {"path": "note.txt"}}, {"reply": "Friday."}]}


def _evidence(reply: str) -> Evidence:
    recs = [{"kind": "session_start"}, {"kind": "tool_call", "tool": "read_file", "args": {"path": "note.txt"},
                                         "outcome": "ok"}]
    prev, lines = GENESIS_HASH, []
    for i, r in enumerate(recs):
        s = seal({"seq": i, **r}, prev)
        prev = s["hash"]
        lines.append(canonical_json(s))
    return Evidence(audit_text="\n".join(lines) + "\n", audit_count=len(recs), workspace_tar=tar_of({"note.txt": "x"}),
                    initial={}, trace={"messages": [{"role": "user", "content": SPEC["prompt"]},
                                                    {"role": "assistant", "content": reply}]})


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """A judge cache of this test's own: a verdict cached by another run is not asked again."""
    monkeypatch.setenv("COWORK_CACHE", str(tmp_path / "cache"))
    settings.reload()
    yield
    settings.get.cache_clear()


@pytest.fixture
def judge_server():
    def decide(method, path, body):
        if method != "POST":
            return 200, {"data": [{"id": "j"}]}
        shown = body["messages"][-1]["content"].split("<transcript>", 1)[-1].split("</transcript>", 1)[0]
        said = [line for line in shown.splitlines() if line.startswith("[assistant]")]
        verdict = {"passed": any("Friday" in line for line in said), "reason": "read the reply"}
        return 200, {"choices": [{"message": {"role": "assistant", "content": json.dumps(verdict)}}]}

    server = FakeChatServer(decide)
    yield server
    server.close()


@pytest.fixture
def bundle(tmp_path):
    folder = _evidence("The meeting is on Friday.").save(tmp_path / "ev")
    (folder / "spec.json").write_text(TaskSpec.model_validate(SPEC).model_dump_json())
    return folder


def test_a_saved_bundle_is_judged_with_a_judge_and_not_graded_without(bundle, judge_server, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert main(["grade", str(bundle), "--json"]) == 0
    without = json.loads(capsys.readouterr().out)
    assert without["not_graded"] == ["summary"] and not without["passed"]
    assert not [r for r in judge_server.requests if r["method"] == "POST"]

    assert main(["grade", str(bundle), "--json", "--judge-model", "j", "--judge-base-url", judge_server.url]) == 0
    judged = json.loads(capsys.readouterr().out)
    assert judged["not_graded"] == [] and judged["passed"] and judged["score"] == 1.0
    assert [r["body"]["model"] for r in judge_server.requests if r["method"] == "POST"] == ["j"]


def test_a_judge_that_does_not_answer_stops_the_grade_before_anything(bundle, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    code = main(["grade", str(bundle), "--judge-model", "j", "--judge-base-url", "http://127.0.0.1:9/v1"])
    assert code == 3 and "--judge-model" in capsys.readouterr().err


async def test_a_live_sandboxs_grade_judges_its_judge_checks(judge_server, tmp_path):
    """What ``cowork grade ID --judge-model`` and ``cowork down ID --evidence DIR --judge-model``
    call: the judge's verdict decides the check, a reply without the fact fails it."""
    spec = TaskSpec.model_validate(SPEC)
    stand_in = SimpleNamespace(spec=spec, loaded=None, image="unused")
    judge = LLMJudge(model="j", base_url=judge_server.url, api_key="k", cache_dir=tmp_path / "cache")
    good = await Sandbox.grade_evidence(stand_in, _evidence("It is on Friday."), judge=judge)
    bad = await Sandbox.grade_evidence(stand_in, _evidence("I could not read it."), judge=judge)
    unjudged = await Sandbox.grade_evidence(stand_in, _evidence("It is on Friday."))
    assert good.passed and not good.not_graded
    assert not bad.passed and next(c for c in bad.checks if c.id == "summary").status == "fail"
    assert not unjudged.passed and unjudged.not_graded == ["summary"]


def test_down_refuses_a_judge_without_evidence_to_grade(capsys):
    assert main(["down", "no-such-sandbox", "--judge-model", "j"]) == 2
    assert "--evidence" in capsys.readouterr().err


def test_a_judge_that_fails_mid_grade_leaves_its_check_not_graded(bundle, capsys, monkeypatch):
    """The endpoint answered the preflight, then fails every judgement: the grade is made and
    printed with the check not graded and why (no traceback, never passed)."""
    def flaky(method, path, body):
        return (200, {"data": [{"id": "j"}]}) if method == "GET" else (500, {"error": {"message": "overloaded"}})

    server = FakeChatServer(flaky)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    try:
        code = main(["grade", str(bundle), "--json", "--judge-model", "j", "--judge-base-url", server.url])
    finally:
        server.close()
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["not_graded"] == ["summary"] and not out["passed"]
    summary = next(c for c in out["checks"] if c["id"] == "summary")
    assert "could not be asked" in summary["detail"] or "could not be asked" in (summary.get("error") or "")
