"""The measurements behind ``cowork bench``: tool-call latency, stdio bridge, HTTP gateway, start,
memory, scale, throughput, grading, build and pool figures, and the environment's share of a
rollout (the command itself is :mod:`cowork.cli.bench`).

Everything is measured in one run on the machine it runs on, against the baselines of the
same run (``docker exec``, ``docker run --rm``), and checked against the targets (the second performance rung where it set one).
Every container it starts carries the usual owner labels; it removes them all on the way
out, also on Ctrl-C or SIGTERM, and the reaper removes them if the process dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import signal
import time
from pathlib import Path
from typing import Any

from .. import settings
from .delegation import delegation_overhead
from .env_share import env_share
from .gateway import gateway_figures
from .phases import Bench, Plan
from .pooling import pool_figures
from .report import Report
from .stdio_bridge import bridge_figures

__all__ = ["ONLY", "PHASES", "Bench", "Plan", "Report", "run_bench"]


def default_spec() -> Path:
    """The spec the bench runs: fix-csv-report from the source checkout."""
    base = settings.get().home
    return base / "specs" / "fix-csv-report"


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    from ..engine.client import get_client

    info: dict[str, Any] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                            "kernel": platform.release()}
    try:
        with open("/proc/meminfo") as fh:
            info["memory_gib"] = round(int(fh.readline().split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        d = get_client().info()
        info.update(docker=d.get("ServerVersion"), cgroup=d.get("CgroupVersion"),
                    cgroup_driver=d.get("CgroupDriver"), storage=d.get("Driver"))
    except Exception as exc:  # informational only
        info["docker_info_error"] = str(exc)
    return info


#: Phases run_bench announces through ``progress`` (eight of its own, three of the pool's, one
#: per concurrency of the environment's share).
PHASES = 12 + len(Plan.env_share_concurrency)
#: Parts that can be run alone (``cowork bench --only NAME``), and the phases each announces.
ONLY = {"env-share": 1 + len(Plan.env_share_concurrency), "delegation": 2}


async def run_bench(plan: Plan, spec: str | Path | None = None, before: set[str] | None = None,
                    progress=None, only: str | None = None) -> Report:
    """Measure every figure; stops what it started before returning or raising.

    Args:
        plan: Sample counts (``Plan.make(quick, scale)``).
        spec: Task folder to run; default fix-csv-report.
        before: Ids of this session's containers that existed before the run (not counted
            as left behind).
        progress: Called with a short phase name as each phase begins.
        only: Run only this part (a key of :data:`ONLY`) after the build, e.g. ``env-share``.

    Raises:
        CoworkError: Docker, image or sandbox failures that stop the whole run.
        ValueError: ``only`` names no part.
    """
    if only is not None and only not in ONLY:
        raise ValueError(f"no bench part {only!r}; choose one of {', '.join(ONLY)}")
    from ..engine.client import in_thread
    from . import docker_probes as probes

    say = progress or (lambda _msg: None)
    if before is None:
        before = set(await in_thread(probes.session_containers))
    bench = Bench(plan, spec or default_spec())
    data: dict[str, Any] = {"quick": plan.quick, "plan": plan.__dict__, "spec": bench.loaded.spec.id,
                            "machine": await in_thread(machine)}
    t0 = time.perf_counter()
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    try:
        if main is not None:  # always, inside a coroutine asyncio runs
            loop.add_signal_handler(signal.SIGTERM, main.cancel)
    except (NotImplementedError, RuntimeError):  # not the main thread
        pass
    try:
        say("build cache")
        data["build"] = await bench.build()
        if only == "env-share":
            data["only"] = only
            data["env_share"] = await env_share(bench, say)
        elif only == "delegation":
            data["only"] = only
            data["delegation"] = await delegation_overhead(bench, say, 15 if plan.quick else 40)
        else:
            await _every_phase(bench, data, before, say)
    finally:
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(signal.SIGTERM)
        await bench.close()
    data["left_behind"] = len([c for c in await in_thread(probes.session_containers) if c not in before])
    data["wall_s"] = round(time.perf_counter() - t0, 1)
    return Report(data)


async def _every_phase(bench: Bench, data: dict[str, Any], before: set[str], say: Any) -> None:
    """Every figure after the build, in order, into ``data``."""
    plan = bench.plan
    say("tool-call latency")
    data["latency"] = await bench.latency()
    say("stdio bridge (cowork connect)")
    data["bridge"] = await bridge_figures(bench)
    say("HTTP gateway (cowork serve)")
    data["gateway"] = await gateway_figures(bench)
    say("sandbox start and idle memory")
    data["start"], data["memory"], fleet = await bench.start_and_memory()
    data["start"]["first_start_s"] = data["latency"].pop("first_start_s")
    say("throughput")
    extra = await asyncio.gather(*(bench.start() for _ in range(plan.fleet - len(fleet))))
    data["throughput"] = await bench.throughput(fleet + list(extra))
    await bench.stop(*fleet, *extra)
    say("grading")
    data["grading"] = await bench.grading()
    data["pool"] = await pool_figures(bench, say)
    data["env_share"] = await env_share(bench, say)
    data["delegation"] = await delegation_overhead(bench, say, 15 if plan.quick else 40)
    say(f"scale ({plan.scale} sandboxes at once)")
    data["scale"] = await bench.scale(before)
