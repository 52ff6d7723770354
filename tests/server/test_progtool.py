"""The ``python`` tool through an in-memory MCP client (no Docker): its channel takes any bytes
the code writes, its inner calls are the app's own calls, audited with their parent."""

import json

import pytest
from fastmcp import Client

from cowork.formats import merge_tool_calls, verify_chain
from cowork.server.app import ServerConfig, build_app
from cowork.server.state.audit import AuditLog
from cowork.server.tools import python_tool as progtool
from cowork.server.tools.workspace import WorkspaceConfig
from cowork.spec.toolnames import known_tools


@pytest.fixture
def env(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha\nbeta\n")
    audit = AuditLog(str(tmp_path / "audit.jsonl"))
    cfg = ServerConfig(task_id="t", tools=["python", "read_file", "shell"],
                       workspace=WorkspaceConfig(root=str(ws), tool_timeout_s=20, output_limit=4000))
    mcp, fs = build_app(cfg, audit)
    yield mcp, tmp_path / "audit.jsonl"
    fs.close()
    audit.close()


async def run(mcp, code: str) -> dict:
    async with Client(mcp.fastmcp()) as c:
        r = await c.call_tool("python", {"code": code}, raise_on_error=False)
    assert not r.is_error, r.content[0].text
    return r.structured_content


def records(path) -> list[dict]:
    report = verify_chain(path.read_text().splitlines())
    assert report.valid, report.error
    return report.records


class TestRegistration:
    async def test_served_only_when_allowed_with_its_annotations(self, env, tmp_path):
        async with Client(env[0].fastmcp()) as c:
            tools = {t.name: t for t in await c.list_tools()}
        ann = tools["python"].annotations
        assert (ann.read_only_hint, ann.destructive_hint, ann.idempotent_hint, ann.open_world_hint) == \
            (False, True, False, False)
        mcp, fs = build_app(ServerConfig(workspace=WorkspaceConfig(root=str(tmp_path))), AuditLog(str(tmp_path / "b")))
        try:
            async with Client(mcp.fastmcp()) as c:
                assert "python" not in {t.name for t in await c.list_tools()}
        finally:
            fs.close()

    def test_a_spec_may_name_it(self):
        assert "python" in known_tools()


class TestInnerCalls:
    async def test_values_errors_and_parent_links(self, env):
        mcp, log = env
        out = await run(mcp, """
import inspect
from cowork_tools import workspace, ToolError
print(inspect.signature(workspace.read_file))
print(repr(workspace.read_file("notes.txt")))
print(workspace.shell("echo hi")["output"].strip())
try:
    workspace.read_file("missing.txt")
except ToolError as exc:
    print("error:", exc)
try:
    workspace.read_file("a", "b")
except TypeError as exc:
    print("type error")
""")
        assert out["output"].splitlines() == [
            "(path: str, *, offset: int = 0, limit: int | None = None)",
            "'alpha\\nbeta\\n'", "hi", "error: File not found: 'missing.txt'", "type error"]
        calls = merge_tool_calls(records(log))
        python = next(c for c in calls if c["tool"] == "python")
        inner = [(c["tool"], c["outcome"]) for c in calls if c.get("parent") == python["call_seq"]]
        assert inner == [("read_file", "ok"), ("shell", "ok"), ("read_file", "error")]

    async def test_whatever_the_code_writes_on_the_channel_is_answered_not_obeyed(self, env, monkeypatch):
        monkeypatch.setattr(progtool, "MAX_LINE", 4096)
        mcp, log = env
        out = await run(mcp, r"""
import json, cowork_tools
ch = cowork_tools._channel
def raw(data):
    ch._sock.sendall(data)
    return json.loads(ch._file.readline())
for bad in [b"not json\n", b"[1, 2]\n", b'{"op": "format_disk"}\n', b'{"op": "call", "tool": 5}\n',
            b'{"op": "call", "tool": "shell", "args": "rm -rf /"}\n', b'\xff\xfe\n']:
    reply = raw(bad)
    print(reply["ok"], reply["type"])
print(cowork_tools.workspace.read_file("notes.txt").split()[0])
print(raw(b"x" * 10000 + b"\n")["error"])
try:
    cowork_tools.workspace.read_file("notes.txt")
except cowork_tools.ToolError as exc:
    print("after:", str(exc)[:26])
""")
        lines = out["output"].splitlines()
        assert lines[:6] == ["False ProtocolError"] * 6, out["output"]
        assert lines[6] == "alpha"
        assert lines[7] == "request line over 4096 bytes; the channel is closed"
        assert lines[8] == "after: the tool channel is closed"
        calls = merge_tool_calls(records(log))
        assert [c["tool"] for c in calls if c.get("parent") is not None] == ["read_file"]  # nothing else ran

    async def test_the_code_cannot_start_another_python_call(self, env):
        mcp, log = env
        out = await run(mcp, """
import cowork_tools
print(hasattr(cowork_tools, "python"), "python" in str(cowork_tools.tools()))
try:
    cowork_tools.call("python", code="print(1)")
except cowork_tools.ToolError as exc:
    print(exc)
""")
        assert out["output"].splitlines() == [
            "False False", "the python tool cannot be called from python code; call the tools you need directly"]
        calls = merge_tool_calls(records(log))
        assert [(c["tool"], c.get("parent") is not None, c["outcome"]) for c in calls] == \
            [("python", True, "error"), ("python", False, "ok")]

    async def test_an_uncaught_exception_is_a_traceback_and_exit_code_1(self, env):
        out = await run(env[0], "x = 1\nraise ValueError('boom')\n")
        assert out["exit_code"] == 1
        assert 'File "<python>", line 2, in <module>' in out["output"] and "ValueError: boom" in out["output"]
        assert "cowork_tools" not in out["output"]  # the runner's own frame is not shown
        assert json.dumps(out)


class TestClientModule:
    """The module the code imports, on its own: how a tool's schema becomes a function."""

    @pytest.fixture
    def fresh(self):
        import importlib.util

        spec = importlib.util.spec_from_file_location("cowork_tools_under_test", f"{progtool.AGENT_LIB}/cowork_tools.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    @pytest.fixture
    def client(self, fresh, monkeypatch):
        module, sent = fresh, []
        monkeypatch.setattr(module, "_send", lambda name, args: sent.append((name, args)) or "ok")
        return module, sent

    def tool(self, module, props, required):
        return module._Tool("crm_create_account", {"namespace": "crm", "function": "create_account",
                                                   "description": "d",
                                                   "input_schema": {"properties": props, "required": required}})

    def test_an_argument_called_name_is_the_tools_and_defaults_stay_the_servers(self, client):
        module, sent = client
        fn = self.tool(module, {"name": {"type": "string"}, "tier": {"type": "string", "default": "silver"}}, ["name"])
        assert str(fn.__signature__) == "(name: str, *, tier: str = 'silver')"
        fn("Initech")
        fn(name="Initrode", tier="gold")
        assert sent == [("crm_create_account", {"name": "Initech"}),
                        ("crm_create_account", {"name": "Initrode", "tier": "gold"})]
        with pytest.raises(TypeError):
            fn(nmae="typo")
        assert len(sent) == 2  # a wrong argument is Python's TypeError, nothing sent

    def test_an_argument_python_cannot_name_is_passed_as_given(self, client):
        module, sent = client
        fn = self.tool(module, {"from": {"type": "string"}}, ["from"])
        fn(**{"from": "a@b.c"})
        assert sent == [("crm_create_account", {"from": "a@b.c"})]

    def test_outside_the_python_tool_there_is_no_channel(self, fresh):
        with pytest.raises(fresh.ToolError, match="no tool channel"):
            fresh.call("mail_search", query="x")
        with pytest.raises(AttributeError, match="not a service this task allows"):
            fresh.mail  # noqa: B018
