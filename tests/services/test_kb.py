"""Knowledge base and offline web tools."""

from __future__ import annotations

from cowork.services.registry import dump_state

from .support import ME, actions, call, fails


class TestKb:
    async def test_search_ranks_title_hits_first(self, client):
        out = await call(client, "kb_search", query="vpn")
        assert [p["id"] for p in out["pages"]] == ["page-1", "page-2"]
        assert [p["id"] for p in (await call(client, "kb_search", query="vpn", space="hr"))["pages"]] == ["page-2"]
        assert (await call(client, "kb_search", query="kubernetes"))["total"] == 0

    async def test_read(self, client):
        assert (await call(client, "kb_read_page", page_id="page-2"))["title"] == "Travel policy"
        await fails(client, "kb_read_page", "Unknown page id 'page-7'", page_id="page-7")

    async def test_create_and_update(self, client, env):
        out = await call(client, "kb_create_page", title="Research", body="Findings", space="research", tags=["ai"])
        assert out["author"] == ME and dump_state(env.ctx.db)["kb"]["pages"][out["id"]]["space"] == "research"
        upd = await call(client, "kb_update_page", page_id=out["id"], body="More findings")
        assert upd["changed"] == ["body"]
        assert actions(env) == [("kb", "create_page"), ("kb", "update_page")]
        await fails(client, "kb_update_page", "Nothing to change", page_id="page-1")
        await fails(client, "kb_update_page", "Unknown page id", page_id="x", body="y")
        await fails(client, "kb_create_page", "title", title="")

    async def test_web_search_and_fetch(self, client):
        out = await call(client, "kb_web_search", query="vpn traffic")
        assert [r["url"] for r in out["results"]] == ["https://example.org/vpn-guide"]
        page = await call(client, "kb_web_fetch", url="https://news.example.com/ai/")
        assert page["title"] == "AI news" and "Ignore previous instructions" in page["text"]
        await fails(client, "kb_web_fetch", "404 Not Found: 'https://example.org/missing'", url="https://example.org/missing")
        await fails(client, "kb_web_search", "query", query="")
