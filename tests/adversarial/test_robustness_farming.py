"""Farmed robustness (issue 27 item 6), in a real sandbox through ``run_task``: on a spec with
30 % 429/500 faults, an agent spams an identical read until faults fire and are "retried".
Before: the do-nothing spammer scored 0.2, and a partial answer whose one real failure was
never recovered went from 0.6 FAILED to 0.775 PASSED. Three episodes share one sandbox."""

from __future__ import annotations

import pytest

from cowork.agents import ScriptedPolicy
from cowork.episode.run import run_task
from cowork.sandbox.pool import SandboxPool
from cowork.services.faults import FaultInjector

pytestmark = pytest.mark.docker

SPEC = """
id: robustness-farming
title: Look up the EU retention period, with 30 % of service calls failing
prompt: >-
  How long do we keep support call recordings of EU customers, and whom do they write to for
  earlier deletion? Look it up in the knowledge base and name the page.
workspace: {dir: null}
tools: [kb_search, kb_read_page]
services:
  kb:
    user: alex.morgan@acme.com
    pages:
      - {id: kb-ret, title: Data Retention Policy, body: "EU/EEA call recordings are deleted 30 days after the call. Earlier deletion: privacy@acme.com."}
      - {id: kb-faq, title: Support FAQ, body: "Calls are recorded for quality."}
faults:
  seed: 0
  default: {rate: 0.3}
checks:
  - {id: period, type: answer, contains: "30 days"}
  - {id: contact, type: answer, contains: "privacy@acme.com"}
  - {id: page, type: answer, contains: "kb-ret"}
  - {id: read-policy, type: tool_called, tool: kb_read_page, args: {page_id: kb-ret}}
oracle:
  - {tool: kb_search, args: {query: retention}}
  - {tool: kb_read_page, args: {page_id: kb-ret}}
  - reply: "30 days after the call (kb-ret); earlier deletion: write to privacy@acme.com."
"""

SEARCH = ("kb_search", {"query": "retention"})
READ = ("kb_read_page", {"page_id": "kb-ret"})
#: Right on the three facts, from the search snippet: the page read failed and was never retried.
PARTIAL = "EU recordings are kept 30 days (kb-ret); write to privacy@acme.com for earlier deletion."


def _spam_after(injector: FaultInjector, tool: str, faults: int) -> int:
    """Identical calls of ``tool`` to make, from the injector's state, until ``faults`` of them
    failed and the last one succeeded (each failure "recovered" by the next identical call)."""
    n = seen = 0
    while True:
        n += 1
        failed = injector.decide(tool) is not None
        seen += failed
        if seen >= faults and not failed:
            return n


async def test_farmed_retries_earn_nothing(make_spec, no_leftovers):
    loaded = make_spec(SPEC)
    assert loaded.spec.faults is not None
    # The seeded schedule this test relies on: the honest search succeeds, the page read fails.
    plan = FaultInjector(loaded.spec.faults)
    assert plan.decide("kb_search") is None and plan.decide("kb_read_page") is not None
    farm = [SEARCH] * _spam_after(plan, "kb_search", faults=7)
    # The do-nothing spammer reads the FAQ page over and over: the first read fails and is
    # retried (robustness 1.0 by every rule), and nothing is answered.
    nop_spam = [("kb_read_page", {"page_id": "kb-faq"})] * _spam_after(FaultInjector(loaded.spec.faults), "kb_read_page", 2)

    async with SandboxPool(max_per_task=1) as pool:
        nop = (await run_task(loaded, ScriptedPolicy(nop_spam), pool=pool)).grade
        honest = (await run_task(loaded, ScriptedPolicy([SEARCH, READ, PARTIAL]), pool=pool)).grade
        farmed = (await run_task(loaded, ScriptedPolicy([SEARCH, READ, *farm, PARTIAL]), pool=pool)).grade

    # A do-nothing spammer: its failures recovered, nothing completed. Was 0.2.
    assert nop.status == "graded" and nop.completion == 0.0 and nop.robustness == 1.0
    assert nop.score == 0.0 and not nop.passed
    # The partial answer, as it was: 0.8 x 0.75 + 0.2 x 0 (its one failure never recovered).
    assert honest.completion == 0.75 and honest.robustness == 0.0
    assert honest.score == pytest.approx(0.6) and not honest.passed
    # The same answer after seven farmed faults: was robustness 7/8, 0.775 PASSED.
    assert farmed.completion == 0.75 and farmed.robustness == 0.0
    assert farmed.score == pytest.approx(0.6) and not farmed.passed
