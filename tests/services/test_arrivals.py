"""Records that arrive during an episode (world events) in the services of v2, whose seeds cross-reference."""

from __future__ import annotations

import pytest

from cowork.server.services_setup import Services
from cowork.services.base import ServiceContext, open_db
from cowork.services.registry import ServicesSeed, dump_state, seed_all

from .support import SEED_DATA


@pytest.fixture
def services(tmp_path) -> Services:
    seed = ServicesSeed.model_validate(SEED_DATA)
    ctx = ServiceContext(db=open_db())
    seed_all(ctx, seed)
    return Services(ctx, seed, str(tmp_path))


@pytest.mark.parametrize("service, data", [
    ("expenses", {"transactions": [{"id": "txn-new", "amount": 9, "merchant": "Taxi"}]}),  # seeded reports name txn-1
    ("scheduler", {"runs": [{"id": "run-new", "job_id": "job-1", "status": "failed", "log": "boom"}]}),
    ("scheduler", {"jobs": [{"id": "job-new", "name": "j", "schedule": "@hourly"}]}),  # seeded runs name job-1
    ("news", {"items": [{"id": "item-new", "feed_id": "feed-1", "title": "Breaking"}]}),
    ("news", {"feeds": [{"id": "feed-new", "title": "F", "url": "https://f.example/rss"}]}),
    ("inventory", {"products": [{"id": "NEW-1", "name": "New"}]}),  # seeded orders name WID-100
    ("config", {"history": [{"id": "chg-new", "target": "flag", "key": "dark-mode", "by": "a@acme.com"}]}),
    ("mail", {"messages": [{"id": "m-new", "from": "a@acme.com", "in_reply_to": "msg-1"}]}),
])
def test_new_records_arrive_beside_the_seeded_ones(services, service, data):
    before = dump_state(services.ctx.db)[service]
    ids = services.add_records(service, data)
    after = dump_state(services.ctx.db)[service]
    (coll, items), = data.items()
    assert ids == [items[0]["id"]] and set(after[coll]) == set(before[coll]) | set(ids)
    assert {c: r for c, r in after.items() if c != coll} == {c: r for c, r in before.items() if c != coll}


def test_an_id_in_use_is_refused(services):
    with pytest.raises(ValueError, match="duplicate id 'txn-1'"):
        services.add_records("expenses", {"transactions": [{"id": "txn-1", "amount": 1}]})
