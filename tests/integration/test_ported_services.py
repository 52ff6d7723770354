"""The issue 28 service features in a real sandbox: the image serves the offline web, the
CRM report lands in the workspace as the agent's file, and a calendar attendee named by name
resolves through contacts (the in-process tests hold the detail; this proves the image has them)."""

from __future__ import annotations

import textwrap

import pytest

from cowork import Sandbox
from cowork.spec.loader import load_spec

pytestmark = pytest.mark.docker

SPEC = """\
id: ported-services
title: Ported services
prompt: Research, report, invite.
tools: [web, crm_export_report, calendar_create_event, expenses_list_transactions, read_file]
services:
  web:
    pages:
      - {url: "https://stats.example/sample-size", title: Sample size, text: "3,900 users per arm."}
  crm:
    accounts: [{name: CloudCreate, tier: VIP, revenue: 5200000}]
  contacts:
    people: [{name: Dana Smith, email: dana@acme.com}]
  expenses:
    transactions: [{amount: 10, status: pending}, {amount: 20}]
checks:
  - {id: read, type: tool_called, tool: web_fetch}
oracle:
  - {tool: web_fetch, args: {url: "https://stats.example/sample-size"}}
"""


async def test_the_image_serves_the_ported_features(tmp_path, no_leftovers):
    (tmp_path / "task.yaml").write_text(textwrap.dedent(SPEC))
    sb = await Sandbox.start(load_spec(tmp_path))
    try:
        hit = await sb.call_tool("web_search", {"query": "sample size"})
        assert not hit.is_error and hit.structured["results"][0]["url"] == "https://stats.example/sample-size"
        missing = await sb.call_tool("web_fetch", {"url": "https://example.com/"})
        assert missing.is_error and "404 Not Found" in missing.text
        report = await sb.call_tool("crm_export_report", {"title": "VIP", "account_ids": ["acct-1"], "path": "vip.csv"})
        assert not report.is_error, report.text
        text = await sb.call_tool("read_file", {"path": "vip.csv"})
        assert "CloudCreate" in text.text
        denied = await sb.call_tool("crm_export_report", {"title": "x", "account_ids": ["acct-1"], "path": "/etc/cron.d/x"})
        assert denied.is_error  # written as the agent: root's folders are not its to write
        event = await sb.call_tool("calendar_create_event", {"title": "Sync", "start": "2026-03-04T10:00:00Z",
                                                             "end": "2026-03-04T10:30:00Z", "attendees": ["Dana Smith"]})
        assert event.structured["attendees"][0]["email"] == "dana@acme.com"
        pending = await sb.call_tool("expenses_list_transactions", {"status": "pending"})
        assert [t["amount"] for t in pending.structured["transactions"]] == [10]
        ev = await sb.export_evidence()
        assert ev.state_final["crm"]["reports"]["report-1"]["path"] == "vip.csv"
    finally:
        await sb.stop()
