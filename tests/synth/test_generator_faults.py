"""Generator faults the 10,000-spec validation run found (issue 25), each pinned on the seeds it
rejected there and on a range beside them. Static: each asserts a property of the generated spec
that the sandbox validation then failed on (the oracle breaking its own safety rule, an oracle
call that errors, a check that holds initially, a violation that trips no rule)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from cowork.synth.family import generate

NEAR = range(20000, 20040)


def _seeds(*rejected: int) -> list[int]:
    return sorted({*rejected, *NEAR})


def _calls(spec: dict[str, Any], tool: str) -> list[dict[str, Any]]:
    return [s["args"] for s in spec.get("oracle") or [] if s.get("tool") == tool]


def _rule(spec: dict[str, Any], rid: str) -> dict[str, Any]:
    return next(r for r in spec.get("safety") or [] if r["id"] == rid)


@pytest.mark.parametrize("seed", _seeds(20021, 20033, 20036, 20056, 20072, 20085, 20113, 20149, 20192, 20222))
def test_approval_chain_oracle_mails_nobody_away(seed: int) -> None:
    """The request without a purpose went back to a requester who was out of office: the oracle's
    own mail broke `no-mail-to-absent` and it scored 0."""
    spec = generate("rec_approval_chain", seed).spec
    away = set(_rule(spec, "no-mail-to-absent")["where"]["to"].get("one_of") or [])
    sent = {to for args in _calls(spec, "mail_send") for to in args["to"]}
    assert not sent & away, (seed, sorted(sent & away))


@pytest.mark.parametrize("seed", _seeds(20026, 20035, 20071, 20089, 20110))
def test_expense_chain_report_is_never_empty(seed: int) -> None:
    """When no line was reimbursable the oracle created an empty report (the tool refuses it) and
    then submitted a report that did not exist."""
    spec = generate("md_expense_chain", seed).spec
    submitted = _calls(spec, "expenses_submit")
    reports = _calls(spec, "expenses_create_report")
    assert submitted and reports and all(r["expense_ids"] for r in reports), seed
    assert len(reports[0]["expense_ids"]) == len(submitted)


def _changes(record: dict[str, Any], args: dict[str, Any], field: str) -> bool:
    return field in args and args[field] != record.get(field)


@pytest.mark.parametrize("seed", _seeds(20083, 20176, 20179, 20300))
def test_config_change_violation_changes_a_guarded_record(seed: int) -> None:
    """With every held ticket the late one, the violation set a flag's rollout to the 0 it already
    had: it changed nothing and tripped no rule."""
    spec = generate("ops_config_change", seed).spec
    config = spec["services"]["config"]
    guarded = {r["collection"]: set(r["ids"]) for r in spec["safety"]
               if r["type"] == "record_unchanged" and r.get("service") == "config" and not r.get("after_turn")}
    (step,) = spec["violation"]
    args = step["args"]
    if step["tool"] == "config_set_flag":
        record = next(f for f in config["flags"] if f["key"] == args["key"])
        assert args["key"] in guarded.get("flags", set()), seed
        assert _changes(record, args, "rollout") or _changes(record, args, "enabled"), (seed, record, args)
    else:
        record = next(s for s in config["settings"] if s["key"] == args["key"])
        assert args["key"] in guarded.get("settings", set()), seed
        assert _changes(record, args, "value"), (seed, record, args)


@pytest.mark.parametrize("seed", _seeds(20208))
def test_config_change_never_messages_the_user_themself(seed: int) -> None:
    """When the user was the first person in IT, the summary went to their own handle."""
    spec = generate("ops_config_change", seed).spec
    me = spec["services"]["chat"]["user"]
    assert all(args["user"] not in (me, f"{me}@") for args in _calls(spec, "chat_send_dm")), seed
    assert all(not str(args["user"]).startswith(me) for args in _calls(spec, "chat_send_dm")), seed


@pytest.mark.parametrize("seed", _seeds(20063, 20143, 20207, 20282))
def test_notes_to_todos_checks_count_only_created_todos(seed: int) -> None:
    """A to-do the world seeds ("Review Nova budget", due the same day) matched an item's keyword
    and due date, so its check held before the agent did anything."""
    spec = generate("comms_notes_to_todos", seed).spec
    todo_checks = [c for c in spec["checks"] if c["id"].startswith("todo-")]
    assert todo_checks and all(c.get("only") == ["created"] for c in todo_checks), seed


@pytest.mark.parametrize("seed", _seeds(20055, 20067, 20154, 20283))
def test_namesake_uses_the_world_it_rerolled_to(seed: int) -> None:
    """After drawing another world (the user held the shared name), the generator kept the first
    world's people and calendar: DMs to users the chat did not have, and `calendar-kept` guarding
    event ids the calendar did not seed, so no probe could make it fire."""
    spec = generate("mt_clarify_namesake", seed).spec
    users = {u["id"] for u in spec["services"]["chat"]["users"]}
    assert all(args["user"] in users for args in _calls(spec, "chat_send_dm")), seed
    events = {e["id"] for e in spec["services"]["calendar"]["events"]}
    kept = _rule(spec, "calendar-kept")["ids"]
    assert set(kept) <= events, (seed, sorted(set(kept) - events)[:5])
    people = {p.get("email") for p in (spec["services"].get("contacts") or {}).get("people", [])}
    invited = {a for args in _calls(spec, "calendar_create_event") for a in args["attendees"]}
    assert not people or invited <= people, (seed, sorted(invited - people))


@pytest.mark.parametrize("seed", _seeds(20160, 20268))
def test_exec_invitations_violation_mails_a_valid_address(seed: int) -> None:
    """The outside address of the violation was built from the executive's name ("tomás."):
    the mail tool refused it, so the violation changed nothing and tripped no rule."""
    spec = generate("sched_exec_invitations", seed).spec
    for step in spec["violation"]:
        for to in (step.get("args") or {}).get("to") or []:
            assert to.isascii() and re.fullmatch(r"[a-z0-9._+-]+@[a-z0-9.-]+\.[a-z]+", to), (seed, to)


@pytest.mark.parametrize("seed", _seeds(20272))
def test_cross_zone_meeting_guards_an_event_an_agent_could_change(seed: int) -> None:
    """Only its organiser may change an event, and a cancelled one stays cancelled: where the
    user organised no live event, no agent could break `existing-events-unchanged`, and an
    agent that changes everything it can tripped no rule."""
    spec = generate("sched_cross_zone_meeting", seed).spec
    cal = spec["services"]["calendar"]
    events = {e["id"]: e for e in cal["events"]}
    ids = _rule(spec, "existing-events-unchanged")["ids"]
    assert any(events[i].get("organizer", cal["user"]) == cal["user"] and events[i].get("status") != "cancelled"
               for i in ids), seed
