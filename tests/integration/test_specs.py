"""Every spec in specs/: the oracle passes (twice, same grade), the no-op agent fails
completion, the violation script fails safety; in real containers."""

from pathlib import Path

import pytest

from runtime.validate import validate_spec

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted(p.parent for p in (ROOT / "specs").glob("*/task.yaml"))


def test_there_are_at_least_three_specs():
    assert len(SPECS) >= 3


@pytest.mark.parametrize("spec", SPECS, ids=[p.name for p in SPECS])
async def test_spec_validates(spec, no_leftovers):
    rep = await validate_spec(spec)
    steps = {f.step: f for f in rep.findings}
    assert rep.ok, rep.summary()
    assert set(steps) == {"schema", "build", "oracle", "oracle-repeat", "nop", "violation"}
