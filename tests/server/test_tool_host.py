"""The behaviour check: the tool host answers exactly as the FastMCP app built from it.

The host's own path (server.host, served on rpc.sock) replaced fastmcp for every call the
host makes; external clients still get the FastMCP app (``host.fastmcp()``). Two servers with
the same seed and workspace get the same calls, one through the host, one through fastmcp's
in-memory client: answers (content, structured content, error flag), audit records (all but
time, hash chain and duration) and the tool list must be identical. Every tool is called,
with good arguments where the test knows some and with none and wrong ones everywhere.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest
from fastmcp import Client

from cowork.formats import PYTHON_TOOL, WORKSPACE_TOOLS
from cowork.server.app import ServerConfig, build_app
from cowork.server.catalog_build import build_catalog
from cowork.server.state.audit import AuditLog
from cowork.server.tools.workspace import WorkspaceConfig
from cowork.services.base import ServiceContext, open_db
from cowork.services.faults import FaultConfig, FaultInjector
from cowork.services.names import ALL_SERVICE_TOOLS
from cowork.services.registry import ServicesSeed, register_all, seed_all
from cowork.toolhost.errors import ToolError
from cowork.toolhost.host import ToolHost


def _seed_data() -> dict[str, Any]:
    """The services tests' rich seed (tests/services/support.py), loaded by path."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("_cowork_services_support", Path(__file__).parent.parent / "services" / "support.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_cowork_services_support", module)
    spec.loader.exec_module(module)
    return module.SEED_DATA


#: Served: every tool but these two (one is asked for anyway, to see the refusal).
NOT_SERVED = {"edit_file", "mail_delete"}

GOOD: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "notes.txt"}),
    ("read_file", {"path": "notes.txt", "offset": 1, "limit": 1}),
    ("read_file", {"path": "notes.txt", "offset": "1"}),  # lax: a numeric string is taken
    ("read_file", {"path": "missing.txt"}),
    ("read_file", {"path": "/etc/shadow"}),
    ("read_file", {"path": 3}),
    ("read_file", {"path": "notes.txt", "offset": -1}),
    ("write_file", {"path": "sub/new.txt", "content": "één\n"}),
    ("list_files", {}),
    ("list_files", {"pattern": "**/*.txt", "path": "sub"}),
    ("grep", {"pattern": "be+ta"}),
    ("grep", {"pattern": "(unclosed"}),
    ("shell", {"command": "echo hi; exit 3"}),
    ("edit_file", {"path": "notes.txt", "old_string": "a", "new_string": "b"}),
    ("no_such_tool", {"x": 1}),
    ("mail_delete", {"message_id": "msg-1"}),
    ("mail_list_folders", {}),
    ("mail_search", {"query": "report"}),
    ("mail_send", {"to": ["dana@acme.com"], "subject": "Hi", "body": "Hello"}),
    ("mail_send", {"to": "not an address", "subject": "Hi", "body": "Hello"}),
    ("calendar_list_events", {}),
    ("contacts_search", {"query": "dana"}),
    ("tickets_search", {"query": ""}),
    ("todo_create", {"title": "Follow up"}),
    ("read_file", {"path": "notes.txt", "unexpected": True}),
    ("boom_async", {}),
    ("boom_async", {"kind": "tool"}),
    ("not_json", {}),
    ("not_json", {"kind": "nan"}),
    ("not_json", {"kind": "finite"}),
    ("list_or_fail", {"n": 3}),
    ("list_or_fail", {"n": -1}),
    ("list_or_fail", {"n": "x"}),
]


def _server(root: str, audit_path: str) -> tuple[Any, Any, AuditLog]:
    os.makedirs(root)
    with open(os.path.join(root, "notes.txt"), "w") as fh:
        fh.write("alpha\nbeta\ngamma\n")
    os.makedirs(os.path.join(root, "sub"))
    audit = AuditLog(audit_path)
    tools = [t for t in (*WORKSPACE_TOOLS, PYTHON_TOOL, *ALL_SERVICE_TOOLS) if t not in NOT_SERVED]
    host, fs = build_app(ServerConfig(task_id="same", tools=tools,
                                      workspace=WorkspaceConfig(root=root, tool_timeout_s=5)), audit)
    faults = FaultInjector(FaultConfig.model_validate({"default": {"rate": 0.15}}), seed=7)
    ctx = ServiceContext(db=open_db(), audit=audit.append, faults=faults)
    seed_all(ctx, ServicesSeed.model_validate(_seed_data()))
    register_all(host, ctx, set(tools))

    @host.tool(name="boom_async", description="Fails as asked.")
    async def boom_async(kind: str = "value") -> dict:
        if kind == "tool":
            raise ToolError("a tool's own words")
        raise ValueError("an unexpected failure")

    @host.tool(name="not_json")
    def not_json(kind: str = "inf") -> dict:
        value = {"inf": float("inf"), "nan": float("nan")}.get(kind, 1.5)
        return {"totals": {"USD": value}, "rows": [1, value]}

    @host.tool(name="list_or_fail")
    def list_or_fail(n: int = 0) -> list[dict]:
        if n < 0:
            raise KeyError("negative")
        return [{"n": n, "half": n / 2}]

    return host, fs, audit


def _calls() -> list[tuple[str, dict[str, Any]]]:
    # Every served tool with no arguments and with a wrong one, after the known-good calls.
    every = [t for t in (*WORKSPACE_TOOLS, *ALL_SERVICE_TOOLS) if t not in NOT_SERVED and t != "shell"]
    return GOOD + [(t, {}) for t in every] + [(t, {"limit": "many"}) for t in every]


def _records(path: str) -> list[dict[str, Any]]:
    out = []
    for line in open(path).read().splitlines():
        rec = json.loads(line)
        for key in ("time", "hash", "prev", "duration_ms"):
            rec.pop(key, None)
        out.append(rec)
    return out


def _answer(wire: dict[str, Any]) -> dict[str, Any]:
    return {"content": wire.get("content"), "structuredContent": wire.get("structuredContent"),
            "isError": bool(wire.get("isError"))}


@pytest.fixture
async def pair(tmp_path):
    lean = _server(str(tmp_path / "a"), str(tmp_path / "a.jsonl"))
    ref = _server(str(tmp_path / "b"), str(tmp_path / "b.jsonl"))
    yield lean, ref, tmp_path
    for host, fs, audit in (lean, ref):
        fs.close()
        audit.close()


class TestSameAsFastMCP:
    async def test_answers_and_audit_records_are_identical(self, pair):
        (lean, _, _), (ref, _, _), tmp = pair
        calls = _calls()
        got = []
        for name, args in calls:
            try:
                got.append(_answer((await lean.call_tool(name, dict(args))).wire()))
            except Exception as exc:  # the rpc server's rule: any failure is an isError result
                got.append({"content": [{"type": "text", "text": str(exc)}], "structuredContent": None,
                            "isError": True})
        want = []
        async with Client(ref.fastmcp()) as client:
            for name, args in calls:
                r = await client.call_tool_mcp(name, dict(args))
                want.append(_answer(r.model_dump(by_alias=True, exclude_none=True, mode="json")))
        for (name, args), g, w in zip(calls, got, want):
            assert g == w, (name, args)
        assert sum(a["isError"] for a in got) > 20 and sum(not a["isError"] for a in got) > 20
        assert _records(str(tmp / "a.jsonl")) == _records(str(tmp / "b.jsonl"))
        kinds = {r["kind"] for r in _records(str(tmp / "a.jsonl"))}
        assert {"tool_call", "tool_result", "tool_denied", "fault", "service_action"} <= kinds, kinds

    async def test_tool_list_is_fastmcps(self, pair):
        (lean, _, _), (ref, _, _), _ = pair
        async with Client(ref.fastmcp()) as client:
            listed = (await client.list_tools_mcp()).model_dump(by_alias=True, exclude_none=True, mode="json")
        assert lean.tools_wire() == listed["tools"]
        assert [t.name for t in await lean.list_tools()] == [t["name"] for t in listed["tools"]]

    def test_the_images_catalog_is_what_fastmcp_lists(self, tmp_path):
        # The image's file comes from the same function; a tool missing from it is listed by fastmcp.
        catalog = build_catalog()
        assert set(catalog) >= {*WORKSPACE_TOOLS, PYTHON_TOOL, *ALL_SERVICE_TOOLS}
        assert catalog["read_file"]["outputSchema"]["x-fastmcp-wrap-result"] is True
        assert catalog["read_file"]["annotations"]["readOnlyHint"] is True


class TestHostWithoutFastMCP:
    async def test_a_tool_missing_from_the_catalog_is_still_listed(self, tmp_path, monkeypatch):
        host = ToolHost(name="t")

        @host.tool(name="brand_new", description="Not in any catalog.")
        async def brand_new(n: int = 1) -> dict:
            return {"n": n}

        listed = {t["name"]: t for t in host.tools_wire()}
        assert listed["brand_new"]["description"] == "Not in any catalog."
        assert (await host.call_tool("brand_new", {"n": "2"})).structured_content == {"n": 2}

    async def test_registering_after_the_fastmcp_app_was_built_is_refused(self):
        host = ToolHost(name="t")
        host.fastmcp()
        with pytest.raises(RuntimeError):
            host.tool(name="late")(lambda: None)
