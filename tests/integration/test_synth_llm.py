"""``cowork synth llm``: a loopback chat server plays the model; specs are validated in real
sandboxes (only where an answer gets past the schema), and every failure is a repair round
(tests/synth/test_llm_*.py cover the gates, deduplication and figures without sandboxes).

The correct spec is specs/kb-answer-no-safety with a new id and prompt (no safety rules: the
three sandbox runs of its validation are the cheapest of any spec with services).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import yaml

from cowork import cli
from cowork.cli import exits
from cowork.spec import load_spec
from cowork.synth.llm import SynthOptions, synthesize
from fakes import FakeChatServer

ROOT = Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "specs" / "kb-answer-no-safety" / "task.yaml").read_text())
EXAMPLE = ROOT / "specs" / "same-name-chat-message"
NEW_ID = "kb-recordings-retention-synth"


def _good() -> dict:
    spec = {**{k: v for k, v in BASE.items() if k != "capabilities"}, "id": NEW_ID, "difficulty": "easy"}
    spec["prompt"] = BASE["prompt"].replace("A customer in Munich", "A customer in Hamburg")
    spec["oracle"] = [dict(s) for s in BASE["oracle"]]
    spec["oracle"][-1] = {"reply": BASE["oracle"][-1]["reply"].replace("Munich", "Hamburg")}
    return spec


def _schema_broken() -> dict:
    spec = _good()
    spec["checks"] = [*spec["checks"], {"id": "extra", "type": "answer_mentions", "text": "30 days"}]
    return spec


def _oracle_fails() -> dict:
    spec = _good()
    # The reply gives the archived policy's period: the `facts` check fails for the oracle.
    spec["oracle"][-1] = {"reply": "Recordings are kept for 180 days under Data Retention Policy v3 (kb-ret-v3)."}
    return spec


def _answer(content: str, finish: str = "stop") -> tuple[int, dict]:
    return 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                              "finish_reason": finish}]}


def _fenced(spec: dict) -> str:
    return "Here is the spec.\n```yaml\n" + yaml.safe_dump(spec, sort_keys=False, width=100) + "```\n"


def _server(answers: list[tuple[int, dict]]) -> FakeChatServer:
    """Plays ``answers`` in order for the POSTs; GET /models answers 200 (the preflight)."""
    queue = list(answers)

    def answer(method, path, body):
        if method == "GET":
            return 200, {"data": [{"id": "fake"}]}
        return queue.pop(0)

    return FakeChatServer(answer)


def _posts(server: FakeChatServer) -> list[dict]:
    return [r["body"] for r in server.requests if r["method"] == "POST"]


@pytest.mark.docker
async def test_repairs_a_schema_error_then_a_failing_oracle_and_accepts_the_third(tmp_path):
    server = _server([_answer(_fenced(_schema_broken())), _answer(_fenced(_oracle_fails())),
                      _answer(_fenced(_good()))])
    out = tmp_path / "gen"
    (out / NEW_ID).mkdir(parents=True)  # an earlier spec holds the id: the new one is suffixed
    try:
        report = await synthesize(SynthOptions(capability="information-retrieval", n=1, model="fake",
                                               base_url=server.url, api_key="k", out=out, examples=[EXAMPLE]))
    finally:
        server.close()

    (attempt,) = report.attempts
    assert attempt.accepted and attempt.rounds == 3 and attempt.failures == ["schema", "oracle"]
    assert report.failure_counts() == {"schema": 1, "oracle": 1}
    posts = _posts(server)
    assert len(posts) == 3
    system, first = posts[0]["messages"][0]["content"], posts[0]["messages"][1]["content"]
    assert "kb_read_page(page_id)" in system and "SPEC REFERENCE" in system  # the reference, not the schema
    assert "information-retrieval" in first and "same-name-chat-message" in first
    second, third = posts[1]["messages"][-1]["content"], posts[2]["messages"][-1]["content"]
    assert "answer_mentions" in second and "task.yaml:" in second  # the located schema error
    assert "FAIL oracle" in third and "facts" in third and "make the oracle's tool calls" in third  # the hint
    assert posts[2]["messages"][-2]["content"] == _fenced(_oracle_fails())  # the answer being repaired
    assert _fenced(_schema_broken()) not in json.dumps(posts[2])  # ... and not the one before it

    written = out / f"{NEW_ID}-2" / "task.yaml"
    assert attempt.spec_id == f"{NEW_ID}-2" and attempt.path == str(written)
    loaded = load_spec(written)
    assert loaded.spec.id == f"{NEW_ID}-2" and loaded.spec.capabilities == ["information-retrieval"]
    saved = json.loads((out / "synth-report.json").read_text())
    assert saved["attempts"] == 1 and saved["accepted"] == 1
    assert saved["rounds_per_accepted"] == {f"{NEW_ID}-2": 3} and saved["failures"] == {"schema": 1, "oracle": 1}
    assert saved["validated_per_minute"] > 0
    assert saved["acceptance_rate"] == 1.0 and saved["rounds_per_accepted_spec"] == 3
    assert saved["tokens"]["source"] == "estimate" and saved["tokens"]["per_accepted_spec"] > 0


def _spec(name: str, new_id: str, **changes) -> dict:
    return {**yaml.safe_load((ROOT / "specs" / name / "task.yaml").read_text()), "id": new_id, **changes}


#: kb-answer-no-safety with every entity renamed: the same task, which the clone gate finds.
RENAMES = {"acme.com": "globex.io", "Munich": "Lyon", "nadia.brandt": "ines.roux", "tom.becker": "luc.martin",
           "alex.morgan": "sam.ortiz", "Germany, France, Norway": "Spain, Italy, Austria",
           "Data Retention Policy": "Record Keeping Rules", "Support FAQ": "Helpdesk Notes",
           "Support onboarding checklist": "Helpdesk Starter List", "Switzerland and the UK": "Iceland and Serbia"}


def _scripted_run() -> list[str]:
    """Five attempts of good, bad and repairable answers (docs/llm-synthesis.md quotes the figures)."""
    good = _good()
    news = _spec("clean-newsletter-list", "newsletter-cleanup-synth")
    misspelt = copy.deepcopy(news)
    misspelt["oracle"][2]["args"]["contents"] = misspelt["oracle"][2]["args"].pop("content")
    crm = _spec("crm-report-answer-numbers", "crm-pipeline-figures-synth")
    clone = yaml.safe_dump({**good, "id": "kb-recordings-lyon"}, sort_keys=False, width=100)
    for old, new in RENAMES.items():
        clone = clone.replace(old, new)
    return [_fenced(good),                                            # 0: right at once
            *[_fenced({**good, "id": "kb-broken", "pass_threshold": 3})] * 3,  # 1: a schema error, 3 times
            _fenced(misspelt), _fenced(news),                        # 2: write_file(contents=...), repaired
            _fenced({**crm, "difficulty": "hard"}), _fenced(crm),    # 3: an overclaimed label, repaired
            "Here it is.\n```yaml\n" + clone + "```\n",            # 4: a renamed clone of attempt 0,
            "I cannot do that.", _fenced(good)[:300]]                # then prose, then a cut-off answer


@pytest.mark.docker
async def test_a_scripted_run_of_good_bad_and_repairable_answers(tmp_path):
    """Every kind of round in one run, validated in sandboxes: the misspelt oracle argument is fed
    back with its step, tool, error and argument (issue 25: it used to say only that the checks
    failed), and the report's figures count what happened."""
    script = _scripted_run()
    server = _server([_answer(a, "length" if n == len(script) - 1 else "stop") for n, a in enumerate(script)])
    try:
        report = await synthesize(SynthOptions(capability="information-retrieval", n=5, model="scripted",
                                               base_url=server.url, api_key="k", out=tmp_path, rounds=3,
                                               concurrency=1, examples=[EXAMPLE]))
    finally:
        server.close()
    print(report.summary())  # the line docs/llm-synthesis.md quotes (pytest -s)
    assert [a.failures for a in report.attempts] == [
        [], ["schema"] * 3, ["oracle-call"], ["gate-difficulty"], ["duplicate", "yaml", "yaml"]]
    posts = _posts(server)
    feedback = posts[5]["messages"][-1]["content"]
    assert ("FAIL oracle-call: oracle[2] write_file returned an error: content: Missing required argument; "
            "contents: Unexpected keyword argument") in feedback
    assert "fix oracle[2].args.contents: write_file has no argument 'contents'; did you mean 'content'?" in feedback
    assert "FAIL oracle: score 0.20" in feedback  # the grade follows the cause
    assert f"{NEW_ID}, a spec accepted earlier in this run with the names changed" in posts[9]["messages"][-1]["content"]

    saved = json.loads((tmp_path / "synth-report.json").read_text())
    assert saved["accepted"] == 3 and saved["acceptance_rate"] == 0.6
    assert saved["rounds"] == 11 and saved["rounds_per_accepted_spec"] == 3.67
    assert saved["failures"] == {"duplicate": 1, "gate-difficulty": 1, "oracle-call": 1, "schema": 3, "yaml": 2}
    sent = sum(math.ceil(sum(len(m["content"]) for m in p["messages"]) / 4) for p in posts)
    assert saved["tokens"]["prompt"] == sent and saved["tokens"]["source"] == "estimate"
    assert saved["tokens"]["per_accepted_spec"] == round(saved["tokens"]["total"] / 3)
    assert saved["first_request"]["chars"] < 40_000 and saved["largest_repair_request"]["chars"] < 40_000
    assert report.summary().startswith("3 of 5 attempt(s) gave a validated spec (60%; information-retrieval")


def test_a_model_that_never_gets_it_right_stops_after_the_rounds(tmp_path, capsys):
    """Two attempts of two rounds each, every answer invalid: four requests, nothing written,
    exit 1, and a report that says why."""
    server = _server([_answer(_fenced(_schema_broken())) for _ in range(4)])
    out = tmp_path / "gen"
    try:
        code = cli.main(["synth", "llm", "--capability", "information-retrieval", "--model", "fake",
                         "--base-url", server.url, "--out", str(out), "--n", "2", "--rounds", "2",
                         "--examples", str(EXAMPLE)])
    finally:
        server.close()
    assert code == exits.GATE_FAILED
    assert len(_posts(server)) == 4
    assert sorted(p.name for p in out.iterdir()) == ["synth-report.json"]
    saved = json.loads((out / "synth-report.json").read_text())
    assert saved["attempts"] == 2 and saved["accepted"] == 0 and saved["failures"] == {"schema": 4}
    assert all(s["rounds"] == 2 and not s["accepted"] for s in saved["specs"])
    shown = capsys.readouterr().out
    assert "0 of 2 attempt(s)" in shown and "FAIL attempt 0 after 2 round(s) (schema, schema)" in shown


async def test_malformed_answers_are_repair_rounds_not_crashes(tmp_path):
    """Prose, a document cut at the token limit, a YAML list, a spec that needs a host folder:
    each is one failed round with a message that says what to send instead."""
    cut = _fenced(_good())[:400]
    needs_folder = {**_good(), "workspace": {"dir": "../../etc"}}
    server = _server([_answer("I cannot write YAML today, sorry."), _answer(cut, finish="length"),
                      _answer("```yaml\n- id: a\n- id: b\n```"), _answer(_fenced(needs_folder))])
    out = tmp_path / "gen"
    try:
        report = await synthesize(SynthOptions(capability="information-retrieval", n=1, model="fake",
                                               base_url=server.url, out=out, rounds=4, examples=[EXAMPLE]))
    finally:
        server.close()
    (attempt,) = report.attempts
    assert not attempt.accepted and attempt.rounds == 4
    assert attempt.failures == ["yaml", "yaml", "yaml", "self-contained"]
    feedback = [p["messages"][-1]["content"] for p in _posts(server)[1:]]
    assert "invalid YAML" in feedback[0] or "holds no YAML" in feedback[0] or "not a task.yaml" in feedback[0]
    assert "cut off at the token limit" in feedback[1]
    assert "not a task.yaml mapping" in feedback[2]
    assert "workspace.dir" in attempt.last_error
    assert not [p for p in out.iterdir() if p.is_dir()]


async def test_an_endpoint_that_fails_ends_the_attempt_as_endpoint(tmp_path):
    server = _server([(400, {"error": "bad model"})])
    try:
        report = await synthesize(SynthOptions(capability="triage", n=1, model="nope", base_url=server.url,
                                               out=tmp_path, examples=[EXAMPLE]))
    finally:
        server.close()
    (attempt,) = report.attempts
    assert attempt.failures == ["endpoint"] and attempt.rounds == 0 and "HTTP 400" in attempt.last_error


async def test_a_colliding_id_of_64_characters_is_suffixed_within_the_limit(tmp_path):
    from cowork.synth.llm import Synthesizer

    long_id = "a" * 64
    text = yaml.safe_dump({**_good(), "id": long_id}, sort_keys=False, width=100)
    synth = Synthesizer(SynthOptions(capability="triage", n=1, model="m", out=tmp_path, examples=[EXAMPLE]))
    assert (await synth.write(text, long_id))[0] == long_id
    new_id, path = await synth.write(text, long_id)
    assert new_id == "a" * 62 + "-2" and load_spec(path).spec.id == new_id
