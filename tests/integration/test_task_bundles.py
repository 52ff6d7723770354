"""Task bundles: the task layer mounted from a folder on the sandbox image instead of built
into a per-task image (``SandboxPool(bundles=True)``). Same grades, no build, the seed as
closed to the agent as in an image, a verified reset, and no folder left behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cowork.agents import make_policy
from cowork.engine.client import get_client
from cowork.engine.container import run_root
from cowork.engine.images import TASK_REPO_PREFIX, write_task_bundle
from cowork.engine.reaper import sweep
from cowork.episode.run import run_task
from cowork.errors import ImageError
from cowork.sandbox.pool import BUNDLES, SandboxPool
from cowork.spec.loader import load_spec

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]


def _fresh_copy(tmp_path: Path, name: str, new_id: str) -> Path:
    """A curated spec under an id no image was ever built for."""
    dest = tmp_path / new_id
    shutil.copytree(ROOT / "specs" / name, dest)
    text = (dest / "task.yaml").read_text()
    (dest / "task.yaml").write_text(text.replace(f"id: {name}\n", f"id: {new_id}\n", 1))
    return dest


def _task_images(task_id: str) -> list[str]:
    return [t for im in get_client().images.list() for t in im.tags if t.startswith(f"{TASK_REPO_PREFIX}{task_id}:")]


@pytest.mark.parametrize("name", ["fix-csv-report", "office-auditor-pipeline-confirmation"])
async def test_a_bundled_spec_grades_as_its_image_does_and_builds_no_image(tmp_path, name):
    new_id = f"bundle-{name[:20]}-{os.getpid()}"
    loaded = load_spec(_fresh_copy(tmp_path, name, new_id))
    pool = SandboxPool(max_per_task=1, max_total=1, bundles=True)
    try:
        oracle = await run_task(loaded, make_policy("oracle", loaded.spec), pool=pool)
        nop = await run_task(loaded, make_policy("nop", loaded.spec), pool=pool)  # reused, reset
        assert pool.stats["started"] == 1 and pool.stats["reused"] == 1
        assert (oracle.grade.score, oracle.grade.passed) == (1.0, True)
        assert not nop.grade.passed
        bundles = list(pool._bundles().iterdir())
        assert len(bundles) == 1 and oracle.evidence is not None
    finally:
        await pool.close()
    assert not _task_images(new_id), "a bundled spec built a task image"
    assert not pool._bundles().exists(), "the pool's bundle folder outlived it"
    # The same spec from its image grades the same.
    image = await run_task(loaded, make_policy("oracle", loaded.spec))
    assert (image.grade.score, image.grade.passed) == (oracle.grade.score, oracle.grade.passed)
    assert {c.id: c.passed for c in image.grade.checks} == {c.id: c.passed for c in oracle.grade.checks}


async def test_the_agent_can_neither_read_nor_change_the_bundle(tmp_path):
    loaded = load_spec(ROOT / "specs" / "fix-csv-report")
    async with SandboxPool(max_per_task=1, max_total=1, bundles=True) as pool:
        sb = await pool.acquire(loaded)
        try:
            attacks = {
                "list": "ls /opt/cowork/task",
                "read config": "cat /opt/cowork/task/task.json",
                "read seed": "cat /opt/cowork/task/seed/ledger/approved_2026Q2.csv",
                "write": "echo x > /opt/cowork/task/task.json",
            }
            for what, cmd in attacks.items():
                out = await sb.call_tool("shell", {"command": f"{cmd}; echo rc=$?"})
                text = str(out)
                assert "rc=0" not in text, f"the agent could {what} the bundle: {text[:300]}"
                assert "region,quarter" not in text and '"services"' not in text
            # The root-owned seeded file is root's in the workspace, as from an image.
            out = await sb.call_tool("shell", {"command": "echo forged > ledger/approved_2026Q2.csv; echo rc=$?; "
                                                          "stat -c %U ledger/approved_2026Q2.csv"})
            assert "rc=0" not in str(out) and "root" in str(out)
        finally:
            await pool.release(sb, discard_evidence=True)


def test_a_bundle_is_roots_alone_and_written_once_per_content(tmp_path):
    loaded = load_spec(ROOT / "specs" / "fix-csv-report")
    image, folder = write_task_bundle(loaded, tmp_path / "b")
    again = write_task_bundle(loaded, tmp_path / "b")
    assert again == (image, folder) and len(list((tmp_path / "b").iterdir())) == 1
    assert (folder / "task.json").is_file() and (folder / "seed" / "ledger" / "approved_2026Q2.csv").is_file()
    for path in [folder, *folder.rglob("*")]:
        st = path.stat()
        assert st.st_uid == 0
        assert (st.st_mode & 0o777) == (0o700 if path.is_dir() else 0o600), path


def test_a_process_that_is_not_root_gets_a_clear_error(tmp_path, monkeypatch):
    loaded = load_spec(ROOT / "specs" / "fix-csv-report")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ImageError, match="root"):
        write_task_bundle(loaded, tmp_path / "b")


def test_gc_removes_the_bundles_of_a_dead_pool_and_keeps_a_live_ones():
    root = run_root() / BUNDLES
    root.mkdir(mode=0o700, exist_ok=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = root / f"{dead.pid}-deadbeef"
    live = root / f"{os.getpid()}-0badf00d"
    for folder in (gone, live):
        (folder / "abc").mkdir(parents=True, exist_ok=True)
        (folder / "abc" / "task.json").write_text("{}")
        old = time.time() - 3600
        os.utime(folder, (old, old))
    try:
        removed = sweep(min_age_s=60).run_dirs
        assert str(gone) in removed and not gone.exists()
        assert live.exists()
    finally:
        shutil.rmtree(gone, ignore_errors=True)
        shutil.rmtree(live, ignore_errors=True)
