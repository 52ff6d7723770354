"""Workspace tools through an in-memory MCP client (no Docker)."""

import json
from pathlib import Path

import pytest
from fastmcp import Client

from cowork.formats import WORKSPACE_TOOLS, merge_tool_calls, verify_chain
from cowork.server.app import ServerConfig, build_app
from cowork.server.audit import AuditLog
from cowork.server.workspace_tools import WorkspaceConfig


@pytest.fixture
def env(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    (ws / "sub").mkdir()
    (ws / "sub" / "data.csv").write_text("a,b\n1,2\n")
    audit = AuditLog(str(tmp_path / "audit.jsonl"))
    cfg = ServerConfig(task_id="t", workspace=WorkspaceConfig(root=str(ws), tool_timeout_s=2, output_limit=1000))
    mcp, fs = build_app(cfg, audit)
    yield mcp, ws, audit, tmp_path / "audit.jsonl"
    fs.close()
    audit.close()


async def call(mcp, name, args):
    async with Client(mcp) as c:
        return await c.call_tool(name, args, raise_on_error=False)


def text(r) -> str:
    return r.content[0].text


class TestWorkspaceTools:
    async def test_lists_exactly_the_workspace_tools_with_annotations(self, env):
        async with Client(env[0]) as c:
            tools = {t.name: t for t in await c.list_tools()}
        assert set(tools) == set(WORKSPACE_TOOLS)
        assert tools["read_file"].annotations.read_only_hint is True
        assert tools["shell"].annotations.destructive_hint is True

    async def test_allow_list_limits_tools(self, tmp_path):
        audit = AuditLog(str(tmp_path / "a.jsonl"))
        mcp, fs = build_app(ServerConfig(tools=["read_file"], workspace=WorkspaceConfig(root=str(tmp_path))), audit)
        async with Client(mcp) as c:
            assert [t.name for t in await c.list_tools()] == ["read_file"]
            r = await c.call_tool("shell", {"command": "true"}, raise_on_error=False)
        assert r.is_error
        fs.close()

    async def test_read_file_whole_and_slice(self, env):
        assert text(await call(env[0], "read_file", {"path": "notes.txt"})) == "alpha\nbeta\ngamma\n"
        assert text(await call(env[0], "read_file", {"path": "notes.txt", "offset": 1, "limit": 1})) == "beta\n"

    async def test_read_file_errors(self, env):
        r = await call(env[0], "read_file", {"path": "missing.txt"})
        assert r.is_error and "File not found: 'missing.txt'" in text(r)
        r = await call(env[0], "read_file", {"path": "sub"})
        assert r.is_error and "is a directory" in text(r)
        r = await call(env[0], "read_file", {"path": "/run/cowork/audit.jsonl"})
        assert r.is_error and "Permission denied" in text(r)

    async def test_write_creates_parents(self, env):
        r = await call(env[0], "write_file", {"path": "out/deep/x.txt", "content": "hi"})
        assert not r.is_error and (env[1] / "out/deep/x.txt").read_text() == "hi"

    async def test_edit_file_exact_unique_and_replace_all(self, env):
        r = await call(env[0], "edit_file", {"path": "notes.txt", "old_string": "beta", "new_string": "BETA"})
        assert not r.is_error and "BETA" in (env[1] / "notes.txt").read_text()
        r = await call(env[0], "edit_file", {"path": "notes.txt", "old_string": "zeta", "new_string": "x"})
        assert r.is_error and "not found" in text(r)
        (env[1] / "dup.txt").write_text("x x x")
        r = await call(env[0], "edit_file", {"path": "dup.txt", "old_string": "x", "new_string": "y"})
        assert r.is_error and "occurs 3 times" in text(r)
        r = await call(env[0], "edit_file", {"path": "dup.txt", "old_string": "x", "new_string": "y", "replace_all": True})
        assert not r.is_error and (env[1] / "dup.txt").read_text() == "y y y"

    async def test_list_files_and_grep(self, env):
        r = await call(env[0], "list_files", {"pattern": "**/*.csv"})
        assert json.loads(text(r))["files"] == ["sub/data.csv"]
        r = await call(env[0], "grep", {"pattern": "^b", "path": "."})
        assert json.loads(text(r))["matches"] == ["notes.txt:2: beta"]
        r = await call(env[0], "grep", {"pattern": "("})
        assert r.is_error and "Invalid regular expression" in text(r)
        r = await call(env[0], "list_files", {"path": "notes.txt"})
        assert r.is_error and "Not a directory" in text(r)

    async def test_shell_runs_in_workspace_and_reports_exit_code(self, env):
        r = await call(env[0], "shell", {"command": "pwd; ls sub; exit 3"})
        out = json.loads(text(r))
        assert out["exit_code"] == 3 and out["output"].splitlines() == [str(env[1]), "data.csv"]

    async def test_shell_output_is_capped_and_says_so(self, env):
        out = json.loads(text(await call(env[0], "shell", {"command": "yes | head -c 50000"})))
        assert out["truncated"] is True and "[output truncated: showed 1000 of 50000 bytes]" in out["output"]

    async def test_shell_timeout_cuts_the_call_and_the_next_call_works(self, env):
        r = await call(env[0], "shell", {"command": "echo started; sleep 60"})
        assert r.is_error and "timed out after 2s" in text(r) and "started" in text(r)
        assert not (await call(env[0], "shell", {"command": "true"})).is_error

    async def test_bad_arguments_are_tool_errors(self, env):
        r = await call(env[0], "read_file", {"path": "notes.txt", "offset": "x"})
        assert r.is_error

    async def test_every_call_is_audited_in_a_valid_chain(self, env):
        mcp, _, audit, path = env
        await call(mcp, "read_file", {"path": "notes.txt"})
        await call(mcp, "read_file", {"path": "missing"})
        await call(mcp, "shell", {"command": "echo hi"})
        rep = verify_chain(Path(path).read_text(), expected_count=audit.count)
        assert rep.valid and [r["kind"] for r in rep.records] == ["tool_call", "tool_result"] * 3
        calls = merge_tool_calls(rep.records)  # each call before it runs, its result after
        assert [r["tool"] for r in calls] == ["read_file", "read_file", "shell"]
        assert [r["outcome"] for r in calls] == ["ok", "error", "ok"]
        assert calls[2]["args"] == {"command": "echo hi"} and calls[2]["duration_ms"] >= 0
