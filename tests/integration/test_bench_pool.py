"""The bench's pool phase on real containers, at a tiny size: every figure is there, every
pool is closed and nothing is left behind. No timed assertions: only presence and sanity."""

from __future__ import annotations

import dataclasses

import pytest

from cowork.bench import default_spec
from cowork.bench.phases import Bench, Plan
from cowork.bench.pooling import pool_figures
from cowork.bench.report import Report

pytestmark = pytest.mark.docker


@pytest.mark.timeout(120)
async def test_pool_phase_reports_its_figures(no_leftovers):
    plan = dataclasses.replace(Plan.make(True, None), resets=3, acquires=5, pool_concurrency=2, pooled_episodes=4,
                               fresh_episodes=2, overhead_inflight=2, overhead_waves=2, think_s=0.05)
    bench = Bench(plan, default_spec())
    phases: list[str] = []
    try:
        await bench.build()
        pool = await pool_figures(bench, phases.append)
    finally:
        await bench.close()
    assert len(phases) == 3 and not bench.live

    for kind in ("workspace", "services"):
        reset = pool["reset"][kind]
        assert reset["ms"]["n"] == 3 and reset["ms"]["p50"] > 0 and reset["server_ms"]["p50"] > 0
    assert pool["reset"]["services"]["services"] == ["calendar", "contacts", "mail"]
    assert pool["acquire"]["ms"]["n"] == 5 and pool["acquire"]["ms"]["p50"] > 0

    rate = pool["episode_rate"]
    assert rate["pooled_eps"] > 0 and rate["fresh_eps"] > 0 and rate["cold_starts"] == 0
    assert rate["pooled_rounds"][0]["calls"] == 4 * 8 and rate["pooled_rounds"][0]["tool_errors"] == 0

    over = pool["overhead"]
    assert over["in_flight"] == 2 and over["episodes_per_round"] == 4 and over["cold_starts"] == 0
    assert over["ideal_s"] == pytest.approx(2 * 9 * 0.05) and over["wall_s"] >= over["ideal_s"]
    assert over["rounds"][0]["tool_errors"] == 0 and "compare" not in over
    assert over["env_cpu_ms_per_episode"] is None or over["env_cpu_ms_per_episode"] > 0

    shown = {v["figure"]: v["shown"] for v in Report({"pool": pool}).verdicts()}
    assert all(shown[f] != "-" for f in shown
               if ("pool" in f or "reset" in f or "overhead" in f) and "delegation" not in f)  # its own phase
