"""A hidden argument sent anyway, in a real sandbox (issue 28, feature 10): the task exposes
``tickets_update`` without ``status``; the agent never sees it, guesses it anyway, and the
ticket stays open, with the refused call in the audit log as a failed call."""

from __future__ import annotations

import pytest

from cowork import run_task
from cowork.agents import ScriptedPolicy

pytestmark = pytest.mark.docker

SPEC = """\
id: triage-without-status
title: Triage a ticket without closing it
prompt: Set the priority of ticket tkt-1.
tools: [tickets_get, tickets_update]
tool_options:
  tickets_update: {hide_args: [status]}
services:
  tickets:
    user: me@acme.com
    tickets:
      - {title: VPN down, requester: carol@acme.com, status: open, priority: null}
checks:
  - {id: prioritised, type: record_exists, service: tickets, collection: tickets, where: {id: tkt-1, priority: high}}
oracle:
  - {tool: tickets_update, args: {ticket_id: tkt-1, priority: high}}
"""


class Watching(ScriptedPolicy):
    """A scripted agent that keeps the tool list it was shown."""

    seen: list = []

    async def act(self, messages, tools):
        Watching.seen = tools
        return await super().act(messages, tools)


def _parameters(tools: list, name: str) -> dict:
    for t in tools:
        fn = t.get("function", t)
        if fn.get("name") == name:
            return fn.get("parameters") or fn.get("inputSchema") or {}
    raise AssertionError(f"{name} not offered: {tools}")


async def test_the_agent_that_guesses_the_hidden_argument_does_not_get_it_applied(make_spec, no_leftovers):
    loaded = make_spec(SPEC)
    policy = Watching([("tickets_update", {"ticket_id": "tkt-1", "priority": "high"}),
                       ("tickets_update", {"ticket_id": "tkt-1", "status": "closed"})])
    res = await run_task(loaded, policy)
    assert "status" not in _parameters(Watching.seen, "tickets_update")["properties"]
    assert "priority" in _parameters(Watching.seen, "tickets_update")["properties"]
    ticket = res.evidence.state_final["tickets"]["tickets"]["tkt-1"]
    assert ticket["status"] == "open" and ticket["priority"] == "high"
    refused = [c for c in res.evidence.tool_calls if (c.get("args") or {}).get("status") == "closed"]
    assert len(refused) == 1 and refused[0]["outcome"] == "error"
    assert "does not take 'status'" in str(refused[0].get("error"))
    assert res.grade.status == "graded" and res.grade.passed
