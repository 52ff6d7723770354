"""Workspace tools through an in-memory MCP client (no Docker)."""

import asyncio
import io
import json
import os
import tarfile
import threading
from pathlib import Path

import pytest
from fastmcp import Client

from cowork.evidence import Evidence
from cowork.formats import WORKSPACE_TOOLS, merge_tool_calls, verify_chain
from cowork.server.app import ServerConfig, build_app
from cowork.server.fs.agentfs import AgentFS
from cowork.server.fs.fsaccess import FileRefused, open_checked
from cowork.server.fs.fswalk import Glob, Walk
from cowork.server.state.audit import AuditLog
from cowork.server.state.workspace_export import (
    EXPORT_KEY,
    INCOMPLETE_MEMBER,
    OMITTED_KEY,
    ExportLimits,
    export_workspace,
)
from cowork.server.tools.workspace import WorkspaceConfig


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
    async with Client(mcp.fastmcp()) as c:
        return await c.call_tool(name, args, raise_on_error=False)


def text(r) -> str:
    return r.content[0].text


class TestWorkspaceTools:
    async def test_lists_exactly_the_workspace_tools_with_annotations(self, env):
        async with Client(env[0].fastmcp()) as c:
            tools = {t.name: t for t in await c.list_tools()}
        assert set(tools) == set(WORKSPACE_TOOLS)
        assert tools["read_file"].annotations.read_only_hint is True
        assert tools["shell"].annotations.destructive_hint is True

    async def test_allow_list_limits_tools(self, tmp_path):
        audit = AuditLog(str(tmp_path / "a.jsonl"))
        mcp, fs = build_app(ServerConfig(tools=["read_file"], workspace=WorkspaceConfig(root=str(tmp_path))), audit)
        async with Client(mcp.fastmcp()) as c:
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


# --------------------------------------------------------------------------- fail closed (issue 12)


def _touch(p: Path) -> Path:
    p.touch()
    return p


def _nest(root: Path, depth: int, name: str = "d") -> str:
    """Make ``depth`` nested folders with descriptors (no path ever longer than PATH_MAX)."""
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=fd)
        sub = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = sub
    os.close(fd)
    return "/".join([name] * depth)


def _remove_tree(path: Path) -> None:
    """Delete a tree of any depth without recursion: pytest's own clean-up (shutil.rmtree)
    recurses and fails on 1,000+ levels, which would break later runs for everyone."""
    stack = [(os.open(path, os.O_RDONLY | os.O_DIRECTORY), None, None)]
    while stack:
        fd, parent_fd, name = stack[-1]
        sub = None
        for e in os.scandir(fd):
            if e.is_dir(follow_symlinks=False):
                sub = e.name
                break
            os.unlink(e.name, dir_fd=fd)
        if sub is not None:
            stack.append((os.open(sub, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd), fd, sub))
            continue
        stack.pop()
        if parent_fd is not None:
            os.rmdir(name, dir_fd=parent_fd)
        os.close(fd)
    os.rmdir(path)


@pytest.fixture
def deep_tmp(tmp_path):
    """A folder for deep trees, removed without recursion at the end."""
    d = tmp_path / "deep"
    d.mkdir()
    yield d
    _remove_tree(d)


def _tar(path: Path) -> tuple[dict, dict[str, tarfile.TarInfo], dict[str, bytes]]:
    data = path.read_bytes()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        summary = json.loads(tar.pax_headers[EXPORT_KEY])
        members = {m.name: m for m in tar.getmembers()}
    return summary, members, Evidence("", None, data, {}).files


class TestFailClosedTools:
    async def test_grep_is_linear_time_and_refuses_backreferences(self, env):
        (env[1] / "a.txt").write_text("a" * 5000 + "\n")
        r = await call(env[0], "grep", {"pattern": "(a|a)*b", "path": "a.txt"})  # exponential for Python's re
        assert not r.is_error and json.loads(text(r))["matches"] == []
        r = await call(env[0], "grep", {"pattern": r"(a)\1"})
        assert r.is_error and "RE2" in text(r)

    async def test_grep_anchors_match_at_line_end_and_case_folds(self, env):
        r = await call(env[0], "grep", {"pattern": "^BETA$", "ignore_case": True})
        assert json.loads(text(r))["matches"] == ["notes.txt:2: beta"]

    async def test_grep_glob_and_single_file(self, env):
        r = await call(env[0], "grep", {"pattern": "2", "glob": "*.csv"})
        assert json.loads(text(r))["matches"] == ["sub/data.csv:2: 1,2"]
        r = await call(env[0], "grep", {"pattern": "gamma", "path": "notes.txt"})
        assert json.loads(text(r))["matches"] == ["notes.txt:3: gamma"]

    async def test_fifo_and_devices_are_refused_at_once(self, env):
        os.mkfifo(env[1] / "pipe")
        for path in ["pipe", "/dev/zero", "/dev/null"]:
            r = await call(env[0], "read_file", {"path": path})
            assert r.is_error and "not a regular file" in text(r), text(r)
        r = await call(env[0], "grep", {"pattern": "beta"})         # the walk passes the FIFO by
        assert json.loads(text(r))["matches"] == ["notes.txt:2: beta"]

    async def test_symlinks_into_proc_are_refused_after_open(self, env):
        (env[1] / "me").symlink_to("/proc/self")
        (env[1] / "env").symlink_to("/proc/self/environ")
        for tool, args in [("read_file", {"path": "env"}), ("read_file", {"path": "me/status"}),
                           ("list_files", {"path": "me"}), ("grep", {"pattern": ".", "path": "me"}),
                           ("write_file", {"path": "me/comm", "content": "x"})]:
            r = await call(env[0], tool, args)
            assert r.is_error and "Permission denied" in text(r), (tool, text(r))

    def test_the_check_judges_the_opened_file_not_the_path(self, tmp_path):
        # A path that resolved to a plain file before the open but is /proc at the open: the
        # descriptor's own path decides (dir_fd skips the early path check, as a race would).
        proc_fd = os.open("/proc", os.O_RDONLY)
        try:
            with pytest.raises(FileRefused, match="Permission denied"):
                open_checked("self/status", "x", os.O_RDONLY, dir_fd=proc_fd)
        finally:
            os.close(proc_fd)

    async def test_globs_cannot_climb_out_and_walks_do_not_follow_links(self, env):
        (env[1] / "p").symlink_to("/proc")
        for pattern in ["../../proc/*", "/proc/*", "sub/../../*"]:
            r = await call(env[0], "list_files", {"pattern": pattern})
            assert r.is_error and "pattern" in text(r)
        files = json.loads(text(await call(env[0], "list_files", {"pattern": "**/*"})))["files"]
        assert "p" in files and not [f for f in files if f.startswith("p/")]
        assert files == ["notes.txt", "p", "sub/", "sub/data.csv"]

    async def test_read_file_reads_only_what_it_shows(self, env):
        os.truncate(_touch(env[1] / "huge.txt"), 1 << 40)           # 1 TiB, sparse
        r = await call(env[0], "read_file", {"path": "huge.txt"})
        assert not r.is_error and f"of {1 << 40} bytes" in text(r)
        r = await call(env[0], "edit_file", {"path": "huge.txt", "old_string": "a", "new_string": "b"})
        assert r.is_error and "use shell" in text(r)

    def test_list_and_walk_survive_deep_nesting(self, deep_tmp):
        deep = _nest(deep_tmp, 1500)
        fd = os.open(deep_tmp, os.O_RDONLY)
        try:
            walk = Walk(fd)
            rels = [e.rel for e in walk]
        finally:
            os.close(fd)
        assert rels[-1] == deep and walk.stopped is None and walk.skipped == []
        assert Glob("**/d").match(deep) and not Glob("*/d").match(deep)


class TestAgentFSPool:
    async def test_stuck_calls_do_not_starve_the_pool(self):
        fs = AgentFS(None, None, workers=2, max_threads=8)
        gate = threading.Event()
        stuck = [asyncio.ensure_future(fs.run(gate.wait)) for _ in range(5)]
        assert await asyncio.wait_for(fs.run(lambda: "answered"), 30) == "answered"
        gate.set()
        assert await asyncio.gather(*stuck) == [True] * 5
        fs.close()

    async def test_errors_come_back_to_the_caller(self):
        fs = AgentFS(None, None)
        with pytest.raises(FileNotFoundError):
            await fs.run(os.stat, "/nonexistent/x")
        fs.close()


class TestExport:
    def test_every_hard_link_name_is_a_regular_member(self, tmp_path):
        ws = tmp_path / "ws"
        (ws / "reports").mkdir(parents=True)
        (ws / "reports" / "q3.csv").write_text("a,b\n")
        os.link(ws / "reports" / "q3.csv", ws / "backup.csv")
        summary, members, files = _tar(Path(export_workspace(str(ws), str(tmp_path / "w.tar"))["path"]))
        assert summary["complete"] and members["backup.csv"].isfile() and members["reports/q3.csv"].isfile()
        assert files["backup.csv"] == files["reports/q3.csv"] == b"a,b\n"

    def test_oversized_files_stay_as_marked_placeholders(self, tmp_path):
        ws = tmp_path / "ws"
        ws.mkdir()
        with open(ws / "sparse.bin", "wb") as fh:
            fh.truncate(2 << 30)
        (ws / "a.txt").write_bytes(b"x" * 600)
        (ws / "b.txt").write_bytes(b"y" * 600)
        limits = ExportLimits(max_file_bytes=1 << 20, max_total_bytes=1000)
        res = export_workspace(str(ws), str(tmp_path / "w.tar"), limits)
        assert os.path.getsize(tmp_path / "w.tar") < 64 << 10
        summary, members, files = _tar(tmp_path / "w.tar")
        assert summary["complete"] and summary["omitted_paths"] == ["b.txt", "sparse.bin"]
        assert "per-file limit" in members["sparse.bin"].pax_headers[OMITTED_KEY]
        assert "total limit" in members["b.txt"].pax_headers[OMITTED_KEY]
        assert files["a.txt"] == b"x" * 600 and files["b.txt"].startswith(b"[cowork: content omitted")
        assert [o["path"] for o in res["omitted_files"]] == ["b.txt", "sparse.bin"]

    def test_deep_trees_export_and_limits_make_it_incomplete_not_silent(self, tmp_path, deep_tmp):
        ws = deep_tmp
        deep = _nest(ws, 1100)
        fd = os.open(ws / deep, os.O_RDONLY)
        os.close(os.open("loot.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
        os.close(fd)
        summary, _, files = _tar(Path(export_workspace(str(ws), str(tmp_path / "w.tar"))["path"]))
        assert summary["complete"] and f"{deep}/loot.txt" in files
        cut = Path(export_workspace(str(ws), str(tmp_path / "w.tar"), ExportLimits(max_entries=10))["path"])
        summary, members, files = _tar(cut)
        assert not summary["complete"] and "more than 10 entries" in summary["left_out"][0]
        assert INCOMPLETE_MEMBER in members and INCOMPLETE_MEMBER not in files  # a marker, not a workspace file
        assert not Evidence("", None, cut.read_bytes(), {}).export_complete    # what the grader goes by
        summary, _, _ = _tar(Path(export_workspace(str(ws), str(tmp_path / "w.tar"), ExportLimits(max_path=100))["path"]))
        assert not summary["complete"] and "longer than 100 bytes" in summary["left_out"][0]
