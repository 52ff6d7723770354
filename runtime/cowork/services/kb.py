"""Knowledge base: internal pages, plus an offline web of seeded pages to search and fetch."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, model_validator

from ..toolhost.errors import ToolError
from .base import (
    READ,
    Email,
    Limit,
    Offset,
    SeedDay,
    SeedModel,
    SeedTime,
    ServiceContext,
    Store,
    check_unique,
    hints,
    iso,
    page,
    resolve_day,
    resolve_time,
    snippet,
    tool_adder,
)

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "kb"
PageId = Annotated[str, Field(description="Page id, as returned by kb_search.")]


class Page(SeedModel):
    """An internal knowledge-base page."""

    id: str | None = None
    """Stable id; default ``page-<n>`` by position."""
    title: str = Field(min_length=1)
    """Title."""
    body: str = ""
    """Text (Markdown)."""
    space: str = "general"
    """Space (section) it belongs to, e.g. ``hr`` or ``engineering``."""
    tags: list[str] = []
    """Labels."""
    author: Email | None = None
    """Who wrote it; default the user."""
    updated: SeedTime = "now-7d"
    """When it was last changed."""


class WebPage(SeedModel):
    """A page of the offline web, reached with kb_web_search and kb_web_fetch."""

    url: str = Field(pattern=r"^https?://[^\s/]+\S*$")
    """Its address, e.g. ``https://example.org/report``."""
    title: str = Field(min_length=1)
    """Title."""
    text: str = ""
    """Text content."""
    published: SeedDay | None = None
    """Publication date."""


class KbSeed(SeedModel):
    """Initial state of the knowledge base and the offline web."""

    user: Email = "me@example.com"
    """The user's address: author of new pages."""
    pages: list[Page] = []
    """Knowledge-base pages."""
    web: list[WebPage] = []
    """Offline web pages."""

    @model_validator(mode="after")
    def _refs(self) -> "KbSeed":
        check_unique(self.pages, "page", "pages")
        urls: set[str] = set()
        for n, w in enumerate(self.web):
            if w.url in urls:
                raise ValueError(f"web[{n}].url: {w.url!r} is listed twice")
            urls.add(w.url)
        return self


SEED = KbSeed


def seed(store: Store, data: KbSeed) -> None:
    """Write the seed's records and settings."""
    store.set_meta("user", data.user)
    for rid, p in zip(check_unique(data.pages, "page", "pages"), data.pages):
        store.insert("pages", {**p.model_dump(), "id": rid, "author": p.author or data.user,
                               "updated": resolve_time(p.updated, store.now)})
    for w in data.web:
        store.insert("web", {"id": w.url, **w.model_dump(),
                             "published": resolve_day(w.published, store.now) if w.published else None})


def _score(query: str, title: str, text: str) -> int:
    """Hits of the query's words, title hits counting three times; 0 means no match."""
    title, text = title.lower(), text.lower()
    words = re.findall(r"\w+", query.lower())
    return sum(3 * title.count(w) + text.count(w) for w in words) if words else 1


def rank(items: list[dict[str, Any]], query: str, title: str, text: str) -> list[dict[str, Any]]:
    """``items`` that match ``query``, best first (see _score); ties keep their seeded order."""
    scored = [(_score(query, i[title], i[text]), n, i) for n, i in enumerate(items)]
    return [i for s, n, i in sorted(scored, key=lambda x: (-x[0], x[1])) if s > 0]


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed knowledge-base tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    @tool("kb_search", READ)
    def kb_search(query: Annotated[str, Field(description="Words to look for; pages with more hits come first.")] = "",
                  space: Annotated[str | None, Field(description="Only this space.")] = None,
                  offset: Offset = 0, limit: Limit = 10) -> dict:
        """Search knowledge-base pages by relevance."""
        with store.tx():
            pages = [p for p in store.all("pages") if space is None or p["space"] == space]
        hits = [{"id": p["id"], "title": p["title"], "space": p["space"], "tags": p["tags"], "updated": p["updated"],
                 "snippet": snippet(p["body"], query)} for p in rank(pages, query, "title", "body")]
        return page(hits, offset, limit, "pages")

    @tool("kb_read_page", READ)
    def kb_read_page(page_id: PageId) -> dict:
        """Read a knowledge-base page."""
        with store.tx():
            return store.require("pages", page_id, "page")

    @tool("kb_create_page", hints())
    def kb_create_page(title: Annotated[str, Field(min_length=1)], body: str = "", space: str = "general",
                       tags: list[str] = []) -> dict:
        """Create a knowledge-base page."""
        with store.tx():
            rid = store.new_id("pages", "page")
            rec = {"id": rid, "title": title, "body": body, "space": space, "tags": list(tags),
                   "author": store.meta("user", "me@example.com"), "updated": iso(store.now)}
            store.insert("pages", rec)
            store.audit("create_page", [rid], [k for k in rec if k != "id"])
        return rec

    @tool("kb_update_page", hints(destructive=True, idempotent=True))
    def kb_update_page(page_id: PageId, title: str | None = None,
                       body: Annotated[str | None, Field(description="The whole new text.")] = None,
                       tags: list[str] | None = None) -> dict:
        """Replace a page's title, text or tags."""
        changes = {k: v for k, v in (("title", title), ("body", body), ("tags", tags)) if v is not None}
        if not changes:
            raise ToolError("Nothing to change: give title, body or tags")
        with store.tx():
            store.require("pages", page_id, "page")
            rec, changed = store.update("pages", page_id, changes)
            if changed:
                rec, _ = store.update("pages", page_id, {"updated": iso(store.now)})
                store.audit("update_page", [page_id], changed)
        return {**rec, "changed": changed}

    @tool("kb_web_search", hints(read=True, open_world=True))
    def kb_web_search(query: Annotated[str, Field(min_length=1, description="Search terms.")],
                      offset: Offset = 0, limit: Limit = 10) -> dict:
        """Search the web; returns titles, addresses and snippets, best first."""
        with store.tx():
            web = store.all("web")
        hits = [{"url": w["url"], "title": w["title"], "published": w["published"], "snippet": snippet(w["text"], query)}
                for w in rank(web, query, "title", "text")]
        return page(hits, offset, limit, "results")

    @tool("kb_web_fetch", hints(read=True, open_world=True))
    def kb_web_fetch(url: Annotated[str, Field(description="Address of the page, as returned by kb_web_search.")]) -> dict:
        """Fetch a web page's text."""
        with store.tx():
            w = store.get("web", url) or store.get("web", url.rstrip("/"))
        if w is None:
            raise ToolError(f"404 Not Found: {url!r}")
        return {k: w[k] for k in ("url", "title", "published", "text")}
