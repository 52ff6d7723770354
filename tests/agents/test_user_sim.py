"""The LLM-simulated user against a real HTTP server on loopback (no Docker)."""

import pytest

from cowork import settings
from cowork.agents.user_sim import SimulatedUser
from cowork.errors import PolicyError
from cowork.spec.conversation import LLMUser
from fakes import FakeChatServer


@pytest.fixture(autouse=True)
def _fresh_settings():
    """Settings are read once; tests that set COWORK_USER_* re-read them, and leave them fresh."""
    yield
    settings.reload()

LLM = LLMUser(persona="Dana, a terse office manager", goal="get the Q3 report mailed to finance",
              facts=["the report is reports/q3.pdf", "finance is finance@acme.test"], temperature=0.3)
FIRST = "Please send the Q3 report to finance."


def _completion(content):
    return 200, {"choices": [{"message": {"role": "assistant", "content": content}}],
                 "usage": {"prompt_tokens": 40, "completion_tokens": 6}}


@pytest.fixture
def serve():
    servers = []

    def start(*responses):
        servers.append(FakeChatServer(responses))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _user(server, llm=LLM, **kw):
    kw.setdefault("retries", 0)
    return SimulatedUser(llm, FIRST, model="user-model", base_url=server.url, api_key="k-123", **kw)


class TestRequest:
    async def test_sends_prompt_first_request_and_agent_reply(self, serve):
        server = serve(_completion("It's reports/q3.pdf."))
        await _user(server, max_tokens=77, seed=5).reply("Which file is the Q3 report?")
        (req,) = server.requests
        body = req["body"]
        assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer k-123"
        assert (body["model"], body["temperature"], body["max_tokens"], body["seed"]) == ("user-model", 0.3, 77, 5)
        system, first, last = body["messages"]
        assert system["role"] == "system"
        for part in (LLM.persona, LLM.goal, *LLM.facts, "###STOP###"):
            assert part in system["content"]
        assert first == {"role": "assistant", "content": FIRST}
        assert last == {"role": "user", "content": "Which file is the Q3 report?"}

    async def test_seed_is_omitted_when_none(self, serve):
        server = serve(_completion("ok"))
        await _user(server).reply("hi")
        assert "seed" not in server.requests[0]["body"]

    async def test_second_reply_sends_the_whole_conversation(self, serve):
        server = serve(_completion("  Finance's address? finance@acme.test  "), _completion("Thanks!"))
        user = _user(server)
        await user.reply("What is finance's address?")
        await user.reply("Sent.")
        roles = [(m["role"], m["content"]) for m in server.requests[1]["body"]["messages"][1:]]
        assert roles == [("assistant", FIRST), ("user", "What is finance's address?"),
                         ("assistant", "  Finance's address? finance@acme.test  "), ("user", "Sent.")]


class TestReply:
    async def test_normal_reply_and_record(self, serve):
        server = serve(_completion("  The file is reports/q3.pdf.\n"))
        reply = await _user(server, max_tokens=64, seed=9).reply("Which file?")
        assert reply.text == "The file is reports/q3.pdf." and reply.stop is False
        rec = reply.record
        assert rec["source"] == "llm" and rec["model"] == "user-model" and rec["base_url"] == server.url
        assert (rec["temperature"], rec["max_tokens"], rec["seed"]) == (0.3, 64, 9)
        assert rec["raw"] == "  The file is reports/q3.pdf.\n"
        assert rec["usage"] == {"prompt_tokens": 40, "completion_tokens": 6}
        assert rec["duration_ms"] >= 0

    async def test_stop_marker_ends_it_and_keeps_text_before(self, serve):
        server = serve(_completion("Great, thanks! ###STOP### extra words"))
        reply = await _user(server).reply("Done: mailed to finance.")
        assert reply.stop is True and reply.text == "Great, thanks!"
        assert reply.record["raw"] == "Great, thanks! ###STOP### extra words"

    async def test_custom_stop_marker(self, serve):
        custom = LLM.model_copy(update={"stop": "<<BYE>>"})
        server = serve(_completion("###STOP### is not mine"), _completion("All good <<BYE>>"))
        user = _user(server, llm=custom)
        assert "<<BYE>>" in user.system_prompt() and "###STOP###" not in user.system_prompt()
        first = await user.reply("Anything else?")
        assert first.stop is False and first.text == "###STOP### is not mine"
        second = await user.reply("Done.")
        assert second.stop is True and second.text == "All good"

    @pytest.mark.parametrize("content", ["", "  \n "])
    async def test_empty_answer_stops(self, serve, content):
        server = serve(_completion(content))
        reply = await _user(server).reply("Anything else?")
        assert reply.stop is True and reply.text == ""


class TestErrors:
    async def test_server_error_is_retried(self, serve):
        server = serve((500, {"error": "busy"}), _completion("Yes please."))
        reply = await _user(server, retries=1).reply("Shall I send it?")
        assert reply.text == "Yes please." and len(server.requests) == 2

    async def test_client_error_raises_naming_the_simulated_user(self, serve):
        server = serve((400, {"error": "bad model"}))
        with pytest.raises(PolicyError, match="simulated user.*HTTP 400"):
            await _user(server, retries=3).reply("Shall I send it?")
        assert len(server.requests) == 1

    @pytest.mark.parametrize("payload", [{"choices": []}, {"usage": {}},
                                         {"choices": [{"message": {"content": None}}]}])
    async def test_answer_without_text_raises(self, serve, payload):
        server = serve((200, payload))
        with pytest.raises(PolicyError, match="simulated user"):
            await _user(server).reply("Shall I send it?")

    async def test_failed_call_leaves_the_conversation_unchanged(self, serve):
        server = serve((200, {"choices": []}), _completion("Yes."))
        user = _user(server)
        with pytest.raises(PolicyError):
            await user.reply("Shall I send it?")
        await user.reply("Shall I send it?")
        assert [m["role"] for m in server.requests[1]["body"]["messages"]] == ["system", "assistant", "user"]


class TestResetAndDefaults:
    async def test_reset_starts_over(self, serve):
        server = serve(_completion("It's q3.pdf."), _completion("Hello again."))
        user = _user(server)
        await user.reply("Which file?")
        user.reset()
        await user.reply("Hi, which file?")
        messages = server.requests[1]["body"]["messages"]
        assert [m["role"] for m in messages] == ["system", "assistant", "user"]
        assert messages[-1]["content"] == "Hi, which file?"

    def test_env_defaults_prefer_the_user_variables(self, monkeypatch):
        monkeypatch.setenv("COWORK_USER_BASE_URL", "http://user-host/v1/")
        monkeypatch.setenv("OPENAI_BASE_URL", "http://openai-host/v1")
        monkeypatch.setenv("COWORK_USER_API_KEY", "user-key")
        monkeypatch.setenv("OPENAI_API_KEY", "openai-key")
        settings.reload()
        user = SimulatedUser(LLM, FIRST, model="m")
        assert (user.base_url, user.api_key) == ("http://user-host/v1", "user-key")

    def test_env_defaults_fall_back_to_openai_then_public(self, monkeypatch):
        monkeypatch.delenv("COWORK_USER_BASE_URL", raising=False)
        monkeypatch.delenv("COWORK_USER_API_KEY", raising=False)
        monkeypatch.setenv("OPENAI_BASE_URL", "http://openai-host/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "openai-key")
        settings.reload()
        assert (SimulatedUser(LLM, FIRST, model="m").base_url,
                SimulatedUser(LLM, FIRST, model="m").api_key) == ("http://openai-host/v1", "openai-key")
        monkeypatch.delenv("OPENAI_BASE_URL")
        monkeypatch.delenv("OPENAI_API_KEY")
        user = SimulatedUser(LLM, FIRST, model="m")
        assert (user.base_url, user.api_key) == ("https://api.openai.com/v1", "")
