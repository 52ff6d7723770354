"""Web: an offline web of seeded pages behind a search engine and a fetcher; never the network.

Tasks that research (Claw-Eval's C-tasks) need ``web_search`` / ``web_fetch`` with answers the
task controls: the same query gives the same ranking in every run, a URL that was not seeded
is a 404, and nothing leaves the sandbox (its network is none anyway; this service never
opens a socket).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated
from urllib.parse import urldefrag

from pydantic import Field, model_validator

from ..toolhost.errors import ToolError
from .base import (
    Limit,
    Offset,
    SeedDay,
    SeedModel,
    ServiceContext,
    Store,
    hints,
    page,
    resolve_day,
    snippet,
    tool_adder,
)
from .kb import rank

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "web"
#: Read-only, and the content is the web's: outside the organisation.
WEB = hints(read=True, open_world=True)


def _key(url: str) -> str:
    """How a URL is looked up: without its #fragment and trailing slash."""
    return urldefrag(url.strip())[0].rstrip("/")


class Page(SeedModel):
    """One page of the offline web."""

    url: str = Field(pattern=r"^https?://[^\s/]+\S*$")
    """Its address, e.g. ``https://example.org/report``; unique."""
    title: str = Field(min_length=1)
    """Title, shown in search results (a hit in it weighs three times one in the text)."""
    text: str = ""
    """The page's text, as web_fetch returns it."""
    published: SeedDay | None = None
    """Publication date, if the page has one."""


class WebSeed(SeedModel):
    """The pages of the offline web."""

    pages: list[Page] = []
    """Every page web_search can find and web_fetch can return."""

    @model_validator(mode="after")
    def _unique(self) -> "WebSeed":
        seen: dict[str, int] = {}
        for n, p in enumerate(self.pages):
            if _key(p.url) in seen:
                raise ValueError(f"pages[{n}].url: {p.url!r} is the address of pages[{seen[_key(p.url)]}] already")
            seen[_key(p.url)] = n
        return self


SEED = WebSeed


def seed(store: Store, data: WebSeed) -> None:
    """Write the seeded pages, keyed by their normalised URL."""
    for p in data.pages:
        store.insert("pages", {"id": _key(p.url), **p.model_dump(),
                               "published": resolve_day(p.published, store.now) if p.published else None})


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed web tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    @tool("web_search", WEB)
    def web_search(query: Annotated[str, Field(min_length=1, description="Search terms.")],
                   offset: Offset = 0, limit: Limit = 10) -> dict:
        """Search the web: pages holding the query's words, best first, with title, address and a snippet."""
        with store.tx():
            pages = store.all("pages")
        hits = [{"url": p["url"], "title": p["title"], "published": p["published"], "snippet": snippet(p["text"], query)}
                for p in rank(pages, query, "title", "text")]
        return page(hits, offset, limit, "results")

    @tool("web_fetch", WEB)
    def web_fetch(url: Annotated[str, Field(min_length=1, description="The page's address, as web_search gives it.")]) -> dict:
        """Fetch a web page's text; an address no page has is 404 Not Found."""
        with store.tx():
            p = store.get("pages", _key(url))
        if p is None:
            raise ToolError(f"404 Not Found: {url!r}")
        return {k: p[k] for k in ("url", "title", "published", "text")}
