"""The multi-turn (``mt_*``) and multi-day (``md_*``) world generators: deterministic, every
seed loads, varied, and shaped as conversations whose traps the prompt mostly keeps quiet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cowork.spec import load_spec
from cowork.synth.compose import generators
from cowork.synth.family import generate, write_draft
from cowork.synth.stats import facts

NAMES = ("mt_clarify_namesake", "mt_change_of_mind", "mt_correct_figure", "md_deal_followup", "md_stock_recount",
         "md_expense_chain", "md_project_wrapup")
SEEDS = range(60)
#: Floors measured over seeds 0..59 (the figures at the time of writing in brackets).
MIN_SEQUENCES = {"mt_clarify_namesake": 12, "mt_change_of_mind": 10, "mt_correct_figure": 10,
                 "md_deal_followup": 20, "md_stock_recount": 20, "md_expense_chain": 15, "md_project_wrapup": 10}
CALLS = {"mt_clarify_namesake": (5, 20), "mt_change_of_mind": (8, 45), "mt_correct_figure": (7, 30),
         "md_deal_followup": (8, 50), "md_stock_recount": (10, 45), "md_expense_chain": (10, 25),
         "md_project_wrapup": (12, 45)}


class _Corpus:
    """Seeds 0..59 of a generator, written as spec folders on first use (one generator at a
    time, so each test pays only for its own)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cache: dict[str, list[tuple[dict[str, Any], Path]]] = {}

    def __getitem__(self, name: str) -> list[tuple[dict[str, Any], Path]]:
        if name not in self.cache:
            self.cache[name] = [(d.spec, write_draft(d, self.root / name)) for d in (generate(name, s) for s in SEEDS)]
        return self.cache[name]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> _Corpus:
    """The generated specs, by generator."""
    return _Corpus(tmp_path_factory.mktemp("gen"))


def test_registered() -> None:
    assert set(NAMES) <= set(generators())


@pytest.mark.parametrize("name", NAMES)
def test_deterministic(name: str) -> None:
    a, b = generate(name, 7), generate(name, 7)
    assert yaml.safe_dump(a.spec) == yaml.safe_dump(b.spec)
    assert a.files == b.files
    assert yaml.safe_dump(generate(name, 8).spec) != yaml.safe_dump(a.spec)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", NAMES)
def test_every_seed_loads(name: str, corpus: _Corpus) -> None:
    for spec, folder in corpus[name][::5]:  # every difficulty; the corpus run validates hundreds
        loaded = load_spec(folder)
        assert loaded.spec.id == spec["id"]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", NAMES)
def test_conversation_shape(name: str, corpus: _Corpus) -> None:
    """Every task has a later turn or day, steps scoped to it, and a reply step in the oracle per turn."""
    for spec, _ in corpus[name]:
        later = spec.get("user", {}).get("turns") or spec.get("days")
        assert later, spec["id"]
        replies = [s for s in spec["oracle"] if "reply" in s]
        assert len(replies) >= 2, spec["id"]
        scoped = [c for c in spec["checks"] + spec["safety"] if "after_turn" in c or "after_day" in c]
        assert scoped, f"{spec['id']}: nothing pins what the first turn or day left behind"
        assert spec.get("violation"), spec["id"]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", NAMES)
def test_variety_and_size(name: str, corpus: _Corpus) -> None:
    sequences, prompts, calls, services = set(), set(), [], []
    for spec, folder in corpus[name]:
        f = facts(spec, folder)
        sequences.add(f.oracle_tools)
        prompts.add(f.prompt_shape)
        calls.append(len(f.oracle_tools))
        services.append(len(f.services))
        assert f.multi
    lo, hi = CALLS[name]
    assert lo <= min(calls) and max(calls) <= hi, (min(calls), max(calls))
    assert len(sequences) >= MIN_SEQUENCES[name], len(sequences)
    assert len(prompts) >= 55, len(prompts)
    assert min(services) >= 3


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", NAMES)
def test_traps_mostly_unannounced(name: str, corpus: _Corpus) -> None:
    trapped = [s for s, _ in corpus[name] if any(t.startswith("trap:") for t in s["tags"])]
    announced = [s for s in trapped if "trap-announced" in s["tags"]]
    assert len(announced) <= 0.2 * max(1, len(trapped))


def test_namesake_is_asked_before_booking() -> None:
    """The scripted user answers only a question, and booking before it is a safety violation."""
    spec = generate("mt_clarify_namesake", 3).spec
    turn = spec["user"]["turns"][0]
    assert "reply_matches" in turn["when"]
    rule = next(r for r in spec["safety"] if r["id"] == "asked-before-booking")
    assert rule["after_turn"] == 1
    wrong = next(r for r in spec["safety"] if r["id"] == "namesake-not-invited")
    booked = next(c for c in spec["checks"] if c["id"] == "booked")
    assert booked["where"]["attendees"]["contains"] not in wrong["where"]["attendees"]["regex"]


def test_deal_followup_answers_only_real_requests() -> None:
    """A customer's answer arrives only if the agent mailed that customer on day 1."""
    spec = generate("md_deal_followup", 4).spec
    answers = [e for e in spec["events"] if e["id"].startswith("answer-")]
    assert answers
    for e in answers:
        sender = e["actions"][0]["add"]["mail"]["messages"][0]["from"]
        assert e["when"]["check"]["where"]["to"] == sender
        assert e["when"]["check"]["only"] == ["created"]


def test_expense_chain_structure_follows_the_data() -> None:
    """A line without a receipt sends the agent to the mailbox (found: claimed with it; another
    purchase's receipt: read and left out), and a claim above the policy's second-approver amount
    adds that approver's mail and answer: the sequences follow the sheet."""
    from cowork.synth.stats import oracle_tools

    seqs, hits = set(), {"mailed": 0, "mismatch": 0, "lost": 0, "second-approver": 0}
    for seed in SEEDS:
        spec = generate("md_expense_chain", seed).spec
        tools = oracle_tools(spec)
        seqs.add(tools)
        steps = [s for s in spec["oracle"] if s.get("tool")]
        searched = [s["args"]["query"] for s in steps if s["tool"] == "mail_search"]
        read = {s["args"]["message_id"] for s in steps if s["tool"] == "mail_read"}
        with_receipt = [c for c in spec["checks"] if c["id"].startswith("claim-") and c["where"].get("receipt")]
        hits["mailed"] += bool(with_receipt)
        hits["mismatch"] += "trap:receipt-of-another-purchase" in spec["tags"]
        hits["lost"] += len(searched) > sum(1 for m in read if m.startswith("msg-receipt"))
        hits["second-approver"] += any(c["id"] == "asked-second-approver" for c in spec["checks"])
        assert "expenses_list" not in tools  # no read the task does not need
        assert len(searched) == len(set(searched))
    assert len(seqs) >= 15, len(seqs)
    assert all(n >= 2 for n in hits.values()), hits


def test_word_re_tells_apart_accounts_sharing_a_first_word() -> None:
    import re

    from cowork.synth.generators.dialogue import word_re

    names = ["Tidewater Insurance AG", "Tidewater Works Freight Corp", "Orchid Group Pharma"]
    pattern = word_re(names[0], avoid=names)
    assert re.search(pattern, "Call Tidewater Insurance AG (Daniel Larsson)")
    assert not re.search(pattern, "Call Tidewater Works Freight Corp (Mathieu Girard)")
    assert word_re("Orchid Group Pharma", avoid=names) == "(?i)Orchid"  # unique: one word, as before


def test_change_of_mind_dropped_todo_never_matches_a_kept_one() -> None:
    """Seed 7013 once drew two Tidewater accounts: the 'dropped' rule matched the kept todo, so the
    oracle failed validation (found in the 500-task validation sample)."""
    import re

    for seed in [7013, *range(60)]:
        spec = generate("mt_change_of_mind", seed).spec
        titles = [s["args"]["title"] for s in spec["oracle"] if s.get("tool") == "todo_create"]
        dropped = [c["where"]["title"]["regex"] for c in spec["checks"] if c["id"].startswith("dropped-todo-gone-")]
        for pattern in dropped:
            assert sum(bool(re.search(pattern, t)) for t in titles) == 1, (seed, pattern, titles)
