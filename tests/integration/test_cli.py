"""The CLI end to end: run, up / connect (stdio bridge for MCP clients) / down, image cache."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from cowork.cli import main
from cowork.engine.images import ensure_task_image
from cowork.engine.reaper import managed_containers
from cowork.spec.loader import load_spec

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "fix-csv-report")


def test_run_prints_a_json_grade_and_saves_evidence(capsys, tmp_path, no_leftovers):
    assert main(["run", SPEC, "--agent", "oracle", "--json", "--evidence", str(tmp_path / "ev")]) == 0
    (out,) = json.loads(capsys.readouterr().out)["runs"]  # one episode: the shape of many (docs/cli.md)
    assert out["grade"]["passed"] is True and out["grade"]["score"] == 1.0 and out["agent"] == "oracle"
    assert out["trajectory"]["status"] == "completed" and out["trajectory"]["tool_calls"] == 4
    assert out["evidence"] == str(tmp_path / "ev")
    # The saved bundle regrades offline to the same grade.
    assert main(["grade", str(tmp_path / "ev"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == out["grade"]


async def test_up_connect_down(capfd):
    assert await asyncio.to_thread(main, ["up", SPEC, "--json"]) == 0
    info = json.loads(capfd.readouterr().out)
    try:
        assert info["id"] in {c.id[:12] for c in managed_containers()}
        transport = StdioTransport(command=sys.executable, args=["-m", "cowork.cli", "connect", info["id"]],
                                   env={**os.environ}, cwd=str(ROOT))
        async with Client(transport) as c:
            names = {t.name for t in await c.list_tools()}
            r = await c.call_tool("shell", {"command": "cat reports/summary.json"})
        assert "shell" in names and "read_file" in names
        assert "2026-Q3" in r.structured_content["output"]
        # A kept sandbox survives the gc sweep although its `up` process has exited.
        assert main(["gc"]) == 0
        assert info["id"] in {c.id[:12] for c in managed_containers()}
    finally:
        assert main(["down", info["id"]]) == 0
    assert info["id"] not in {c.id[:12] for c in managed_containers()}
    assert not Path(info["mcp_socket"]).parent.exists()


def test_unchanged_spec_is_not_rebuilt_and_a_changed_one_is(sandbox_image, tmp_path):
    from cowork.engine.client import get_client

    loaded = load_spec(SPEC)
    first = ensure_task_image(loaded, sandbox_image)
    built = get_client().images.get(first).attrs["Created"]
    assert ensure_task_image(loaded, sandbox_image) == first
    assert get_client().images.get(first).attrs["Created"] == built  # the same image: nothing was rebuilt
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "task.yaml").write_text((ROOT / "specs/fix-csv-report/task.yaml").read_text()
                                              .replace("workspace:\n  dir: workspace", "workspace:\n  dir: null"))
    other = ensure_task_image(load_spec(tmp_path / "t"), sandbox_image)
    assert other != first and other.split(":")[0] == first.split(":")[0]


def test_bad_spec_exits_2_with_a_located_message(tmp_path, capsys):
    (tmp_path / "task.yaml").write_text("id: x\ntitle: t\nprompt: p\nlimits:\n  max_turns: lots\n")
    assert main(["run", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "task.yaml:5: limits.max_turns:" in err


def test_trials_report_mean_score_pass_at_k_and_pass_hat_k(capsys, tmp_path, no_leftovers):
    results = tmp_path / "results.jsonl"
    assert main(["run", SPEC, str(ROOT / "specs" / "update-service-config"), "--agent", "nop", "--trials", "2",
                 "--json", "--results", str(results)]) == 0
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    assert [(x["task"], x["trial"]) for x in lines] == [("fix-csv-report", 0), ("fix-csv-report", 1),
                                                        ("update-service-config", 0), ("update-service-config", 1)]
    assert all(x["passed"] is False and x["status"] == "completed" for x in lines)
    out = json.loads(capsys.readouterr().out)
    assert len(out["runs"]) == 4
    m = out["metrics"]
    assert set(m["tasks"]) == {"fix-csv-report", "update-service-config"}
    for t in m["tasks"].values():
        assert t["trials"] == 2 and t["passes"] == 0 and t["pass@2"] == 0.0 and t["pass^2"] == 0.0
    assert m["overall"]["pass@1"] == 0.0 and 0 < m["overall"]["mean_score"] < 0.75


def test_images_prune_removes_stale_tags_and_keeps_current(sandbox_image, capsys):
    from cowork.engine.client import get_client

    current = ensure_task_image(load_spec(SPEC), sandbox_image)
    client = get_client()
    client.images.get(sandbox_image).tag("cowork-task-stale-probe", "old")  # no cowork.sandbox label: stale
    assert main(["images", "prune"]) == 0
    out = capsys.readouterr().out
    assert "cowork-task-stale-probe:old" in out
    tags = {t for i in client.images.list() for t in i.tags}
    assert current in tags and sandbox_image in tags and "cowork-task-stale-probe:old" not in tags


def test_docs_python_api_example_runs(tmp_path):
    """docs/api.md's Python API example runs as written (from a folder with the specs)."""
    readme = (ROOT / "docs" / "api.md").read_text()
    start = readme.index("```python\nimport asyncio\nfrom cowork import")
    code = readme[start + len("```python\n"):readme.index("```", start + 10)]
    (tmp_path / "specs").symlink_to(ROOT / "specs")
    (tmp_path / "example.py").write_text(code)
    proc = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The oracle run passes; the step-by-step sandbox did no work, so its grade fails.
    assert "completed 1.0 True []" in proc.stdout and "fix-csv-report: FAILED" in proc.stdout
    assert (tmp_path / "out" / "grade.json").exists()


@pytest.mark.parametrize("opening", ["```python\nimport asyncio\nfrom cowork import SandboxPool",
                                     "```python\nimport asyncio\nfrom cowork import RolloutRunner\nfrom cowork.agents.tiny"])
def test_docs_pool_and_training_examples_run(opening):
    """The SandboxPool (docs/api.md) and training (docs/training.md) examples run as written (from the checkout)."""
    readme = (ROOT / "docs" / "api.md").read_text() + (ROOT / "docs" / "training.md").read_text()
    start = readme.index(opening)
    code = readme[start + len("```python\n"):readme.index("```", start + 10)]
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip(), out.stderr[-2000:]
