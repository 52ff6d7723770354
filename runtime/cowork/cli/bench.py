"""``cowork bench [--quick] [--json] [--scale N] [--only env-share|delegation]``: runs :func:`cowork.bench.run_bench` with a
progress bar over its phases, removes whatever it started (also on Ctrl-C or SIGTERM), and
prints the report. The measuring itself is :mod:`cowork.bench`'s.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from pathlib import Path

from ..bench import ONLY, PHASES, Plan, run_bench
from . import exits

log = logging.getLogger(__name__)


def bench(quick: bool = False, as_json: bool = False, scale: int | None = None,
          spec: str | Path | None = None, only: str | None = None) -> int:
    """Measure every figure and print the report (a table, or the raw figures as JSON).

    Args:
        quick: Fewer samples and sandboxes (a smoke run).
        as_json: Print every raw figure as JSON (and no progress bar).
        scale: Sandboxes started at once (default: ``Plan.make``'s).
        spec: Task folder to run; default fix-csv-report.
        only: Run only this part after the build (``env-share`` or ``delegation``).

    Returns:
        0 when the run completed (targets missed are reported, not failed); 130 when
        interrupted.

    Raises:
        CoworkError: Docker, image or sandbox failures that stop the whole run.
    """
    from ..bench import docker_probes as probes
    from ..engine.client import get_client
    from ..rollouts.progress import ProgressReport

    if only is not None and only not in ONLY:
        print(f"cowork bench: no part {only!r}; choose one of {', '.join(ONLY)}", file=sys.stderr)
        return exits.BAD_INPUT
    get_client()  # a clear DockerUnavailable before anything starts
    plan = Plan.make(quick, scale)
    before = set(probes.session_containers())

    # A bar over the phases on a terminal (plain lines when piped): each phase is done when
    # the next one begins.
    phases = ProgressReport("bench", "phases", ONLY[only] if only else PHASES, enabled=not as_json)
    current: list[str] = []

    def progress(msg: str) -> None:
        if current:
            phases.advance(current.pop())
        current.append(msg)

    interrupted = False
    prev_term = signal.getsignal(signal.SIGTERM)
    try:
        # Until the event loop takes over SIGTERM, turn it into the same path as Ctrl-C.
        signal.signal(signal.SIGTERM, _raise_interrupt)
        with phases:
            report = asyncio.run(run_bench(plan, spec, before, progress, only=only))
            if current:
                phases.advance(current.pop())
    except (KeyboardInterrupt, asyncio.CancelledError):
        interrupted = True
        report = None
    finally:
        signal.signal(signal.SIGTERM, prev_term)
        prev_int = signal.signal(signal.SIGINT, signal.SIG_IGN)  # let the sweep finish
        try:
            left = probes.sweep(before, settle_s=5.0 if interrupted else 0.0)
            if left:
                log.warning("bench removed %d leftover container(s): %s", len(left), ", ".join(left))
        finally:
            signal.signal(signal.SIGINT, prev_int)
    if interrupted or report is None:
        print("cowork bench: interrupted; everything it started was removed", file=sys.stderr)
        return exits.INTERRUPTED
    if as_json:
        print(json.dumps(report.as_json(), indent=2, default=str))
    else:
        m = report.data["machine"]
        print(f"cowork bench{' --quick' if plan.quick else ''} on {m.get('cpus')} cores, "
              f"{m.get('memory_gib')} GiB, Docker {m.get('docker')}, cgroup v{m.get('cgroup')}, "
              f"spec {report.data['spec']}, {report.data['wall_s']} s\n")
        print(report.table())
    return exits.OK


def _raise_interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt
