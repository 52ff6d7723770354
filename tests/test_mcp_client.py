"""The lean host MCP client against the real server app over a real unix socket (no Docker)."""

import asyncio
import json
from types import SimpleNamespace

import pytest
import uvicorn

from cowork.mcp_client import LeanMcpClient, McpError, _response_message
from cowork.server.app import ServerConfig, build_app
from cowork.server.audit import AuditLog
from cowork.server.workspace_tools import WorkspaceConfig


@pytest.fixture
async def server(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hello\n")
    audit = AuditLog(str(tmp_path / "audit.jsonl"))
    mcp, fs = build_app(ServerConfig(workspace=WorkspaceConfig(root=str(tmp_path / "ws"))), audit)
    sock = str(tmp_path / "mcp.sock")
    srv = uvicorn.Server(uvicorn.Config(mcp.http_app(path="/mcp", json_response=True), uds=sock,
                                        log_level="warning", lifespan="on"))
    task = asyncio.create_task(srv.serve())
    while not srv.started:
        await asyncio.sleep(0.01)
    yield sock, audit
    srv.should_exit = True
    await task
    fs.close()


class TestLeanClient:
    async def test_discovers_lists_and_calls(self, server):
        sock, audit = server
        async with LeanMcpClient(sock) as c:
            assert c._meta is not None  # the stateless revision was negotiated
            tools = {t.name: t for t in await c.list_tools()}
            ok = await c.call_tool("read_file", {"path": "a.txt"})
            bad = await c.call_tool("read_file", {"path": "missing.txt"})
            unknown = await c.call_tool("no_such_tool", {})
        assert tools["read_file"].annotations.read_only_hint is True
        assert ok["content"][0]["text"] == "hello\n" and not ok.get("isError")
        assert bad["isError"] and "File not found" in bad["content"][0]["text"]
        assert unknown["isError"] and "no_such_tool" in unknown["content"][0]["text"]
        assert audit.count >= 2

    def test_reads_a_response_from_an_event_stream(self):
        body = ("event: message\ndata: " + json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"x": 1}}) + "\n\n"
                + "data: " + json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"ok": True}}) + "\n\n")
        resp = SimpleNamespace(headers={"content-type": "text/event-stream"}, text=body)
        assert _response_message(resp, 7) == {"jsonrpc": "2.0", "id": 7, "result": {"ok": True}}
        with pytest.raises(McpError):
            _response_message(resp, 9)
