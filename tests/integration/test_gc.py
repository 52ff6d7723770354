"""A SIGKILLed owner leaves containers that `cowork gc` removes; the start-up sweep does too."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cowork.cli import main
from cowork.engine import labels as L
from cowork.engine.reaper import managed_containers

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import asyncio, sys
from cowork.sandbox.sandbox import Sandbox
async def go():
    boxes = [await Sandbox.start(sys.argv[1]) for _ in range(2)]
    print(" ".join(b.id for b in boxes), flush=True)
    await asyncio.sleep(3600)
asyncio.run(go())
"""


def _orphans() -> list[str]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(ROOT / "specs" / "fix-csv-report")],
                            stdout=subprocess.PIPE, text=True)
    ids = proc.stdout.readline().split()
    assert len(ids) == 2, "child did not start its sandboxes"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    alive = {c.id for c in managed_containers()}
    assert set(ids) <= alive  # the owner died without cleaning up
    return ids


def test_gc_removes_containers_of_a_killed_owner(capsys):
    ids = _orphans()
    run_dirs = [c.labels[L.RUN_DIR] for c in managed_containers() if c.id in ids]
    assert main(["gc"]) == 0
    assert "removed 2 sandbox(es)" in capsys.readouterr().out
    assert not ({c.id for c in managed_containers()} & set(ids))
    assert not any(Path(d).exists() for d in run_dirs)


def test_gc_leaves_live_owners_alone(capsys):
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(ROOT / "specs" / "fix-csv-report")],
                            stdout=subprocess.PIPE, text=True)
    try:
        ids = proc.stdout.readline().split()
        assert main(["gc"]) == 0
        assert set(ids) <= {c.id for c in managed_containers()}
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        main(["gc"])
    assert not ({c.id for c in managed_containers()} & set(ids))


def test_reaper_tells_a_recycled_pid_from_the_owner():
    me = L.owner_labels("t", "/nonexistent")
    assert L.owner_alive(me)
    assert not L.owner_alive({**me, L.OWNER_START: "1"})
    assert not L.owner_alive({**me, L.OWNER_PID: "999999999"})
