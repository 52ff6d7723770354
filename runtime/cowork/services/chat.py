"""Chat: users, channels, direct messages, threads and reactions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from ..toolhost.errors import ToolError
from .base import (
    READ,
    Email,
    Limit,
    Offset,
    SeedModel,
    SeedTime,
    ServiceContext,
    Store,
    check_ref,
    check_unique,
    hints,
    iso,
    matches,
    newest_first,
    page,
    resolve_time,
    tool_adder,
)

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "chat"
ChannelId = Annotated[str, Field(description="Channel id, as listed by chat_list_channels.")]
_HANDLE = r"^[a-z0-9][a-z0-9._-]{0,39}$"


class ChatUser(SeedModel):
    """A person on the chat."""

    id: str = Field(pattern=_HANDLE)
    """Handle, e.g. ``dana``."""
    name: str = ""
    """Display name."""
    email: Email | None = None
    """Their address."""
    title: str = ""
    """Job title."""


class Channel(SeedModel):
    """A channel or a direct-message conversation."""

    id: str = Field(pattern=_HANDLE)
    """Stable id, e.g. ``general``."""
    name: str = ""
    """Display name; default the id."""
    topic: str = ""
    """What it is for."""
    kind: Literal["channel", "dm"] = "channel"
    """``dm`` is a private conversation between its members."""
    private: bool = False
    """Private channels are seen only by their members (a dm always is)."""
    members: list[str] = []
    """Handles of the members."""


class ChatMessage(SeedModel):
    """A message in a channel or a thread."""

    id: str | None = None
    """Stable id; default ``cm-<n>`` by position."""
    channel_id: str
    """Where it was posted."""
    author: str
    """Handle of who wrote it."""
    text: str = Field(min_length=1)
    """Text."""
    ts: SeedTime = "now-1h"
    """When it was posted."""
    thread_id: str | None = None
    """Id of the top-level message this one answers in a thread."""
    reactions: dict[str, list[str]] = {}
    """Emoji name to the handles that reacted with it."""


class ChatSeed(SeedModel):
    """Initial state of the chat service."""

    user: str = Field("me", pattern=_HANDLE)
    """Handle of the user; one of ``users``."""
    users: list[ChatUser] = [ChatUser(id="me", name="Me")]
    """Everyone on the chat."""
    channels: list[Channel] = []
    """Channels and direct-message conversations."""
    messages: list[ChatMessage] = []
    """Messages."""

    @model_validator(mode="after")
    def _refs(self) -> "ChatSeed":
        users = {u.id for u in self.users}
        check_ref(self.user, users, "user", "user")
        channels = {c.id: c for c in self.channels}
        if len(channels) != len(self.channels):
            raise ValueError("channels: an id is listed twice")
        for n, c in enumerate(self.channels):
            for m in c.members:
                check_ref(m, users, f"channels[{n}].members", "user")
        ids = check_unique(self.messages, "cm", "messages")
        by_id = dict(zip(ids, self.messages))
        for n, msg in enumerate(self.messages):
            check_ref(msg.channel_id, channels, f"messages[{n}].channel_id", "channel")
            check_ref(msg.author, users, f"messages[{n}].author", "user")
            check_ref(msg.thread_id, by_id, f"messages[{n}].thread_id", "message")
            if msg.thread_id and by_id[msg.thread_id].channel_id != msg.channel_id:
                raise ValueError(f"messages[{n}].thread_id: {msg.thread_id!r} is in another channel")
        return self


SEED = ChatSeed


def seed(store: Store, data: ChatSeed) -> None:
    """Write the seed's records and settings."""
    store.set_meta("user", data.user)
    store.set_meta("users", [u.model_dump() for u in data.users])
    for c in data.channels:
        store.insert("channels", {**c.model_dump(), "name": c.name or c.id,
                                  "private": c.private or c.kind == "dm"})
    for rid, m in zip(check_unique(data.messages, "cm", "messages"), data.messages):
        store.insert("messages", {**m.model_dump(), "id": rid, "ts": resolve_time(m.ts, store.now),
                                  "reactions": {k: sorted(v) for k, v in sorted(m.reactions.items())}})


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed chat tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    def me() -> str:
        return store.meta("user", "me")

    def users() -> list[dict[str, Any]]:
        return store.meta("users") or [{"id": "me", "name": "Me", "email": None, "title": ""}]

    def can_see(c: dict[str, Any]) -> bool:
        return not c["private"] or me() in c["members"]

    def channel(cid: str) -> dict[str, Any]:
        c = store.require("channels", cid, "channel")
        if not can_see(c):
            raise ToolError(f"Permission denied: {cid!r} is private and you are not a member")
        return c

    def view(m: dict[str, Any], replies: int | None = None) -> dict[str, Any]:
        return m if replies is None else {**m, "reply_count": replies}

    def post(c: dict[str, Any], text: str, thread_id: str | None, action: str = "post",
             opened: list[str] = []) -> dict[str, Any]:
        mid = store.new_id("messages", "cm")
        rec = {"id": mid, "channel_id": c["id"], "author": me(), "text": text, "ts": iso(store.now),
               "thread_id": thread_id, "reactions": {}}
        store.insert("messages", rec)
        store.audit(action, [mid, *opened], [k for k in rec if k != "id"])
        return rec

    @tool("chat_list_channels", READ)
    def chat_list_channels(offset: Offset = 0, limit: Limit = 50) -> dict:
        """List the channels and direct messages you can see."""
        with store.tx():
            seen = [c for c in store.all("channels") if can_see(c)]
            msgs = store.all("messages")
        out = [{**c, "member": me() in c["members"], "messages": sum(m["channel_id"] == c["id"] for m in msgs)}
               for c in sorted(seen, key=lambda c: (c["kind"], c["id"]))]
        return page(out, offset, limit, "channels")

    @tool("chat_list_users", READ)
    def chat_list_users(query: Annotated[str, Field(description="Words to find in handle, name, email or title.")] = "",
                        offset: Offset = 0, limit: Limit = 50) -> dict:
        """List people on the chat."""
        with store.tx():
            found = [u for u in users() if matches(query, u["id"], u["name"], u["email"], u["title"])]
        return {"you": me(), **page(found, offset, limit, "users")}

    @tool("chat_read", READ)
    def chat_read(channel_id: ChannelId,
                  thread_id: Annotated[str | None, Field(description="Read this thread: its first message and replies, oldest first.")] = None,
                  offset: Offset = 0, limit: Limit = 20) -> dict:
        """Read a channel's top-level messages, newest first, or one thread."""
        with store.tx():
            channel(channel_id)
            msgs = [m for m in store.all("messages") if m["channel_id"] == channel_id]
            if thread_id is not None:
                parent = store.require("messages", thread_id, "message")
                if parent["channel_id"] != channel_id or parent["thread_id"] is not None:
                    raise ToolError(f"Message {thread_id!r} does not start a thread in {channel_id!r}")
                replies = sorted((m for m in msgs if m["thread_id"] == thread_id), key=lambda m: m["ts"])
                return {"thread": parent, **page(replies, offset, limit, "replies")}
        counts = {m["thread_id"]: 0 for m in msgs if m["thread_id"]}
        for m in msgs:
            if m["thread_id"]:
                counts[m["thread_id"]] += 1
        top = [view(m, counts.get(m["id"], 0)) for m in newest_first([m for m in msgs if not m["thread_id"]], "ts")]
        return {"channel_id": channel_id, **page(top, offset, limit, "messages")}

    @tool("chat_search", READ)
    def chat_search(query: Annotated[str, Field(min_length=1, description="Words that must all occur in the message or its author.")],
                    channel_id: Annotated[str | None, Field(description="Only this channel.")] = None,
                    offset: Offset = 0, limit: Limit = 20) -> dict:
        """Search messages in the channels you can see, newest first."""
        with store.tx():
            if channel_id is not None:
                channel(channel_id)
            visible = {c["id"] for c in store.all("channels") if can_see(c)}
            hits = [m for m in store.all("messages") if m["channel_id"] in visible
                    and (channel_id is None or m["channel_id"] == channel_id) and matches(query, m["text"], m["author"])]
        return page(newest_first(hits, "ts"), offset, limit, "messages")

    @tool("chat_post", hints())
    def chat_post(channel_id: ChannelId, text: Annotated[str, Field(min_length=1)],
                  thread_id: Annotated[str | None, Field(description="Reply in the thread of this top-level message.")] = None) -> dict:
        """Post a message to a channel, or a reply in a thread."""
        with store.tx():
            c = channel(channel_id)  # anyone may post in a public channel, only members in a private one
            if thread_id is not None:
                parent = store.require("messages", thread_id, "message")
                if parent["channel_id"] != channel_id:
                    raise ToolError(f"Message {thread_id!r} is not in channel {channel_id!r}")
                thread_id = parent["thread_id"] or thread_id
            return post(c, text, thread_id)

    @tool("chat_send_dm", hints())
    def chat_send_dm(user: Annotated[str, Field(description="Handle or email address of the person.")],
                     text: Annotated[str, Field(min_length=1)]) -> dict:
        """Send a direct message, opening the conversation if needed."""
        with store.tx():
            who = next((u for u in users() if user.lower() in (u["id"], u["email"])), None)
            if who is None:
                raise ToolError(f"Unknown user {user!r}; see chat_list_users")
            if who["id"] == me():
                raise ToolError("You cannot send a direct message to yourself")
            pair = sorted({me(), who["id"]})
            c = next((c for c in store.all("channels") if c["kind"] == "dm" and sorted(c["members"]) == pair), None)
            opened = []
            if c is None:
                c = {"id": f"dm-{'-'.join(pair)}", "name": f"{pair[0]}, {pair[1]}", "topic": "", "kind": "dm",
                     "private": True, "members": pair}
                store.insert("channels", c)
                opened.append(c["id"])
            return post(c, text, None, "send_dm", opened)

    @tool("chat_react", hints(idempotent=True))
    def chat_react(message_id: Annotated[str, Field(description="Message id.")],
                   emoji: Annotated[str, Field(pattern=r"^[a-z0-9_+-]{1,32}$", description="Emoji name, e.g. thumbsup.")]) -> dict:
        """Add your reaction to a message."""
        with store.tx():
            m = store.require("messages", message_id, "message")
            channel(m["channel_id"])
            reactions = {k: list(v) for k, v in m["reactions"].items()}
            who = reactions.setdefault(emoji, [])
            if me() not in who:
                who.append(me())
                who.sort()
            rec, changed = store.update("messages", message_id, {"reactions": dict(sorted(reactions.items()))})
            if changed:
                store.audit("react", [message_id], changed)
        return {"id": message_id, "reactions": rec["reactions"]}
