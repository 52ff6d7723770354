"""Chat tools: channels, private access, threads, DMs, reactions."""

from __future__ import annotations

from cowork.services.registry import dump_state

from .support import actions, call, fails


def chat(env):
    return dump_state(env.ctx.db)["chat"]


class TestReading:
    async def test_channels_hide_private_ones(self, client):
        out = await call(client, "chat_list_channels")
        assert [c["id"] for c in out["channels"]] == ["general", "dm-alex-dana"]
        assert out["channels"][0]["messages"] == 2 and out["channels"][0]["member"] is True

    async def test_users(self, client):
        out = await call(client, "chat_list_users", query="dana")
        assert out["you"] == "alex" and [u["id"] for u in out["users"]] == ["dana"]

    async def test_read_channel_and_thread(self, client):
        out = await call(client, "chat_read", channel_id="general")
        assert [(m["id"], m["reply_count"]) for m in out["messages"]] == [("cm-1", 1)]
        thread = await call(client, "chat_read", channel_id="general", thread_id="cm-1")
        assert thread["thread"]["text"] == "Deploy at 5pm?" and [m["id"] for m in thread["replies"]] == ["cm-2"]
        await fails(client, "chat_read", "Permission denied: 'secret' is private", channel_id="secret")
        await fails(client, "chat_read", "Unknown channel id 'random'", channel_id="random")
        await fails(client, "chat_read", "does not start a thread", channel_id="general", thread_id="cm-2")
        await fails(client, "chat_read", "Unknown message id", channel_id="general", thread_id="cm-9")

    async def test_search_skips_private_channels(self, client):
        assert [m["id"] for m in (await call(client, "chat_search", query="deploy"))["messages"]] == ["cm-1"]
        assert (await call(client, "chat_search", query="salary"))["total"] == 0
        await fails(client, "chat_search", "Permission denied", query="salary", channel_id="secret")
        await fails(client, "chat_search", "query", query="")


class TestWriting:
    async def test_post_and_reply_in_thread(self, client, env):
        top = await call(client, "chat_post", channel_id="general", text="Shipping now")
        reply = await call(client, "chat_post", channel_id="general", text="+1", thread_id="cm-2")
        assert top["author"] == "alex" and top["thread_id"] is None
        assert reply["thread_id"] == "cm-1"  # a reply to a reply joins the thread
        assert actions(env) == [("chat", "post")] * 2
        await fails(client, "chat_post", "Permission denied", channel_id="secret", text="hi")
        await fails(client, "chat_post", "is not in channel 'general'", channel_id="general", text="x", thread_id="cm-4")
        await fails(client, "chat_post", "Unknown channel id", channel_id="nope", text="x")

    async def test_dm_reuses_or_opens_a_conversation(self, client, env):
        out = await call(client, "chat_send_dm", user="dana@acme.com", text="Deck attached")
        assert out["channel_id"] == "dm-alex-dana"
        out = await call(client, "chat_send_dm", user="sam", text="Hi")
        assert out["channel_id"] == "dm-alex-sam" and chat(env)["channels"]["dm-alex-sam"]["members"] == ["alex", "sam"]
        assert env.audit[-1]["ids"] == [out["id"], "dm-alex-sam"]
        await fails(client, "chat_send_dm", "Unknown user 'zoe'", user="zoe", text="x")
        await fails(client, "chat_send_dm", "yourself", user="alex", text="x")

    async def test_react(self, client, env):
        out = await call(client, "chat_react", message_id="cm-4", emoji="eyes")
        assert out["reactions"] == {"eyes": ["alex", "sam"]}
        await fails(client, "chat_react", "Permission denied", message_id="cm-3", emoji="eyes")
        await fails(client, "chat_react", "Unknown message id", message_id="cm-99", emoji="eyes")
        await fails(client, "chat_react", "emoji", message_id="cm-1", emoji="Not An Emoji!")
