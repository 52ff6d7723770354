"""The memory service (issue 30): write, search, list and forget, deterministic ranking, every
change audited and in the state dump, seeded memories that the agent's writes cannot pass off
as untouched, and a reset that brings back only the seed."""

from __future__ import annotations

import pytest
from fastmcp import Client
from pydantic import ValidationError

from cowork.formats import diff_state
from cowork.services.names import SERVICE_TOOLS
from cowork.services.registry import SERVICES, ServicesSeed, dump_state, reset

from .small import small_env
from .support import call, fails

SEED = {"memory": {"memories": [
    {"text": "Dana prefers meetings on Thursday afternoons.", "tags": ["People", "dana"], "key": "dana-meetings",
     "created": "now-7d"},
    {"id": "budget", "text": "The Q3 budget is frozen until the board meets.", "tags": ["finance"]},
]}}


def actions(env) -> list[tuple[str, list[str], list[str]]]:
    return [(r["action"], r["ids"], r["fields"]) for r in env.audit if r.get("kind") == "service_action"]


@pytest.fixture
def env():
    return small_env(SEED, set(SERVICE_TOOLS["memory"]))


@pytest.fixture
async def client(env):
    async with Client(env.mcp) as c:
        yield c


def test_registered_like_every_service():
    assert SERVICES["memory"].NAME == "memory"
    assert SERVICE_TOOLS["memory"] == ("memory_write", "memory_search", "memory_list", "memory_forget")


def test_seeded_memories_are_state(env):
    mems = dump_state(env.ctx.db)["memory"]["memories"]
    assert set(mems) == {"mem-1", "budget"}
    assert mems["mem-1"]["tags"] == ["people", "dana"] and mems["mem-1"]["created"] == "2026-02-23T09:00:00Z"
    assert mems["budget"]["created"] == mems["budget"]["updated"] == "2026-03-02T09:00:00Z"


def test_a_repeated_key_or_id_is_a_seed_error():
    with pytest.raises(ValidationError, match=r"memories\[1\]\.key: 'k' is the key of memories\[0\] already"):
        ServicesSeed.model_validate({"memory": {"memories": [{"text": "a", "key": "k"}, {"text": "b", "key": "k "}]}})
    with pytest.raises(ValidationError, match="duplicate id 'x'"):
        ServicesSeed.model_validate({"memory": {"memories": [{"id": "x", "text": "a"}, {"id": "x", "text": "b"}]}})
    with pytest.raises(ValidationError, match="text"):
        ServicesSeed.model_validate({"memory": {"memories": [{"text": ""}]}})


async def test_written_memory_is_found_audited_and_in_the_state(client, env):
    out = await call(client, "memory_write", text="The build job logs to /workspace/build.log", tags=["Jobs", "jobs"])
    assert out["status"] == "created" and out["id"] == "mem-2" and out["tags"] == ["jobs"]
    assert actions(env) == [("create", ["mem-2"], ["created", "key", "tags", "text", "updated"])]
    hits = await call(client, "memory_search", query="build log")
    assert [m["id"] for m in hits["memories"]] == ["mem-2"] and hits["memories"][0]["text"].endswith("build.log")
    state = dump_state(env.ctx.db)["memory"]["memories"]["mem-2"]
    assert state["text"] == "The build job logs to /workspace/build.log" and state["created"] == "2026-03-02T09:00:00Z"


async def test_ranking_is_deterministic_key_and_tags_first_ties_in_written_order(client):
    await call(client, "memory_write", text="Thursday is the release day.")
    await call(client, "memory_write", text="Ask about Thursday.")
    out = await call(client, "memory_search", query="thursday")
    # every hit scores 1 (the word once, in the text): the order they were written in
    assert [m["id"] for m in out["memories"]] == ["mem-1", "mem-2", "mem-3"]
    assert await call(client, "memory_search", query="thursday") == out
    # a tag hit weighs three times a text hit
    assert [m["id"] for m in (await call(client, "memory_search", query="finance thursday"))["memories"]][0] == "budget"
    assert [m["id"] for m in (await call(client, "memory_search", query="dana"))["memories"]] == ["mem-1"]
    assert (await call(client, "memory_search", query="quantum"))["memories"] == []
    page1 = await call(client, "memory_search", query="thursday", limit=2)
    assert page1["total"] == 3 and page1["next_offset"] == 2


async def test_tags_filter_search_and_list(client):
    await call(client, "memory_write", text="Board meets on Thursday.", tags=["finance", "dates"])
    only = await call(client, "memory_search", query="thursday board", tags=["FINANCE"])
    assert [m["id"] for m in only["memories"]] == ["mem-2", "budget"]  # both tagged finance, "board" in both
    both = await call(client, "memory_list", tags=["finance", "dates"])
    assert [m["id"] for m in both["memories"]] == ["mem-2"]
    assert [m["id"] for m in (await call(client, "memory_list"))["memories"]] == ["mem-2", "budget", "mem-1"]


async def test_a_key_replaces_its_memory_and_the_change_to_a_seeded_one_shows(client, env):
    """The agent rewriting a seeded memory through its key is an audited update of that seeded
    record, and the state diff names it: it cannot pass as a new memory beside an intact seed."""
    seed_dump = dump_state(env.ctx.db)
    out = await call(client, "memory_write", text="Dana now prefers Monday mornings.", key=" dana-meetings ")
    assert out["status"] == "updated" and out["id"] == "mem-1"
    assert actions(env) == [("update", ["mem-1"], ["tags", "text", "updated"])]
    diff = diff_state(seed_dump, dump_state(env.ctx.db))["memory"]["memories"]
    assert diff["created"] == [] and set(diff["updated"]["mem-1"]) == {"tags", "text", "updated"}
    again = await call(client, "memory_write", text="Dana now prefers Monday mornings.", key="dana-meetings")
    assert again["status"] == "updated" and len(actions(env)) == 1  # nothing changed, nothing audited


async def test_forgotten_memory_is_gone_from_search_list_and_state_and_its_id_never_returns(client, env):
    assert await call(client, "memory_forget", memory_id="mem-1") == {"id": "mem-1", "status": "forgotten"}
    assert actions(env) == [("delete", ["mem-1"], [])]
    assert (await call(client, "memory_search", query="dana thursday"))["memories"] == []
    assert [m["id"] for m in (await call(client, "memory_list"))["memories"]] == ["budget"]
    assert "mem-1" not in dump_state(env.ctx.db)["memory"]["memories"]
    # a new memory never takes the forgotten seeded one's id (a grader would read it as the seed, changed)
    assert (await call(client, "memory_write", text="Dana prefers Thursdays.", key="dana-meetings"))["id"] == "mem-2"
    await fails(client, "memory_forget", "Unknown memory id 'mem-1'", memory_id="mem-1")


async def test_reset_brings_back_only_the_seed(client, env):
    seeded = dump_state(env.ctx.db)
    await call(client, "memory_write", text="left over from the last episode")
    await call(client, "memory_forget", memory_id="budget")
    reset(env.ctx, env.seed)
    assert dump_state(env.ctx.db) == seeded
    assert (await call(client, "memory_search", query="left over"))["memories"] == []


async def test_limits_and_hints(client):
    await fails(client, "memory_write", "text", text="x" * 8001)
    await fails(client, "memory_write", "tags", text="t", tags=[f"t{n}" for n in range(21)])
    tools = {t.name: t.annotations for t in await client.list_tools()}
    assert tools["memory_search"].read_only_hint and tools["memory_list"].read_only_hint
    assert tools["memory_forget"].destructive_hint and not tools["memory_write"].read_only_hint
    assert not any(a.open_world_hint for a in tools.values())
