"""The lean host MCP client against the real server app over a real unix socket (no Docker)."""

import asyncio
import hashlib
import json
from types import SimpleNamespace

import pytest
import uvicorn

from cowork.formats import AUDIT_STRING_LIMIT, merge_tool_calls, verify_chain
from cowork.sandbox.mcp import LeanMcpClient, McpError, _response_message
from cowork.server.app import ServerConfig, build_app
from cowork.server.state.audit import AuditLog
from cowork.server.tools.workspace import WorkspaceConfig


@pytest.fixture
async def server(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hello\n")
    audit = AuditLog(str(tmp_path / "audit.jsonl"))
    mcp, fs = build_app(ServerConfig(workspace=WorkspaceConfig(root=str(tmp_path / "ws"))), audit)
    sock = str(tmp_path / "mcp.sock")
    srv = uvicorn.Server(uvicorn.Config(mcp.fastmcp().http_app(path="/mcp", json_response=True), uds=sock,
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


class TestArgumentsOnTheWire:
    """Issue 12.7: what a raw client sends is checked by the server too, and audited."""

    async def _raw(self, c: LeanMcpClient, arguments_json: str) -> dict:
        body = ('{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"write_file","arguments":%s,'
                '"_meta":%s}}' % (arguments_json, json.dumps(c._meta)))
        headers = {**c._headers, "Mcp-Method": "tools/call", "Mcp-Name": "write_file"}
        resp = await c._http.post("/mcp", content=body.encode(), headers=headers)
        assert resp.status_code == 200, resp.text
        return resp.json()["result"]

    async def test_nan_and_oversize_from_a_raw_client_are_refused_and_audited(self, server, tmp_path):
        sock, audit = server
        async with LeanMcpClient(sock) as c:
            nan = await self._raw(c, '{"path":"n.txt","content":NaN}')
            big = await self._raw(c, json.dumps({"path": "b.txt", "content": "x" * 2_000_000}))
        assert nan["isError"] and "not valid JSON" in nan["content"][0]["text"]
        assert big["isError"] and "over the limit of 1048576 bytes" in big["content"][0]["text"]
        assert not (tmp_path / "ws" / "n.txt").exists() and not (tmp_path / "ws" / "b.txt").exists()
        rep = verify_chain((tmp_path / "audit.jsonl").read_text(), expected_count=audit.count)
        assert rep.valid, rep.error
        calls = merge_tool_calls(rep.records)
        assert [c["error_type"] for c in calls] == ["ArgumentsRefused"] * 2
        assert calls[1]["args"]["content"] == "x" * AUDIT_STRING_LIMIT
        assert calls[1]["cut"] == [{"path": "/args/content", "length": 2_000_000,
                                    "sha256": hashlib.sha256(b"x" * 2_000_000).hexdigest()}]

    async def test_lone_surrogates_travel_and_are_replaced_for_tool_and_audit(self, server, tmp_path):
        sock, audit = server
        async with LeanMcpClient(sock) as c:
            r = await c.call_tool("write_file", {"path": "s.txt", "content": "a\ud800b\u2028c"})
            with pytest.raises(McpError) as info:  # never sent: the host cannot encode NaN
                await c.call_tool("write_file", {"path": "n.txt", "content": float("nan")})
        assert not r.get("isError") and info.value.rpc_code == -32602
        assert (tmp_path / "ws" / "s.txt").read_text() == "a\ufffdb\u2028c"
        rep = verify_chain((tmp_path / "audit.jsonl").read_text(), expected_count=audit.count)
        [call] = merge_tool_calls(rep.records)
        assert rep.valid and call["args"]["content"] == "a\ufffdb\u2028c" and call["surrogates_replaced"]
