"""Properties every service tool must have: listed in the catalog, annotated truthfully, audited."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from fastmcp import Client, FastMCP

from cowork.services import registry
from cowork.services.base import ServiceContext, open_db
from cowork.services.names import ALL_SERVICE_TOOLS, SERVICE_TOOLS, TOOL_SERVICE
from cowork.services.registry import dump_state, register_all, state_hash

from .support import ME, call

#: One successful call of every tool against the test seed.
SAMPLES: dict[str, dict] = {
    "mail_list_folders": {}, "mail_list_messages": {}, "mail_search": {"query": "report"},
    "mail_read": {"message_id": "msg-1"},
    "mail_send": {"to": ["dana@acme.com"], "subject": "Hi", "body": "Hello"},
    "mail_reply": {"message_id": "msg-1", "body": "Will do"},
    "mail_forward": {"message_id": "msg-1", "to": ["bob@acme.com"]},
    "mail_draft": {"to": ["dana@acme.com"], "subject": "Draft", "body": "..."},
    "mail_move": {"message_id": "msg-1", "folder": "archive"},
    "mail_delete": {"message_id": "msg-1"}, "mail_mark_read": {"message_ids": ["msg-1"]},
    "calendar_list_calendars": {}, "calendar_list_events": {}, "calendar_get_event": {"event_id": "evt-1"},
    "calendar_free_busy": {"emails": [ME], "start": "2026-03-03T00:00:00Z", "end": "2026-03-04T00:00:00Z"},
    "calendar_create_event": {"title": "Sync", "start": "2026-03-04T10:00:00", "end": "2026-03-04T10:30:00"},
    "calendar_update_event": {"event_id": "evt-1", "title": "Daily standup"},
    "calendar_cancel_event": {"event_id": "evt-1"},
    "calendar_respond": {"event_id": "evt-2", "response": "accepted"},
    "contacts_search": {"query": "smith"}, "contacts_get_person": {"person_id": "person-1"},
    "contacts_lookup_email": {"email": "dana@acme.com"}, "contacts_list_orgs": {},
    "contacts_get_org": {"org_id": "org-1"}, "contacts_create_person": {"name": "Eve Adams", "email": "eve@acme.com"},
    "contacts_update_person": {"person_id": "person-4", "email": "bob.lee@acme.com"},
    "documents_list": {}, "documents_search": {"query": "goals"}, "documents_read": {"document_id": "doc-1"},
    "documents_versions": {"document_id": "doc-1"}, "documents_create": {"title": "Memo", "content": "Hi"},
    "documents_edit": {"document_id": "doc-1", "append": " And profit."},
    "documents_share": {"document_id": "doc-1", "email": "sam@acme.com", "role": "viewer"},
    "documents_delete": {"document_id": "doc-1"},
    "tickets_search": {}, "tickets_get": {"ticket_id": "tkt-1"}, "tickets_create": {"title": "Mouse broken"},
    "tickets_update": {"ticket_id": "tkt-1", "assignee": "sam@acme.com"},
    "tickets_comment": {"ticket_id": "tkt-1", "body": "Looking into it"},
    "tickets_close": {"ticket_id": "tkt-1", "resolution": "Router restarted"},
    "crm_search": {"query": "initech"}, "crm_get_account": {"account_id": "acct-1"},
    "crm_get_deal": {"deal_id": "deal-1"}, "crm_list_deals": {}, "crm_create_account": {"name": "Umbrella"},
    "crm_create_contact": {"account_id": "acct-1", "name": "Milton"},
    "crm_create_deal": {"account_id": "acct-2", "name": "Globex expansion", "amount": 20000},
    "crm_update_deal": {"deal_id": "deal-1", "stage": "negotiation"},
    "crm_update_contact": {"contact_id": "con-1", "title": "Engineer"},
    "crm_log_activity": {"kind": "note", "subject": "Sent quote", "deal_id": "deal-1"},
    "chat_list_channels": {}, "chat_list_users": {}, "chat_read": {"channel_id": "general"},
    "chat_search": {"query": "deploy"}, "chat_post": {"channel_id": "general", "text": "Sounds good"},
    "chat_send_dm": {"user": "sam", "text": "Hi Sam"}, "chat_react": {"message_id": "cm-1", "emoji": "thumbsup"},
    "kb_search": {"query": "vpn"}, "kb_read_page": {"page_id": "page-1"},
    "kb_create_page": {"title": "Onboarding", "body": "Welcome"},
    "kb_update_page": {"page_id": "page-1", "body": "Use the new client."},
    "kb_web_search": {"query": "vpn"}, "kb_web_fetch": {"url": "https://example.org/vpn-guide"},
    "expenses_list": {}, "expenses_get": {"expense_id": "exp-1"}, "expenses_get_policy": {},
    "expenses_submit": {"amount": 42.5, "category": "meals", "date": "2026-03-01", "receipt": True},
    "expenses_approve": {"expense_id": "exp-1"}, "expenses_reject": {"expense_id": "exp-2", "reason": "No receipt"},
    "todo_list": {}, "todo_create": {"title": "Call Dana"}, "todo_update": {"task_id": "task-1", "priority": "low"},
    "todo_complete": {"task_id": "task-1"}, "todo_delete": {"task_id": "task-1"},
    "mail_label": {"message_ids": ["msg-1", "msg-2"], "add": ["todo"], "remove": ["finance"]},
    "mail_save_attachment": {"message_id": "msg-1", "name": "report.pdf", "path": "saved/report.pdf",
                             "overwrite": True},
    "crm_update_account": {"account_id": "acct-2", "status": "active", "tier": "gold"},
    "crm_export": {"tier": "gold"},
    "expenses_list_transactions": {}, "expenses_list_reports": {}, "expenses_get_report": {"report_id": "rpt-1"},
    "expenses_create_report": {"title": "Hotel", "transaction_ids": ["txn-2"]},
    "expenses_submit_report": {"report_id": "rpt-2"},
    "inventory_list_warehouses": {}, "inventory_list_products": {}, "inventory_get_product": {"product_id": "WID-100"},
    "inventory_adjust_stock": {"product_id": "GAD-200", "delta": 10, "reason": "received PO-7"},
    "inventory_list_orders": {}, "inventory_get_order": {"order_id": "ord-1"},
    "inventory_create_order": {"customer": "Hooli", "lines": [{"product_id": "WID-100", "quantity": 3}]},
    "inventory_update_order_status": {"order_id": "ord-1", "status": "shipped", "tracking": "1Z1"},
    "inventory_cancel_order": {"order_id": "ord-1", "reason": "customer asked"},
    "config_list_flags": {}, "config_get_flag": {"key": "new-checkout"},
    "config_set_flag": {"key": "new-checkout", "enabled": True, "rollout": 10, "reason": "canary"},
    "config_list_settings": {}, "config_get_setting": {"key": "session.timeout_minutes"},
    "config_set_setting": {"key": "session.timeout_minutes", "value": 45, "reason": "users asked"},
    "config_history": {},
    "scheduler_list_jobs": {}, "scheduler_get_job": {"job_id": "job-1"}, "scheduler_list_runs": {},
    "scheduler_get_run": {"run_id": "run-2"}, "scheduler_trigger_run": {"job_id": "job-2"},
    "scheduler_pause_job": {"job_id": "job-1", "reason": "disk swap"}, "scheduler_resume_job": {"job_id": "job-3"},
    "scheduler_update_schedule": {"job_id": "job-1", "schedule": "30 3 * * *"},
    "news_list_feeds": {"include_available": True}, "news_list_items": {}, "news_search_items": {"query": "chip"},
    "news_read_item": {"item_id": "item-1"}, "news_subscribe": {"url": "https://security.example/rss"},
    "news_unsubscribe": {"feed_id": "feed-2"},
    "crm_export_report": {"title": "Gold accounts", "account_ids": ["acct-1", "acct-3"], "summary": "Two."},
    "web_search": {"query": "sample size"}, "web_fetch": {"url": "https://stats.example/sample-size"},
    "memory_write": {"text": "The report is due Friday.", "tags": ["deadline"]}, "memory_search": {"query": "dana"},
    "memory_list": {}, "memory_forget": {"memory_id": "mem-1"},
}

#: Tools that change the workspace, not their service's state (no service_action record).
WORKSPACE_EFFECT = {"mail_save_attachment"}

#: Tools whose effect or content crosses the organisation's boundary.
OPEN_WORLD = {"mail_send", "mail_reply", "mail_forward", "documents_share", "kb_web_search", "kb_web_fetch",
              "news_list_items", "news_search_items", "news_read_item", "news_subscribe", "web_search", "web_fetch"}


_ANNOTATIONS: dict = {}


async def annotations_of(client) -> dict:
    if not _ANNOTATIONS:
        _ANNOTATIONS.update({t.name: t.annotations for t in await client.list_tools()})
    return _ANNOTATIONS


class TestCatalog:
    def test_every_tool_has_a_sample(self):
        assert set(SAMPLES) == set(ALL_SERVICE_TOOLS)

    def test_names_are_namespaced(self):
        for service, tools in SERVICE_TOOLS.items():
            assert all(t.startswith(service + "_") for t in tools), service
            assert len(set(tools)) == len(tools)
        assert set(registry.SERVICES) == set(SERVICE_TOOLS)
        assert len(SERVICE_TOOLS) >= 14

    def test_services_import_nothing_host_side(self):
        # the office readers are in the image too (engine.images.OFFICE_PACKAGES), for office_text.py
        allowed = {"fastmcp", "pydantic", "cowork.formats", "openpyxl", "docx", "pypdf"}
        for path in Path(registry.__file__).parent.glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    ok = top in sys.stdlib_module_names or top in allowed or name in allowed
                    assert ok and (path.name != "catalog.py" or top in sys.stdlib_module_names), f"{path.name}: {name}"

    async def test_each_service_registers_exactly_its_catalog(self):
        for service, tools in SERVICE_TOOLS.items():
            mcp = FastMCP("one")
            register_all(mcp, ServiceContext(db=open_db()), set(tools) | {"shell"})
            async with Client(mcp) as c:
                assert {t.name for t in await c.list_tools()} == set(tools), service

    async def test_allow_list_exposes_only_allowed_tools(self):
        mcp = FastMCP("some")
        register_all(mcp, ServiceContext(db=open_db()), {"mail_read", "calendar_list_events", "read_file"})
        async with Client(mcp) as c:
            assert {t.name for t in await c.list_tools()} == {"mail_read", "calendar_list_events"}


class TestAnnotations:
    async def test_all_hints_present_and_consistent(self, client):
        tools = {t.name: t for t in await client.list_tools()}
        assert set(tools) == set(ALL_SERVICE_TOOLS)
        for name, t in tools.items():
            a = t.annotations
            hints = (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint)
            assert all(isinstance(h, bool) for h in hints), name
            if a.read_only_hint:
                assert not a.destructive_hint and a.idempotent_hint, name
            assert a.open_world_hint == (name in OPEN_WORLD), name
            assert t.description, name

    async def test_deleting_tools_are_destructive(self, client):
        tools = {t.name: t.annotations for t in await client.list_tools()}
        for name in ("mail_delete", "documents_delete", "todo_delete", "calendar_cancel_event", "documents_edit",
                     "inventory_cancel_order", "news_unsubscribe", "memory_forget"):
            assert tools[name].destructive_hint, name

    async def test_pagination_arguments_on_lists(self, client):
        for t in await client.list_tools():
            if t.name.endswith(("_search", "_list", "_list_messages", "_list_events", "_list_deals")):
                assert {"offset", "limit"} <= set(t.input_schema["properties"]), t.name


class TestBehaviour:
    @pytest.mark.parametrize("tool", sorted(SAMPLES))
    async def test_sample_call_and_audit(self, tool, client, env):
        before = dump_state(env.ctx.db)
        result = await call(client, tool, **SAMPLES[tool])
        assert isinstance(result, dict)
        after = dump_state(env.ctx.db)
        annotations = (await annotations_of(client))[tool]
        records = [r for r in env.audit if r["kind"] == "service_action"]
        if annotations.read_only_hint or tool in WORKSPACE_EFFECT:
            assert after == before and records == [], tool
            return
        assert after != before, tool
        assert len(records) == 1, records
        rec = records[0]
        assert {"kind", "service", "action", "ids", "fields"} <= set(rec) <= {"kind", "service", "action", "ids", "fields", "values"}
        # ``values`` are stored fields the action also names (an event's start kept in UTC).
        assert set(rec.get("values") or {}) <= set(rec["fields"]), rec
        assert rec["service"] == TOOL_SERVICE[tool] and rec["ids"] and all(isinstance(i, str) for i in rec["ids"])
        if annotations.idempotent_hint:
            await call(client, tool, **SAMPLES[tool])
            assert state_hash(dump_state(env.ctx.db)) == state_hash(after), f"{tool} is not idempotent"

    async def test_pages_carry_next_offset(self, client):
        first = await call(client, "mail_search", limit=2)
        assert len(first["messages"]) == 2 and first["next_offset"] == 2 and first["total"] == 5
        last = await call(client, "mail_search", offset=4, limit=2)
        assert len(last["messages"]) == 1 and last["next_offset"] is None
