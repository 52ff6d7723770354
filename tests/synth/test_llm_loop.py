"""``cowork synth llm``'s loop without sandboxes: a loopback chat server plays the model, a
stand-in validator passes every spec that loads (one that does not gets the real schema
report), and the real gates, deduplication, repair messages and report figures run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import yaml

from cowork.spec import load_spec
from cowork.spec.loader import LoadedSpec
from cowork.synth import gates
from cowork.synth.llm import SynthOptions, synthesize
from cowork.validate.validate import Finding, ValidationReport, validate_spec
from fakes import FakeChatServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "specs" / "same-name-chat-message"
KB = (ROOT / "specs" / "kb-answer-no-safety" / "task.yaml").read_text()
NEWSLETTER = (ROOT / "specs" / "clean-newsletter-list" / "task.yaml").read_text()
#: Every entity of kb-answer-no-safety renamed: the same task, its raw seed 0.65 similar.
RENAMES = {"acme.com": "globex.io", "Munich": "Lyon", "nadia.brandt": "ines.roux", "tom.becker": "luc.martin",
           "alex.morgan": "sam.ortiz", "Germany, France, Norway": "Spain, Italy, Austria",
           "Data Retention Policy": "Record Keeping Rules", "Support FAQ": "Helpdesk Notes",
           "Support onboarding checklist": "Helpdesk Starter List", "Switzerland and the UK": "Iceland and Serbia"}


def _spec(text: str, new_id: str, **changes) -> str:
    data = {**yaml.safe_load(text), "id": new_id, **changes}
    return yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True)


def _kb(new_id: str = "kb-recordings-hamburg", **changes) -> str:
    return _spec(KB.replace("A customer in Munich", "A customer in Hamburg"), new_id, **changes)


def _renamed(new_id: str = "kb-recordings-lyon") -> str:
    text = KB
    for old, new in RENAMES.items():
        text = text.replace(old, new)
    return _spec(text, new_id)


def _fenced(text: str) -> str:
    return "Here it is.\n```yaml\n" + text + "```\n"


def _answer(text: str, usage: dict | None = None) -> tuple[int, dict]:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": _fenced(text)},
                         "finish_reason": "stop"}]}
    return 200, body | ({"usage": usage} if usage else {})


class Validator:
    """Passes every spec that loads (with ``extra`` findings); a spec that does not load gets
    the real schema report, which needs no sandbox. Counts its calls."""

    def __init__(self, *extra: Finding):
        self.extra, self.calls = list(extra), 0

    async def __call__(self, spec):
        self.calls += 1
        if not isinstance(spec, LoadedSpec):
            return await validate_spec(spec)
        return ValidationReport(spec=str(spec.path), task=spec.spec.id, ok=True,
                                findings=[Finding(step="schema", ok=True, detail="spec is valid"), *self.extra])


async def _run(tmp_path, answers, validator=None, **opts):
    server = FakeChatServer(list(answers))
    validator = validator or Validator()
    options = dict(capability="information-retrieval", n=1, model="fake", base_url=server.url, api_key="k",
                   out=tmp_path / "gen", examples=[EXAMPLE], concurrency=1) | opts
    try:
        report = await synthesize(SynthOptions(**options), validate=validator)
    finally:
        server.close()
    return report, [r["body"] for r in server.requests], validator


class TestGatesInTheLoop:
    async def test_an_overclaimed_difficulty_is_fed_back_and_the_relabelled_spec_accepted(self, tmp_path):
        report, posts, _ = await _run(tmp_path, [_answer(_kb(difficulty="hard")), _answer(_kb(difficulty="easy"))])
        (attempt,) = report.attempts
        assert attempt.accepted and attempt.failures == ["gate-difficulty"] and attempt.rounds == 2
        feedback = posts[1]["messages"][-1]["content"]
        assert "quality gates refused it" in feedback
        assert "FAIL gate-difficulty: difficulty is hard but the task measures easy" in feedback
        assert "fix difficulty: set difficulty: easy" in feedback
        assert load_spec(attempt.path).spec.difficulty == "easy"

    async def test_an_answer_check_a_hedge_passes_is_refused_then_repaired(self, tmp_path):
        # "30 days" beside the archived 180 days and the FAQ's 6 months: a reply naming all passes.
        hedgeable = yaml.safe_load(_kb())
        hedgeable["checks"][0] = {"id": "facts", "type": "answer", "contains": "30 days"}
        hedgeable["scoring"] = {"formula": "0.7 * facts + 0.3 * cites_source"}
        report, posts, _ = await _run(tmp_path, [_answer(yaml.safe_dump(hedgeable, sort_keys=False)),
                                                 _answer(_kb())])
        (attempt,) = report.attempts
        assert attempt.accepted and attempt.failures == ["gate-answer"]
        feedback = posts[1]["messages"][-1]["content"]
        assert "FAIL gate-answer: answer check 'facts' passes a hedged reply" in feedback and "fix checks[0]:" in feedback
        assert "distractors" in feedback


    async def test_a_gate_that_fails_accepts_nothing(self, tmp_path, monkeypatch):
        def broken(loaded):
            raise RuntimeError("hedge builder broke")

        monkeypatch.setattr(gates, "answer_gate", broken)
        report, _, _ = await _run(tmp_path, [_answer(_kb())])
        (attempt,) = report.attempts
        assert not attempt.accepted and attempt.failures == ["run"]
        assert "gate_findings gate failed on 'kb-recordings-hamburg'" in attempt.last_error
        assert not [p for p in (tmp_path / "gen").iterdir() if p.is_dir()]


class TestDuplicates:
    async def test_a_renamed_clone_of_a_spec_accepted_earlier_is_refused(self, tmp_path):
        # The seed-similarity gate misses this clone; the structural one (skeleton) finds it.
        pair = [load_spec(_write(tmp_path / "a", _kb())), load_spec(_write(tmp_path / "b", _renamed()))]
        assert gates.near_duplicates(pair) == [] and len(gates.structural_duplicates(pair)) == 1

        validator = Validator()
        report, posts, _ = await _run(
            tmp_path, [_answer(_kb()), _answer(_renamed()), _answer(_spec(NEWSLETTER, "newsletter-dedupe"))],
            validator, n=2)
        first, second = report.attempts
        assert first.accepted and first.spec_id == "kb-recordings-hamburg"
        assert second.accepted and second.failures == ["duplicate"] and second.spec_id == "newsletter-dedupe"
        feedback = posts[2]["messages"][-1]["content"]
        assert "not a new task" in feedback and "kb-recordings-hamburg, a spec accepted earlier in this run" in feedback
        assert "with the names changed" in feedback
        assert validator.calls == 2  # the clone never reached the sandboxes
        assert sorted(p.name for p in (tmp_path / "gen").iterdir() if p.is_dir()) == \
            ["kb-recordings-hamburg", "newsletter-dedupe"]

    async def test_an_example_with_a_new_id_is_refused_as_a_near_copy(self, tmp_path):
        copy = _spec((EXAMPLE / "task.yaml").read_text(), "chat-same-name-again")
        report, posts, validator = await _run(tmp_path, [_answer(copy)], rounds=1)
        (attempt,) = report.attempts
        assert not attempt.accepted and attempt.failures == ["duplicate"] and validator.calls == 0
        assert "near-copy of the example same-name-chat-message" in attempt.last_error


class TestOracleCalls:
    async def test_a_spec_whose_oracle_call_failed_is_refused_though_it_validates(self, tmp_path):
        note = Finding(step="oracle-call", ok=True, field="oracle[1].args.pageid",
                       detail="oracle[1] kb_read_page returned an error: page_id: Missing required argument; "
                              "pageid: Unexpected keyword argument (the oracle passes anyway)",
                       hint="kb_read_page has no argument 'pageid'; did you mean 'page_id'? It takes: page_id")
        report, posts, _ = await _run(tmp_path, [_answer(_kb()), _answer(_kb())], Validator(note), rounds=2)
        (attempt,) = report.attempts
        assert attempt.failures == ["oracle-call", "oracle-call"] and not attempt.accepted
        feedback = posts[1]["messages"][-1]["content"]
        assert "FAIL oracle-call: oracle[1] kb_read_page returned an error" in feedback
        assert "fix oracle[1].args.pageid: kb_read_page has no argument 'pageid'; did you mean 'page_id'?" in feedback


class TestRepairMessages:
    async def test_a_repair_round_sends_the_last_answer_and_its_feedback_not_the_history(self, tmp_path):
        broken = yaml.safe_load(_kb())
        broken["checks"][0]["type"] = "answer_mentions"
        also_broken = {**broken, "title": "Another try"}
        report, posts, _ = await _run(tmp_path, [_answer(yaml.safe_dump(broken, sort_keys=False)),
                                                 _answer(yaml.safe_dump(also_broken, sort_keys=False)),
                                                 _answer(_kb())])
        (attempt,) = report.attempts
        assert attempt.accepted and attempt.failures == ["schema", "schema"]
        first, second, third = posts
        assert [m["role"] for m in first["messages"]] == ["system", "user"]
        assert "same-name-chat-message" in first["messages"][1]["content"]  # the example, in round 1 only
        for later in (second, third):
            assert [m["role"] for m in later["messages"]] == ["system", "user", "assistant", "user"]
            assert later["messages"][0] == first["messages"][0]  # one system message: a cacheable prefix
            assert "same-name-chat-message" not in later["messages"][1]["content"]
        assert "Another try" not in json.dumps(second) and "Another try" in third["messages"][2]["content"]
        assert "title: Another try" not in json.dumps(third["messages"][:2])
        assert "Earlier answers of this attempt failed on: schema." in third["messages"][-1]["content"]
        # The third request is the second's size, give or take the answers' difference: no regrowth.
        assert abs(attempt.request_chars[2] - attempt.request_chars[1]) < 200
        assert attempt.request_chars == [sum(len(m["content"]) for m in p["messages"]) for p in posts]


class TestReport:
    SCRIPT = [  # good at once; bad twice; repairable (a gate, then fixed)
        _kb(), "bad", "bad", _spec(NEWSLETTER, "newsletter-dedupe", difficulty="hard"),
        _spec(NEWSLETTER, "newsletter-dedupe", difficulty="easy")]

    @staticmethod
    def _answers(usage: bool):
        broken = yaml.safe_dump({**yaml.safe_load(_kb("kb-broken")), "pass_threshold": 3}, sort_keys=False)
        return [_answer(broken if text == "bad" else text,
                        {"prompt_tokens": 1000 + n, "completion_tokens": 100} if usage else None)
                for n, text in enumerate(TestReport.SCRIPT)]

    async def test_figures_from_the_endpoints_usage(self, tmp_path):
        report, posts, _ = await _run(tmp_path, self._answers(usage=True), n=3, rounds=2)
        assert [a.failures for a in report.attempts] == [[], ["schema", "schema"], ["gate-difficulty"]]
        saved = json.loads((tmp_path / "gen" / "synth-report.json").read_text())
        prompt = sum(1000 + n for n in range(5))
        assert saved["acceptance_rate"] == 0.667 and saved["rounds"] == 5 and saved["rounds_per_accepted_spec"] == 2.5
        assert saved["tokens"] == {"prompt": prompt, "completion": 500, "total": prompt + 500,
                                   "per_accepted_spec": round((prompt + 500) / 2), "source": "usage"}
        assert saved["failures"] == {"gate-difficulty": 1, "schema": 2}
        assert saved["first_request"]["chars"] == max(
            sum(len(m["content"]) for m in p["messages"]) for p in posts if len(p["messages"]) == 2)
        line = report.summary().splitlines()[0]
        assert line.startswith("2 of 3 attempt(s) gave a validated spec (67%;")
        assert f"2.5 round(s) and {(prompt + 500) / 2 / 1000:.1f}k tokens (usage) per accepted spec" in line

    async def test_figures_estimated_when_the_endpoint_gives_no_usage(self, tmp_path):
        report, posts, _ = await _run(tmp_path, self._answers(usage=False), n=3, rounds=2)
        saved = report.as_dict()
        sent = sum(math.ceil(sum(len(m["content"]) for m in p["messages"]) / 4) for p in posts)
        answered = sum(math.ceil(len(a[1]["choices"][0]["message"]["content"]) / 4) for a in self._answers(False))
        assert saved["tokens"]["prompt"] == sent and saved["tokens"]["completion"] == answered
        assert saved["tokens"]["source"] == "estimate"
        assert saved["tokens"]["per_accepted_spec"] == round((sent + answered) / 2)
        # The first request holds the reference and the example; a repair round is below the
        # old 198k-character first request by far, and does not grow with the rounds.
        assert saved["first_request"]["chars"] < 40_000
        assert saved["largest_repair_request"]["chars"] < 40_000


def _write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text(text)
    return folder
