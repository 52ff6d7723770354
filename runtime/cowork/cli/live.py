"""``cowork grade ID`` and ``cowork down [--evidence]``: grading a session an outside MCP client
drove in a sandbox ``cowork up`` started (see docs/live-sessions.md).

Grading a running sandbox exports its evidence the way an episode's end does, and nothing
more: no reset, the client may go on working. The evidence carries every branch a ``cowork
restore`` abandoned, and the grade judges them too (docs/checkpoints.md). The export holds new calls back with a tool
error for its duration ("Refused: the sandbox is exporting its evidence ..."), and it kills
the agent's background processes (nothing may write files while they are read).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..errors import CoworkError, SandboxError
from . import exits, output


def record_up(sb: Any) -> None:
    """Keep, in the sandbox's run dir, what a later ``cowork grade ID`` / ``cowork down
    --evidence`` needs (see cowork.sandbox.attach.record_up)."""
    from ..sandbox.attach import record_up as keep

    keep(sb)


async def _attach(ref: str, spec: str | None = None):
    """A handle on the sandbox; one whose MCP server no longer answers gets a handle without
    a session (its evidence is then salvaged)."""
    from ..sandbox.sandbox import Sandbox

    try:
        return await Sandbox.attach(ref, spec=spec), True
    except SandboxError:
        return await Sandbox.attach(ref, spec=spec, connect=False), False


async def _evidence(sb: Any, answering: bool):
    """The sandbox's evidence now, with a trace rebuilt from its audit log."""
    from ..episode.trajectory import audit_trace

    ev = None
    if answering:
        try:
            ev = await sb.export_evidence()
        except SandboxError:
            ev = None
    if ev is None:  # the server is dead or stopped answering: what the run dir and container still hold
        ev = await sb.salvage_evidence()
    ev.trace = audit_trace(ev, sb.spec.id)
    ev.meta["live"] = {"driven_by": "an outside MCP client", "trace": "rebuilt from the audit log"}
    return ev


async def _grade(sb: Any, ev: Any, judge: Any = None):
    """Hidden verifiers and the judge first (as after an episode), then the grade of the live
    state and of every branch a restore abandoned (``Sandbox.grade_evidence``)."""
    return await sb.grade_evidence(ev, judge=judge)


def _save(dest: Path, ev: Any, g: Any, spec: Any) -> None:
    """The bundle ``cowork grade DIR`` regrades offline: evidence (with every abandoned branch
    under ``branches/<n>/``), grade.json, spec.json."""
    ev.save(dest)
    (dest / "grade.json").write_text(g.model_dump_json(indent=1))
    from ..sandbox.attach import spec_json

    (dest / "spec.json").write_text(spec_json(spec))


async def grade_target(target: str, *, spec: str | None, evidence: Path | None, as_json: bool,
                       judge_model: str | None = None, judge_base_url: str | None = None) -> int:
    """``cowork grade TARGET`` where TARGET is no folder: a running sandbox's id, or a mistake
    said as one (no folder and no sandbox of that name: bad input, exit 2)."""
    from ..engine.reaper import NoSuchSandbox

    where = ("an evidence folder (`cowork run --evidence DIR`, `cowork grade ID --evidence DIR`) or the id of a "
             "running sandbox (`cowork ps` lists them)")
    if Path(target).exists():
        raise CoworkError(f"{target} is a file, not a folder; give {where}")
    if "/" in target or target.startswith("."):  # a path: no sandbox id or name has a slash or starts with a dot
        raise CoworkError(f"no folder or sandbox named {target!r}: there is no such folder; give {where}")
    try:
        return await grade_live(target, spec=spec, evidence=evidence, as_json=as_json, judge_model=judge_model,
                                judge_base_url=judge_base_url)
    except NoSuchSandbox:
        raise CoworkError(f"no folder or sandbox named {target!r}: neither a folder here nor a cowork sandbox's id "
                          f"or name; give {where}") from None


async def grade_live(ref: str, *, spec: str | None, evidence: Path | None, as_json: bool,
                     judge_model: str | None = None, judge_base_url: str | None = None) -> int:
    """Grade a running sandbox as it is now; it keeps running. With ``evidence`` also save
    the bundle there; with ``judge_model`` its judge items are judged (else not graded)."""
    from .preflight import judge_for

    judge = await judge_for(judge_model, judge_base_url)  # before the export: a bad endpoint costs nothing
    sb, answering = await _attach(ref, spec)
    try:
        ev = await _evidence(sb, answering)
    finally:
        await sb.detach()
    g = await _grade(sb, ev, judge)
    if evidence is not None:
        _save(evidence, ev, g, sb.spec)
    if as_json:
        output.print_json(g.model_dump())
    else:
        output.say(g.summary())
        if evidence is not None:
            output.say(f"evidence saved to {evidence}")
    return exits.OK


# --------------------------------------------------------------------------- down
def client_calls(run_dir: Path) -> int:
    """Calls an MCP client made in the sandbox, refused ones included (the task's own actors'
    are not counted), as its audit log says now."""
    n = 0
    try:
        with open(Path(run_dir) / "audit.jsonl", "rb") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and rec.get("kind") in ("tool_call", "tool_denied") \
                        and rec.get("actor") is None:
                    n += 1
    except FileNotFoundError:
        return 0
    return n


def down(ids: list[str], *, evidence: Path | None, yes: bool, judge_model: str | None = None,
         judge_base_url: str | None = None) -> Any:
    """Remove sandboxes. With ``evidence``: export, grade and save each one first (DIR, or
    DIR/<name> for several). Without: one an MCP client used is confirmed on a terminal
    (unless ``yes``), or removed with a line saying what was not kept.

    Without ``evidence`` this runs to the end here (no event loop: callers inside one, such
    as a test's ``main(["down", ...])``, keep working); with it, it returns the coroutine
    for the CLI to run.

    Returns:
        0; 1 when a sandbox was kept because the answer was no; 2 when one was kept because
        its evidence could not be graded without a spec.
    """
    from ..engine.reaper import find_container

    if evidence is None and judge_model:
        raise CoworkError("--judge-model judges the grade that --evidence DIR saves; add --evidence DIR "
                          "(without it nothing is graded)")
    # Every id is resolved before anything is removed: a typo in the third removes nothing.
    containers = [find_container(ref) for ref in ids]
    if evidence is None:
        return max(_down_unsaved(c, yes) for c in containers)
    return _down_all_saved(containers, evidence, judge_model, judge_base_url)


async def _down_all_saved(containers: list[Any], evidence: Path, judge_model: str | None,
                          judge_base_url: str | None) -> int:
    from .preflight import judge_for

    judge = await judge_for(judge_model, judge_base_url)
    code = exits.OK
    for c in containers:
        code = max(code, await _down_saved(c, evidence if len(containers) == 1 else evidence / c.name, judge))
    return code


async def _down_saved(container: Any, dest: Path, judge: Any = None) -> int:
    try:
        sb, answering = await _attach(container.id)
    except CoworkError as exc:
        output.error(f"{exc}; kept {container.name}: save and grade it with `cowork grade {container.id[:12]} "
                     f"--spec SPEC --evidence {dest}`, then `cowork down {container.id[:12]}`")
        return exits.BAD_INPUT
    try:
        ev = await _evidence(sb, answering)
        g = await _grade(sb, ev, judge)
        _save(dest, ev, g, sb.spec)
    except BaseException:
        await sb.detach()  # nothing saved: the sandbox stays
        raise
    await sb.stop()
    output.say(g.summary())
    output.say(f"removed {container.name}; its evidence and grade are in {dest}")
    return exits.OK


def _down_unsaved(container: Any, yes: bool) -> int:
    from ..engine.container import remove_container
    from ..sandbox.attach import run_dir_of

    run_dir = run_dir_of(container)
    n = client_calls(run_dir)
    if n and not yes and sys.stdin.isatty():
        import typer

        if not typer.confirm(f"{container.name} holds {n} tool call(s) an MCP client made; remove it without "
                             "keeping them?", default=False):
            output.say(f"kept {container.name}; keep its evidence with: cowork down {container.id[:12]} --evidence DIR")
            return exits.GATE_FAILED
    remove_container(container.id, str(run_dir))
    output.say(f"removed {container.name}" + (f"; its {n} tool call(s) were not kept (use --evidence DIR to keep "
                                              "them)" if n else ""))
    return exits.OK
