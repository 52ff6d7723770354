"""The host's transport (server.rpc and mcp_client.RpcMcpClient), in-process over a real unix socket."""

from __future__ import annotations

import asyncio
import json

import pytest

from cowork.sandbox.mcp import McpError, RpcMcpClient
from cowork.server.app import ServerConfig, build_app
from cowork.server.state.audit import AuditLog
from cowork.server.tools.workspace import WorkspaceConfig
from cowork.toolhost.rpc import MAX_LINE, RpcServer


@pytest.fixture
async def served(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\n")
    audit = AuditLog(str(tmp_path / "audit.jsonl"))
    host, fs = build_app(ServerConfig(task_id="t", tools=["read_file", "write_file", "shell"],
                                      workspace=WorkspaceConfig(root=str(ws), tool_timeout_s=5)), audit)

    @host.tool(name="big", description="A long answer.")
    async def big(n: int = 10) -> str:
        return "x" * n

    @host.tool(name="slow", description="Sleeps, then answers.")
    async def slow(s: float = 0.2, tag: str = "") -> dict:
        await asyncio.sleep(s)
        return {"tag": tag}

    server = RpcServer(host, version="1")
    sock = str(tmp_path / "rpc.sock")
    await server.start(sock)
    yield sock, server, tmp_path
    server.close()
    fs.close()
    audit.close()


async def raw(sock: str, *lines: bytes, answers: int) -> list[dict]:
    reader, writer = await asyncio.open_unix_connection(sock, limit=MAX_LINE * 2)
    for line in lines:
        writer.write(line)
    out = [json.loads(await asyncio.wait_for(reader.readline(), 10)) for _ in range(answers)]
    writer.close()
    return out


class TestClient:
    async def test_discovers_lists_and_calls(self, served):
        sock, _, tmp = served
        async with RpcMcpClient(sock) as c:
            assert c.server_info["name"] == "cowork:t"
            tools = {t.name: t for t in await c.list_tools()}
            ok = await c.call_tool("read_file", {"path": "a.txt"})
            missing = await c.call_tool("read_file", {"path": "nope.txt"})
            unknown = await c.call_tool("no_such_tool", {})
        assert tools["read_file"].annotations.read_only_hint is True and "slow" in tools
        assert ok["content"][0]["text"] == "hello\n" and ok["structuredContent"] == {"result": "hello\n"}
        assert missing["isError"] and "nope.txt" in missing["content"][0]["text"]
        assert unknown["isError"] and "Unknown tool" in unknown["content"][0]["text"]
        kinds = [json.loads(x)["kind"] for x in (tmp / "audit.jsonl").read_text().splitlines()]
        assert kinds == ["tool_call", "tool_result", "tool_call", "tool_result", "tool_denied"]

    async def test_calls_on_one_connection_run_at_once_and_are_matched_by_id(self, served):
        sock, _, _ = served
        async with RpcMcpClient(sock) as c:
            t0 = asyncio.get_running_loop().time()
            got = await asyncio.gather(*[c.call_tool("slow", {"s": 0.3 - i * 0.05, "tag": str(i)}) for i in range(5)])
            took = asyncio.get_running_loop().time() - t0
        assert [g["structuredContent"]["tag"] for g in got] == ["0", "1", "2", "3", "4"]
        assert took < 1.0  # one after another would take 1.0 s

    async def test_a_server_that_goes_away_fails_pending_calls_without_an_rpc_code(self, served):
        sock, server, _ = served
        async with RpcMcpClient(sock) as c:
            pending = asyncio.ensure_future(c.call_tool("slow", {"s": 5}))
            await asyncio.sleep(0.1)
            server.close()
            with pytest.raises(McpError) as err:
                await asyncio.wait_for(pending, 5)
        assert err.value.rpc_code is None  # Sandbox.call_tool reads that as "the sandbox stopped answering"

    async def test_arguments_json_cannot_carry_are_refused_before_sending(self, served):
        sock, _, _ = served
        async with RpcMcpClient(sock) as c:
            with pytest.raises(McpError) as err:
                await c.call_tool("write_file", {"path": "x", "content": float("nan")})
        assert err.value.rpc_code == -32602


    async def test_concurrent_calls_after_a_break_share_one_new_connection(self, served):
        sock, _, _ = served
        async with RpcMcpClient(sock) as c:
            c._writer.transport.abort()  # the connection breaks under the client
            await asyncio.sleep(0.05)
            got = await asyncio.gather(*[c.call_tool("slow", {"s": 0.05, "tag": str(i)}) for i in range(6)])
            assert [g["structuredContent"]["tag"] for g in got] == [str(i) for i in range(6)]
            first = c._writer
            assert (await c.call_tool("slow", {"s": 0})) and c._writer is first  # no reconnect while it works


class TestServerRobustness:
    async def test_an_answer_over_the_line_limit_is_an_error_for_that_call_only(self, served, monkeypatch):
        from cowork.toolhost import rpc

        sock, _, _ = served
        monkeypatch.setattr(rpc, "MAX_LINE", 4096)
        async with RpcMcpClient(sock) as c:
            with pytest.raises(McpError) as err:
                await c.call_tool("big", {"n": 10_000})
            small = await c.call_tool("big", {"n": 10})
        assert err.value.rpc_code == -32603 and "over the transport" in str(err.value)
        assert small["content"][0]["text"] == "x" * 10

    async def test_a_failing_method_still_gets_an_answer(self, served, monkeypatch):
        sock, server, _ = served

        def broken():
            raise RuntimeError("catalog unreadable")

        monkeypatch.setattr(server.host, "tools_wire", broken)
        answers = await raw(sock, b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n', answers=1)
        assert answers[0]["error"]["code"] == -32603 and "catalog unreadable" in answers[0]["error"]["message"]

    async def test_bad_lines_get_errors_and_the_connection_stays_usable(self, served):
        sock, _, _ = served
        call = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                           "params": {"name": "read_file", "arguments": {"path": "a.txt"}}}).encode() + b"\n"
        answers = await raw(sock, b"not json\n", b"[1,2]\n",
                            b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
                            b'{"jsonrpc":"2.0","id":"m","method":"resources/list"}\n',
                            b'{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":5}}\n', call, answers=5)
        by_id = {a.get("id"): a for a in answers}
        assert by_id[None]["error"]["code"] in (-32700, -32600)
        assert by_id["m"]["error"]["code"] == -32601
        assert by_id["p"]["error"]["code"] == -32602
        assert by_id[9]["result"]["content"][0]["text"] == "hello\n"

    async def test_a_line_over_the_limit_is_refused_and_the_connection_closed(self, served):
        sock, _, _ = served
        reader, writer = await asyncio.open_unix_connection(sock)
        writer.write(b"x" * (MAX_LINE + 10) + b"\n")
        line = await asyncio.wait_for(reader.readline(), 30)
        assert json.loads(line)["error"]["code"] == -32600
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed
        writer.close()
