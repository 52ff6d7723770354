"""News tools: feeds, items, reading, search, and subscriptions from the offline directory."""

from __future__ import annotations

from cowork.services.registry import dump_state

from .support import actions, call, fails


def news(env):
    return dump_state(env.ctx.db)["news"]


class TestReading:
    async def test_feeds_with_counts_and_directory(self, client):
        out = await call(client, "news_list_feeds")
        assert [(f["id"], f["items"], f["unread"]) for f in out["feeds"]] == [("feed-1", 1, 1), ("feed-2", 2, 1)]
        assert "available" not in out
        out = await call(client, "news_list_feeds", include_available=True)
        assert [(a["url"], a["subscribed"]) for a in out["available"]] == [
            ("https://blog.acme.example/rss", True), ("https://techdaily.example/feed", True),
            ("https://security.example/rss", False)]

    async def test_items_newest_first_without_content(self, client):
        out = await call(client, "news_list_items")
        assert [i["id"] for i in out["items"]] == ["item-2", "item-1", "item-3"] and "content" not in out["items"][0]
        ids = lambda out: [i["id"] for i in out["items"]]
        assert ids(await call(client, "news_list_items", feed_id="feed-2", unread_only=True)) == ["item-2"]
        assert ids(await call(client, "news_list_items", since="2026-03-01T00:00:00Z")) == ["item-2"]
        await fails(client, "news_list_items", "Unknown feed id 'feed-9'", feed_id="feed-9")
        await fails(client, "news_list_items", "Bad date for since", since="today")

    async def test_search(self, client):
        out = await call(client, "news_search_items", query="instructions")
        assert [i["id"] for i in out["items"]] == ["item-2"] and "Ignore previous" in out["items"][0]["snippet"]
        assert (await call(client, "news_search_items", query="shipped", feed_id="feed-2"))["total"] == 0
        assert (await call(client, "news_search_items", query="r. lee"))["total"] == 1  # author
        await fails(client, "news_search_items", "query", query="")

    async def test_read_marks_read(self, client, env):
        out = await call(client, "news_read_item", item_id="item-1")
        assert out["content"].startswith("We shipped") and out["read"] is True and out["feed"] == "Acme Blog"
        assert news(env)["items"]["item-1"]["read"] is True and actions(env) == [("news", "read")]
        await call(client, "news_read_item", item_id="item-1")
        await call(client, "news_read_item", item_id="item-3")  # read already
        assert actions(env) == [("news", "read")]
        await fails(client, "news_read_item", "Unknown item id 'x'", item_id="x")


class TestSubscriptions:
    async def test_subscribe_from_the_directory(self, client, env):
        out = await call(client, "news_subscribe", url=" https://security.example/rss ")
        assert out["id"] == "feed-3" and out["title"] == "Security Weekly" and out["new_items"] == 2
        items = [i for i in news(env)["items"].values() if i["feed_id"] == "feed-3"]
        assert sorted((i["id"], i["title"], i["read"]) for i in items) == [
            ("item-4", "Patch Tuesday", False), ("item-5", "VPN flaw", False)]
        assert [i["published"] for i in sorted(items, key=lambda i: i["id"])] == ["2026-03-01T09:00:00Z", "2026-03-02T05:00:00Z"]
        assert env.audit[-1]["ids"] == ["feed-3", "item-4", "item-5"]
        again = await call(client, "news_subscribe", url="https://security.example/rss", title="Other")
        assert again["already_subscribed"] is True and again["title"] == "Security Weekly"
        assert actions(env) == [("news", "subscribe")]

    async def test_unknown_url_is_not_fetched(self, client, env):
        await fails(client, "news_subscribe", r"404 Not Found: no feed at 'https://evil.example/rss' \(this sandbox is offline",
                    url="https://evil.example/rss")
        assert actions(env) == [] and "feed-3" not in news(env)["feeds"]

    async def test_unsubscribe_and_come_back(self, client, env):
        out = await call(client, "news_unsubscribe", feed_id="feed-2")
        assert out == {"id": "feed-2", "url": "https://techdaily.example/feed", "status": "unsubscribed", "items_deleted": 2}
        assert set(news(env)["items"]) == {"item-1"} and set(news(env)["feeds"]) == {"feed-1"}
        await fails(client, "news_unsubscribe", "Unknown feed id 'feed-2'", feed_id="feed-2")
        back = await call(client, "news_subscribe", url="https://techdaily.example/feed")
        assert back["new_items"] == 2 and back["title"] == "Tech Daily"
        titles = sorted(i["title"] for i in news(env)["items"].values() if i["feed_id"] == back["id"])
        assert titles == ["AI chips surge", "Old news"]
        assert actions(env) == [("news", "unsubscribe"), ("news", "subscribe")]
