"""Issue 28 item 2: a ``scoring.formula`` bounded when some credits are unknown (judge checks
not run): interval arithmetic that always holds, equals :func:`evaluate` on known values,
and bounds formulas that are not monotonic in a judge (where setting it to 0 or 1 would not)."""

from __future__ import annotations

import random

import pytest

from cowork.evidence import Evidence
from cowork.formats import GENESIS_HASH, canonical_json, seal
from cowork.grading import grade
from cowork.grading.grade import completion_bounds
from cowork.spec.formula import bounds, evaluate
from cowork.spec.models import TaskSpec
from fakes import tar_of

FORMULAS = [
    "0.6 * a + 0.4 * max(b, j)",
    "j if a else 0",
    "a * j + (1 - a) * b",
    "1 - j",
    "j * (1 - j) * 4",
    "clamp(a + j - 0.5, 0.2, 0.9)",
    "(a > 0.5 and j >= 0.8) * 1 + (not b) * 0.3",
    "abs(a - j) / (b + 0.5)",
    "a / j",
    "min(a, j, b) + (0.5 if a == j else 0.1)",
    "0.5 < j <= b",
]


@pytest.mark.parametrize("formula", FORMULAS)
def test_on_known_values_it_is_evaluate(formula):
    rng = random.Random(formula)
    for _ in range(200):
        vals = {k: rng.choice([0.0, 1.0, 0.5, rng.random()]) for k in "abj"}
        lo, hi = bounds(formula, {k: (v, v) for k, v in vals.items()})
        assert lo == pytest.approx(hi) == pytest.approx(evaluate(formula, vals))


@pytest.mark.parametrize("formula", FORMULAS)
def test_every_value_the_judge_could_give_lies_within(formula):
    rng = random.Random(formula + "!")
    for _ in range(100):
        known = {k: rng.choice([0.0, 1.0, rng.random()]) for k in "ab"}
        lo, hi = bounds(formula, {**{k: (v, v) for k, v in known.items()}, "j": (0.0, 1.0)})
        for j in [0.0, 1.0, 0.5, 0.8, *(rng.random() for _ in range(20))]:
            assert lo - 1e-9 <= evaluate(formula, {**known, "j": j}) <= hi + 1e-9, (known, j)


def test_a_formula_not_monotonic_in_the_judge_is_bounded_both_ways():
    # Judges at 0 would call this full marks; the judge can in fact take it anywhere in [0, 1].
    assert evaluate("1 - j", {"j": 0.0}) == 1.0
    assert bounds("1 - j", {"j": (0.0, 1.0)}) == (0.0, 1.0)
    assert bounds("j if a > 0.5 else 0", {"a": (0.0, 0.0), "j": (0.0, 1.0)}) == (0.0, 0.0)


def test_completion_bounds_of_a_grade_with_an_unjudged_judge():
    spec = TaskSpec.model_validate({
        "id": "t", "title": "t", "prompt": "p", "oracle": [{"tool": "shell"}],
        "checks": [{"id": "done", "type": "file_exists", "path": "zzz"}, {"id": "tone", "type": "judge", "rubric": "r"}],
        "scoring": {"formula": "0.3 + 0.7 * tone if not done else done"}})
    line = canonical_json(seal({"seq": 0, "kind": "session_start"}, GENESIS_HASH))
    g = grade(spec, Evidence(audit_text=line + "\n", audit_count=1, workspace_tar=tar_of({"a.txt": "a"}), initial={}))
    assert g.completion == pytest.approx(0.3)  # the judge at 0, as the grade counts it
    assert completion_bounds(spec, g) == pytest.approx((0.3, 1.0))
