"""The curated specs pass the static quality gates: no near-duplicates or renamed clones, no
overclaimed difficulty, and every answer check fails a reply that lists every candidate."""

import asyncio
from pathlib import Path

from cowork.cli import exits, synth

ROOT = Path(__file__).resolve().parents[2]


def test_every_curated_spec_passes_the_static_gates(capsys):
    code = asyncio.run(synth.check([str(ROOT / "specs")], concurrency=1, threshold=0.8, static=True, as_json=False))
    out = capsys.readouterr().out
    assert code == exits.OK, out
    assert "REFUSED" not in out
