"""Multi-turn spec sections without Docker: what the loader refuses (with file, line and field),
the user's conditions, and the evidence of a multi-turn episode (baseline, boundaries, bundle)."""

from __future__ import annotations

import json
import textwrap

import pytest

from cowork.episode.conversation import TurnEnd, holds
from cowork.errors import EvidenceError, SpecError
from cowork.evidence import Evidence
from cowork.spec.conversation import Condition
from cowork.spec.loader import load_spec
from fakes import tar_of

BASE = """\
id: mt
title: t
prompt: p
tools: [write_file, mail_send]
checks: [{type: file_exists, path: a.txt}]
oracle: [{tool: write_file, args: {path: a.txt, content: x}}]
violation: [{reply: "No."}]
"""


def _load(tmp_path, extra: str):
    (tmp_path / "task.yaml").write_text(BASE + textwrap.dedent(extra))
    return load_spec(tmp_path)


@pytest.mark.parametrize("extra, expected", [
    ("user: {turns: [{say: hi, day: 3}]}\ndays: [{clock: now+1d, prompt: d2}]\n",
     "user.turns[0].day: day 3 does not exist (the task has 2)"),
    ("events: [{actions: [{tool: write_file, clock: now+1h}]}]\n", "exactly one of tool, add, clock"),
    ("events: [{actions: [{clock: tomorrow}]}]\n", "neither ISO 8601 nor relative"),
    ("events: [{after_turn: 1, at: now+1h, actions: [{clock: now+2h}]}]\n", "after_turn or at, not both"),
    ("events: [{actions: [{tool: mail_fly}]}]\n", "unknown tool 'mail_fly'"),
    ("user: {llm: {persona: p, goal: g}}\n", "needs scripted turns too"),
    ("user: {turns: [{say: hi, when: {reply_matches: \"(\"}}]}\n", "reply_matches"),
    ("days: [{clock: now+1d, prompt: d2}]\nsafety: [{type: file_exists, path: a, after_turn: 1, after_day: 1}]\n",
     "after_turn or after_day, not both"),
])
def test_the_loader_refuses_broken_multi_turn_sections_and_says_where(tmp_path, extra, expected):
    with pytest.raises(SpecError) as err:
        _load(tmp_path, extra)
    assert expected in str(err.value) and "task.yaml:" in str(err.value), str(err.value)


def test_a_step_is_a_call_or_a_reply_and_a_reply_step_loads(tmp_path):
    (tmp_path / "task.yaml").write_text(BASE.replace('violation: [{reply: "No."}]',
                                                     'violation: [{tool: mail_send, reply: "x"}]'))
    with pytest.raises(SpecError, match="either a tool call .* or a reply"):
        load_spec(tmp_path)
    spec = _load(tmp_path, "user: {turns: [{say: hi}]}\n").spec
    assert spec.multi_turn and spec.violation[0].reply == "No." and spec.violation[0].tool is None


def test_conditions_hold_only_when_every_part_does():
    end = TurnEnd(reply="Which day suits you?", called={"calendar_free_busy"})
    assert holds(None, end)
    assert holds(Condition(reply_matches=r"\?", called="calendar_free_busy"), end)
    assert not holds(Condition(reply_matches=r"\?", called="mail_send"), end)
    assert not holds(Condition(reply_lacks="(?i)which"), end)
    assert holds(Condition(not_called="mail_send"), end)
    assert not holds(Condition(not_called="calendar_free_busy"), end)
    # a check with no evidence to judge it on does not hold (fail closed)
    assert not holds(Condition.model_validate({"check": {"type": "file_exists", "path": "a.txt"}}), end)


def _evidence() -> Evidence:
    seed = {"mail": {"messages": {"m1": {"id": "m1", "subject": "a", "folder": "inbox"},
                                  "m2": {"id": "m2", "subject": "b"}}}}
    world = [{"actor": "world", "audit_count": 0,
              "files": {"notes.md": "f" * 64, "gone.txt": None, "keep.txt": ""},
              "records": {"mail": {"messages": {"m3": {"created": {"id": "m3", "subject": "new"}},
                                                "m2": {"deleted": True},
                                                "m1": {"fields": {"subject": "edited"}}}}}}]
    return Evidence(audit_text="", audit_count=0, workspace_tar=tar_of({"a.txt": b"x"}),
                    initial={"notes.md": "0" * 64, "gone.txt": "1" * 64, "keep.txt": "2" * 64},
                    meta={"world": world}, state_seed=seed, state_final=seed,
                    boundaries=[{"turn": 1, "day": 1, "audit_count": 0, "state": seed,
                                 "workspace_tar": tar_of({"b.txt": b"y"})}])


def test_the_baseline_folds_in_what_the_user_and_the_world_changed():
    ev = _evidence()
    # only the fields the world changed: had the agent moved m1 to another folder before, the
    # baseline still says "inbox", so that move stays the agent's
    assert ev.state_before["mail"]["messages"] == {"m1": {"id": "m1", "subject": "edited", "folder": "inbox"},
                                                   "m3": {"id": "m3", "subject": "new"}}
    assert ev.state_seed["mail"]["messages"]["m2"]  # the true seed is kept as it was
    # keep.txt was not a regular file after the action (a symlink the agent planted): its
    # baseline stays the seeded file, so the agent's replacement still counts as a change
    assert ev.initial_before == {"notes.md": "f" * 64, "keep.txt": "2" * 64}


def test_the_baseline_leaves_the_seed_untouched_and_follows_a_later_world_change():
    ev = _evidence()
    seed = json.loads(json.dumps(ev.state_seed))
    first = ev.state_before
    assert ev.state_before is first  # computed once for this seed and world log
    first_m1 = dict(first["mail"]["messages"]["m1"])
    # a world change that arrives later (a new turn's actions) is folded in, not missed
    ev.meta["world"] = [*ev.meta["world"], {"actor": "world", "audit_count": 9, "files": {},
                                            "records": {"mail": {"messages": {"m2": {"deleted": True}}}}}]
    again = ev.state_before
    assert again is not first and "m2" not in again["mail"]["messages"]
    assert again["mail"]["messages"]["m1"] == first_m1
    # the seed itself, shared with every other evidence of the sandbox, was never written
    assert ev.state_seed == seed


def test_boundaries_survive_a_saved_bundle_and_a_forged_file_name_is_refused(tmp_path):
    ev = _evidence()
    ev.save(tmp_path / "b")
    back = Evidence.load(tmp_path / "b")
    assert back.boundaries[0]["turn"] == 1 and back.at_boundary(turn=1).files == {"b.txt": b"y"}
    assert back.at_boundary(turn=2) is None and back.at_boundary(day=1) is not None
    index = json.loads((tmp_path / "b" / "boundaries.json").read_text())
    index[0]["workspace_file"] = "../audit.jsonl"
    (tmp_path / "b" / "boundaries.json").write_text(json.dumps(index))
    with pytest.raises(EvidenceError, match="not one of its own"):
        Evidence.load(tmp_path / "b")


def test_an_unknown_tool_gets_its_closest_names_not_the_whole_catalogue(tmp_path):
    (tmp_path / "task.yaml").write_text(BASE.replace("tools: [write_file, mail_send]", "tools: [write_file, mail_snd]"))
    with pytest.raises(SpecError) as err:
        load_spec(tmp_path)
    msg = str(err.value)
    assert "unknown tool 'mail_snd'; did you mean 'mail_send'" in msg and "task.yaml:4" in msg
    assert "calendar_free_busy" not in msg and len(msg) < 400
