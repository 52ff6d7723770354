"""``cowork import``: bring another benchmark's tasks in as cowork task folders."""

from __future__ import annotations

from pathlib import Path

from . import exits, output


def claw_eval(path: Path, *, out: Path, native: bool, only: list[str], judge_model: str | None,
              judge_base_url: str | None, as_json: bool) -> int:
    """Import a Claw-Eval checkout (``cowork import claw-eval``): exit 0 when at least one task
    was imported and the importer failed on none, 1 otherwise."""
    from ..integrations.claw_eval.importer import import_checkout

    report = import_checkout(path, out, native=native, only=only or None, judge_model=judge_model,
                             judge_base_url=judge_base_url)
    if as_json:
        output.print_json(report.model_dump(mode="json"))
    else:
        output.say(report.text())
    return exits.OK if report.ok else exits.GATE_FAILED
