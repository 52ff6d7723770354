"""Memory: the agent's own notes to itself, kept across turns, days, checkpoints and restores.

A coworker that works over several sessions needs somewhere to put what it learnt (a
preference, a decision, where a long job writes its log) other than its context window. The
memories are service records like any other: in the SQLite database a checkpoint saves and a
restore puts back, reset by the pool to the seed, every change audited, every memory in the
state dump, so a grader can check what the agent remembered with ``record_exists``. Search
ranks with the knowledge base's function (kb.rank), so the same query always gives the same
order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, model_validator

from .base import (
    READ,
    Limit,
    Offset,
    SeedModel,
    SeedTime,
    ServiceContext,
    Store,
    check_unique,
    hints,
    iso,
    newest_first,
    page,
    resolve_time,
    tool_adder,
)
from .kb import rank

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "memory"
#: Longest memory text: memories are notes, not files (the workspace holds files).
MAX_TEXT = 8000
MemoryId = Annotated[str, Field(description="Memory id, as memory_write, memory_search or memory_list give it.")]
Tags = Annotated[list[Annotated[str, Field(min_length=1, max_length=64)]],
                 Field(max_length=20, description="Labels, e.g. ['customer:globex', 'decision'].")]


def _tags(tags: list[str] | None) -> list[str]:
    """Tags as stored and matched: trimmed, lower-case, each once, in the order given."""
    out: list[str] = []
    for t in tags or []:
        t = t.strip().lower()
        if t and t not in out:
            out.append(t)
    return out


class Memory(SeedModel):
    """One memory the agent starts with (what an earlier session left)."""

    id: str | None = None
    """Stable id; default ``mem-<n>`` by position."""
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    """What is remembered."""
    tags: list[str] = []
    """Labels memory_search and memory_list can filter by (matched lower-case)."""
    key: str | None = Field(default=None, min_length=1, max_length=200)
    """A name for the memory, unique: memory_write with the same key replaces it."""
    created: SeedTime = "now"
    """When it was written."""


class MemorySeed(SeedModel):
    """The memories the agent starts with."""

    memories: list[Memory] = []
    """Seeded memories, found by memory_search like the agent's own."""

    @model_validator(mode="after")
    def _unique(self) -> "MemorySeed":
        check_unique(self.memories, "mem", "memories")
        seen: dict[str, int] = {}
        for n, m in enumerate(self.memories):
            if m.key is None:
                continue
            key = m.key.strip()
            if key in seen:
                raise ValueError(f"memories[{n}].key: {key!r} is the key of memories[{seen[key]}] already")
            seen[key] = n
        return self


SEED = MemorySeed


def seed(store: Store, data: MemorySeed) -> None:
    """Write the seeded memories."""
    for rid, m in zip(check_unique(data.memories, "mem", "memories"), data.memories):
        at = resolve_time(m.created, store.now)
        store.insert("memories", {"id": rid, "text": m.text, "tags": _tags(m.tags),
                                  "key": m.key.strip() if m.key else None, "created": at, "updated": at})


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed memory tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    def tagged(tags: list[str] | None) -> list[dict[str, Any]]:
        want = _tags(tags)
        return [m for m in store.all("memories") if all(t in m["tags"] for t in want)]

    @tool("memory_write", hints())
    def memory_write(text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT, description="What to remember.")],
                     tags: Tags = [],
                     key: Annotated[str | None, Field(min_length=1, max_length=200, description=(
                         "A name for this memory; writing again with the same key replaces it."))] = None) -> dict:
        """Remember something for later turns and sessions; with a key, replace the memory of that key."""
        key = key.strip() if key is not None and key.strip() else None
        with store.tx():
            old = next((m for m in store.all("memories") if key is not None and m["key"] == key), None)
            if old is not None:
                rec, changed = store.update("memories", old["id"], {"text": text, "tags": _tags(tags),
                                                                    "updated": iso(store.now)})
                if changed:  # no state change without its record, the new time included
                    store.audit("update", [rec["id"]], changed)
                return {**rec, "status": "updated"}
            rid = store.new_id("memories", "mem")
            rec = {"id": rid, "text": text, "tags": _tags(tags), "key": key,
                   "created": iso(store.now), "updated": iso(store.now)}
            store.insert("memories", rec)
            store.audit("create", [rid], [k for k in rec if k != "id"])
        return {**rec, "status": "created"}

    @tool("memory_search", READ)
    def memory_search(query: Annotated[str, Field(min_length=1, description="Words to look for.")],
                      tags: Annotated[list[str] | None, Field(description="Only memories with every one of these tags.")] = None,
                      offset: Offset = 0, limit: Limit = 10) -> dict:
        """Search memories: those holding the query's words, best first (a hit in the key or tags weighs
        three times one in the text; equal scores keep the order they were written in)."""
        with store.tx():
            items = [{**m, "_title": " ".join([m["key"] or "", *m["tags"]])} for m in tagged(tags)]
        hits = [{k: v for k, v in m.items() if k != "_title"} for m in rank(items, query, "_title", "text")]
        return page(hits, offset, limit, "memories")

    @tool("memory_list", READ)
    def memory_list(tags: Annotated[list[str] | None, Field(description="Only memories with every one of these tags.")] = None,
                    offset: Offset = 0, limit: Limit = 50) -> dict:
        """List memories, most recently written first."""
        with store.tx():
            items = tagged(tags)
        return page(newest_first(items, "updated"), offset, limit, "memories")

    @tool("memory_forget", hints(destructive=True))
    def memory_forget(memory_id: MemoryId) -> dict:
        """Forget a memory for good: it is gone from search, list and every later session."""
        with store.tx():
            store.require("memories", memory_id, "memory")
            store.delete("memories", memory_id)
            store.audit("delete", [memory_id], [])
        return {"id": memory_id, "status": "forgotten"}
