"""Validation runs a spec's episodes in one sandbox, reset and verified between them (issue
"The corpus at scale": four sandbox starts were 72 % of a spec's validation time)."""

from pathlib import Path

import pytest

from cowork.sandbox import pool as pool_module
from cowork.validate.validate import validate_spec

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pools(monkeypatch):
    made = []

    class Spy(pool_module.SandboxPool):
        def __init__(self, **kw):
            super().__init__(**kw)
            made.append(self)

    monkeypatch.setattr(pool_module, "SandboxPool", Spy)
    return made


async def test_one_sandbox_reset_between_the_runs(pools, no_leftovers):
    rep = await validate_spec(ROOT / "specs" / "fix-csv-report")
    assert rep.ok, rep.summary()
    (pool,) = pools
    # oracle, oracle-repeat, nop, violation: one start, a verified reset after each run.
    assert pool.stats["started"] == 1 and pool.stats["resets"] >= 3 and pool.stats["reset_failed"] == 0
    assert pool.total == 0  # closed: nothing left running


async def test_fresh_sandboxes_on_request_give_the_same_verdicts(pools, no_leftovers):
    spec = ROOT / "specs" / "mt-clarify-which-report"
    reused, fresh = await validate_spec(spec), await validate_spec(spec, reuse=False)
    assert len(pools) == 1
    assert reused.ok and fresh.ok
    assert [(f.step, f.ok) for f in reused.findings] == [(f.step, f.ok) for f in fresh.findings]


async def test_trivial_runs_share_one_sandbox(pools, no_leftovers):
    from cowork.spec.loader import load_spec
    from cowork.synth.trivial import trivial_runs

    rep = await trivial_runs(load_spec(ROOT / "specs" / "fix-csv-report"))
    assert rep.error is None and not rep.refused, rep
    (pool,) = pools
    # empty answer, do-everything, read-everything: one start, verified resets between them.
    assert pool.stats["started"] == 1 and pool.stats["resets"] >= 2 and pool.total == 0
