"""Bring-your-own HTTP services without Docker (issue 28): the spec section and its errors with
file, line and field; how an endpoint and a call become a request; an audit's JSON as service
state; the task layer; and the whole in-container path in-process: the companion's supervisor
starting the fixture's FastAPI service on this host, the tool host calling it through its
socket (audited, schema-checked, fault-injected, limited), its seed, dump and verified reset."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import socket
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from cowork.errors import SpecError
from cowork.evidence import Evidence
from cowork.spec.http_services import Endpoint, service_files, state_of
from cowork.spec.loader import load_spec
from cowork.toolhost.http_tools import build_target

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "http_task"


def variant(tmp_path: Path, change, name: str = "task") -> Path:
    d = tmp_path / name
    shutil.copytree(FIXTURE, d)
    text = (d / "task.yaml").read_text()
    data = yaml.safe_load(text)
    change(data)
    (d / "task.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return d


def problems(path: Path) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value).splitlines()[1:]


def line_of(path: Path, text: str, after: int = 0) -> int:
    lines = (path / "task.yaml").read_text().splitlines()
    return next(n for n, line in enumerate(lines, start=1) if n > after and text in line)


# --------------------------------------------------------------------------- the spec
class TestSpec:
    def test_fixture_loads_with_defaults(self):
        spec = load_spec(FIXTURE).spec
        svc = spec.http_services[0]
        assert (svc.health.method, svc.reset.method, svc.audit.method) == ("GET", "POST", "GET")
        assert svc.argv == ["python", "server.py"] and svc.ready_timeout_s == 20
        assert spec.http_tool_names[:2] == ["notes_list", "notes_get"]
        assert spec.http_tools[0].wire() == {
            "name": "notes_list", "description": "List the notes, optionally only those with a tag.",
            "inputSchema": {"type": "object", "properties": {"tag": {"type": "string",
                                                                      "description": "Only notes with this tag"}}},
            "annotations": {"readOnlyHint": True}}

    def test_endpoints_in_claw_evals_form(self):
        assert Endpoint.model_validate("http://localhost:9102/todo/reset").model_dump() == \
            {"path": "/todo/reset", "method": None}
        assert Endpoint.model_validate("post /a?b=1").model_dump() == {"path": "/a?b=1", "method": "POST"}
        with pytest.raises(ValueError, match="own loopback port"):
            Endpoint.model_validate("http://example.com/x")

    def test_claw_eval_style_service_entry(self, tmp_path):
        def claw(d):
            d["http_services"][0].update(health="http://localhost:9102/notes/list", reset="http://localhost:9102/notes/reset")
        spec = load_spec(variant(tmp_path, claw)).spec
        assert spec.http_services[0].health.path == "/notes/list"

    def test_field_errors_name_file_line_and_field(self, tmp_path):
        def bad(d):
            d["http_services"][0]["porrt"] = 1
            d["http_tools"][1]["path"] = "/notes/get/{id}"
            d["http_tools"][2]["method"] = "FETCH"
            d["http_tools"][3]["input_schema"] = {"type": "object", "properties": {"x": {"type": "strin"}}}
        d = variant(tmp_path, bad)
        found = problems(d)
        f = d / "task.yaml"
        assert f"{f}:{line_of(d, 'porrt')}: http_services[0].porrt: unknown field; remove it or check its " \
               "spelling (did you mean 'port'?)" in [p.strip().replace(os.path.relpath(f), str(f)) for p in found]
        text = "\n".join(found)
        assert f":{line_of(d, '/notes/get/{id}')}: http_tools[1].path: placeholder {{id}} is not an argument" in text
        assert "http_tools[2].method: Input should be 'GET', 'POST', 'PUT', 'PATCH' or 'DELETE'" in text
        assert "http_tools[3].input_schema: input_schema.properties.x.type: not a valid JSON Schema" in text

    def test_whole_spec_errors_each_at_its_line(self, tmp_path):
        def bad(d):
            d["http_services"].append({**d["http_services"][0], "name": "mail"})  # built-in name, same port
            d["http_tools"][3]["service"] = "notes_apx"
            d["http_tools"][4]["name"] = "read_file"
            d["http_tools"][5]["name"] = "notes_list"
            del d["http_services"][0]["audit"]
        d = variant(tmp_path, bad)
        text = "\n".join(problems(d))
        assert f":{line_of(d, 'name: mail')}: http_services[1].name: 'mail' is a built-in service" in text
        assert "http_services[1].port: port 9102 is taken by http_services[0]" in text
        assert f":{line_of(d, 'notes_apx')}: http_tools[3].service: no http service 'notes_apx' " \
               "(http_services: notes_api, mail)" in text
        assert "http_tools[4].name: 'read_file' is one of the sandbox's own tools" in text
        assert "http_tools[5].name: 'notes_list' is declared twice (first http_tools[0])" in text
        checks = line_of(d, "checks:")
        assert f":{line_of(d, 'service: notes_api', checks)}: checks[0].service: http service 'notes_api' has no " \
               "audit endpoint" in text

    def test_a_builtin_name_is_fine_unless_tools_allows_it(self, tmp_path):
        def shadow(d):
            d["http_tools"][0]["name"] = "calendar_create_event"  # Claw-Eval's names meet ours
            d["checks"][2]["tool"] = "calendar_create_event"
            d["oracle"][0]["tool"] = "calendar_create_event"
        assert load_spec(variant(tmp_path, shadow)).spec.http_tool_names[0] == "calendar_create_event"

        def both(d):
            shadow(d)
            d["tools"].append("calendar_create_event")
        assert "tools allows the built-in 'calendar_create_event' too" in "\n".join(problems(variant(tmp_path, both, "b")))

    def test_files_folder_must_be_the_tasks_and_not_the_agents(self, tmp_path):
        def missing(d):
            d["http_services"][0]["files"] = "services/nope"
        assert "http_services[0].files: folder 'services/nope' not found beside task.yaml" in \
            "\n".join(problems(variant(tmp_path, missing)))

        def outside(d):
            d["http_services"][0]["files"] = "../.."
        assert "is not a folder inside the task folder" in "\n".join(problems(variant(tmp_path, outside, "o")))

        def visible(d):
            d["workspace"] = {"dir": "services"}
        assert "overlaps the workspace folder, whose files the agent gets" in \
            "\n".join(problems(variant(tmp_path, visible, "v")))

    def test_http_names_count_in_faults_turns_and_scripts(self, tmp_path):
        def use(d):
            d["faults"] = {"tools": {"notes_list": {"rate": 0.5}}, "services": {"notes_api": {"rate": 0.1}}}
            d["user"] = {"turns": [{"when": {"called": "notes_list"}, "say": "Thanks."}]}
        spec = load_spec(variant(tmp_path, use)).spec
        assert spec.faults.rule_for("notes_list", "notes_api").rate == 0.5
        assert spec.faults.rule_for("notes_get", "notes_api").rate == 0.1

        def unknown(d):
            d["faults"] = {"services": {"nope_api": {"rate": 1}}}
        assert "unknown service 'nope_api'" in "\n".join(problems(variant(tmp_path, unknown, "u")))

        def world(d):
            d["events"] = [{"after_turn": 1, "actions": [{"tool": "notes_create", "args": {"title": "From a colleague"}}]}]
        assert "events[0].actions[0].tool: the user and the world cannot call HTTP tools yet" in \
            "\n".join(problems(variant(tmp_path, world, "w")))

        def scoped(d):
            d["user"] = {"turns": [{"say": "And now?"}]}
            d["checks"][0]["after_turn"] = 1
        assert "checks[0].service: the state of http service 'notes_api' is collected after the episode only" in \
            "\n".join(problems(variant(tmp_path, scoped, "s")))

    def test_schema_lists_the_section(self):
        from cowork.spec import json_schema

        props = json_schema()["properties"]
        assert "http_services" in props and "http_tools" in props


# --------------------------------------------------------------------------- requests and state
class TestRequestsAndState:
    def test_targets(self):
        assert build_target("/notes/get/{note_id}", "GET", {"note_id": "a b/c", "full": True, "tags": ["x", "y"]}) == \
            ("/notes/get/a%20b%2Fc?full=true&tags=x&tags=y", None)
        target, body = build_target("/notes/create", "POST", {"title": "Ünï", "n": 1})
        assert target == "/notes/create" and json.loads(body) == {"title": "Ünï", "n": 1}

    def test_state_of_an_audit(self):
        state = state_of({"calls": [{"endpoint": "/a"}, {"endpoint": "/b"}],
                          "notes": [{"id": "n1", "t": 1}, {"id": "n2"}],
                          "dupes": [{"id": "x"}, {"id": "x"}],
                          "by_id": {"k1": {"v": 1}}, "count": 3, "tags": ["a"]})
        assert state["calls"] == {"0": {"endpoint": "/a"}, "1": {"endpoint": "/b"}}
        assert set(state["notes"]) == {"n1", "n2"} and set(state["dupes"]) == {"0", "1"}
        assert state["by_id"] == {"k1": {"v": 1}} and state["_values"] == {"count": {"value": 3}}
        assert state["tags"] == {"0": {"value": "a"}}
        assert state_of([1, 2]) == {"items": {"0": {"value": 1}, "1": {"value": 2}}}

    def test_lost_state_is_not_graded(self):
        from cowork.grading import grade

        spec = load_spec(FIXTURE).spec
        ev = Evidence(audit_text="", audit_count=0, workspace_tar=_empty_tar(), initial={},
                      meta={"http_state_unavailable": {"notes_api": "does not answer"}},
                      state_seed={}, state_final={})
        g = grade(spec, ev)
        by_id = {c.id: c for c in g.checks}
        assert by_id["stale-deleted"].status == "not_graded" and "could not be collected" in by_id["stale-deleted"].detail
        assert by_id["listed-first"].status != "not_graded" and g.safe is None and not g.passed
        g2 = grade(spec, Evidence(audit_text="", audit_count=0, workspace_tar=_empty_tar(), initial={}))
        assert {c.id: c.status for c in g2.checks}["review-created"] == "not_graded"  # no state at all

    def test_task_layer_holds_the_files_root_only(self, tmp_path):
        from cowork.engine import images

        loaded = load_spec(variant(tmp_path, lambda d: None))
        (loaded.root / "services" / "notes" / "run.sh").write_text("#!/bin/sh\n")
        (loaded.root / "services" / "notes" / "run.sh").chmod(0o755)
        files = {p: m for p, _, m in service_files(loaded.spec, loaded.root)}
        assert files == {"http/notes_api/fixtures/notes.json": 0o600, "http/notes_api/run.sh": 0o700,
                         "http/notes_api/server.py": 0o600}
        cfg = images.task_config(loaded)
        assert cfg["http_tools"][3]["annotations"] == {"destructiveHint": True}
        assert cfg["http_services"][0]["health"] == {"path": "/health", "method": "GET"}

        class Img:
            id = "sha256:base"

        class Client:
            class images:  # noqa: N801 - docker's attribute name
                @staticmethod
                def get(_):
                    return Img

        orig = images.get_client
        images.get_client = lambda: Client
        try:
            context, digest = images._task_context(loaded, "base")
            (loaded.root / "services" / "notes" / "fixtures" / "notes.json").write_text("[]")
            assert images._task_context(loaded, "base")[1] != digest  # a fixture's change is a new image
        finally:
            images.get_client = orig
        with tarfile.open(fileobj=io.BytesIO(context)) as tar:
            members = {m.name: m.mode for m in tar.getmembers()}
        assert members["task/http/notes_api/server.py"] == 0o600 and members["task/http"] == 0o700
        assert not any(n.startswith("task/seed/") for n in members)  # never the workspace


def _empty_tar() -> bytes:
    buf = io.BytesIO()
    tarfile.open(fileobj=buf, mode="w").close()
    return buf.getvalue()


# --------------------------------------------------------------------------- in-process path
def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
async def running(tmp_path):
    """The fixture's service started by the supervisor on this host, and a tool host serving
    its tools through the supervisor's socket (the task's faults as ``faults``)."""
    from cowork.engine.images import task_config
    from cowork.server.app import ServerConfig, build_app
    from cowork.server.http_services import setup_http
    from cowork.server.state.audit import AuditLog
    from cowork.server.tools.workspace import WorkspaceConfig

    procs = []

    async def start(faults=None):
        loaded = load_spec(FIXTURE)
        raw = task_config(loaded)
        raw["http_services"][0]["port"] = _free_port()
        raw["faults"] = faults
        task, run = tmp_path / "task", tmp_path / "run"
        for path, data, _ in service_files(loaded.spec, loaded.root):
            (task / path).parent.mkdir(parents=True, exist_ok=True)
            (task / path).write_bytes(data)
        (task / "task.json").write_text(json.dumps(raw))
        (run / "http").mkdir(parents=True)
        (run / "export").mkdir()
        (tmp_path / "ws").mkdir()
        env = {**os.environ, "COWORK_HTTP_DIR": str(run / "http"), "COWORK_TASK_DIR": str(task),
               "COWORK_TASK_CONFIG": str(task / "task.json")}
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "cowork.server.http_supervisor", env=env)
        procs.append(proc)
        status = run / "http" / "status.json"
        for _ in range(300):
            if status.exists() and json.loads(status.read_text())["ready"]:
                break
            await asyncio.sleep(0.05)
        assert json.loads(status.read_text())["ready"], status.read_text()
        audit = AuditLog(str(run / "audit.jsonl"))
        host, fs = build_app(ServerConfig(tools=["read_file"], workspace=WorkspaceConfig(root=str(tmp_path / "ws"))),
                             audit)
        http = setup_http(host, raw, str(run), audit)
        await http.take_seed({})
        return host, http, audit, run

    yield start
    for proc in procs:
        proc.terminate()
        await proc.wait()


class TestInProcess:
    async def test_calls_audit_dump_and_verified_reset(self, running):
        host, http, audit, run = await running()
        assert [t["name"] for t in host.tools_wire()][:3] == ["read_file", "notes_list", "notes_get"]
        r = await host.call_tool("notes_delete", {"note_id": "note-3"})
        assert json.loads(r.content[0].text) == {"status": "deleted", "note_id": "note-3"}
        from cowork.toolhost.errors import ToolError

        with pytest.raises(ToolError, match="Invalid arguments for notes_delete: 'note_id' is a required property"):
            await host.call_tool("notes_delete", {})
        records = [json.loads(line) for line in (run / "audit.jsonl").read_text().splitlines()]
        assert [(r["kind"], r["tool"], r.get("outcome")) for r in records] == [
            ("tool_call", "notes_delete", None), ("tool_result", "notes_delete", "ok"),
            ("tool_call", "notes_delete", None), ("tool_result", "notes_delete", "error")]
        seed_hash = http.seed_hash
        assert await asyncio.to_thread(http.current_hash) != seed_hash
        await http.dump({})
        dumped = json.loads((run / "export" / "http_state.json").read_text())
        assert dumped["final"]["notes_api"]["deleted"][0]["id"] == "note-3" and not dumped["seed"]["notes_api"]["deleted"]
        assert (await http.reset({}))["matches_seed"] is True
        with pytest.raises(RuntimeError, match="checkpoints are not supported"):
            await http.handlers()["checkpoint"]({})

    async def test_external_mcp_clients_get_the_same_tools(self, running):
        from fastmcp import Client

        host, http, audit, run = await running()
        async with Client(host.fastmcp()) as client:
            tools = {t.name: t for t in await client.list_tools()}
            assert tools["notes_get"].input_schema["required"] == ["note_id"]
            assert tools["notes_delete"].annotations.destructive_hint is True
            r = await client.call_tool("notes_get", {"note_id": "note-1"})
            assert r.structured_content["title"] == "Q3 planning"
            bad = await client.call_tool("notes_get", {"note_id": "zz"}, raise_on_error=False)
            assert bad.is_error and "HTTP 404" in bad.content[0].text
        kinds = [(json.loads(line)["kind"], json.loads(line).get("outcome"))
                 for line in (run / "audit.jsonl").read_text().splitlines()]
        assert kinds == [("tool_call", None), ("tool_result", "ok"), ("tool_call", None), ("tool_result", "error")]

    async def test_faults_of_their_own(self, running):
        host, http, audit, run = await running(faults={"seed": 1, "tools": {"notes_create": {"rate": 1, "kinds": ["429"]}}})
        from cowork.toolhost.errors import ToolError

        with pytest.raises(ToolError, match="429 Too Many Requests: notes_create is rate limited"):
            await host.call_tool("notes_create", {"title": "x"})
        await host.call_tool("notes_list", {})
        kinds = [json.loads(line)["kind"] for line in (run / "audit.jsonl").read_text().splitlines()]
        assert kinds == ["tool_call", "fault", "tool_result", "tool_call", "tool_result"]
        assert http.own_faults and http.faults.foreign >= {"notes_create"}
        final = await asyncio.to_thread(http.audit_of, "notes_api")
        assert [c["endpoint"] for c in final["calls"]] == ["/notes/list"]  # the faulted call never got there
