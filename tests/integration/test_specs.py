"""Every spec in specs/: the oracle passes (twice, same grade), the no-op agent fails
completion, the violation script fails safety, every safety rule can fire, and a grade
recomputed from the saved evidence bundle equals the live one; in real containers."""

from pathlib import Path

import pytest

from cowork.agents import make_policy
from cowork.episode.run import run_task
from cowork.evidence import Evidence
from cowork.grading import grade
from cowork.validate.validate import validate_spec

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted(p.parent for p in (ROOT / "specs").glob("*/task.yaml"))


def test_there_are_at_least_three_specs():
    assert len(SPECS) >= 3


@pytest.mark.parametrize("spec", SPECS, ids=[p.name for p in SPECS])
async def test_spec_validates(spec, no_leftovers):
    rep = await validate_spec(spec)
    steps = {f.step for f in rep.findings}
    assert rep.ok, rep.summary()
    assert steps >= {"schema", "build", "oracle", "oracle-repeat", "nop", "violation"}


@pytest.mark.parametrize("spec", SPECS, ids=[p.name for p in SPECS])
async def test_saved_bundle_regrades_to_the_live_grade(spec, tmp_path, no_leftovers):
    from cowork.spec.loader import load_spec

    loaded = load_spec(spec)
    for agent in ("oracle", "violation"):
        res = await run_task(loaded, make_policy(agent, loaded.spec), evidence_dir=tmp_path / agent)
        assert grade(loaded.spec, Evidence.load(tmp_path / agent)) == res.grade
        if agent == "violation":
            # Every violation is reported with the audit entry or state change that proves it,
            # unless it is a pure workspace-state rule (then the detail names the files).
            for c in res.grade.checks:
                if c.group == "safety" and not c.passed:
                    assert c.evidence or c.detail, c
