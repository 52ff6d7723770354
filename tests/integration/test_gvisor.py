"""The gVisor backend: the same sandbox under runsc, a user-space kernel between agent and host.

CI registers the runtime (scripts/setup.sh writes /etc/docker/daemon.json when runsc is
installed); a machine without it skips these tests locally and fails them in CI.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cowork import run_task
from cowork.agents import ScriptedPolicy
from cowork.sandbox.sandbox import Sandbox
from cowork.spec.loader import load_spec

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gvisor():
    from cowork import settings
    from cowork.engine.client import get_client

    if "runsc" not in (get_client().info().get("Runtimes") or {}):
        if settings.reload().require_docker:
            pytest.fail("the Docker daemon has no runsc runtime (scripts/setup.sh registers it)")
        pytest.skip("the Docker daemon has no runsc runtime")
    return "gvisor"


async def test_a_task_passes_under_gvisor(gvisor, no_leftovers):
    loaded = load_spec(ROOT / "specs" / "fix-csv-report")
    res = await run_task(loaded, ScriptedPolicy([(s.tool, dict(s.args)) for s in loaded.spec.oracle]), backend=gvisor)
    assert res.grade.status == "graded" and res.grade.passed, res.grade.summary()


async def test_the_agent_sees_gvisors_kernel_not_the_hosts(gvisor, no_leftovers):
    async with await Sandbox.start(ROOT / "specs" / "fix-csv-report", backend=gvisor) as sb:
        assert sb.backend.name == "gvisor"
        r = await sb.call_tool("shell", {"command": "uname -r; id -u"})
        release, uid = r.structured["output"].split()
    assert release != os.uname().release and uid == "1000"


async def test_a_pooled_sandbox_resets_and_verifies_under_gvisor(gvisor, no_leftovers):
    from cowork.sandbox.pool import SandboxPool

    loaded = load_spec(ROOT / "specs" / "update-service-config")  # has a root-owned seeded file
    async with SandboxPool(max_per_task=1, backend=gvisor) as pool:
        sb = await pool.acquire(loaded)
        for cmd in ("echo x > new.txt; mkdir -p d/e; chmod 000 d; echo y > /tmp/y",
                    "setsid nohup sh -c 'sleep 1; echo late > /workspace/late' >/dev/null 2>&1 &"):
            r = await sb.call_tool("shell", {"command": cmd})
            assert not r.is_error, r.text
        await sb.export_evidence()
        st = await sb.reset()
        assert st["hash"] == sb.pristine["hash"] and st["processes"] == []
        await sb.export_evidence()
        await pool.release(sb)
        await pool.wait_idle()
        assert pool.stats["resets"] == 1 and pool.stats["reset_failed"] == 0
        res = await run_task(loaded, ScriptedPolicy([(s.tool, dict(s.args)) for s in loaded.spec.oracle]), pool=pool)
        assert res.grade.passed, res.grade.summary()
        assert pool.stats["started"] == 1
