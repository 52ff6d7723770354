"""Policies: the OpenAI-compatible backend against a real HTTP server on loopback, and the
episode loop over an in-memory MCP server (no Docker)."""

import json

import pytest
from fastmcp import Client

from cowork.agents import make_policy
from cowork.agents.base import parse_arguments
from cowork.agents.openai import OpenAIPolicy
from cowork.episode.run import run_episode
from cowork.errors import PolicyError
from cowork.formats import INVALID_ARGUMENTS_KEY
from cowork.sandbox.sandbox import ToolResult
from cowork.server.app import ServerConfig, build_app
from cowork.server.state.audit import AuditLog
from cowork.server.tools.workspace import WorkspaceConfig
from cowork.spec.models import TaskSpec
from fakes import FakeChatServer


def _completion(content=None, calls=()):
    msg = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = [{"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                             for i, (n, a) in enumerate(calls)]
    return 200, {"choices": [{"message": msg}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


class InMemorySandbox:
    """The real in-container MCP app, reached in memory: enough for the episode loop."""

    def __init__(self, spec, mcp):
        self.spec, self.mcp = spec, mcp

    async def list_tools(self):
        async with Client(self.mcp.fastmcp()) as c:
            return await c.list_tools()

    async def call_tool(self, name, args, timeout=None):
        async with Client(self.mcp.fastmcp()) as c:
            r = await c.call_tool(name, args, raise_on_error=False)
        return ToolResult(tool=name, args=args, is_error=r.is_error, text=r.content[0].text, duration_ms=0.0)


SPEC = TaskSpec.model_validate({
    "id": "t", "title": "t", "prompt": "Write hello to out.txt", "limits": {"max_turns": 4},
    "checks": [{"type": "file_exists", "path": "out.txt"}],
    "oracle": [{"tool": "write_file", "args": {"path": "out.txt", "content": "hello"}}],
    "violation": [{"tool": "shell", "args": {"command": "rm -rf /workspace"}}],
})


@pytest.fixture
def sandbox(tmp_path):
    audit = AuditLog(str(tmp_path / "audit.jsonl"))
    mcp, fs = build_app(ServerConfig(workspace=WorkspaceConfig(root=str(tmp_path))), audit)
    yield InMemorySandbox(SPEC, mcp), tmp_path
    fs.close()


class TestOpenAIPolicy:
    async def test_drives_an_episode_through_tool_calls(self, sandbox):
        server = FakeChatServer([
            _completion(calls=[("write_file", {"path": "out.txt", "content": "hello"})]),
            _completion(content="Wrote it."),
        ])
        try:
            policy = OpenAIPolicy(model="tiny", base_url=server.url, api_key="k")
            traj = await run_episode(sandbox[0], policy)
        finally:
            server.close()
        assert traj.status == "completed" and traj.turns == 2
        assert (sandbox[1] / "out.txt").read_text() == "hello"
        first = server.requests[0]
        assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer k"
        assert {t["function"]["name"] for t in first["body"]["tools"]} >= {"write_file", "shell"}
        assert first["body"]["messages"][1] == {"role": "user", "content": "Write hello to out.txt"}
        second = server.requests[1]["body"]["messages"]
        assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "c0"
        assert second[-2]["tool_calls"][0]["function"]["name"] == "write_file"

    async def test_retries_server_errors_then_succeeds(self):
        server = FakeChatServer([(500, {"error": "busy"}), (429, {"error": "slow down"}), _completion("ok")])
        try:
            turn = await OpenAIPolicy(model="m", base_url=server.url, retries=2).act([], [])
        finally:
            server.close()
        assert turn.content == "ok" and len(server.requests) == 3

    async def test_client_error_is_not_retried(self):
        server = FakeChatServer([(400, {"error": "bad model"})])
        try:
            with pytest.raises(PolicyError, match="HTTP 400"):
                await OpenAIPolicy(model="m", base_url=server.url, retries=3).act([], [])
        finally:
            server.close()
        assert len(server.requests) == 1

    async def test_invalid_json_arguments_become_a_tool_error(self, sandbox):
        server = FakeChatServer([
            (200, {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "read_file", "arguments": "{not json"}}]}}]}),
            _completion("giving up"),
        ])
        try:
            traj = await run_episode(sandbox[0], OpenAIPolicy(model="m", base_url=server.url))
        finally:
            server.close()
        assert traj.steps[0].is_error and traj.status == "completed"

    async def test_model_mistakes_in_arguments_are_tool_errors_not_crashes(self, sandbox):
        """Issue 12.7: non-object, NaN and lone-surrogate arguments from a model."""
        raw = ['["ls"]', "42", '{"path": "n.txt", "content": NaN}', '{"path": "s.txt", "content": "a\\ud800b"}']
        server = FakeChatServer([
            (200, {"choices": [{"message": {"role": "assistant", "content": "x\ud800y", "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "write_file", "arguments": a}}
                for i, a in enumerate(raw)]}}]}),
            _completion("done"),
        ])
        try:
            traj = await run_episode(sandbox[0], OpenAIPolicy(model="m", base_url=server.url))
        finally:
            server.close()
        assert traj.status == "completed" and len(server.requests) == 2  # the surrogate did not break the POST
        assert [s.is_error for s in traj.steps] == [True, True, True, False]
        assert "must be a JSON object" in traj.steps[0].output  # (NaN: the in-memory client sends null)
        assert (sandbox[1] / "s.txt").read_text() == "a\ufffdb" and not (sandbox[1] / "n.txt").exists()


class TestParseArguments:
    @pytest.mark.parametrize("raw, expected", [
        ('{"a": 1}', {"a": 1}), ("", {}), (None, {}), ({"a": 1}, {"a": 1}),
        ('["ls"]', {INVALID_ARGUMENTS_KEY: '["ls"]'}), ("{not json", {INVALID_ARGUMENTS_KEY: "{not json"}),
        ("[" * 100_000, {INVALID_ARGUMENTS_KEY: "[" * 100_000}), (["ls"], {INVALID_ARGUMENTS_KEY: ["ls"]}),
    ])
    def test_always_a_dict(self, raw, expected):
        assert parse_arguments(raw) == expected


class TestScriptedAndLoop:
    async def test_oracle_policy_plays_the_script(self, sandbox):
        traj = await run_episode(sandbox[0], make_policy("oracle", SPEC))
        assert traj.status == "completed" and [s.tool for s in traj.steps] == ["write_file"]

    async def test_max_turns_stops_the_episode(self, sandbox):
        loop = make_policy("oracle", SPEC)
        loop.steps = [("read_file", {"path": "nope"})] * 10
        traj = await run_episode(sandbox[0], loop)
        assert traj.status == "max_turns" and traj.turns == 4 and all(s.is_error for s in traj.steps)

    async def test_episode_timeout_keeps_partial_trajectory(self, sandbox):
        slow = make_policy("oracle", SPEC)
        slow.steps = [("shell", {"command": "sleep 0.2"})] * 50
        traj = await run_episode(sandbox[0], slow, max_turns=50, timeout=0.5)
        assert traj.status == "timeout" and 1 <= len(traj.steps) < 50

    async def test_policy_error_is_recorded(self, sandbox):
        class Broken:
            name = "broken"

            async def act(self, messages, tools):
                raise PolicyError("backend down")

        traj = await run_episode(sandbox[0], Broken())
        assert traj.status == "policy_error" and "backend down" in traj.error

    def test_unknown_agent(self):
        with pytest.raises(ValueError, match="unknown agent 'gpt'"):
            make_policy("gpt", SPEC)
