"""The commands other than ``run`` and ``rollout``: what each does, given parsed arguments.

Every function returns the exit code; errors are raised (``cowork.cli.app`` turns a
CoworkError into its message and code). Heavy modules are imported inside each function, so
``cowork --help`` and ``cowork connect`` start quickly.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ..errors import CoworkError, DockerUnavailable, ImageError, SandboxError
from ..rollouts.progress import ProgressReport
from . import exits, interrupted, output

#: cowork.export.write.FORMATS, written out (importing the exporter loads the grader; a test keeps them equal).
EXPORT_FORMATS = ("openai-sft", "trl-sft", "rl")


# --------------------------------------------------------------------------- evaluate
def _spec_targets(paths: list[str]) -> list[Path]:
    """Each path a spec, a folder of spec folders (bad input when it holds none), or a spec
    dataset (``DIR``, ``DIR:SPLIT``: its rows written back to spec folders)."""
    from ..spec.loader import SPEC_FILE
    from ..synth.dataset import resolve_tasks

    targets: list[Path] = []
    for p in map(Path, resolve_tasks(paths)):
        if p.is_dir() and not (p / SPEC_FILE).exists():
            found = sorted(x.parent for x in p.glob(f"*/{SPEC_FILE}"))
            if not found:
                raise CoworkError(f"{p}: no {SPEC_FILE} in it or in its subfolders; give a task folder, its "
                                  f"{SPEC_FILE}, or a folder of task folders")
            targets += found
        elif not p.exists():
            raise CoworkError(f"{p}: no such file or folder")
        else:
            targets.append(p)
    return targets


#: Exception names a validation report's ``run`` step quotes when the machine, not the spec, failed.
_INFRA_NAMES = tuple(f"{e.__name__}:" for e in (DockerUnavailable, ImageError, SandboxError))


async def validate(specs: list[str], *, concurrency: int, as_json: bool, verbose: bool,
                   judge_model: str | None = None, judge_base_url: str | None = None) -> int:
    """Validate specs, ``concurrency`` at once; 1 when one is invalid, 3 when the machine failed."""
    from ..validate.validate import report_json, validate_spec

    if concurrency < 1:
        raise CoworkError(f"--concurrency must be at least 1, got {concurrency}")
    from .preflight import judge_for

    judge = await judge_for(judge_model, judge_base_url)
    targets = _spec_targets(specs)
    limit = asyncio.Semaphore(concurrency)
    progress = ProgressReport("validate", "specs", len(targets), enabled=len(targets) > 1)
    interrupted.expect(lambda: interrupted.specs(progress.figures))

    async def one(target: Path):
        async with limit:
            report = await validate_spec(target, judge=judge)
        if not as_json:
            # A valid spec is one line; an invalid or unproven one shows every step, with the
            # repair hints and what was not proven.
            lines = report.summary().splitlines()
            for line in lines if verbose or not (report.ok and report.proven) else lines[:1]:
                output.show(output.styled(line))
        progress.advance(f"{report.task or target} {'VALID' if report.ok else 'INVALID'}")
        return report

    with progress:
        reports = await asyncio.gather(*(one(t) for t in targets))
    if as_json:
        output.print_json(report_json(reports))
    else:
        unproven = sum(r.ok and not r.proven for r in reports)
        output.say(f"{sum(r.ok for r in reports)} of {len(reports)} spec(s) valid"
                   + (f", {unproven} of them not proven in part (judge checks without --judge-model)" if unproven else ""))
    if any(f.step == "run" and f.detail.startswith(_INFRA_NAMES) for r in reports for f in r.findings):
        return exits.INFRASTRUCTURE
    return exits.OK if all(r.ok for r in reports) else exits.GATE_FAILED


def grade(folder: Path, spec: str | None, as_json: bool, *, judge_model: str | None = None,
          judge_base_url: str | None = None) -> Any:
    """Recompute a saved bundle's grade; with ``judge_model`` its judge items are judged again
    (else the judgements the bundle holds, if any, are used).

    Without a judge this runs to the end here (no event loop: callers inside one, such as a
    test's ``main(["grade", DIR])``, keep working); with one it returns the coroutine for the
    CLI to run.
    """
    from ..evidence import Evidence
    from ..spec.loader import load_spec
    from ..spec.models import TaskSpec

    if spec:
        task = load_spec(spec).spec
    elif (folder / "spec.json").exists():
        task = TaskSpec.model_validate_json((folder / "spec.json").read_text())
    else:
        raise CoworkError(f"{folder} has no spec.json; pass --spec")
    ev = Evidence.load(folder)
    if judge_model:
        return _grade_judged(task, ev, judge_model, judge_base_url, as_json)
    return _say_grade(task, ev, as_json)


async def _grade_judged(task: Any, ev: Any, judge_model: str, judge_base_url: str | None, as_json: bool) -> int:
    from ..grading.judge import judge_evidence
    from .preflight import judge_for

    await judge_evidence(await judge_for(judge_model, judge_base_url), task, ev)
    return _say_grade(task, ev, as_json)


def _say_grade(task: Any, ev: Any, as_json: bool) -> int:
    from ..grading import grade as grade_evidence

    g = grade_evidence(task, ev)
    if as_json:
        output.print_json(g.model_dump())
    else:
        output.say(g.summary())
    return exits.OK


def view(source: Path, *, port: int, export: Path | None, open_browser: bool) -> int:
    """Serve the web view of a results folder or bundle, or write it as one HTML file."""
    try:
        from ..view import export_html, serve
    except ImportError as exc:
        raise CoworkError(f"the web view is not available in this installation ({exc}); update cowork") from exc
    if export is not None:
        output.say(f"wrote {export_html(source, export)}")
        return exits.OK
    serve(source, port=port, open_browser=open_browser)
    return exits.OK


# --------------------------------------------------------------------------- train
def export(results: list[str], *, fmt: str, out: str, as_format: str | None = None, reward: str = "score",
           max_turns: int | None = None, min_score: float | None = None, curate: bool = True,
           as_json: bool = False) -> int:
    """``cowork export``: write the file, print what was kept and why the rest was not.

    Returns:
        0 when at least one episode was written, 1 when none was kept.

    Raises:
        CoworkError: see :func:`cowork.export.write.export` (bad arguments are reported as
            CoworkError too).
    """
    from ..export.write import export as write_export

    if max_turns is not None and max_turns < 1:
        raise CoworkError(f"--max-turns must be at least 1, got {max_turns}")
    try:
        report = write_export(results, fmt, out, reward=reward, curate=curate, max_turns=max_turns,
                              min_score=min_score, as_format=as_format)
    except ValueError as exc:  # an unknown reward or format from the API's point of view
        raise CoworkError(str(exc)) from exc
    if as_json:
        output.print_json(report.to_dict())
    else:
        output.say(report.summary())
    return exits.OK if report.kept else exits.GATE_FAILED


# --------------------------------------------------------------------------- sandboxes
async def up(spec: str, as_json: bool, http: bool = False) -> int:
    """Start a sandbox that outlives the command."""
    from ..sandbox.sandbox import Sandbox
    from . import live

    sb = await Sandbox.start(spec, keep=True)
    await sb.detach()
    live.record_up(sb)  # what `cowork grade ID` / `cowork down --evidence` need later
    from ..engine.labels import run_id
    from .sandboxes import mcp_url

    # One shape with and without --http (cli/sandboxes.py's UP_SCHEMA, docs/cli.md).
    info: dict[str, Any] = {"id": sb.id[:12], "name": sb.name, "run_id": run_id(sb.name), "task": sb.spec.id,
                            "mcp_socket": str(sb.socket_path), "mcp_url": mcp_url(sb.socket_path),
                            "stdio_bridge": f"cowork connect {sb.id[:12]}", "http": None}
    if http:
        from . import gateway

        info["http"] = gateway.issue_token(sb)
    if as_json:
        output.print_json(info)
    else:
        output.say(f"sandbox {info['name']} is up (id {info['id']}, task {info['task']}; the name, or its last "
                   f"part {info['run_id']}, works as the id too)")
        output.say(f"  MCP (streamable HTTP) over the unix socket {info['mcp_socket']}, path /mcp  "
                   f"(as one URL: {info['mcp_url']})")
        output.say(f"  MCP over stdio (Claude Desktop, MCP Inspector): {info['stdio_bridge']}")
        if http:
            from . import gateway

            output.say(gateway.describe(info["http"]))
        output.say(f"  stop it with: cowork down {info['id']}")
    return exits.OK


# --------------------------------------------------------------------------- maintenance
def gc(everything: bool) -> int:
    """Remove sandboxes whose owner is gone (every one with ``everything``), and stale run dirs."""
    from ..engine.reaper import sweep

    done = sweep(include_kept=everything, everything=everything)
    output.say(f"removed {len(done.containers)} sandbox(es)" + (": " + ", ".join(done.containers) if done.containers else ""))
    output.say(f"removed {len(done.run_dirs)} run dir(s) of killed runners" + "".join(f"\n  {d}" for d in done.run_dirs))
    return exits.OK


def spec_schema() -> int:
    """Print the JSON Schema of task.yaml (``cowork spec schema``)."""
    from ..spec import json_schema

    output.print_json(json_schema())
    return exits.OK


def images_build(offline: bool) -> int:
    """Build the sandbox image if it is missing, with a progress bar; print its tag.

    Raises:
        ImageError: the build failed (its log is in the message).
    """
    from ..engine.images import BUILD_STEPS, ensure_sandbox_image

    with ProgressReport("images", "steps", BUILD_STEPS) as steps:
        tag = ensure_sandbox_image(offline_only=offline, done=steps.advance)
    output.say(tag)
    return exits.OK


def images_prune() -> int:
    """Remove outdated sandbox and task images (see engine.images.prune_images); list them."""
    from ..engine.images import prune_images

    removed = prune_images()
    output.say(f"removed {len(removed)} image tag(s)" + "".join(f"\n  {t}" for t in removed))
    return exits.OK
