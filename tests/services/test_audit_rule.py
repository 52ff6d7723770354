"""Issue 12: no state change without its audit record, bounded records and storage (no Docker)."""

from __future__ import annotations

import json
import os

import pytest
from fastmcp import Client, FastMCP

from cowork.formats import merge_tool_calls, verify_chain
from cowork.server.state.audit import AuditLog, AuditMiddleware
from cowork.services.base import ServiceContext, Store, limit_growth, open_db
from cowork.services.names import ALL_SERVICE_TOOLS
from cowork.services.registry import ServicesSeed, dump_state, register_all, seed_all, state_hash

from .support import SEED_DATA
from .test_all_tools import SAMPLES

SEED = ServicesSeed.model_validate(SEED_DATA)
MAIL = {"to": ["eve@outside.example"], "subject": "numbers", "body": "see attached"}


def build(log: AuditLog, db_growth: int | None = None) -> tuple[ServiceContext, FastMCP]:
    """The server as the sandbox builds it: audit middleware first, then the services."""
    ctx = ServiceContext(db=open_db(), audit=log.append)
    seed_all(ctx, SEED)
    if db_growth is not None:
        limit_growth(ctx.db, db_growth)
    mcp = FastMCP("t")
    mcp.add_middleware(AuditMiddleware(log))
    register_all(mcp, ctx, set(ALL_SERVICE_TOOLS))
    return ctx, mcp


def sent(ctx: ServiceContext) -> list[dict]:
    return [m for m in dump_state(ctx.db)["mail"]["messages"].values() if m["folder"] == "sent"
            and m["to"] == MAIL["to"]]


def records(log: AuditLog) -> list[dict]:
    with open(log.path) as fh:
        rep = verify_chain(fh.read(), expected_count=log.count)
    assert rep.valid, rep.error
    return rep.records


class TestRecordBeforeEffect:
    async def test_call_is_recorded_before_its_effect_and_its_result_after(self, tmp_path):
        log = AuditLog(str(tmp_path / "audit.jsonl"))
        ctx, mcp = build(log)
        async with Client(mcp) as c:
            assert not (await c.call_tool("mail_send", MAIL, raise_on_error=False)).is_error
        recs = records(log)
        assert [r["kind"] for r in recs] == ["tool_call", "service_action", "tool_result"]
        assert recs[0]["args"] == MAIL and recs[2]["call_seq"] == 0 and recs[2]["outcome"] == "ok"
        [call] = merge_tool_calls(recs)
        assert call["seq"] == 2 and call["structured"]["status"] == "sent"

    async def test_a_call_that_cannot_be_audited_is_refused_and_has_no_effect(self, tmp_path):
        log = AuditLog(str(tmp_path / "audit.jsonl"), max_bytes=0, reserve=0)  # no record fits
        ctx, mcp = build(log)
        before = state_hash(dump_state(ctx.db))
        async with Client(mcp) as c:
            r = await c.call_tool("mail_send", MAIL, raise_on_error=False)
        assert r.is_error and "could not be written to the audit log" in r.content[0].text
        assert sent(ctx) == [] and state_hash(dump_state(ctx.db)) == before and log.count == 0

    async def test_a_failed_append_after_a_failed_write_refuses_everything(self, tmp_path):
        log = AuditLog(str(tmp_path / "audit.jsonl"))
        ctx, mcp = build(log)
        os.close(log._fd)  # the disk under the log is gone: writes fail
        log._fd = os.open(os.devnull, os.O_RDONLY)
        async with Client(mcp) as c:
            r1 = await c.call_tool("mail_send", MAIL, raise_on_error=False)
            r2 = await c.call_tool("mail_send", MAIL, raise_on_error=False)
        assert r1.is_error and r2.is_error and sent(ctx) == []

    @pytest.mark.parametrize("tool", sorted(SAMPLES))
    async def test_every_service_change_rolls_back_when_its_record_fails(self, tool, tmp_path):
        log = AuditLog(str(tmp_path / "audit.jsonl"))
        ctx, mcp = build(log)

        def refuse(record):
            if record["kind"] == "service_action":
                raise OSError("disk full")
            return log.append(record)

        ctx.audit = refuse
        before = state_hash(dump_state(ctx.db))
        async with Client(mcp) as c:
            r = await c.call_tool(tool, SAMPLES[tool], raise_on_error=False)
        assert state_hash(dump_state(ctx.db)) == before, f"{tool} changed state without its record"
        if not r.is_error:  # a read-only tool writes no service record
            assert not [x for x in records(log) if x["kind"] == "service_action"]


class TestArgumentsInServer:
    async def test_surrogates_are_replaced_alike_for_the_service_and_the_audit(self, tmp_path):
        log = AuditLog(str(tmp_path / "audit.jsonl"))
        ctx, mcp = build(log)
        async with Client(mcp) as c:
            r = await c.call_tool("mail_send", {**MAIL, "body": "a\ud800b"}, raise_on_error=False)
        assert not r.is_error
        [call] = merge_tool_calls(records(log))
        assert call["args"]["body"] == "a\ufffdb" and call["surrogates_replaced"] and call["outcome"] == "ok"
        assert [m["body"] for m in sent(ctx)] == ["a\ufffdb"]

    async def test_nan_is_refused_and_audited(self, tmp_path):
        log = AuditLog(str(tmp_path / "audit.jsonl"))
        ctx, mcp = build(log)
        mw = next(m for m in mcp.middleware if isinstance(m, AuditMiddleware))

        class Msg:
            name = "expenses_submit"
            arguments = {"amount": float("nan"), "category": "meals", "date": "2026-03-01"}

        class Ctx:
            message = Msg()

        async def never(_):
            raise AssertionError("a refused call must not run")

        with pytest.raises(Exception, match="not valid JSON"):
            await mw.on_call_tool(Ctx(), never)
        [call] = merge_tool_calls(records(log))
        assert call["outcome"] == "error" and call["error_type"] == "ArgumentsRefused"
        assert call["args"]["amount"] == "nan" and any(c.get("non_finite") for c in call["cut"])


class TestBounds:
    async def test_audit_log_stays_within_budget_and_reserve(self, tmp_path):
        log = AuditLog(str(tmp_path / "audit.jsonl"), max_bytes=300_000, reserve=20_000)
        ctx, mcp = build(log)
        big = "B" * 900_000
        outcomes = []
        async with Client(mcp) as c:
            for _ in range(60):
                r = await c.call_tool("kb_create_page", {"title": "t", "body": big}, raise_on_error=False)
                outcomes.append(r.is_error)
        size = (tmp_path / "audit.jsonl").stat().st_size
        assert size <= 320_000 and log.size == size
        calls = merge_tool_calls(records(log))
        compacted = [c for c in calls if c["args"] == {}]
        assert compacted and all(c["cut"][0]["path"] == "/args" and c["cut"][0]["over_budget"] for c in compacted)
        assert outcomes[-1] is True  # once the reserve is spent, calls are refused, not run unaudited
        created = [p for p in dump_state(ctx.db)["kb"]["pages"].values() if p["title"] == "t"]
        actions = [r for r in records(log) if r["kind"] == "service_action"]
        assert created and len(created) == len(actions)  # every page that exists was recorded
        # a call whose result record found no room counts as called, outcome unknown
        ok = sum(1 for c in calls if c["outcome"] == "ok")
        assert ok <= len(created) <= ok + sum(1 for c in calls if c["outcome"] == "unknown")

    async def test_database_growth_is_a_clean_tool_error(self, tmp_path):
        log = AuditLog(str(tmp_path / "audit.jsonl"))
        ctx, mcp = build(log, db_growth=2_000_000)
        errors = []
        async with Client(mcp) as c:
            for _ in range(10):
                r = await c.call_tool("kb_create_page", {"title": "t", "body": "C" * 900_000}, raise_on_error=False)
                errors.append(r.content[0].text if r.is_error else None)
        assert errors[0] is None and errors[-1] is not None and "storage is full" in errors[-1]
        pages = ctx.db.execute("PRAGMA page_count").fetchone()[0] * ctx.db.execute("PRAGMA page_size").fetchone()[0]
        assert pages < 2_000_000 + 1_000_000  # seed + growth
        assert [r for r in records(log) if r["kind"] == "tool_result"][-1]["outcome"] == "error"

    def test_state_dump_survives_surrogates(self):
        ctx = ServiceContext(db=open_db())
        with Store(ctx, "kb").tx() as st:
            st.insert("pages", {"id": "p1", "body": "x\ud800y"})
        dump = dump_state(ctx.db)
        assert dump["kb"]["pages"]["p1"]["body"] == "x\ud800y"
        assert len(state_hash(dump)) == 64 and json.dumps(dump).isascii()
