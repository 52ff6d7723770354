"""Fault injection: deterministic, scoped to service tools, always audited."""

from __future__ import annotations

from typing import Any

import pytest
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError
from pydantic import ValidationError

from cowork.formats import verify_chain
from cowork.server.state.audit import AuditLog, AuditMiddleware
from cowork.services.base import ServiceContext, open_db
from cowork.services.faults import FaultConfig, FaultInjector
from cowork.services.registry import ServicesSeed, dump_state, register_all, reset, seed_all

from .support import SEED_DATA

SEED = ServicesSeed.model_validate(SEED_DATA)
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("mail_list_messages", {}), ("mail_read", {"message_id": "msg-1"}), ("calendar_list_events", {}),
    ("todo_list", {}), ("mail_mark_read", {"message_ids": ["msg-1"]}),
] * 8
#: The service tools these tests call; registering only these keeps each server quick to build.
USED = {tool for tool, _ in CALLS} | {"mail_send", "kb_search", "inventory_create_order", "inventory_list_products",
                                     "config_set_flag", "scheduler_trigger_run", "news_subscribe"}


def build(config: dict, seed: int | None = None, audit_log: AuditLog | None = None):
    records: list[dict[str, Any]] = []
    sink = audit_log.append if audit_log else records.append
    ctx = ServiceContext(db=open_db(), audit=sink, faults=FaultInjector(FaultConfig.model_validate(config), seed))
    seed_all(ctx, SEED)
    mcp = FastMCP("faults")
    if audit_log:
        mcp.add_middleware(AuditMiddleware(audit_log))

    @mcp.tool(name="read_file")
    def read_file(path: str) -> str:
        """A stand-in for a workspace tool."""
        return "content"

    register_all(mcp, ctx, USED | {"read_file"})
    return ctx, mcp, records


async def run(mcp: FastMCP, calls=CALLS) -> list[str]:
    out = []
    async with Client(mcp) as c:
        for tool, args in calls:
            try:
                await c.call_tool(tool, args)
                out.append("ok")
            except ToolError as exc:
                out.append(str(exc).split(":")[0])
    return out


class TestDeterminism:
    async def test_same_seed_same_faults(self):
        config = {"seed": 7, "default": {"rate": 0.4, "kinds": ["429", "500", "latency"], "latency_ms": 1}}
        _, mcp_a, rec_a = build(config)
        _, mcp_b, rec_b = build(config)
        first, second = await run(mcp_a), await run(mcp_b)
        assert first == second and rec_a == rec_b
        assert {"ok", "429 Too Many Requests", "500 Internal Server Error"} == set(first)
        assert any(r.get("fault") == "latency" for r in rec_a)
        _, mcp_c, _ = build(config, seed=8)  # the run's episode seed overrides the config's
        assert await run(mcp_c) != first

    async def test_rate_zero_injects_none(self):
        _, mcp, records = build({"default": {"rate": 0}})
        assert set(await run(mcp)) == {"ok"}
        assert [r for r in records if r["kind"] == "fault"] == []

    def test_injector_reset_restarts_the_sequence(self):
        inj = FaultInjector(FaultConfig.model_validate({"default": {"rate": 0.5}}), seed=3)
        first = [inj.decide("mail_read") for _ in range(30)]
        inj.reset()
        assert [inj.decide("mail_read") for _ in range(30)] == first
        assert any(first) and not all(first)
        assert FaultInjector(FaultConfig(), seed=3).decide("mail_read") is None


class TestFaults:
    async def test_429_carries_retry_after_and_changes_nothing(self):
        ctx, mcp, records = build({"tools": {"mail_send": {"rate": 1, "kinds": ["429"], "retry_after_s": 7}}})
        before = dump_state(ctx.db)
        async with Client(mcp) as c:
            with pytest.raises(ToolError, match=r"429 Too Many Requests: mail_send is rate limited; Retry-After: 7 s"):
                await c.call_tool("mail_send", {"to": ["a@b.com"], "subject": "s", "body": "b"})
            await c.call_tool("mail_read", {"message_id": "msg-1"})
        assert dump_state(ctx.db) == before
        assert records == [{"kind": "fault", "tool": "mail_send", "fault": "429", "call": 0, "retry_after_s": 7}]

    async def test_500_and_latency(self):
        _, mcp, records = build({"services": {"todo": {"rate": 1, "kinds": ["500"]}},
                                 "tools": {"kb_search": {"rate": 1, "kinds": ["latency"], "latency_ms": 5}}})
        assert await run(mcp, [("todo_list", {}), ("kb_search", {"query": "vpn"})]) == ["500 Internal Server Error", "ok"]
        assert records == [{"kind": "fault", "tool": "todo_list", "fault": "500", "call": 0},
                           {"kind": "fault", "tool": "kb_search", "fault": "latency", "call": 0, "latency_ms": 5}]

    async def test_most_specific_rule_wins(self):
        _, mcp, _ = build({"default": {"rate": 1, "kinds": ["500"]}, "services": {"mail": {"rate": 0}},
                           "tools": {"mail_read": {"rate": 1, "kinds": ["500"]}}})
        out = await run(mcp, [("mail_list_messages", {}), ("mail_read", {"message_id": "msg-1"}), ("todo_list", {})])
        assert out == ["ok", "500 Internal Server Error", "500 Internal Server Error"]

    async def test_new_services_are_faulted_per_tool_and_per_service(self):
        ctx, mcp, records = build({"tools": {"inventory_create_order": {"rate": 1, "kinds": ["429"]}},
                                   "services": {"config": {"rate": 1, "kinds": ["500"]}}})
        before = dump_state(ctx.db)
        order = {"customer": "x", "lines": [{"product_id": "WID-100", "quantity": 1}]}
        out = await run(mcp, [("inventory_create_order", order), ("inventory_list_products", {}),
                              ("config_set_flag", {"key": "dark-mode", "enabled": False, "reason": "r"}),
                              ("scheduler_trigger_run", {"job_id": "job-2"})])
        assert out == ["429 Too Many Requests", "ok", "500 Internal Server Error", "ok"]
        after = dump_state(ctx.db)
        assert after["inventory"] == before["inventory"] and after["config"] == before["config"]  # nothing changed
        assert [r["tool"] for r in records if r["kind"] == "fault"] == ["inventory_create_order", "config_set_flag"]
        assert [r["action"] for r in records if r["kind"] == "service_action"] == ["trigger"]

    async def test_workspace_tools_are_never_faulted(self):
        _, mcp, records = build({"default": {"rate": 1, "kinds": ["500"]}})
        assert await run(mcp, [("read_file", {"path": "a"})] * 20) == ["ok"] * 20
        assert records == []


class TestAuditAndReset:
    async def test_faults_are_in_the_hash_chained_log_and_reset_still_works(self, tmp_path):
        log = AuditLog(str(tmp_path / "audit.jsonl"))
        ctx, mcp, _ = build({"default": {"rate": 1, "kinds": ["500"]}}, audit_log=log)
        calls = [("mail_read", {"message_id": "msg-1"}), ("read_file", {"path": "x"})]
        assert await run(mcp, calls) == ["500 Internal Server Error", "ok"]
        reset(ctx, SEED)  # never passes through MCP, so never faulted
        assert await run(mcp, calls) == ["500 Internal Server Error", "ok"]
        log.close()
        report = verify_chain((tmp_path / "audit.jsonl").read_text(), expected_count=log.count)
        assert report.valid, report.error
        kinds = [(r["kind"], r.get("tool"), r.get("outcome") or r.get("fault")) for r in report.records]
        # The call is audited before the fault hits it, its result after.
        assert kinds == [("tool_call", "mail_read", None), ("fault", "mail_read", "500"),
                         ("tool_result", "mail_read", "error"),
                         ("tool_call", "read_file", None), ("tool_result", "read_file", "ok")] * 2
        assert [r["call"] for r in report.records if r["kind"] == "fault"] == [0, 0]  # reset restarted the counts


class TestConfig:
    @pytest.mark.parametrize("config, message", [
        ({"services": {"email": {"rate": 1}}}, "unknown service 'email'"),
        ({"tools": {"shell": {"rate": 1}}}, "'shell' is not a service tool"),
        ({"default": {"rate": 1.5}}, "less than or equal to 1"),
        ({"default": {"rate": 0.5, "kinds": ["404"]}}, "'429', '500' or 'latency'"),
        ({"default": {"rate": 0.5, "kinds": []}}, "at least 1 item"),
    ])
    def test_bad_config(self, config, message):
        with pytest.raises(ValidationError, match=message):
            FaultConfig.model_validate(config)
