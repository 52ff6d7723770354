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


async def llm(capability: str, *, n: int, model: str, base_url: str | None, out: Path, rounds: int,
              concurrency: int, examples: list[Path], as_json: bool) -> int:
    """Ask a chat model for ``n`` specs of ``capability``, repairing each from its validation
    report; exit 0 when at least one validated spec was written, 1 when none was."""
    from ..synth.llm import SynthOptions, synthesize
    from .preflight import Endpoint, preflight

    opts = SynthOptions(capability=capability, n=n, model=model, base_url=base_url, out=out, rounds=rounds,
                        concurrency=concurrency, examples=list(examples))
    await preflight([Endpoint("--model", opts.resolved_base_url(), opts.resolved_api_key(), "$OPENAI_API_KEY",
                              "--base-url or $OPENAI_BASE_URL")])
    report = await synthesize(opts)
    if as_json:
        output.print_json(report.as_dict())
    else:
        output.say(report.summary() + f"\nreport: {out / 'synth-report.json'}")
    return exits.OK if report.accepted else exits.GATE_FAILED
