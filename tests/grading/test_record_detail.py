"""A failed ``record_exists`` says what it looked for and which records came nearest, with the
fields that differed, in a bounded line (synthetic evidence, no Docker)."""

from __future__ import annotations

import io
import tarfile

from cowork.evidence import Evidence
from cowork.formats import GENESIS_HASH, canonical_json, seal
from cowork.grading import grade
from cowork.spec.models import TaskSpec

DEALS = {
    "d-1": {"id": "d-1", "name": "Acme renewal", "stage": "open", "amount": 5000, "owner": "me@acme.com"},
    "d-2": {"id": "d-2", "name": "Globex", "stage": "won", "amount": 1200, "owner": "kim@acme.com"},
    "d-3": {"id": "d-3", "name": "Initech", "stage": "lost", "amount": 90, "owner": "kim@acme.com"},
}


def _evidence(final: dict) -> Evidence:
    lines, prev = [], GENESIS_HASH
    for i, r in enumerate([{"kind": "session_start"}]):
        s = seal({"seq": i, **r}, prev)
        prev = s["hash"]
        lines.append(canonical_json(s))
    buf = io.BytesIO()
    tarfile.open(fileobj=buf, mode="w").close()
    return Evidence(audit_text="\n".join(lines) + "\n", audit_count=len(lines), workspace_tar=buf.getvalue(),
                    initial={}, state_seed={"crm": {"deals": DEALS}}, state_final={"crm": {"deals": final}})


def _check(final: dict, **check):
    spec = TaskSpec.model_validate({
        "id": "t", "title": "t", "prompt": "p", "oracle": [{"tool": "shell"}], "violation": [{"tool": "shell"}],
        "checks": [{"id": "won", "type": "record_exists", "service": "crm", "collection": "deals", **check}]})
    return grade(spec, _evidence(final)).checks[0]


def test_a_miss_says_what_it_looked_for_and_the_nearest_records_with_what_differed():
    c = _check(DEALS, where={"name": {"contains": "Acme"}, "stage": "won", "amount": 5000})
    assert c.status == "fail"
    assert c.detail.startswith("0 crm.deals record(s) match where name contains 'Acme', stage = 'won', "
                               "amount = 5000; 3 records in all; nearest: "), c.detail
    # d-1 meets two of the three conditions and comes first; d-2 meets one.
    assert "d-1 (2 of 3 conditions; stage is 'open')" in c.detail
    assert "d-2 (1 of 3 conditions; name is 'Globex', amount is 1200)" in c.detail
    assert c.detail.index("d-1") < c.detail.index("d-2")
    assert "d-3" not in c.detail  # it meets none


def test_a_missing_field_is_named_and_the_matcher_kinds_read_as_written():
    deals = {"d-9": {"id": "d-9", "stage": "won"}}
    c = _check(deals, where={"stage": {"one_of": ["won", "closed"]}, "owner": {"regex": "@acme\\.com$"},
                             "note": {"absent": False}, "name": {"equals": "x", "ignore_case": True}})
    assert "stage one of ['won', 'closed'], owner matches /@acme\\.com$/, note present, name = 'x' (any case)" \
        in c.detail, c.detail
    assert "d-9 (1 of 4 conditions; no owner, no note, no name)" in c.detail


def test_too_few_matches_say_how_many_were_needed_and_which_matched():
    c = _check(DEALS, where={"owner": "kim@acme.com"}, min_count=3)
    assert c.detail.startswith("2 crm.deals record(s) match (need 3) where owner = 'kim@acme.com'; 3 records in all; "
                               "matching: d-2, d-3; no other record meets any condition; for instance: d-1 (0 of 1 conditions; "
                               "owner is 'me@acme.com')"), c.detail


def test_only_created_records_and_an_empty_collection_are_said():
    c = _check(DEALS, where={"stage": "won"}, only=["created"])
    assert "0 records the episode created in all" in c.detail and "nearest" not in c.detail


def test_the_detail_stays_bounded_whatever_the_records_hold():
    long = "x" * 5000
    deals = {f"d-{i}": {"id": f"d-{i}", **{f"f{j}": long for j in range(20)}} for i in range(50)}
    c = _check(deals, where={f"f{j}": {"equals": "y" * 500} for j in range(19)} | {"f19": long})
    assert c.status == "fail" and len(c.detail) <= 1100, len(c.detail)
    assert "nearest: d-0 (1 of 20 conditions;" in c.detail


def test_a_pass_still_names_the_matching_records():
    c = _check(DEALS, where={"stage": "won"})
    assert c.status == "pass" and c.detail == "1 crm.deals record(s) match: d-2"
