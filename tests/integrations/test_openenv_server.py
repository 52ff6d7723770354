"""`cowork serve --openenv`: cowork tasks behind OpenEnv's own server, driven by OpenEnv's own clients
over real HTTP and WebSocket on loopback (openenv 0.10.0), with rewards from real sandboxes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn
from openenv.core import GenericEnvClient, MCPToolClient
from openenv.core.env_server import CallToolAction, ListToolsAction

from cowork.errors import CoworkError, SpecError
from cowork.integrations import openenv as coe
from cowork.integrations.stepped import close_runtimes
from cowork.spec.loader import load_spec

ROOT = Path(__file__).resolve().parents[2]
CRM = ROOT / "specs" / "crm-report-answer-numbers"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """The real app on a real uvicorn server on loopback; its sandboxes removed afterwards."""
    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(coe.make_app([CRM], max_sandboxes=2), host="127.0.0.1", port=port,
                                        log_level="warning", ws="websockets-sansio"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the OpenEnv server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(10)
        close_runtimes()


class TestWithoutSandboxes:
    def test_the_app_publishes_openenvs_schemas_and_refuses_what_it_cannot_serve(self):
        with pytest.raises(SpecError, match="no tasks given"):
            coe.make_app([])
        env = coe.CoworkOpenEnv([load_spec(CRM)])
        with pytest.raises(SpecError, match="unknown task 'nope'"):
            env.reset(task="nope")
        with pytest.raises(CoworkError, match=r"step\(\) before reset\(\)"):
            env.step(CallToolAction(tool_name="crm_list_deals", arguments={}))
        assert env.list_tasks("train") == [{"id": "crm-report-answer-numbers", "index": 0,
                                            "title": load_spec(CRM).spec.title}]

    def test_cowork_serve_openenv_refuses_an_unknown_reward(self, capsys):
        from cowork.cli import main

        assert main(["serve", "--openenv", str(CRM), "--reward", "grpo"]) != 0
        assert "--reward score, pass, safety_gated or turn" in "".join(capsys.readouterr())


@pytest.mark.docker
class TestServedTask:
    async def test_two_episodes_oracle_then_nop_through_openenvs_mcp_client(self, server):
        spec = load_spec(CRM).spec
        async with httpx.AsyncClient(base_url=server) as http:
            assert (await http.get("/health")).json()["status"] == "healthy"
            schema = (await http.get("/schema")).json()
            assert schema["action"]["properties"]["type"]["const"] == "call_tool"
            assert "messages" in schema["reset_observation"]["properties"]

        async with MCPToolClient(base_url=server) as env:
            # The agent boundary: /mcp tools/list, before any episode, and the final_answer tool.
            names = [t.name for t in await env.list_tools()]
            assert set(spec.tools) <= set(names) and names[-1] == coe.FINAL_ANSWER

            # Episode 1: the oracle's calls, then its reply, over the /ws control boundary.
            first = await env.reset(task=spec.id)
            assert first.done is False and first.observation.prompt == spec.prompt
            assert [m["role"] for m in first.observation.messages] == ["system", "user"]
            for step in spec.oracle[:-1]:
                r = await env.step(CallToolAction(tool_name=step.tool, arguments=step.args))
                assert r.done is False and r.reward == 0.0
                assert r.observation.tool_name == step.tool and not r.observation.result["is_error"]
                assert "deal" in r.observation.result["data"]
            state = await env.state()
            assert state.step_count == len(spec.oracle) - 1
            last = await env.step(CallToolAction(tool_name=coe.FINAL_ANSWER,
                                                 arguments={"answer": spec.oracle[-1].reply}))
            assert last.done is True and last.reward == 1.0
            assert last.metadata["passed"] is True and last.metadata["status"] == "completed"

            # Episode 2 on the same connection: no work, an empty reply (what `nop` does).
            second = await env.reset(task=spec.id)
            assert second.done is False
            # a tool call through /mcp tools/call lands in the same session's episode; a
            # step-served env answers it with the observation (its result, reward and done)
            out = await env.call_tool("crm_get_deal", deal_id="deal-201")
            assert out["tool_name"] == "crm_get_deal" and json.loads(out["result"]["data"])["id"] == "deal-201"
            assert (await env.state()).step_count == 1
            nop = await env.step(CallToolAction(tool_name=coe.FINAL_ANSWER, arguments={"answer": ""}))
            assert nop.done is True and nop.reward < 1.0 and nop.metadata["passed"] is False

    async def test_the_generic_client_over_the_websocket_alone(self, server):
        async with GenericEnvClient(base_url=server) as env:
            first = await env.reset(index=0)
            assert first.observation["task"] == "crm-report-answer-numbers"
            tools = await env.step(ListToolsAction())
            assert coe.FINAL_ANSWER in [t["name"] for t in tools.observation["tools"]]
            r = await env.step({"type": "call_tool", "tool_name": "no_such_tool", "arguments": {}})
            assert r.done is False and r.observation["result"]["is_error"] is True
            state = await env.state()
            assert state["task"] == "crm-report-answer-numbers" and state["step_count"] == 1

    def test_cowork_serve_openenv_serves_the_task_api(self, server):
        # after the fixture: the task's image is built, so the command is up in seconds
        port = _free_port()
        proc = subprocess.Popen([sys.executable, "-m", "cowork.cli", "serve", "--openenv", str(CRM), "--port",
                                 str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                    break
                except httpx.TransportError:
                    assert proc.poll() is None, proc.stdout.read().decode()
                    assert time.monotonic() < deadline, "cowork serve --openenv did not answer"
                    time.sleep(0.2)
            assert health.json()["status"] == "healthy"
            tasks = httpx.post(f"http://127.0.0.1:{port}/cowork/tasks", json={"split": "train"}).json()
            assert [t["id"] for t in tasks["tasks"]] == ["crm-report-answer-numbers"]
        finally:
            proc.terminate()
            proc.wait(20)
