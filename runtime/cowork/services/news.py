"""News: RSS feeds the user follows and their items, from an offline directory (no network)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, model_validator

from ..toolhost.errors import ToolError
from .base import (
    READ,
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
    parse_time,
    resolve_time,
    snippet,
    tool_adder,
)

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "news"
FeedId = Annotated[str, Field(description="Feed id, as listed by news_list_feeds.")]
ItemId = Annotated[str, Field(description="Item id, as listed by news_list_items or news_search_items.")]
#: Tools whose content is the web's (what a feed says is not the organisation's word).
WEB = hints(read=True, open_world=True)


class Feed(SeedModel):
    """A feed the user is subscribed to."""

    id: str | None = None
    """Stable id; default ``feed-<n>`` by position."""
    title: str = Field(min_length=1)
    """Feed title."""
    url: str = Field(min_length=1)
    """Feed address; unique."""
    description: str = ""
    """What it covers."""


class Item(SeedModel):
    """An item (article) of a subscribed feed."""

    id: str | None = None
    """Stable id; default ``item-<n>`` by position."""
    feed_id: str
    """The feed it came from."""
    title: str = Field(min_length=1)
    """Headline."""
    link: str = ""
    """Address of the article."""
    published: SeedTime = "now-1d"
    """When it was published."""
    author: str = ""
    """Byline."""
    summary: str = ""
    """Short summary, as lists show it."""
    content: str = ""
    """Full text, shown by news_read_item."""
    read: bool = False
    """Whether the user has read it."""


class SourceItem(SeedModel):
    """An item of a feed in the offline directory."""

    title: str = Field(min_length=1)
    """Headline."""
    link: str = ""
    """Address of the article."""
    published: SeedTime = "now-1d"
    """When it was published."""
    author: str = ""
    """Byline."""
    summary: str = ""
    """Short summary."""
    content: str = ""
    """Full text."""


class Source(SeedModel):
    """A feed that can be subscribed to: the offline stand-in for a URL on the web."""

    url: str = Field(min_length=1)
    """Feed address; news_subscribe takes only these (and the seeded feeds' own)."""
    title: str = Field(min_length=1)
    """Feed title."""
    description: str = ""
    """What it covers."""
    items: list[SourceItem] = []
    """Its items, as a subscription finds them."""


class NewsSeed(SeedModel):
    """Initial state of the news reader."""

    feeds: list[Feed] = []
    """Subscribed feeds."""
    items: list[Item] = []
    """Items of the subscribed feeds."""
    available: list[Source] = []
    """The offline directory: feeds that can be subscribed to."""

    @model_validator(mode="after")
    def _refs(self) -> "NewsSeed":
        feeds = check_unique(self.feeds, "feed", "feeds")
        check_unique(self.items, "item", "items")
        for what, urls in (("feeds", [f.url for f in self.feeds]), ("available", [s.url for s in self.available])):
            for n, url in enumerate(urls):
                if url in urls[:n]:
                    raise ValueError(f"{what}[{n}].url: {url!r} is listed twice")
        for n, item in enumerate(self.items):
            check_ref(item.feed_id, feeds, f"items[{n}].feed_id", "feed")
        return self


SEED = NewsSeed


def seed(store: Store, data: NewsSeed) -> None:
    """Write the seed's records and the offline directory."""
    directory: dict[str, Any] = {}
    for rid, f in zip(check_unique(data.feeds, "feed", "feeds"), data.feeds):
        store.insert("feeds", {**f.model_dump(), "id": rid})
    items = list(zip(check_unique(data.items, "item", "items"), data.items))
    for rid, item in items:
        store.insert("items", {**item.model_dump(), "id": rid, "published": resolve_time(item.published, store.now)})
    for feed_id, f in zip(check_unique(data.feeds, "feed", "feeds"), data.feeds):  # a seeded feed can come back
        directory[f.url] = {"title": f.title, "description": f.description, "items": [
            {k: v for k, v in store.require("items", rid, "item").items() if k not in ("id", "feed_id", "read")}
            for rid, item in items if item.feed_id == feed_id]}
    for s in data.available:
        directory[s.url] = {"title": s.title, "description": s.description, "items": [
            {**i.model_dump(), "published": resolve_time(i.published, store.now)} for i in s.items]}
    store.set_meta("directory", directory)


def _summary(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "content"}


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed news tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    def items_of(feed_id: str | None) -> list[dict[str, Any]]:
        if feed_id is not None:
            store.require("feeds", feed_id, "feed")
        return [i for i in store.all("items") if feed_id is None or i["feed_id"] == feed_id]

    @tool("news_list_feeds", READ)
    def news_list_feeds(include_available: Annotated[bool, Field(description="Also list the feeds that can be subscribed to.")] = False) -> dict:
        """List subscribed feeds with their item and unread counts (and, if asked, the feeds on offer)."""
        with store.tx():
            feeds, items = store.all("feeds"), store.all("items")
            directory = store.meta("directory", {})
        out: dict[str, Any] = {"feeds": [{**f, "items": sum(i["feed_id"] == f["id"] for i in items),
                                          "unread": sum(i["feed_id"] == f["id"] and not i["read"] for i in items)}
                                         for f in feeds]}
        if include_available:
            subscribed = {f["url"] for f in feeds}
            out["available"] = [{"url": url, "title": d["title"], "description": d["description"],
                                 "subscribed": url in subscribed} for url, d in directory.items()]
        return out

    @tool("news_list_items", WEB)
    def news_list_items(feed_id: Annotated[str | None, Field(description="Only this feed's items.")] = None,
                        unread_only: bool = False,
                        since: Annotated[str | None, Field(description="Only items published at or after this ISO 8601 time.")] = None,
                        offset: Offset = 0, limit: Limit = 20) -> dict:
        """List items, newest first, with their summaries (news_read_item gives the full text)."""
        lo = iso(parse_time(since, "since")) if since else None
        with store.tx():
            items = [i for i in items_of(feed_id) if not (unread_only and i["read"]) and (lo is None or i["published"] >= lo)]
        return page([_summary(i) for i in newest_first(items, "published")], offset, limit, "items")

    @tool("news_search_items", WEB)
    def news_search_items(query: Annotated[str, Field(min_length=1, description="Words that must all occur in title, summary, content or author.")],
                          feed_id: Annotated[str | None, Field(description="Only this feed's items.")] = None,
                          offset: Offset = 0, limit: Limit = 20) -> dict:
        """Search items, newest first, each with a snippet around the first word."""
        with store.tx():
            hits = [i for i in items_of(feed_id) if matches(query, i["title"], i["summary"], i["content"], i["author"])]
        return page([{**_summary(i), "snippet": snippet(i["content"] or i["summary"], query)}
                     for i in newest_first(hits, "published")], offset, limit, "items")

    @tool("news_read_item", hints(idempotent=True, open_world=True))
    def news_read_item(item_id: ItemId) -> dict:
        """Read an item's full text; it is marked read."""
        with store.tx():
            store.require("items", item_id, "item")
            rec, changed = store.update("items", item_id, {"read": True})
            if changed:
                store.audit("read", [item_id], changed)
            feed = store.get("feeds", rec["feed_id"]) or {}
        return {**rec, "feed": feed.get("title")}

    @tool("news_subscribe", hints(idempotent=True, open_world=True))
    def news_subscribe(url: Annotated[str, Field(min_length=1, description="The feed's address, as news_list_feeds(include_available=true) lists it.")],
                       title: Annotated[str | None, Field(description="Your own title for it; default the feed's.")] = None) -> dict:
        """Subscribe to a feed; its items arrive unread. Being already subscribed changes nothing."""
        url = url.strip()
        with store.tx():
            for f in store.all("feeds"):
                if f["url"] == url:
                    return {**f, "already_subscribed": True, "new_items": 0}
            source = store.meta("directory", {}).get(url)
            if source is None:
                raise ToolError(f"404 Not Found: no feed at {url!r} (this sandbox is offline; "
                                "news_list_feeds with include_available=true lists the feeds it has)")
            fid = store.new_id("feeds", "feed")
            rec = {"id": fid, "title": title or source["title"], "url": url, "description": source["description"]}
            store.insert("feeds", rec)
            ids = []
            for item in source["items"]:
                iid = store.new_id("items", "item")
                store.insert("items", {"id": iid, "feed_id": fid, **item, "read": False})
                ids.append(iid)
            store.audit("subscribe", [fid, *ids], [k for k in rec if k != "id"])
        return {**rec, "already_subscribed": False, "new_items": len(ids)}

    @tool("news_unsubscribe", hints(destructive=True))
    def news_unsubscribe(feed_id: FeedId) -> dict:
        """Unsubscribe from a feed; its items and their read marks are deleted."""
        with store.tx():
            f = store.require("feeds", feed_id, "feed")
            gone = [i["id"] for i in store.all("items") if i["feed_id"] == feed_id]
            for iid in gone:
                store.delete("items", iid)
            store.delete("feeds", feed_id)
            store.audit("unsubscribe", [feed_id, *gone], [])
        return {"id": feed_id, "url": f["url"], "status": "unsubscribed", "items_deleted": len(gone)}
