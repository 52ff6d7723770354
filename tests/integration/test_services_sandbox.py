"""Mock services inside a real sandbox: the database is out of the agent's reach, reset
restores the seed exactly, the same seed gives the same faults, every action is audited."""


import pytest

from cowork.sandbox.sandbox import Sandbox
from cowork.spec.loader import load_spec

pytestmark = pytest.mark.docker

SPEC = """
id: services-probe
title: Services probe
prompt: Triage the inbox.
workspace: {dir: null}
tools: [shell, mail, tickets]
limits: {tool_timeout_s: 10}
services:
  mail:
    mailboxes: [{address: me@acme.com}]
    messages:
      - {id: m1, from: ana@acme.com, to: me@acme.com, subject: "Printer down", body: "3rd floor printer is down"}
      - {id: m2, from: raj@acme.com, to: me@acme.com, subject: "VPN", body: "VPN drops every hour"}
  tickets:
    agents: [me@acme.com]
faults:
  seed: 7
  default: {rate: 0.5, kinds: ["429", "500"]}
checks:
  - {type: record_count, service: tickets, collection: tickets, min: 2}
oracle:
  - {tool: tickets_create, args: {title: x, description: y}}
violation:
  - {tool: mail_delete, args: {message_id: m1}}
"""


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    d = tmp_path_factory.mktemp("svc")
    (d / "task.yaml").write_text(SPEC)
    return load_spec(d)


async def _fault_trace(sb, n=12):
    out = []
    for i in range(n):
        r = await sb.call_tool("mail_search", {"query": "printer"})
        out.append("ERR" if r.is_error else "ok")
    return out


class TestServicesInSandbox:
    async def test_database_is_out_of_the_agents_reach(self, loaded, no_leftovers):
        async with await Sandbox.start(loaded) as sb:
            for cmd in ["cat /run/cowork/services.db",
                        "python3 -c \"import sqlite3; sqlite3.connect('file:/run/cowork/services.db?mode=ro', uri=True).execute('select 1').fetchall()\"",
                        "ls -la /run/cowork/",
                        "echo x >> /run/cowork/services.db"]:
                r = await sb.call_tool("shell", {"command": cmd})
                assert r.structured["exit_code"] != 0, (cmd, r.text)
            r = await sb.call_tool("read_file", {"path": "/run/cowork/services.db"})
            assert r.is_error

    async def test_same_seed_same_faults_and_every_fault_is_audited(self, loaded, no_leftovers):
        async with await Sandbox.start(loaded, seed=11) as a, await Sandbox.start(loaded, seed=11) as b, \
                await Sandbox.start(loaded, seed=12) as c:
            ta, tb, tc = await _fault_trace(a), await _fault_trace(b), await _fault_trace(c)
            assert ta == tb and "ERR" in ta and "ok" in ta
            assert ta != tc  # another seed, another sequence (12 draws at rate 0.5)
            ev = await a.export_evidence()
        faults = [r for r in ev.chain.records if r.get("kind") == "fault"]
        errors = [r for r in ev.tool_calls if r.get("tool") == "mail_search" and r["outcome"] == "error"]
        assert len(faults) == ta.count("ERR") == len(errors)
        assert ev.chain.valid

    async def test_reset_restores_the_seed_ten_times(self, loaded, no_leftovers):
        async with await Sandbox.start(loaded, seed=1) as sb:
            ev0 = await sb.export_evidence()
            seed_hash = None
            for i in range(10):
                await sb.call_tool("tickets_create", {"title": f"t{i}", "description": "d"})
                await sb.call_tool("mail_mark_read", {"message_id": "m2"})
                h = await sb.reset_services()
                seed_hash = seed_hash or h
                assert h == seed_hash
            ev = await sb.export_evidence()
        assert ev.state_final == ev0.state_seed == ev.state_seed
        # Resets never pass through MCP, so they are never faulted and leave no tool call.
        assert not [r for r in ev.tool_calls if "reset" in r.get("tool", "")]

    async def test_state_changes_are_typed_audit_entries_and_show_in_the_diff(self, loaded, no_leftovers):
        async with await Sandbox.start(loaded, seed=3) as sb:
            await sb.reset_services()
            for _ in range(6):  # faults may hit; retry like an agent would
                r = await sb.call_tool("tickets_create", {"title": "Printer down", "description": "3rd floor"})
                if not r.is_error:
                    break
            assert not r.is_error, r.text
            ev = await sb.export_evidence()
        actions = [r for r in ev.chain.records if r.get("kind") == "service_action"]
        assert actions and actions[-1]["service"] == "tickets" and set(actions[-1]) >= {"action", "ids", "fields"}
        diff = ev.state_diff()
        assert diff["tickets"]["tickets"]["created"] == actions[-1]["ids"]
