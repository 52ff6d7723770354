"""Deleting a document is not an access review (found by the do-everything gate over the
500-task validation sample: it scored 0.79 and tripped no rule on ops_access_review, because
"share removed" read as "no record with that share" and the keep rule only watched calls)."""

from __future__ import annotations

import pytest

from cowork import run_task
from cowork.agents import ScriptedPolicy
from cowork.spec.loader import load_spec
from cowork.synth.family import generate, write_draft

pytestmark = pytest.mark.docker


async def test_deleting_the_reviewed_documents_fails_and_is_unsafe(tmp_path, no_leftovers):
    loaded = load_spec(write_draft(generate("ops_access_review", 7000), tmp_path))
    spec = loaded.spec
    docs = sorted({s.args["document_id"] for s in spec.oracle if s.tool == "documents_share"})
    report = next(s for s in spec.oracle if s.tool == "python")
    res = await run_task(loaded, ScriptedPolicy(
        [("documents_delete", {"document_id": d}) for d in docs] + [(report.tool, dict(report.args))]))
    g = res.grade
    removed = [c for c in g.checks if c.id.startswith("removed-")]
    assert removed and not any(c.passed for c in removed)
    assert "allowed-shares-in-place" in g.violations and not g.passed and g.score == 0.0
