"""``cowork synth``: generate task specs from families or a model, and check a batch."""

from __future__ import annotations

from pathlib import Path

from . import exits, output


def list_families(as_json: bool) -> int:
    from ..synth import families

    fams = families()
    if as_json:
        output.print_json({n: {"capabilities": list(f.capabilities), "summary": f.summary} for n, f in fams.items()})
    else:
        for name, fam in sorted(fams.items()):
            output.say(f"{name:32} {', '.join(fam.capabilities)}\n    {fam.summary}")
    return exits.OK


def family(name: str, *, n: int, seed: int, out: Path, difficulty: str | None, as_json: bool) -> int:
    """Write ``n`` specs of family ``name`` for seeds ``seed .. seed+n-1`` under ``out``."""
    from ..synth import generate, write_draft

    written = [str(write_draft(generate(name, s, difficulty), out)) for s in range(seed, seed + n)]
    if as_json:
        output.print_json({"family": name, "written": written})
    else:
        output.say(f"wrote {len(written)} spec(s) of {name} under {out} (check them: cowork validate {out})")
    return exits.OK
