"""Every world generator (``cowork.synth.compose``): deterministic, varied, and what it makes
validates in real containers (oracle passes twice with identical grades, nop fails, the
violation trips safety, every safety rule can fire) and refuses the trivial agents.

CI validates one seed per generator, its difficulty cycling with the generator's place in
the list; the documented longer run (docs/world.md: ``cowork synth corpus --validate``) covers
hundreds per generator.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from cowork.spec.capabilities import capabilities
from cowork.spec.loader import load_spec
from cowork.synth.compose import generators
from cowork.synth.family import DIFFICULTIES, families, generate, write_draft
from cowork.validate.validate import validate_spec

NAMES = generators()


def test_generators_cover_the_taxonomy():
    fams = families()
    assert NAMES, "no world generator registered"
    covered = {c for n in NAMES for c in fams[n].capabilities}
    assert covered <= set(capabilities())


@pytest.mark.parametrize("name", NAMES)
def test_a_seed_is_one_spec_and_tasks_spread_over_worlds(name):
    a, b = generate(name, 5), generate(name, 5)
    assert json.dumps(a.spec, sort_keys=True, default=str) == json.dumps(b.spec, sort_keys=True, default=str)
    assert a.files.keys() == b.files.keys() and all(a.files[k] == b.files[k] for k in a.files)
    specs = [generate(name, s).spec for s in range(12)]
    worlds = {t for s in specs for t in s["tags"] if t.startswith("world:")}
    assert len(worlds) >= 10, worlds
    assert len({s["prompt"] for s in specs}) >= 10


@pytest.mark.docker
@pytest.mark.timeout(900)
async def test_one_seed_of_every_generator_validates(tmp_path, sandbox_image):
    folders = [write_draft(generate(n, i, DIFFICULTIES[i % 3]), tmp_path) for i, n in enumerate(NAMES)]
    for f in folders:
        load_spec(f)
    limit = asyncio.Semaphore(2)

    async def one(folder):
        async with limit:
            return await validate_spec(folder)

    reports = await asyncio.gather(*(one(f) for f in folders))
    bad = [r.summary() for r in reports if not r.ok]
    assert not bad, f"{len(bad)} of {len(reports)} failed:\n\n" + "\n\n".join(bad[:4])
