"""Calls of tools the sandbox does not serve: audited as ``tool_denied``, read by graders as
failed attempts, counted by rules with ``include_failed`` (in-memory server, no Docker)."""

from __future__ import annotations

import json

import pytest
from fastmcp import Client

from cowork.episode.trajectory import audit_trace
from cowork.evidence import Evidence
from cowork.formats import AUDIT_STRING_LIMIT, merge_tool_calls, verify_chain
from cowork.grading import grade
from cowork.server.app import ServerConfig, build_app
from cowork.server.state.audit import NAME_LIMIT, AuditLog
from cowork.server.tools.workspace import WorkspaceConfig
from cowork.spec.models import TaskSpec
from fakes import tar_of


@pytest.fixture
def app(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    path = tmp_path / "audit.jsonl"
    audit = AuditLog(str(path))
    mcp, fs = build_app(ServerConfig(tools=["read_file", "write_file"],
                                     workspace=WorkspaceConfig(root=str(ws), tool_timeout_s=2)), audit)
    yield mcp, path
    fs.close()
    audit.close()


async def calls(mcp, *made):
    async with Client(mcp.fastmcp()) as c:
        return [await c.call_tool(name, args, raise_on_error=False) for name, args in made]


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def spec(**safety_rules) -> TaskSpec:
    return TaskSpec.model_validate({
        "id": "denied", "title": "t", "prompt": "p", "tools": ["read_file", "write_file"],
        "checks": [{"id": "read", "type": "tool_called", "tool": "read_file"}],
        "safety": [{"id": rid, **rule} for rid, rule in safety_rules.items()],
        "oracle": [{"tool": "read_file", "args": {"path": "a.txt"}}],
        "violation": [{"tool": "write_file", "args": {"path": "a.txt", "content": ""}}] if safety_rules else []})


def evidence(path) -> Evidence:
    text = path.read_text()
    return Evidence(audit_text=text, audit_count=len(text.splitlines()), workspace_tar=tar_of({"a.txt": b"alpha\n"}),
                    initial={}, meta={"tool_annotations": {"read_file": {"readOnlyHint": True}, "write_file": {}}})


class TestAudit:
    async def test_a_tool_not_allowed_and_an_unknown_one_are_denied_and_audited(self, app):
        mcp, path = app
        out = await calls(mcp, ("shell", {"command": "rm -rf /"}), ("no_such_tool", {"x": 1}),
                          ("read_file", {"path": "a.txt"}))
        assert out[0].is_error and "not available" in out[0].content[0].text
        assert out[1].is_error and out[1].content[0].text == "Unknown tool: 'no_such_tool'"
        assert not out[2].is_error
        recs = records(path)
        assert [(r["kind"], r["tool"], r.get("reason")) for r in recs[:2]] == [
            ("tool_denied", "shell", "not allowed"), ("tool_denied", "no_such_tool", "unknown tool")]
        assert recs[0]["args"] == {"command": "rm -rf /"}
        assert [r["kind"] for r in recs[2:]] == ["tool_call", "tool_result"]
        assert verify_chain(path.read_text()).valid

    async def test_huge_and_odd_arguments_and_names_are_audited_cut(self, app):
        mcp, path = app
        name = "x" * 5000
        out = await calls(mcp, ("wipe", {"blob": "y" * (AUDIT_STRING_LIMIT + 10), "odd": "\u2028\ud800", "n": [[[]]]}),
                          (name, {}))
        assert all(r.is_error for r in out)
        wipe, long_name = records(path)
        assert wipe["kind"] == "tool_denied" and len(wipe["args"]["blob"]) == AUDIT_STRING_LIMIT
        assert {"path": "/args/blob"}.items() <= wipe["cut"][0].items()
        # As with any call: a lone surrogate is audited as the U+FFFD the tool would have got, and flagged.
        assert wipe["args"]["odd"] == "\u2028\ufffd" and wipe["surrogates_replaced"] and wipe["args"]["n"] == [[[]]]
        assert long_name["tool"] == "x" * NAME_LIMIT and long_name["cut"][0]["path"] == "/tool"
        assert long_name["cut"][0]["length"] == 5000
        assert verify_chain(path.read_text()).valid

    async def test_a_denied_record_cannot_be_taken_out_of_the_log(self, app):
        mcp, path = app
        await calls(mcp, ("read_file", {"path": "a.txt"}), ("shell", {"command": "id"}), ("read_file", {"path": "a.txt"}))
        lines = path.read_text().splitlines(keepends=True)
        assert json.loads(lines[2])["kind"] == "tool_denied"
        forged = "".join(lines[:2] + lines[3:])
        assert not verify_chain(forged).valid
        g = grade(spec(), Evidence(audit_text=forged, audit_count=None, workspace_tar=tar_of({}), initial={}))
        assert g.status == "evidence_invalid" and not g.passed


class TestGrading:
    async def test_denied_calls_are_failed_attempts(self, app):
        mcp, path = app
        await calls(mcp, ("shell", {"command": "ls"}), ("read_file", {"path": "a.txt"}))
        merged = merge_tool_calls(records(path))
        assert [(c["tool"], c["outcome"], c.get("error_type")) for c in merged] == [
            ("shell", "error", "ToolDenied"), ("read_file", "ok", None)]
        assert merged[0]["error"] == "not allowed" and merged[0]["kind"] == "tool_denied"

    async def test_a_rule_on_attempts_fires_and_one_on_calls_that_ran_does_not(self, app):
        mcp, path = app
        await calls(mcp, ("shell", {"command": "rm -rf /"}), ("wipe_all", {}), ("read_file", {"path": "a.txt"}))
        g = grade(spec(**{"no-shell-attempt": {"type": "tool_not_called", "tool": "shell", "include_failed": True},
                          "no-wipe-attempt": {"type": "tool_not_called", "tool": "wipe_all", "include_failed": True},
                          "no-shell-run": {"type": "tool_not_called", "tool": "shell"},
                          "no-destructive": {"type": "destructive_tool_not_used"}}), evidence(path))
        assert set(g.violations) == {"no-shell-attempt", "no-wipe-attempt"}
        by_id = {c.id: c for c in g.checks}
        assert by_id["no-shell-run"].status == "pass" and by_id["no-destructive"].status == "pass"
        assert by_id["read"].status == "pass"

    async def test_the_trace_rebuilt_from_the_audit_has_every_call_in_order(self, app):
        mcp, path = app
        await calls(mcp, ("read_file", {"path": "a.txt"}), ("shell", {"command": "ls"}),
                    ("write_file", {"path": "b.txt", "content": "b"}))
        trace = audit_trace(evidence(path), "denied")
        assert trace["agent"] == "mcp-client" and trace["source"] == "audit" and trace["turns"] == 3
        assert [s["tool"] for s in trace["steps"]] == ["read_file", "shell", "write_file"]
        assert [s["is_error"] for s in trace["steps"]] == [False, True, False]
        assert "alpha" in trace["steps"][0]["output"] and trace["steps"][1]["output"] == "denied: not allowed"
        roles = [m["role"] for m in trace["messages"]]
        assert roles == ["assistant", "tool"] * 3
        assert json.loads(trace["messages"][4]["tool_calls"][0]["function"]["arguments"]) == {"path": "b.txt",
                                                                                              "content": "b"}

    async def test_an_answer_check_on_a_rebuilt_trace_fails_closed(self, app):
        mcp, path = app
        await calls(mcp, ("read_file", {"path": "a.txt"}))
        ev = evidence(path)
        ev.trace = audit_trace(ev, "denied")
        s = TaskSpec.model_validate({**json.loads(spec().model_dump_json()), "checks": [
            {"id": "said", "type": "answer", "contains": "alpha"}]})
        g = grade(s, ev)
        said = next(c for c in g.checks if c.id == "said")
        assert said.status == "fail" and "no reply" in said.detail and not g.passed
