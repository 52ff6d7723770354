"""The one OpenAI-compatible client: where endpoints and keys come from, and which failure is whose."""

from __future__ import annotations

import pytest

from cowork.errors import ContextLengthExceeded, EndpointUnavailable, PolicyError
from cowork.llm import DEFAULT_BASE_URL, ChatClient, post_json, resolve_api_key, resolve_base_url
from fakes import FakeChatServer

OK = (200, {"choices": [{"message": {"role": "assistant", "content": "hi"}}]})


class TestResolution:
    def test_the_first_given_url_wins_then_the_environment_then_openai(self, monkeypatch):
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        assert resolve_base_url(None, "") == DEFAULT_BASE_URL
        monkeypatch.setenv("OPENAI_BASE_URL", "http://env/v1/")
        assert resolve_base_url(None) == "http://env/v1"
        assert resolve_base_url(None, "http://settings/v1") == "http://settings/v1"
        assert resolve_base_url("http://arg/v1/", "http://settings/v1") == "http://arg/v1"

    def test_an_explicit_empty_key_is_kept_for_local_servers(self, monkeypatch):
        monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
        assert resolve_api_key("") == ""
        assert resolve_api_key(None) == "sk-env"
        assert resolve_api_key(None, "", "sk-user") == "sk-user"


class TestFailures:
    async def test_a_server_that_keeps_failing_is_unavailable(self):
        server = FakeChatServer([(503, {"error": "down"})] * 2)
        try:
            with pytest.raises(EndpointUnavailable, match="HTTP 503"):
                await post_json(f"{server.url}/chat/completions", {}, retries=1)
        finally:
            server.close()

    async def test_a_refused_key_is_unavailable(self):
        server = FakeChatServer([(401, {"error": "bad key"})])
        try:
            with pytest.raises(EndpointUnavailable, match="HTTP 401"):
                await post_json(f"{server.url}/chat/completions", {}, retries=3)
            assert len(server.requests) == 1  # never retried
        finally:
            server.close()

    async def test_a_refused_request_is_the_policys_failure_not_the_endpoints(self):
        server = FakeChatServer([(400, {"error": "context length exceeded"})])
        try:
            with pytest.raises(PolicyError) as info:
                await post_json(f"{server.url}/chat/completions", {}, retries=3)
            assert not isinstance(info.value, EndpointUnavailable)
        finally:
            server.close()

    @pytest.mark.parametrize("status,message", [
        (400, {"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages "
                                    "resulted in 130412 tokens.", "type": "invalid_request_error",
                         "code": "context_length_exceeded"}}),
        (400, {"object": "error", "message": "The decoder prompt (length 4100) is longer than the maximum model "
                                             "length of 4096."}),
        (400, {"error": "The input (5000 tokens) is longer than the model's context length (4096 tokens)."}),
        (413, {"error": "prompt is too long: 210000 tokens > 200000 maximum"}),
    ])
    async def test_a_prompt_past_the_context_is_a_context_overflow(self, status, message):
        server = FakeChatServer([(status, message)])
        try:
            with pytest.raises(ContextLengthExceeded, match=f"HTTP {status}"):
                await post_json(f"{server.url}/chat/completions", {}, retries=3)
            assert len(server.requests) == 1
        finally:
            server.close()

    @pytest.mark.parametrize("message", ["Invalid value for 'tool_choice'", "max_tokens must be at least 1",
                                         "messages[2].content: expected a string"])
    async def test_other_client_errors_are_no_context_overflow(self, message):
        server = FakeChatServer([(400, {"error": message})])
        try:
            with pytest.raises(PolicyError) as info:
                await post_json(f"{server.url}/chat/completions", {}, retries=0)
            assert not isinstance(info.value, ContextLengthExceeded)
        finally:
            server.close()

    async def test_an_openai_policy_episode_past_the_context_is_truncated_and_kept(self):
        from cowork.agents.openai import OpenAIPolicy
        from cowork.episode.run import run_episode
        from cowork.spec.models import TaskSpec
        from fakes import FakeSandbox

        call = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}]}}]}
        server = FakeChatServer([(200, call), (400, {"error": {"code": "context_length_exceeded",
                                                                 "message": "maximum context length is 8192"}})])
        spec = TaskSpec.model_validate({"id": "t", "title": "t", "prompt": "read a.txt",
                                        "checks": [{"type": "tool_called", "tool": "read_file"}],
                                        "oracle": [{"tool": "read_file", "args": {"path": "a.txt"}}],
                                        "violation": [{"tool": "shell", "args": {"command": "rm a.txt"}}]})
        try:
            traj = await run_episode(FakeSandbox(spec, files={"a.txt": "x" * 100}),
                                     OpenAIPolicy("m", base_url=server.url, api_key=""))
        finally:
            server.close()
        assert (traj.status, traj.stop_reason, traj.turns, len(traj.steps)) == ("truncated", "context_length", 1, 1)

    async def test_no_server_at_all_is_unavailable(self):
        with pytest.raises(EndpointUnavailable):
            await post_json("http://127.0.0.1:9/v1/chat/completions", {}, retries=0, timeout=2)


class TestChatClient:
    async def test_sends_the_model_messages_and_tools(self):
        server = FakeChatServer([OK])
        try:
            client = ChatClient("m", base_url=server.url, api_key="k", temperature=0.5, max_tokens=7)
            data = await client.complete([{"role": "user", "content": "x"}], [{"type": "function"}])
            body = server.requests[0]["body"]
            assert data["choices"][0]["message"]["content"] == "hi"
            assert (body["model"], body["temperature"], body["max_tokens"]) == ("m", 0.5, 7)
            assert body["tools"] == [{"type": "function"}] and server.requests[0]["auth"] == "Bearer k"
        finally:
            server.close()
