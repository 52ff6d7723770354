"""Turn-level credit from check progress, measured on the live state of a real sandbox."""

from __future__ import annotations

import math

import pytest

from cowork.agents import make_policy
from cowork.episode.run import run_task
from cowork.rollouts.rewards import turn_credit
from cowork.spec.loader import load_spec

pytestmark = pytest.mark.docker


async def test_progress_is_measured_after_every_turn_and_credits_sum_to_the_outcome(no_leftovers):
    loaded = load_spec("specs/inbox-triage-to-tickets")
    res = await run_task(loaded, make_policy("oracle", loaded.spec), turn_progress=True)
    p = res.trajectory.turn_progress
    assert res.grade.passed and len(p) == res.trajectory.turns + 1
    assert p[0] < 1.0 and p[-1] == pytest.approx(res.grade.completion, abs=1e-6)
    assert any(b > a for a, b in zip(p, p[1:]))  # some turn made progress
    credits = turn_credit(p, res.grade.score)
    assert len(credits) == res.trajectory.turns and math.isclose(sum(credits), res.grade.score - p[0], abs_tol=1e-6)
    # measuring progress changes nothing: the same grade as without it
    plain = await run_task(loaded, make_policy("oracle", loaded.spec))
    assert plain.grade.model_dump() == res.grade.model_dump()
