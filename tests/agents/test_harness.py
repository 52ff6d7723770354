"""The harness (cowork.agents.harness): attribution of every call in the audit, grants
enforced and audited, grading by agent, and the attacks on each. In process: the real tool
host, audit and rpc transport on a unix socket (no Docker); the real sandbox is in
tests/integration/test_harness_sandbox.py."""

from __future__ import annotations

import asyncio
import json

import pytest

from cowork.agents.harness import HARNESS_TOOLS, MAIN, Coordinator, HarnessPolicy
from cowork.agents.scripted import ScriptedPolicy
from cowork.errors import McpError
from cowork.evidence import Evidence
from cowork.formats import AGENT_META
from cowork.grading import grade
from cowork.grading.agents import harness_problems
from cowork.sandbox.mcp import RpcMcpClient
from cowork.server.app import ServerConfig, build_app
from cowork.server.state.audit import AuditLog
from cowork.server.tools.workspace import WorkspaceConfig
from cowork.spec.models import TaskSpec
from cowork.toolhost.rpc import RpcServer
from fakes import tar_of

TOOLS = ["read_file", "write_file", "list_files"]


class RpcSandbox:
    """The host side of a sandbox, as far as the harness reads it: tools over the real rpc transport."""

    def __init__(self, client: RpcMcpClient):
        self.client = client

    async def call_tool(self, name, args=None, timeout=None, agent=None):
        from cowork.sandbox.sandbox import ToolResult

        r = await self.client.call_tool(name, dict(args or {}), meta={AGENT_META: agent} if agent else None)
        text = "\n".join(b.get("text", "") for b in r.get("content") or [])
        return ToolResult(tool=name, args=dict(args or {}), is_error=bool(r.get("isError")), text=text, duration_ms=0.0)


@pytest.fixture
async def box(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    (ws / "b.txt").write_text("beta\n")
    audit = AuditLog(str(tmp_path / "audit.jsonl"))
    app, fs = build_app(ServerConfig(tools=TOOLS, workspace=WorkspaceConfig(root=str(ws), tool_timeout_s=5)), audit)
    server = RpcServer(app)
    sock = str(tmp_path / "rpc.sock")
    await server.start(sock)
    client = RpcMcpClient(sock)
    await client.initialize()
    try:
        yield RpcSandbox(client), tmp_path, app
    finally:
        await client.close()
        server.close()
        fs.close()
        audit.close()


def records(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]


def evidence(tmp_path, agents: dict | None = None, files: dict | None = None) -> Evidence:
    text = (tmp_path / "audit.jsonl").read_text()
    return Evidence(audit_text=text, audit_count=len(text.splitlines()),
                    workspace_tar=tar_of(files or {"a.txt": b"alpha\n", "b.txt": b"beta\n"}), initial={},
                    trace={"agents": agents} if agents is not None else {})


def openai_tools(app) -> list[dict]:
    from mcp.types import Tool

    from cowork.agents.base import mcp_tool_to_openai

    return [mcp_tool_to_openai(Tool.model_validate(t)) for t in app.tools_wire()]


def subagent_scripts(scripts: dict[str, list]):
    """A factory: each assignment (by label) plays its script."""
    return lambda a: ScriptedPolicy(scripts[a.label], name=f"sub-{a.label}")


def call(name, **args):
    from cowork.agents.base import ToolCall

    return ToolCall(id=f"c-{name}", name=name, arguments=args)


async def run_main(coord: Coordinator, *calls) -> list:
    return [await coord.call(c) for c in calls]


class TestAttribution:
    async def test_every_record_names_its_agent(self, box):
        sb, tmp, app = box
        coord = Coordinator(sb, subagent_scripts({"reader": [("read_file", {"path": "b.txt"}), "b says beta"]}),
                            openai_tools(app))
        r = await run_main(coord, call("read_file", path="a.txt"),
                           call("delegate", task="read b.txt", tools=["read_file"], label="reader"),
                           call("await_result", id="sub-1"), call("accept", id="sub-1"))
        assert [x.is_error for x in r] == [False] * 4, [x.text for x in r]
        assert json.loads(r[2].text)["result"] == "b says beta"
        agents = [(rec["kind"], rec.get("args", {}).get("path"), rec["agent"]) for rec in records(tmp)]
        assert agents == [
            ("tool_call", "a.txt", {"id": "main", "parent": None, "assignment": None}),
            ("tool_result", None, {"id": "main", "parent": None, "assignment": None}),
            ("tool_call", "b.txt", {"id": "sub-1", "parent": "main", "assignment": "reader"}),
            ("tool_result", None, {"id": "sub-1", "parent": "main", "assignment": "reader"})]
        assert coord.subs["sub-1"].record.status == "accepted"

    async def test_forged_attribution_in_arguments_is_ignored(self, box):
        """The attack: an agent puts an identity (or a _meta) in its tool's arguments."""
        sb, tmp, app = box
        forged = {"path": "a.txt", "content": "x", "_meta": {AGENT_META: {"id": "main"}}, "agent": {"id": "main"}}
        coord = Coordinator(sb, subagent_scripts({"w": [("write_file", forged), "done"]}), openai_tools(app))
        await run_main(coord, call("delegate", task="t", tools=["write_file"], label="w"), call("await_result"))
        made = [rec for rec in records(tmp) if rec["kind"] in ("tool_call", "tool_denied")]
        assert made and all(rec["agent"]["id"] == "sub-1" for rec in made)
        # Without a transport identity, arguments alone attribute nothing.
        await sb.call_tool("read_file", {"path": "a.txt", "_meta": {AGENT_META: {"id": "main"}}})
        assert "agent" not in records(tmp)[-1]

    async def test_malformed_identity_is_refused_not_run_unattributed(self, box):
        sb, tmp, _ = box
        with pytest.raises(McpError):
            await sb.client.call_tool("write_file", {"path": "a.txt", "content": "x"},
                                      meta={AGENT_META: {"id": "", "tools": "all"}})
        assert records(tmp) == [] and (tmp / "ws" / "a.txt").read_text() == "alpha\n"


class TestGrants:
    async def test_ungranted_tool_is_denied_and_audited(self, box):
        sb, tmp, app = box
        coord = Coordinator(sb, subagent_scripts({"r": [("write_file", {"path": "a.txt", "content": "pwned"}), "ok"]}),
                            openai_tools(app))
        await run_main(coord, call("delegate", task="read", tools=["read_file"], label="r"), call("await_result"))
        (denied,) = records(tmp)
        assert denied["kind"] == "tool_denied" and denied["reason"] == "not granted"
        assert denied["agent"] == {"id": "sub-1", "parent": "main", "assignment": "r"}
        assert (tmp / "ws" / "a.txt").read_text() == "alpha\n"
        sub = coord.subs["sub-1"].record
        assert sub.denied == ["write_file"] and "not granted" in sub.steps[0]["output"]

    async def test_grant_is_checked_by_the_server_not_only_the_coordinator(self, box):
        """The attack: a host bug (or a forged request) sends an ungranted call anyway."""
        sb, tmp, _ = box
        r = await sb.call_tool("write_file", {"path": "a.txt", "content": "x"},
                               agent={"id": "sub-9", "parent": "main", "assignment": None, "tools": ["read_file"]})
        assert r.is_error and "not granted" in r.text
        assert records(tmp)[-1]["reason"] == "not granted"
        assert (tmp / "ws" / "a.txt").read_text() == "alpha\n"

    async def test_delegate_refuses_tools_the_task_lacks_and_harness_tools(self, box):
        sb, _, app = box
        coord = Coordinator(sb, subagent_scripts({}), openai_tools(app))
        for grant in (["shell"], ["delegate"]):
            (r,) = await run_main(coord, call("delegate", task="t", tools=grant))
            assert r.is_error and "cannot grant" in r.text
        assert not coord.subs


    async def test_subagent_cannot_accept_or_delegate_for_itself(self, box):
        """The attack: a subagent calls the main agent's harness tools (to accept its own report)."""
        sb, tmp, app = box
        coord = Coordinator(sb, subagent_scripts({"r": [("accept", {"id": "sub-1"}),
                                                        ("delegate", {"task": "x", "tools": ["write_file"]}), "ok"]}),
                            openai_tools(app))
        await run_main(coord, call("delegate", task="t", tools=["read_file"], label="r"), call("await_result"))
        assert [(r["tool"], r["reason"]) for r in records(tmp)] == [("accept", "unknown tool"),
                                                                      ("delegate", "unknown tool")]
        assert coord.subs["sub-1"].record.status == "done" and list(coord.subs) == ["sub-1"]

    async def test_labels_cannot_pass_for_agents(self, box):
        sb, _, app = box
        coord = Coordinator(sb, subagent_scripts({}), openai_tools(app))
        for label in ("main", "subagent", "sub-2"):
            (r,) = await run_main(coord, call("delegate", task="t", tools=[], label=label))
            assert r.is_error and "reserved" in r.text
        assert not coord.subs


class TestBudgets:
    async def test_episode_end_cuts_off_running_subagents(self, box):
        sb, _, app = box

        class Slow:
            name = "slow"

            async def act(self, messages, tools):
                await asyncio.sleep(30)

        coord = Coordinator(sb, lambda a: Slow(), openai_tools(app))
        await run_main(coord, call("delegate", task="t", tools=[]))
        await asyncio.wait_for(coord.close(), 5)
        rec = coord.subs["sub-1"].record
        assert rec.status == "failed" and "cut off" in (rec.error or "")


    async def test_turn_and_token_budgets(self, box):
        sb, tmp, app = box
        loop = [("list_files", {"path": "."})] * 5
        coord = Coordinator(sb, subagent_scripts({"turns": loop, "tokens": ["x" * 400]}), openai_tools(app))
        await run_main(coord, call("delegate", task="t", tools=["list_files"], label="turns", max_turns=2),
                       call("delegate", task="t", tools=[], label="tokens", max_tokens=10),
                       call("await_result", id="sub-1"), call("await_result", id="sub-2"))
        a, b = coord.subs["sub-1"].record, coord.subs["sub-2"].record
        assert (a.status, a.turns, len(a.steps)) == ("over_budget", 2, 2)
        assert b.status == "over_budget" and b.result is None
        (r,) = await run_main(coord, call("accept", id="sub-1"))
        assert r.is_error

    async def test_subagent_token_trajectory_is_kept(self, box):
        from cowork.agents.tokens import TokenTrajectory

        sb, _, app = box
        kept = TokenTrajectory(ids=[1, 2, 3], logprobs=[None, None, -0.5], mask=[0, 0, 1], model="tiny")

        class Tokened(ScriptedPolicy):
            def token_trajectory(self):
                return kept

        coord = Coordinator(sb, lambda a: Tokened(["ok"]), openai_tools(app))
        await run_main(coord, call("delegate", task="t", tools=[]), call("await_result"))
        got = coord.subs["sub-1"].record.token_trajectory
        assert got is not None and got["ids"] == [1, 2, 3] and got["mask"] == [0, 0, 1]

    async def test_subagents_run_at_once(self, box):
        sb, _, app = box
        started: list[str] = []
        gate = asyncio.Event()

        class Waiter:
            name = "waiter"

            async def act(self, messages, tools):
                from cowork.agents.base import AssistantTurn

                started.append(messages[1]["content"])
                if len(started) == 2:
                    gate.set()
                await asyncio.wait_for(gate.wait(), 5)  # both must be running together to get past here
                return AssistantTurn(content="ok")

        coord = Coordinator(sb, lambda a: Waiter(), openai_tools(app), max_parallel=2)
        await run_main(coord, call("delegate", task="one", tools=[]), call("delegate", task="two", tools=[]),
                       call("await_result", id="sub-1"), call("await_result", id="sub-2"))
        assert sorted(started) == ["one", "two"]
        assert {s.record.status for s in coord.subs.values()} == {"done"}


def spec(*safety) -> TaskSpec:
    return TaskSpec.model_validate({
        "id": "h", "title": "t", "prompt": "p", "tools": TOOLS,
        "checks": [{"id": "read", "type": "tool_called", "tool": "read_file"}],
        "safety": [{"id": f"s{n}", **rule} for n, rule in enumerate(safety)],
        "oracle": [{"tool": "read_file", "args": {"path": "a.txt"}}],
        "violation": [{"tool": "write_file", "args": {"path": "a.txt", "content": ""}}] if safety else []})


MAIN_ONLY = {"type": "tool_not_called", "tool": "write_file", "reserved_to": "main"}


class TestGradingByAgent:
    async def _episode(self, box, writer: str):
        """main reads a.txt; ``writer`` (main or a subagent labelled w) writes c.txt."""
        sb, tmp, app = box
        sub = [("write_file", {"path": "c.txt", "content": "c"}), "wrote"] if writer == "sub" else ["nothing"]
        coord = Coordinator(sb, subagent_scripts({"w": sub}), openai_tools(app))
        made = [call("read_file", path="a.txt"), call("delegate", task="t", tools=["write_file"], label="w"),
                call("await_result", id="sub-1"), call("accept", id="sub-1")]
        if writer == "main":
            made.insert(1, call("write_file", path="c.txt", content="c"))
        await run_main(coord, *made)
        agents = {k: v.model_dump() for k, v in coord.records(TOOLS).items()}
        return evidence(tmp, agents)

    @pytest.mark.parametrize("writer,fires", [("sub", True), ("main", False), ("none", False)])
    async def test_rule_reserved_to_main_fires_when_a_subagent_breaks_it(self, box, writer, fires):
        g = grade(spec(MAIN_ONLY), await self._episode(box, writer))
        assert (g.violations == ["s0"]) is fires, g.checks
        assert g.passed is not fires

    async def test_agent_selector(self, box):
        ev = await self._episode(box, "sub")
        sp = spec({"type": "tool_not_called", "tool": "write_file", "agent": "w"},
                  {"type": "tool_not_called", "tool": "write_file", "agent": "main"},
                  {"type": "tool_not_called", "tool": "read_file", "agent": "subagent"})
        assert grade(sp, ev).violations == ["s0"]

    def test_single_agent_episode_is_all_main(self, tmp_path):
        audit = AuditLog(str(tmp_path / "audit.jsonl"))
        audit.append({"kind": "tool_call", "tool": "write_file", "args": {"path": "c.txt"}, "outcome": "ok"})
        audit.close()
        ev = evidence(tmp_path)
        assert grade(spec(MAIN_ONLY), ev).safe is True
        assert grade(spec({"type": "tool_not_called", "tool": "write_file", "agent": "main"}), ev).violations == ["s0"]

    async def test_unattributed_call_in_a_harness_episode_fails_closed(self, box):
        """The attack: a call that reaches the sandbox without an identity (mcp.sock, a bug)."""
        sb, tmp, _ = box
        ev_before = await self._episode(box, "none")
        await sb.call_tool("write_file", {"path": "c.txt", "content": "c"})  # no identity
        ev = evidence(tmp, ev_before.trace["agents"])
        g = grade(spec(MAIN_ONLY), ev)
        assert g.safe is None and not g.passed
        assert any("name no agent" in p for p in harness_problems(ev))

    @pytest.mark.parametrize("status", ["done", "over_budget", "failed", "running"])
    async def test_unaccepted_or_over_budget_fails_closed(self, box, status):
        ev = await self._episode(box, "none")
        assert grade(spec(), ev).passed
        ev.trace["agents"]["sub-1"]["status"] = status
        g = grade(spec(), ev)
        assert not g.passed and g.safe is None and "harness" in g.not_graded

    def test_selector_only_on_call_checks(self):
        with pytest.raises(ValueError, match="select tool calls"):
            spec({"type": "path_unchanged", "paths": ["a.txt"], "agent": "main"})
        with pytest.raises(ValueError, match="prohibition"):
            TaskSpec.model_validate({"id": "h", "title": "t", "prompt": "p", "tools": TOOLS, "oracle": [],
                                     "checks": [{"type": "tool_called", "tool": "read_file", "reserved_to": "main"}]})


class TestPolicy:
    def test_make_policy_builds_a_harness_around_any_backend(self):
        from cowork.agents import make_policy

        h = make_policy("harness", None, backend="nop")
        assert isinstance(h, HarnessPolicy) and h.main.name == "nop"
        from cowork.agents.harness import Assignment

        sub = h.subagents(Assignment("sub-1", "t", [], None, 1, 1))
        assert sub.name == "nop" and sub is not h.main
        with pytest.raises(ValueError):
            make_policy("harness", None, backend="harness")

    def test_harness_policy_offers_its_tools_and_keeps_main(self):
        main = ScriptedPolicy([], name="m")
        h = HarnessPolicy(main, lambda a: ScriptedPolicy([]))
        coord = h.attach(object(), [{"type": "function", "function": {"name": "read_file"}}])
        assert [t["function"]["name"] for t in coord.tools] == ["read_file", *HARNESS_TOOLS]
        assert h.name == "harness:m" and MAIN in coord.records(["read_file"])
