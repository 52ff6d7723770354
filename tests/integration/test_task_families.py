"""Every task family: 20 seeds give 20 distinct specs, and every one of them passes
``cowork validate`` (oracle passes twice, nop fails, violation trips safety, every safety
rule can fire, nothing passes on the untouched state), in real containers."""

from __future__ import annotations

import asyncio
import json

import pytest

from cowork.spec.capabilities import capabilities
from cowork.spec.loader import load_spec
from cowork.synth.compose import generators
from cowork.synth.family import families, generate, write_draft
from cowork.validate.validate import validate_spec

SEEDS = range(20)


def _names() -> list[str]:
    """The template families (the world generators have their own test,
    tests/integration/test_world_generators.py)."""
    return sorted(set(families()) - set(generators()))


def test_there_are_at_least_ten_families_across_the_taxonomy():
    fams = {n: f for n, f in families().items() if n in _names()}
    assert len(fams) >= 10, sorted(fams)
    covered = {c for f in fams.values() for c in f.capabilities}
    assert covered <= set(capabilities())
    assert len(covered) >= 8, covered


@pytest.mark.parametrize("name", _names())
def test_a_seed_always_gives_the_same_spec_and_seeds_differ(name):
    a, b = generate(name, 3), generate(name, 3)
    assert json.dumps(a.spec, sort_keys=True, default=str) == json.dumps(b.spec, sort_keys=True, default=str)
    specs = [generate(name, s).spec for s in SEEDS]
    assert len({json.dumps({k: v for k, v in s.items() if k != "id"}, sort_keys=True, default=str)
                for s in specs}) == len(specs)
    assert len({s["prompt"] for s in specs}) > len(specs) // 2  # phrasings vary, not only the records
    assert {s["difficulty"] for s in specs} == {"easy", "medium", "hard"}


@pytest.mark.docker
@pytest.mark.timeout(1200)  # 20 validations of 3-5 sandboxes each: about a minute on a quiet 2-core machine
@pytest.mark.parametrize("name", _names())
async def test_twenty_seeds_all_validate(name, tmp_path, sandbox_image):
    folders = [write_draft(generate(name, s), tmp_path) for s in SEEDS]
    for f in folders:  # every one loads (the schema and the located errors first)
        load_spec(f)
    limit = asyncio.Semaphore(2)

    async def one(folder):
        async with limit:
            return await validate_spec(folder)

    reports = await asyncio.gather(*(one(f) for f in folders))
    bad = [r.summary() for r in reports if not r.ok]
    assert not bad, "\n\n".join(bad[:3])
