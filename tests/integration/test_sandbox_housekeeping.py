"""Sandbox housekeeping on real sandboxes: `cowork ps` lists a `cowork up` sandbox with its ids,
client use, token hash prefix and snapshots (JSON in its documented shape); every id `cowork
up` prints names it in connect, grade, checkpoint and down; a restore to an unknown snapshot
is bad input; and a Ctrl-C'd rollout says what finished, and its rerun resumes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import jsonschema
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from cowork.cli import main
from cowork.cli.sandboxes import PS_SCHEMA, UP_SCHEMA
from cowork.engine import labels as L
from cowork.engine.reaper import managed_containers

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "fix-csv-report")


def _ps(capfd, sid: str) -> dict:
    assert main(["ps", "--json"]) == 0
    listed = json.loads(capfd.readouterr().out)
    jsonschema.validate(listed, PS_SCHEMA)
    rows = [r for r in listed["sandboxes"] if r["id"] == sid]
    assert len(rows) == 1
    return rows[0]


async def test_ps_and_every_printed_id(capfd):
    assert await asyncio.to_thread(main, ["up", SPEC, "--http", "--json"]) == 0
    info = json.loads(capfd.readouterr().out)
    try:
        jsonschema.validate(info, UP_SCHEMA)
        # mcp_url is a URL: the socket's path, percent-encoded, and the MCP path.
        url = urlsplit(info["mcp_url"])
        assert url.scheme == "http+unix" and unquote(url.netloc) == info["mcp_socket"] and url.path == "/mcp"
        # The run id is the name's last part and the socket's folder: one sandbox, three ids.
        assert info["name"].endswith("-" + info["run_id"]) and Path(info["mcp_socket"]).parent.name == info["run_id"]
        token = info["http"]["token"]

        row = await asyncio.to_thread(_ps, capfd, info["id"])
        assert (row["name"], row["run_id"], row["task"], row["status"]) == (
            info["name"], info["run_id"], "fix-csv-report", "running")
        assert row["kept"] and not row["orphan"] and row["used"] is False and row["snapshots"] == []
        assert row["gateway_token"] == hashlib.sha256(token.encode()).hexdigest()[:12]
        assert row["owner"]["user"] == L.user_name() and row["age_s"] >= 0
        assert row["mcp_socket"] == info["mcp_socket"]

        # connect by the run id (the id in the socket path), as an MCP client's stdio command.
        transport = StdioTransport(command=sys.executable, args=["-m", "cowork.cli", "connect", info["run_id"]],
                                   env={**os.environ}, cwd=str(ROOT))
        async with Client(transport) as c:
            r = await c.call_tool("shell", {"command": "cat reports/summary.json"})
        assert "2026-Q3" in r.structured_content["output"]

        # checkpoint by the name; --list by the run id; ps sees the client's call and the snapshot.
        assert await asyncio.to_thread(main, ["checkpoint", info["name"], "--json"]) == 0
        snap = json.loads(capfd.readouterr().out)["id"]
        assert await asyncio.to_thread(main, ["checkpoint", info["run_id"], "--list", "--json"]) == 0
        assert [s["id"] for s in json.loads(capfd.readouterr().out)["snapshots"]] == [snap]
        assert await asyncio.to_thread(main, ["checkpoint", info["run_id"], "--list"]) == 0
        assert snap in capfd.readouterr().out
        row = await asyncio.to_thread(_ps, capfd, info["id"])
        assert row["used"] is True and row["client_calls"] == 1 and row["snapshots"] == [snap]

        # The table: every id, the token prefix, never the token.
        assert main(["ps"]) == 0
        out, err = capfd.readouterr()
        line = next(ln for ln in out.splitlines() if ln.startswith(info["id"]))
        assert info["name"] in line and row["gateway_token"] in line and snap in line and "1 call(s)" in line
        assert token not in out + err

        # A restore to a snapshot the sandbox never had: bad input, one line, nothing changed.
        assert await asyncio.to_thread(main, ["restore", info["run_id"], "cp-0000000000000000"]) == 2
        err = capfd.readouterr().err
        assert err.count("\n") == 1 and "has no snapshot 'cp-0000000000000000'" in err and snap in err
        assert "ValueError" not in err and "Traceback" not in err

        # grade by the run id (it used to say "no cowork sandbox matches").
        assert await asyncio.to_thread(main, ["grade", info["run_id"], "--json"]) == 0
        assert json.loads(capfd.readouterr().out)["task"] == "fix-csv-report"
    finally:
        assert await asyncio.to_thread(main, ["down", info["run_id"], "--yes"]) == 0
    assert info["id"] not in {c.id[:12] for c in managed_containers()}


SLOW_SPEC = """
id: slow-probe
title: Slow probe
prompt: Write done to answer.txt.
workspace: {dir: null}
tools: [shell, write_file]
checks:
  - {id: answer, type: file_contains, path: answer.txt, text: "done"}
oracle:
  - {tool: shell, args: {command: "sleep 1"}}
  - {tool: write_file, args: {path: answer.txt, content: "done"}}
"""


def test_ctrl_c_says_what_finished_and_the_same_command_resumes(tmp_path):
    (tmp_path / "slow").mkdir()
    (tmp_path / "slow" / "task.yaml").write_text(SLOW_SPEC)
    out = tmp_path / "runs"
    argv = [sys.executable, "-m", "cowork.cli", "rollout", str(tmp_path / "slow"), "--group-size", "5",
            "--concurrency", "1", "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ROOT))
    results = out / "results.jsonl"
    deadline = time.monotonic() + 120
    while not (results.exists() and len(results.read_text().splitlines()) >= 2):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    done = len(results.read_text().splitlines())
    assert 2 <= done < 5
    assert (f"cowork: interrupted: {done} of 5 episode(s) finished, saved in {out}" in err
            and f"rerun the same command to run the other {5 - done}" in err), err
    # Its sandboxes went with it.
    assert not [c.name for c in managed_containers() if (c.labels or {}).get(L.OWNER_PID) == str(proc.pid)]
    rerun = subprocess.run(argv, capture_output=True, text=True, cwd=str(ROOT), timeout=240)
    assert rerun.returncode == 0, rerun.stderr
    assert f"5 ({5 - done} run now, {done} done before)" in rerun.stdout
