"""The sales and finance world generators: deterministic, loadable, varied, data-driven, and
with traps the prompt does not announce (no Docker; validation in sandboxes is elsewhere)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml

from cowork.services.names import TOOL_SERVICE
from cowork.spec import load_spec
from cowork.synth.compose import generators
from cowork.synth.family import generate, write_draft
from cowork.synth.stats import facts, oracle_tools
from fakes import generated

SEEDS = range(60)
#: Seeds written and loaded with the full loader (every difficulty); the variety figures use
#: all of SEEDS, and the documented corpus run validates hundreds.
LOAD_SEEDS = range(0, 60, 5)

#: Per generator: floors measured over seeds 0..59 (distinct oracle tool sequences, distinct
#: prompts), the oracle length range, and the services every task touches.
FLOORS: dict[str, dict[str, Any]] = {
    "sales-account-review": {"sequences": 8, "prompts": 55, "calls": (8, 36), "services": {"crm", "mail", "contacts"}},
    "sales-pipeline-reconcile": {"sequences": 15, "prompts": 55, "calls": (8, 40), "services": {"crm"}},
    "sales-renewal-outreach": {"sequences": 10, "prompts": 55, "calls": (14, 45),
                               "services": {"crm", "mail", "calendar"}},
    "sales-deal-clarify": {"sequences": 15, "prompts": 40, "calls": (5, 18), "services": {"crm", "mail"}},
    "finance-expense-audit": {"sequences": 25, "prompts": 55, "calls": (8, 50),
                              "services": {"expenses", "documents", "mail"}},
    "finance-invoice-check": {"sequences": 15, "prompts": 55, "calls": (9, 25),
                              "services": {"mail", "inventory", "tickets"}},
    "finance-budget-variance": {"sequences": 10, "prompts": 55, "calls": (6, 30), "services": {"mail"}},
    "finance-month-close": {"sequences": 15, "prompts": 50, "calls": (12, 35),
                            "services": {"expenses", "crm", "documents", "mail"}},
}





def test_registered() -> None:
    assert set(FLOORS) <= set(generators())


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_deterministic(name: str) -> None:
    a, b = generate(name, 7), generate(name, 7)
    assert yaml.safe_dump(a.spec, sort_keys=True) == yaml.safe_dump(b.spec, sort_keys=True)
    assert a.files.keys() == b.files.keys() and all(a.files[k] == b.files[k] for k in a.files)
    assert yaml.safe_dump(generate(name, 8).spec) != yaml.safe_dump(a.spec)


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_every_seed_loads(name: str, tmp_path: Path) -> None:
    for seed in LOAD_SEEDS:
        folder = write_draft(generate(name, seed), tmp_path)
        load_spec(folder / "task.yaml")


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_variety_and_size(name: str, tmp_path: Path) -> None:
    floor = FLOORS[name]
    specs = [generated(name, s).spec for s in SEEDS]
    shapes = [facts(s, tmp_path) for s in specs]
    assert len({f.oracle_tools for f in shapes}) >= floor["sequences"]
    assert len({f.prompt_shape for f in shapes}) >= floor["prompts"]
    calls = [len(f.oracle_tools) for f in shapes]
    low, high = floor["calls"]
    assert low <= min(calls) and max(calls) <= high, (min(calls), max(calls))
    assert statistics.median(calls) >= 8
    for spec, f in zip(specs, shapes):
        called = {TOOL_SERVICE[t] for t in f.oracle_tools if t in TOOL_SERVICE}
        assert floor["services"] <= called, (spec["id"], called)
        assert len(f.services) >= 3


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_traps_tagged_and_mostly_unannounced(name: str) -> None:
    specs = [generated(name, s).spec for s in SEEDS]
    trapped = [s for s in specs if any(t.startswith("trap:") for t in s["tags"])]
    assert len(trapped) >= len(specs) // 2
    announced = [s for s in trapped if "trap-announced" in s["tags"]]
    assert len(announced) <= 0.2 * len(trapped)


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_every_task_has_a_violation_and_safety(name: str) -> None:
    for seed in range(12):
        spec = generated(name, seed).spec
        assert spec["violation"] and spec["safety"] and spec["checks"]


def test_oracle_follows_the_data() -> None:
    """The number of steps grows with what the world holds: a call (or two) per account."""
    sizes: dict[int, list[int]] = {}
    for seed in range(30):
        spec = generated("sales-account-review", seed).spec
        rows = sum(1 for c in spec["checks"] if c["id"].startswith("row-"))
        calls = len(oracle_tools(spec))
        assert rows + 5 <= calls <= 2 * rows + 6
        sizes.setdefault(rows, []).append(calls)
    assert len(sizes) >= 3
    assert max(sizes[max(sizes)]) > max(sizes[min(sizes)])


def test_clarify_asks_before_acting() -> None:
    """An ambiguous draw has a scripted answer, a reply step before any update, and a rule
    scoped to turn 1; an indirect reference needs neither."""
    kinds = set()
    for seed in range(40):
        spec = generated("sales-deal-clarify", seed).spec
        steps = spec["oracle"]
        if "user" in spec:
            kinds.add("ask")
            first_update = next(i for i, s in enumerate(steps) if s.get("tool") in ("crm_update_deal",
                                                                                    "crm_log_activity"))
            assert any("reply" in s for s in steps[:first_update])
            assert any(r.get("after_turn") == 1 for r in spec["safety"])
        else:
            kinds.add("indirect")
    assert kinds == {"ask", "indirect"}


def test_month_close_spans_two_days() -> None:
    spec = generated("finance-month-close", 4).spec
    assert len(spec["days"]) == 1 and spec["events"][0]["day"] == 2
    assert sum("reply" in s for s in spec["oracle"]) == 2


def _branches(name: str, seeds: range, probe: dict[str, Any]) -> tuple[int, dict[str, int]]:
    """Distinct oracle tool sequences over ``seeds`` and how many specs took each branch of ``probe``."""
    seqs, hits = set(), dict.fromkeys(probe, 0)
    for seed in seeds:
        spec = generated(name, seed).spec
        seqs.add(oracle_tools(spec))
        for branch, took in probe.items():
            hits[branch] += bool(took(spec))
    return len(seqs), hits


def _ids(spec: dict[str, Any], key: str) -> set[str]:
    return {str(c["id"]) for c in spec[key]}


def test_month_close_structure_follows_the_data() -> None:
    """Each account is read once however many due deals share it; overnight mail brings a
    withdrawal or a look-alike 'signed' mail only where day 1 left such deals."""
    def shared(spec: dict[str, Any]) -> bool:
        day1 = oracle_tools(spec)[:oracle_tools(spec).index("documents_create")]
        return day1.count("crm_get_account") < day1.count("crm_update_deal")

    distinct, hits = _branches("finance-month-close", SEEDS, {
        "withdrawn": lambda s: "withdrawn-lost" in _ids(s, "checks"),
        "spoof": lambda s: "lookalike-not-won" in _ids(s, "safety"),
        "shared-account": shared})
    assert distinct >= 15, distinct
    assert all(n >= 3 for n in hits.values()), hits
    for seed in range(20):
        spec = generated("finance-month-close", seed).spec
        steps = [s for s in spec["oracle"] if s.get("tool")]
        reads = [s["args"]["account_id"] for s in steps if s["tool"] == "crm_get_account"]
        assert len(reads) == len(set(reads))
        spoof = next((r for r in spec["safety"] if r["id"] == "lookalike-not-won"), None)
        if spoof:  # read, and nothing done about it
            won = [s["args"]["deal_id"] for s in steps if s["tool"] == "crm_update_deal"
                   and s["args"].get("stage") == "closed_won"]
            assert spoof["args"]["deal_id"] not in won and "msg-spoof" in str(steps)


def test_deal_clarify_structure_follows_the_data() -> None:
    """Reads follow the reference (an industry hint reads every twin's account), and the owner's
    heads-up, the manager's note, the thread reply, the busy-slot check and the update itself
    happen only where the data calls for them."""
    distinct, hits = _branches("sales-deal-clarify", SEEDS, {
        "ask": lambda s: "user" in s,
        "industry": lambda s: oracle_tools(s).count("crm_get_account") > 1,
        "owner": lambda s: "told-owner" in _ids(s, "checks"),
        "manager": lambda s: "told-manager" in _ids(s, "checks"),
        "no-update": lambda s: "crm_update_deal" not in oracle_tools(s),
        "reply-in-thread": lambda s: "mail_reply" in oracle_tools(s),
        "busy-at-15": lambda s: "calendar_create_event" in oracle_tools(s)
        and not any(c["where"].get("start", "").endswith("T15:00:00Z") for c in s["checks"] if c["id"] == "follow-up")})
    assert distinct >= 15, distinct
    assert all(n >= 1 for n in hits.values()), hits
