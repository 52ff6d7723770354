"""Hidden arguments (issue 28, feature 10), in process: a spec's ``tool_options`` hide an argument
from the schema the agent sees, and a call that sends it anyway is refused, audited as a
failed call, and changes nothing; the same through the tool host, the FastMCP app and the
``python`` tool's inner calls. (The sandbox path: tests/adversarial/test_hidden_arguments.py.)"""

from __future__ import annotations

import json
import textwrap

import pytest
from fastmcp import Client

from cowork.errors import SpecError
from cowork.formats import PYTHON_TOOL, verify_chain
from cowork.server.app import ServerConfig, build_app
from cowork.server.services_setup import setup_services
from cowork.server.state.audit import AuditLog
from cowork.server.tools.workspace import WorkspaceConfig
from cowork.services.registry import dump_state
from cowork.spec.loader import load_spec
from cowork.toolhost.errors import ToolError

TOOLS = ["tickets_get", "tickets_update", PYTHON_TOOL]
RAW = {"clock": "2026-03-02T09:00:00+00:00", "services": {"tickets": {
    "user": "me@acme.com", "tickets": [{"title": "VPN down", "requester": "carol@acme.com", "status": "open"}]}}}


@pytest.fixture
def sandbox(tmp_path):
    audit = AuditLog(str(tmp_path / "audit.jsonl"))
    cfg = ServerConfig(tools=TOOLS, workspace=WorkspaceConfig(root=str(tmp_path)),
                       hidden_args={"tickets_update": ["status"]})
    host, fs = build_app(cfg, audit)
    (tmp_path / "export").mkdir()
    services = setup_services(host, RAW, str(tmp_path), audit, TOOLS)
    yield host, services, audit, tmp_path
    fs.close()
    audit.close()


def _ticket(services) -> dict:
    return dump_state(services.ctx.db)["tickets"]["tickets"]["tkt-1"]


def _records(audit: AuditLog, path) -> list[dict]:
    rep = verify_chain(path.read_text(), expected_count=audit.count)
    assert rep.valid, rep.error
    return rep.records


async def test_the_listed_schema_lacks_the_hidden_argument(sandbox):
    host, *_ = sandbox
    [update] = [t for t in host.tools_wire() if t["name"] == "tickets_update"]
    assert "status" not in update["inputSchema"]["properties"] and "priority" in update["inputSchema"]["properties"]
    [get] = [t for t in host.tools_wire() if t["name"] == "tickets_get"]
    assert get["inputSchema"]["properties"]  # other tools untouched


async def test_sending_it_anyway_is_refused_audited_and_changes_nothing(sandbox):
    """The attack: the agent guesses the argument the listing left out."""
    host, services, audit, tmp = sandbox
    with pytest.raises(ToolError, match="Refused: tickets_update does not take 'status' in this task"):
        await host.call_tool("tickets_update", {"ticket_id": "tkt-1", "status": "closed", "priority": "high"})
    assert _ticket(services)["status"] == "open" and _ticket(services)["priority"] == "normal"  # nothing applied
    call, result = _records(audit, tmp / "audit.jsonl")[-2:]
    assert call["kind"] == "tool_call" and call["args"]["status"] == "closed"
    assert result["kind"] == "tool_result" and result["outcome"] == "error" and "Refused" in result["error"]
    assert not any(r["kind"] == "service_action" for r in _records(audit, tmp / "audit.jsonl"))
    # null counts as sending it too
    with pytest.raises(ToolError, match="Refused"):
        await host.call_tool("tickets_update", {"ticket_id": "tkt-1", "status": None, "priority": "high"})
    # without it, the call runs as ever
    await host.call_tool("tickets_update", {"ticket_id": "tkt-1", "priority": "high"})
    assert _ticket(services)["priority"] == "high" and _ticket(services)["status"] == "open"


async def test_the_python_tool_cannot_smuggle_it_in(sandbox):
    host, services, _, _ = sandbox
    code = "import cowork_tools as t\ntry:\n    t.call('tickets_update', ticket_id='tkt-1', status='closed')\nexcept Exception as e:\n    print('refused', e)\n"
    out = await host.call_tool(PYTHON_TOOL, {"code": code})
    assert "Refused" in json.dumps(out.wire()) and _ticket(services)["status"] == "open"


async def test_the_fastmcp_app_hides_and_refuses_too(sandbox):
    host, services, _, _ = sandbox
    async with Client(host.fastmcp()) as c:
        [update] = [t for t in await c.list_tools() if t.name == "tickets_update"]
        assert "status" not in update.input_schema["properties"]
        res = await c.call_tool("tickets_update", {"ticket_id": "tkt-1", "status": "closed"}, raise_on_error=False)
        assert res.is_error and _ticket(services)["status"] == "open"


SPEC = """\
id: hide
title: Triage
prompt: Triage tkt-1.
tools: [tickets_get, tickets_update]
tool_options:
  tickets_update: {hide_args: [%s]}
  %s
services: {tickets: {tickets: [{title: VPN, requester: carol@acme.com}]}}
checks:
  - {id: high, type: record_exists, service: tickets, collection: tickets, where: {priority: high}}
oracle:
  - {tool: tickets_update, args: {ticket_id: tkt-1, priority: high%s}}
"""


@pytest.mark.parametrize("hide, extra, oracle, expected", [
    ("stat", "", "", "t/task.yaml:6: tool_options.tickets_update: hide_args[0]: tickets_update has no argument 'stat'"),
    ("ticket_id", "", "", "t/task.yaml:6: tool_options.tickets_update: hide_args[0]: 'ticket_id' is required"),
    ("status", "tickets_close: {hide_args: [resolution]}", "",
     "t/task.yaml:7: tool_options.tickets_close: hide_args[0]: 'resolution' is required"),
    ("status", "mail_send: {hide_args: [cc]}", "", "t/task.yaml:7: tool_options.mail_send: 'mail_send' is not in the spec's tools allow-list"),
    ("status", "read_file: {hide_args: [offset]}", "", "t/task.yaml:7: tool_options.read_file: 'read_file' is not a service tool"),
    ("status", "", ", status: closed", "t/task.yaml:12: oracle[0].args.status: tool_options hides 'status' of tickets_update"),
])
def test_bad_options_name_file_line_and_field(tmp_path, monkeypatch, hide, extra, oracle, expected):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "task.yaml").write_text(textwrap.dedent(SPEC % (hide, extra, oracle)))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as err:
        load_spec(tmp_path / "t")
    assert expected in str(err.value), str(err.value)


def test_a_good_spec_carries_the_options_into_the_image_config(tmp_path):
    from cowork.engine.images import task_config

    (tmp_path / "task.yaml").write_text(SPEC % ("status", "", ""))
    loaded = load_spec(tmp_path)
    assert task_config(loaded)["tool_options"] == {"tickets_update": {"hide_args": ["status"]}}
    (tmp_path / "task.yaml").write_text((SPEC % ("status", "", "")).replace("tool_options:\n  tickets_update: {hide_args: [status]}\n  \n", ""))
    assert "tool_options" not in task_config(load_spec(tmp_path))  # other tasks' configs are as they were
