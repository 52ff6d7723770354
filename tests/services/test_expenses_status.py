"""Transaction status (issue 28, feature 5): completed, pending or cancelled; seeded, listed,
filtered and in the state graders read; left out, a transaction is completed as before."""

from __future__ import annotations

import pytest
from fastmcp import Client
from pydantic import ValidationError

from cowork.services.registry import ServicesSeed, dump_state

from .small import small_env
from .support import call, fails

SEED = {"expenses": {"transactions": [
    {"id": "TXN-701", "date": "2026-02-24", "amount": 3200, "currency": "CNY", "memo": "INV-001"},
    {"id": "TXN-702", "date": "2026-02-25", "amount": 680, "currency": "CNY", "memo": "INV-002", "status": "pending"},
    {"id": "TXN-703", "date": "2026-02-26", "amount": 5000, "currency": "CNY", "memo": "INV-003", "status": "cancelled"},
]}}
TOOLS = {"expenses_list_transactions", "expenses_create_report"}


@pytest.fixture
async def env_client():
    env = small_env(SEED, TOOLS)
    async with Client(env.mcp) as c:
        yield env, c


async def test_status_is_seeded_listed_and_defaults_to_completed(env_client):
    env, client = env_client
    out = await call(client, "expenses_list_transactions")
    assert {t["id"]: t["status"] for t in out["transactions"]} == \
        {"TXN-701": "completed", "TXN-702": "pending", "TXN-703": "cancelled"}
    state = dump_state(env.ctx.db)["expenses"]["transactions"]
    assert state["TXN-702"]["status"] == "pending" and state["TXN-701"]["status"] == "completed"


async def test_status_filters(env_client):
    _, client = env_client
    pending = await call(client, "expenses_list_transactions", status="pending")
    assert [t["id"] for t in pending["transactions"]] == ["TXN-702"]
    done = await call(client, "expenses_list_transactions", status="completed", query="INV")
    assert [t["id"] for t in done["transactions"]] == ["TXN-701"]
    await fails(client, "expenses_list_transactions", "status", status="settled")


def test_an_unknown_status_is_a_seed_error():
    with pytest.raises(ValidationError, match=r"transactions\.0\.status"):
        ServicesSeed.model_validate({"expenses": {"transactions": [{"amount": 1, "status": "done"}]}})


async def test_a_check_on_status_grades_the_state():
    """record_exists on the status field: the seeded pending one is found, a completed one is not."""
    from cowork.evidence import Evidence
    from cowork.grading.records import RECORD_CHECKS
    from cowork.spec.checks import RecordExists
    from fakes import tar_of

    env = small_env(SEED, TOOLS)
    final = dump_state(env.ctx.db)
    ev = Evidence(audit_text="", audit_count=0, workspace_tar=tar_of({}), initial={}, trace={"messages": []},
                  state_seed=final, state_final=final)
    ok = RecordExists.model_validate({"type": "record_exists", "service": "expenses", "collection": "transactions",
                                      "where": {"id": {"equals": "TXN-702"}, "status": {"equals": "pending"}}})
    wrong = RecordExists.model_validate({"type": "record_exists", "service": "expenses", "collection": "transactions",
                                         "where": {"id": {"equals": "TXN-702"}, "status": {"equals": "completed"}}})
    assert RECORD_CHECKS["record_exists"](ok, ev)[0] is True
    assert RECORD_CHECKS["record_exists"](wrong, ev)[0] is False
