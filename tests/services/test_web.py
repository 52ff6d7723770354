"""The offline web (issue 28, feature 13): seeded pages, a deterministic search, a fetch that
answers only seeded addresses, and never a socket."""

from __future__ import annotations

import socket

import pytest
from fastmcp import Client
from pydantic import ValidationError

from cowork.services.names import SERVICE_TOOLS
from cowork.services.registry import SERVICES, ServicesSeed, dump_state

from .small import small_env
from .support import call, fails

PAGES = [
    {"url": "https://stats.example/sample-size", "title": "A/B test sample size calculator",
     "text": "To detect a 2% lift at 80% power you need about 3,900 users per arm.", "published": "2026-01-10"},
    {"url": "https://blog.example/ab-testing", "title": "Why A/B tests fail",
     "text": "Most A/B tests are underpowered: compute the sample size before you start."},
    {"url": "https://news.example/markets", "title": "Markets today", "text": "Stocks rose."},
]


@pytest.fixture
async def client():
    env = small_env({"web": {"pages": PAGES}}, set(SERVICE_TOOLS["web"]))
    async with Client(env.mcp) as c:
        yield c


def test_registered_like_every_service():
    assert SERVICES["web"].NAME == "web" and SERVICE_TOOLS["web"] == ("web_search", "web_fetch")
    assert ServicesSeed.model_validate({"web": {"pages": PAGES}}).web is not None


async def test_search_ranks_by_text_match_title_first(client):
    out = await call(client, "web_search", query="sample size")
    assert [r["url"] for r in out["results"]] == ["https://stats.example/sample-size", "https://blog.example/ab-testing"]
    assert out["total"] == 2 and "sample size" in out["results"][1]["snippet"]
    assert out["results"][0]["published"] == "2026-01-10"


async def test_search_is_deterministic_and_pages(client):
    first = await call(client, "web_search", query="a b tests", limit=1)
    again = await call(client, "web_search", query="a b tests", limit=1)
    assert first == again and first["next_offset"] == 1 and len(first["results"]) == 1
    assert (await call(client, "web_search", query="quantum"))["results"] == []


async def test_fetch_a_seeded_page_or_404(client):
    page = await call(client, "web_fetch", url="https://stats.example/sample-size/")
    assert page["title"] == "A/B test sample size calculator" and "3,900 users" in page["text"]
    assert (await call(client, "web_fetch", url="https://stats.example/sample-size#power"))["url"] == PAGES[0]["url"]
    await fails(client, "web_fetch", "404 Not Found: 'https://evil.example/'", url="https://evil.example/")


async def test_no_socket_is_ever_opened(client, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the web service opened a socket")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    await fails(client, "web_fetch", "404 Not Found", url="https://real-site.example/page")
    assert (await call(client, "web_search", query="stocks"))["total"] == 1


async def test_read_only_and_open_world(client):
    tools = {t.name: t.annotations for t in await client.list_tools()}
    assert set(tools) == {"web_search", "web_fetch"}
    assert all(a.read_only_hint and a.open_world_hint for a in tools.values())


def test_pages_are_state_and_a_repeated_address_is_a_seed_error():
    env = small_env({"web": {"pages": PAGES}}, set())
    assert set(dump_state(env.ctx.db)["web"]["pages"]) == {p["url"] for p in PAGES}
    with pytest.raises(ValidationError, match=r"pages\[1\]\.url: 'https://a.example/x/' is the address of pages\[0\]"):
        ServicesSeed.model_validate({"web": {"pages": [{"url": "https://a.example/x", "title": "a"},
                                                       {"url": "https://a.example/x/", "title": "b"}]}})
    with pytest.raises(ValidationError, match="url"):
        ServicesSeed.model_validate({"web": {"pages": [{"url": "file:///etc/passwd", "title": "a"}]}})
