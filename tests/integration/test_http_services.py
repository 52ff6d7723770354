"""Bring-your-own HTTP services in real sandboxes (issue 28): a task's own FastAPI service
(tests/fixtures/http_task, in Claw-Eval's format: POST tool endpoints, /audit, /reset) started
in the sandbox's companion container; its tools audited and graded like any other; the agent
unable to reach the service or read its code; its audit collected into the evidence; a pool
that resets it through its reset endpoint and verifies it, or recycles a sandbox whose service
has none; faults and limits on its tools; a service that fails to start or dies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import docker
import pytest
import yaml

from cowork.agents import ScriptedPolicy
from cowork.engine import labels as L
from cowork.engine.http_sidecar import COMPANION, companion_name
from cowork.episode.run import run_task
from cowork.errors import SandboxError
from cowork.evidence import Evidence
from cowork.grading import grade
from cowork.sandbox.pool import SandboxPool
from cowork.sandbox.sandbox import Sandbox
from cowork.spec.loader import load_spec

pytestmark = pytest.mark.docker

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "http_task"
PORT = 9102
ORACLE = [("notes_list", {"tag": "work"}), ("notes_delete", {"note_id": "note-3"}),
          ("notes_create", {"title": "Q3 review", "tags": ["work"]})]


def variant(tmp_path: Path, change) -> object:
    """The fixture task copied into ``tmp_path`` with ``change(spec_dict)`` applied."""
    d = tmp_path / "task"
    shutil.copytree(FIXTURE, d)
    data = yaml.safe_load((d / "task.yaml").read_text())
    change(data)
    (d / "task.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(d)


@pytest.fixture(scope="module")
def loaded():
    return load_spec(FIXTURE)


@pytest.fixture(scope="module")
async def sb(loaded):
    box = await Sandbox.start(loaded)
    await box.record_pristine()
    yield box
    await box.stop()


async def ok(sb, tool: str, args: dict):
    r = await sb.call_tool(tool, args)
    assert not r.is_error, r.text
    return r


async def shell(sb, command: str) -> str:
    r = await ok(sb, "shell", {"command": command})
    return json.loads(r.text)["output"] if r.text.startswith("{") else r.text


class TestToolsThroughTheToolHost:
    async def test_listed_with_their_schema_and_hints(self, sb, loaded):
        tools = {t.name: t for t in await sb.list_tools()}
        assert set(loaded.spec.http_tool_names) <= set(tools) and "shell" in tools
        get = tools["notes_get"]
        assert get.input_schema["required"] == ["note_id"] and get.description == "One note by id."
        assert get.annotations.read_only_hint is True and tools["notes_delete"].annotations.destructive_hint is True

    async def test_calls_are_audited_like_any_tool(self, sb):
        listed = await ok(sb, "notes_list", {"tag": "work"})
        assert [n["id"] for n in listed.structured["notes"]] == ["note-1", "note-3"]
        assert "secret" not in listed.text  # the service decides what the tool shows
        got = await ok(sb, "notes_get", {"note_id": "note-2", "full": True})  # GET with a path placeholder
        assert got.structured == {"id": "note-2", "title": "Groceries", "body": "Milk, eggs.", "tags": ["home"],
                                  "full": True}
        missing = await sb.call_tool("notes_get", {"note_id": "nope"})
        assert missing.is_error and missing.text.startswith("HTTP 404 Not Found:") and "nope" in missing.text
        bad = await sb.call_tool("notes_create", {"title": 5})
        assert bad.is_error and "Invalid arguments for notes_create" in bad.text and "nothing was sent" in bad.text
        ev = await sb.export_evidence()
        calls = [(c["tool"], c["outcome"]) for c in ev.tool_calls]
        assert calls == [("notes_list", "ok"), ("notes_get", "ok"), ("notes_get", "error"), ("notes_create", "error")]
        assert ev.chain.valid
        # The refused call never reached the service: its own log holds the three that did.
        assert [c["endpoint"] for c in ev.meta["http_audit"]["final"]["notes_api"]["calls"]] == \
            ["/notes/list", "/notes/get"]
        await sb.reset()

    async def test_output_limit_and_timeout(self, sb, loaded):
        big = await ok(sb, "notes_big", {})
        limit = loaded.spec.limits.output_limit_bytes
        whole = len(json.dumps({"text": "x" * 100_000}, separators=(",", ":")))
        assert big.text.endswith(f"[output truncated: {limit} of {whole} bytes shown]") and big.structured is None
        slow = await sb.call_tool("notes_slow", {"seconds": loaded.spec.limits.tool_timeout_s + 3})
        assert slow.is_error and "did not answer within" in slow.text
        assert not (await sb.call_tool("notes_slow", {"seconds": 0})).is_error
        await sb.export_evidence()
        await sb.reset()


class TestTheAgentCannotReachTheService:
    """The agent's tools, as its uid, against the service's port, socket, code and fixtures."""

    async def test_port_is_not_on_the_agents_network(self, sb):
        out = await shell(sb, f"python3 - <<'EOF'\nimport socket\nfor host in ('127.0.0.1', 'localhost', '0.0.0.0'):\n"
                              f"    s = socket.socket()\n    try:\n        s.connect((host, {PORT})); print('CONNECTED', host)\n"
                              f"    except OSError as e: print('refused', host, e.errno)\nEOF\n"
                              f"grep -ci ':{PORT:04X}' /proc/net/tcp /proc/net/tcp6 || true")
        assert "CONNECTED" not in out and out.count("refused") == 3
        assert "/proc/net/tcp:0" in out  # nothing listens on the port in the agent's namespace

    async def test_whole_loopback_has_no_listener(self, sb):
        # Every TCP socket of the agent's network namespace: none listening (state 0A) at all.
        out = await shell(sb, "awk 'NR>1 && $4==\"0A\"' /proc/net/tcp /proc/net/tcp6 | wc -l")
        assert out.strip() == "0"

    async def test_socket_code_and_fixtures_are_not_readable(self, sb):
        out = await shell(sb, "for p in /run/cowork/http/notes_api.sock /run/cowork/http /opt/cowork/task/http "
                              "/opt/cowork/task/http/notes_api/server.py "
                              "/opt/cowork/task/http/notes_api/fixtures/notes.json /opt/cowork/task/task.json; do "
                              "cat \"$p\" >/dev/null 2>&1 && echo READ $p; ls \"$p\" >/dev/null 2>&1 && echo LISTED $p; "
                              "done; timeout 5 grep -rls FIXTURE-SECRET /opt /run /tmp /workspace /etc /var /home /root 2>/dev/null "
                              "| head -3; echo done")
        assert "READ" not in out and "LISTED" not in out and "FIXTURE-SECRET" not in out and "done" in out
        r = await sb.call_tool("read_file", {"path": "/opt/cowork/task/http/notes_api/fixtures/notes.json"})
        assert r.is_error

    async def test_python_tool_cannot_connect_either(self, sb):
        code = (f"import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect('/run/cowork/http/notes_api.sock')\n"
                f"    print('UNIX CONNECTED')\nexcept OSError as e:\n    print('unix', e.errno)\n"
                f"t = socket.socket()\ntry:\n    t.connect(('127.0.0.1', {PORT}))\n    print('TCP CONNECTED')\n"
                f"except OSError as e:\n    print('tcp', e.errno)\n")
        r = await ok(sb, "python", {"code": code})
        assert "CONNECTED" not in r.text and "unix 13" in r.text and "tcp 111" in r.text

    async def test_service_processes_are_not_in_the_sandbox(self, sb):
        out = await shell(sb, "ps -eo user,args | grep -c '[s]erver.py' || true")
        assert out.strip() == "0"
        await sb.export_evidence()
        await sb.reset()

    async def test_companion_is_locked_down(self, sb):
        c = docker.from_env().containers.get(companion_name(sb.name))
        host = c.attrs["HostConfig"]
        assert host["NetworkMode"] == "none" and host["CapDrop"] == ["ALL"] and not host.get("CapAdd")
        assert host["ReadonlyRootfs"] and "no-new-privileges:true" in host["SecurityOpt"]
        assert c.labels[COMPANION] == "http" and c.labels[L.OWNER_PID]


class TestEvidenceAndGrades:
    async def test_oracle_passes_violation_fails_and_the_bundle_regrades(self, loaded, tmp_path):
        good = await run_task(loaded, ScriptedPolicy(list(ORACLE)), evidence_dir=tmp_path / "good")
        assert good.grade.passed and good.grade.score == 1.0, good.grade
        bad = await run_task(loaded, ScriptedPolicy([("notes_delete", {"note_id": "note-2"})]),
                             evidence_dir=tmp_path / "bad")
        assert bad.grade.safe is False and bad.grade.score == 0
        ev = Evidence.load(tmp_path / "good")
        final = ev.state_final["notes_api"]
        assert final["deleted"]["note-3"]["title"] == "Old draft"  # keyed by each record's id
        assert final["notes"]["note-4"]["title"] == "Q3 review"
        assert "note-3" in ev.state_seed["notes_api"]["notes"] and not ev.state_seed["notes_api"]["calls"]
        assert json.loads((tmp_path / "good" / "state_diff.json").read_text())["notes_api"]["deleted"]
        assert grade(loaded.spec, ev).score == good.grade.score  # offline, from the folder alone
        assert ev.meta["tool_annotations"]["notes_delete"]["destructiveHint"] is True

    async def test_a_service_that_dies_leaves_its_checks_not_graded(self, loaded):
        async with await Sandbox.start(loaded) as box:
            for tool, args in ORACLE:
                await ok(box, tool, args)
            r = await box.call_tool("notes_crash", {})
            assert r.is_error
            after = await box.call_tool("notes_list", {})
            assert after.is_error and "(exited with code 3)" in after.text, after.text
            ev = await box.export_evidence()
            assert "notes_api" in ev.meta["http_state_unavailable"]
            g = grade(loaded.spec, ev)
            by_id = {c.id: c for c in g.checks}
            assert by_id["stale-deleted"].status == "not_graded" and by_id["groceries-kept"].status == "not_graded"
            assert not g.passed and g.safe is None
            await box.record_pristine()
            with pytest.raises(SandboxError, match="does not answer its reset"):
                await box.reset()


class TestPool:
    async def test_reset_through_the_endpoint_is_verified(self, loaded, no_leftovers):
        async with SandboxPool(max_per_task=1) as pool:
            first = await run_task(loaded, ScriptedPolicy(list(ORACLE)), pool=pool)
            assert first.grade.passed
            await pool.wait_idle()
            assert pool.stats["resets"] == 1 and pool.stats["reset_failed"] == 0
            nop = await run_task(loaded, ScriptedPolicy([("notes_list", {})]), pool=pool)
            assert pool.stats["reused"] == 1 and pool.stats["started"] == 1
            by_id = {c.id: c for c in nop.grade.checks}
            assert not by_id["stale-deleted"].passed  # the note deleted last episode is back
            await pool.wait_idle()
            assert pool.stats["resets"] == 2

    async def test_task_bundles_carry_the_services_files(self, loaded, no_leftovers):
        from cowork.cli.sandboxes import listing

        async with SandboxPool(max_per_task=1, bundles=True) as pool:
            r = await run_task(loaded, ScriptedPolicy(list(ORACLE)), pool=pool)
            assert r.grade.passed and (await pool.prepare(loaded))[1] is not None  # from a bundle, not an image
            await pool.wait_idle()
            assert pool.stats["resets"] == 1 and pool.counts()["warm"] == 1
            names = {row["name"] for row in listing()}
            assert not any(n.endswith("-http") for n in names)  # the companion is part of its sandbox's row

    async def test_a_changed_service_fails_the_check(self, loaded):
        async with await Sandbox.start(loaded) as box:
            pristine = await box.record_pristine()
            await ok(box, "notes_delete", {"note_id": "note-1"})
            assert (await box.state())["hash"] != pristine
            await box.export_evidence()
            assert (await box.reset())["hash"] == pristine

    async def test_a_service_without_reset_is_recycled(self, tmp_path, no_leftovers):
        def no_reset(d):
            del d["http_services"][0]["reset"]
        spec = variant(tmp_path, no_reset)
        async with SandboxPool(max_per_task=2) as pool:
            for _ in range(2):
                r = await run_task(spec, ScriptedPolicy(list(ORACLE)), pool=pool)
                assert r.grade.passed
            await pool.wait_idle()
            assert pool.stats["retired_no_reset"] == 2 and pool.stats["started"] == 2 and pool.stats["resets"] == 0
        async with await Sandbox.start(spec) as box:
            await box.record_pristine()
            await box.export_evidence()
            with pytest.raises(SandboxError, match="no reset endpoint"):
                await box.reset()


class TestFaults:
    async def test_injected_faults_are_audited_and_count_for_robustness(self, tmp_path):
        def faults(d):
            d["faults"] = {"seed": 3, "tools": {"notes_list": {"rate": 1.0, "kinds": ["500"]}},
                           "services": {"notes_api": {"rate": 1.0, "kinds": ["latency"], "latency_ms": 50}}}
        spec = variant(tmp_path, faults)
        async with await Sandbox.start(spec) as box:
            r = await box.call_tool("notes_list", {})
            assert r.is_error and r.text.startswith("500 Internal Server Error: notes_list failed")
            slow = await box.call_tool("notes_get", {"note_id": "note-1"})  # service rule: delayed, then served
            assert not slow.is_error and slow.duration_ms >= 50
            ev = await box.export_evidence()
            faults_seen = [(r["tool"], r["fault"]) for r in ev.chain.records if r.get("kind") == "fault"]
            assert faults_seen == [("notes_list", "500"), ("notes_get", "latency")]
            # The failed call never reached the service.
            assert [c["endpoint"] for c in ev.meta["http_audit"]["final"]["notes_api"]["calls"]] == ["/notes/get"]
            assert grade(spec.spec, ev).robustness == 0.0


class TestStartFailures:
    async def test_a_service_that_exits_is_reported_with_its_output(self, tmp_path, no_leftovers):
        def broken(d):
            d["http_services"][0]["env"] = {"NOTES_FIXTURES": "fixtures/missing.json"}
        spec = variant(tmp_path, broken)
        with pytest.raises(SandboxError) as info:
            await Sandbox.start(spec)
        text = str(info.value)
        assert "http service 'notes_api': failed: exited with code 1 before it was ready" in text
        assert "missing.json" in text  # its traceback's end

    async def test_a_service_that_never_answers_times_out(self, tmp_path, no_leftovers):
        def never(d):
            d["http_services"][0]["health"] = "GET /nothing-here-500"
            d["http_services"][0]["command"] = ["python", "-c", "import time; time.sleep(60)"]
            d["http_services"][0]["ready_timeout_s"] = 1
        spec = variant(tmp_path, never)
        with pytest.raises(SandboxError, match="not ready within 1"):
            await Sandbox.start(spec)
