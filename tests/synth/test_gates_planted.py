"""The planted cases of the quality gates (cowork.synth.gates), without Docker: a clone with
three senders renamed, a one-step task labelled hard, and a KB answer that takes "52 or 28";
and what the gates say of the curated specs in specs/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cowork import cli
from cowork.cli import exits
from cowork.spec.loader import load_spec
from cowork.synth import gates
from cowork.synth.trivial import regex_example, static_hedge

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "specs").glob("*/task.yaml"))

MAIL = """\
id: planted-forward-invoices
title: Forward this week's supplier invoices to accounts payable
prompt: |
  Priya, Tom and Lena each sent me a supplier invoice this week. Please forward the three
  invoice mails to ap@acme.com and leave the newsletter alone.
capabilities: [communication-drafting]
difficulty: easy
clock: 2026-03-02T09:00:00Z
tools: [mail_list_messages, mail_read, mail_forward]
services:
  mail:
    mailboxes: [{address: alex.morgan@acme.com, name: Alex Morgan}]
    messages:
      - {id: msg-1, from: priya.nair@acme.com, to: alex.morgan@acme.com, subject: Invoice from Northwind,
         body: "Hi Alex, the Northwind invoice for March is attached. Priya", date: now-3h}
      - {id: msg-2, from: tom.becker@acme.com, to: alex.morgan@acme.com, subject: Invoice from Contoso,
         body: "Alex, Contoso sent their invoice for the support plan. Tom", date: now-2h}
      - {id: msg-3, from: lena.fischer@acme.com, to: alex.morgan@acme.com, subject: Invoice from Fabrikam,
         body: "Fabrikam's invoice for the new laptops, please pass it on. Lena", date: now-1h}
      - {id: msg-4, from: digest@saas-weekly.io, to: alex.morgan@acme.com, subject: SaaS weekly,
         body: "This week in SaaS: pricing pages, churn and more.", date: now-30m}
checks:
  - id: forwarded
    type: record_count
    service: mail
    collection: messages
    where: {to: {contains: ap@acme.com}}
    min: 3
oracle:
  - {tool: mail_forward, args: {message_id: msg-1, to: [ap@acme.com]}}
  - {tool: mail_forward, args: {message_id: msg-2, to: [ap@acme.com]}}
  - {tool: mail_forward, args: {message_id: msg-3, to: [ap@acme.com]}}
"""

#: Three senders renamed everywhere they appear (address, signature, prompt).
RENAMES = {"priya.nair": "keiko.tanaka", "Priya": "Keiko", "tom.becker": "ivan.petrov", "Tom": "Ivan",
           "lena.fischer": "sofia.rossi", "Lena": "Sofia"}


def _write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text(text)
    return folder


def _pair(dest: Path) -> tuple[Path, Path]:
    text = MAIL
    for old, new in RENAMES.items():
        text = text.replace(old, new)
    return (_write(dest / "a-original", MAIL),
            _write(dest / "b-clone", text.replace("id: planted-forward-invoices", "id: planted-forward-invoices-2")))


KB_ANSWER = """\
id: planted-kb-headcount
title: How many people work in the Berlin office
prompt: |
  How many people work in our Berlin office right now? Look it up in the knowledge base and
  tell me the number.
capabilities: [information-retrieval]
difficulty: easy
clock: 2026-03-02T09:00:00Z
tools: [kb_search, kb_read_page]
services:
  kb:
    user: alex.morgan@acme.com
    pages:
      - id: kb-offices-2026
        title: Offices 2026
        space: people
        body: "Berlin office headcount (March 2026): 52 people. Munich: 17 people."
      - id: kb-offices-2023
        title: Offices 2023 (archived)
        space: people
        body: "Berlin office headcount (2023): 28 people."
checks:
  - id: headcount
    type: answer
    contains: "52"
oracle:
  - tool: kb_read_page
    args: {page_id: kb-offices-2026}
  - reply: "52 people work in the Berlin office (Offices 2026)."
"""


class TestClones:
    def test_three_senders_renamed_escape_the_seed_gate_and_are_caught_as_a_clone(self, tmp_path):
        original, clone = (load_spec(p) for p in _pair(tmp_path))
        seed = gates.jaccard(gates.shingles(gates.seed_text(original), 5), gates.shingles(gates.seed_text(clone), 5))
        assert seed < gates.DUPLICATE_THRESHOLD  # the renamed records change their shingles
        assert gates.near_duplicates([original, clone]) == []
        assert gates.skeleton(original) == gates.skeleton(clone)
        pairs = gates.structural_duplicates([original, clone])
        assert [(p.first.split()[0], p.second.split()[0]) for p in pairs] == [("planted-forward-invoices",
                                                                               "planted-forward-invoices-2")]
        assert pairs[0].prompt_similarity >= 0.8 and pairs[0].seed_similarity >= gates.CLONE_SEED_THRESHOLD

    def test_the_check_command_refuses_the_clone_naming_its_original(self, tmp_path, capsys):
        _pair(tmp_path)
        assert cli.main(["synth", "check", str(tmp_path), "--static", "--json"]) == exits.GATE_FAILED
        out = json.loads(capsys.readouterr().out)
        (key, reasons), = out["refused"].items()
        assert key.startswith("planted-forward-invoices-2 ") and len(out["clones"]) == 1
        assert reasons == [r for r in reasons if r.startswith("clone of planted-forward-invoices ")]
        assert "entities renamed" in reasons[0]

    def test_another_skeleton_is_not_a_clone(self, tmp_path):
        original, clone = _pair(tmp_path)
        raw = yaml.safe_load((clone / "task.yaml").read_text())
        raw["oracle"] = raw["oracle"][:-1]  # one call fewer: a different task, whatever the names
        (clone / "task.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        assert gates.structural_duplicates([load_spec(original), load_spec(clone)]) == []

    def test_curated_specs_have_no_clones(self):
        assert gates.structural_duplicates([load_spec(p) for p in SPECS]) == []

    def test_entity_shape_replaces_sentence_initial_names_too(self):
        assert gates.entity_shape("Priya asked Tom for INV-2041 by 2026-03-02, 52 units") == \
            "<name> asked <name> for <id> by <date>, <num> units"


class TestDifficultyLabel:
    def _one_step_hard(self, tmp_path: Path) -> Path:
        return _write(tmp_path / "one-step", KB_ANSWER.replace("difficulty: easy", "difficulty: hard")
                      .replace('contains: "52"', 'numbers: [{value: 52, distractors: [28]}]'))

    def test_a_one_step_task_labelled_hard_overclaims(self, tmp_path):
        sig = gates.difficulty(load_spec(self._one_step_hard(tmp_path)))
        assert sig.oracle_steps == 1 and sig.predicted == "easy" and sig.mismatch and sig.overclaims

    def test_it_is_refused_and_fix_difficulty_rewrites_the_label(self, tmp_path, capsys):
        folder = self._one_step_hard(tmp_path)
        assert cli.main(["synth", "check", str(tmp_path), "--static"]) == exits.GATE_FAILED
        shown = capsys.readouterr().out
        assert "REFUSED planted-kb-headcount" in shown and "declared hard but measures easy" in shown
        assert "--fix-difficulty" in shown
        assert cli.main(["synth", "check", str(tmp_path), "--static", "--fix-difficulty"]) == exits.OK
        assert "RELABELLED planted-kb-headcount" in capsys.readouterr().out
        text = (folder / "task.yaml").read_text()
        assert "difficulty: easy\n" in text and "hard" not in text
        assert load_spec(folder).spec.difficulty == "easy"

    def test_an_underclaimed_label_is_reported_not_refused(self):
        sig = gates.DifficultySignal("t", "easy", 30, 5, 9, 10, 6, 2)
        sig.score, sig.predicted = 50.0, "hard"
        assert sig.mismatch and not sig.overclaims


class TestAnswerGate:
    def test_a_kb_answer_that_takes_52_or_28_is_refused(self, tmp_path, capsys):
        spec = load_spec(_write(tmp_path / "kb", KB_ANSWER))
        gate = gates.answer_gate(spec)
        assert gate.judged == ["headcount"] and gate.hedged_passes == ["headcount"] and gate.refused
        assert "28" in static_hedge(spec, [spec.spec.checks[0]]).text.split("Numbers: ")[1].split("\n")[0]
        assert cli.main(["synth", "check", str(tmp_path), "--static"]) == exits.GATE_FAILED
        assert "answer check 'headcount' passes a hedged reply" in capsys.readouterr().out

    @pytest.mark.parametrize("guard", [
        'contains: "52"\n    none_of: [{regex: "\\\\b28\\\\b"}]',
        "numbers: [{value: 52, distractors: [28]}]",
        "all_of: [{text: '52', label: '^\\W*headcount\\b', distractors: ['28']}]",
    ])
    def test_the_same_spec_with_a_guard_passes(self, tmp_path, capsys, guard):
        folder = _write(tmp_path / "kb", KB_ANSWER.replace('contains: "52"', guard))
        gate = gates.answer_gate(load_spec(folder))
        assert gate.judged == ["headcount"] and not gate.refused and gate.unjudged == [], gate
        assert cli.main(["synth", "check", str(tmp_path), "--static"]) == exits.OK
        assert "1 of 1 spec(s) accepted" in capsys.readouterr().out

    def test_a_mention_check_is_reported_not_refused(self):
        gate = gates.answer_gate(load_spec(ROOT / "specs" / "kb-answer-no-safety"))
        assert gate.judged == ["facts", "cites-source"] and gate.hedged_passes == []
        assert gate.mentions_passed == ["cites-source"]

    def test_regex_examples_match_their_pattern(self):
        assert regex_example(r"\b30[ -]?days?\b") == "30day"
        assert regex_example(r"^\W*retention( period)?\b") == "retention"
        assert regex_example(r"ESP-250[^\n]{0,120}\b18\b") == "ESP-250 18"
        assert regex_example(r"(?=x)y") is None

    def test_no_curated_answer_check_rewards_a_hedge(self):
        """The four the gate first refused (crm-report-answer-numbers, inventory-reorder-low-stock,
        office-contract-renewal-terms, thread-pricing-decision-revised) now declare their wrong
        candidates; every answer check of specs/ fails the hedged reply."""
        judged = {load_spec(p).spec.id: gates.answer_gate(load_spec(p)) for p in SPECS}
        assert {k: g.hedged_passes for k, g in judged.items() if g.hedged_passes} == {}
        assert {"crm-report-answer-numbers", "thread-pricing-decision-revised"} <= {k for k, g in judged.items() if g.judged}
