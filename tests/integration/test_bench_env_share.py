"""The bench's environment-share phase on real containers, at a tiny size: every figure is
there, both pools are closed and nothing is left behind. No timed assertions."""

from __future__ import annotations

import dataclasses

import pytest

from cowork.bench import default_spec
from cowork.bench.env_share import env_share
from cowork.bench.phases import Bench, Plan
from cowork.bench.report import Report
from cowork.engine.client import in_thread
from cowork.engine.images import ensure_task_image

pytestmark = pytest.mark.docker


@pytest.mark.timeout(120)
async def test_env_share_phase_reports_before_after_and_floor(no_leftovers):
    plan = dataclasses.replace(Plan.make(True, None), env_share_concurrency=(2,), env_share_episodes=1,
                               env_share_rounds=1, think_s=0.05)
    bench = Bench(plan, default_spec())
    phases: list[str] = []
    try:
        bench.image = await in_thread(ensure_task_image, bench.loaded)
        share = await env_share(bench, phases.append)
    finally:
        await bench.close()
    assert phases == ["environment share at concurrency 2 (50 ms per turn)"] and not bench.live

    e = share["c2"]
    assert e["spares"] == 1 and e["cold_starts"] == {"before": 0, "after": 0} and e["turns_per_episode"] == 9
    for name in ("before", "after"):
        r = e[name][0]
        assert r["episodes"] == 2 and r["acquire_ms"] > 0 and r["between_turns_ms"] > 0 and r["after_last_turn_ms"] > 0
        assert e[f"{name}_acquire_ms"]["n"] == 2 and e[f"{name}_nominal_pct"] >= e[f"{name}_pct"]
    assert e["floor_episode_s"][0] >= 9 * 0.05
    http = share["http_client"]
    assert http["fresh_client_ms"]["p50"] > 0 and http["shared_client_ms"]["p50"] > 0

    shown = Report({"env_share": {**share, "think_s": 0.2}, "only": "env-share"}).table()
    assert "environment share detail: c=2:" in shown and "new HTTP client vs one shared" in shown
