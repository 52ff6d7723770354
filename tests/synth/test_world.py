"""The seeded company world: deterministic, varied, consistent, and every service seed valid
for the real seed models."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import posixpath
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
import yaml

from cowork.cli import main
from cowork.errors import CoworkError
from cowork.services.registry import SERVICES, ServicesSeed
from cowork.synth.world import build_world
from cowork.synth.world.names import NEAR_DUPLICATES

SEEDS = range(50)
ROOT = Path(__file__).resolve().parents[2]


def _worlds():
    # Sizes cycle so that the 50 seeds cover all three.
    return [build_world(s, ("small", "medium", "large")[s % 3]) for s in SEEDS]


@pytest.fixture(scope="module")
def worlds():
    return _worlds()


class TestDeterminism:
    def test_same_seed_same_bytes(self):
        assert build_world(11).to_json() == build_world(11).to_json()

    def test_different_seeds_differ(self):
        assert build_world(11).to_json() != build_world(12).to_json()
        assert build_world(11, "small").to_json() != build_world(11, "medium").to_json()

    def test_same_bytes_in_another_process_with_another_hash_seed(self):
        """No hash(): a process with a different PYTHONHASHSEED builds the same world."""
        code = ("import hashlib,sys; from cowork.synth.world import build_world; "
                "sys.stdout.write(hashlib.sha256(build_world(5).to_json().encode()).hexdigest())")
        env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT / "runtime")}
        other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
        assert other == hashlib.sha256(build_world(5).to_json().encode()).hexdigest()

    def test_unknown_size_is_a_clear_error(self):
        with pytest.raises(CoworkError, match="small, medium, large"):
            build_world(1, "huge")


class TestVariety:
    def test_cultures_time_zones_shared_first_names_near_duplicates(self, worlds):
        for w in worlds:
            assert len({p.culture for p in w.people}) >= 4, w.seed
            assert len({p.tz for p in w.people}) >= 4, w.seed
            firsts = [p.name.split()[0] for p in w.people]
            assert len(firsts) > len(set(firsts)), w.seed  # a shared first name
            names = {p.name for p in w.people}
            assert any(a in names and b in names for a, b in NEAR_DUPLICATES), w.seed

    def test_roles_managers_assistants_ooo_externals_lookalikes(self, worlds):
        for w in worlds:
            assert sum(p.manager is None for p in w.people) == 1  # only the CEO has no manager
            assert any(p.assistant for p in w.people)
            today = w.clock.date()
            assert any(a <= today <= b for p in w.people for a, b in p.ooo), w.seed
            kinds = {o.kind for o in w.orgs}
            assert {"self", "customer", "vendor", "auditor", "recruiter", "lookalike"} <= kinds
            real = {o.id: o.domain for o in w.orgs}
            for fake in (o for o in w.orgs if o.kind == "lookalike"):
                assert fake.domain != real[fake.imitates] and fake.domain not in \
                    {d for k, d in real.items() if k != fake.id}

    def test_cultures_differ_across_worlds(self, worlds):
        assert len({c for w in worlds for c in (p.culture for p in w.people)}) >= 10

    def test_long_documents(self):
        w = build_world(2)
        by_id = {d.id: d for d in w.documents}
        assert len(by_id["doc-pol-expenses"].text) >= 20_000
        assert len(by_id["doc-plan-01"].text) >= 20_000
        assert max(len(a.body) for a in w.kb) >= 20_000
        # versions: two superseded ones in the history, the draft apart and not yet effective
        pol = next(p for p in w.policies if p.id == "pol-expenses")
        assert [v.status for v in pol.versions] == ["superseded", "superseded", "current", "draft"]
        assert len(by_id["doc-pol-expenses"].history) == 2
        assert pol.versions[-1].effective > w.clock.date() > pol.versions[2].effective

    def test_mail_threads_have_replies_forwards_cc_bcc_quotes_attachments(self):
        msgs = [m for t in build_world(4).threads for m in t.messages]
        assert {"original", "reply", "forward"} <= {m.kind for m in msgs}
        assert any(m.cc for m in msgs) and any(m.bcc for m in msgs) and any(m.attachments for m in msgs)
        assert any("\n> " in m.body for m in msgs if m.kind == "reply")
        assert any("Forwarded message" in m.body for m in msgs if m.kind == "forward")
        assert any(len({m.sender, *m.to, *m.cc}) >= 3 for m in msgs)

    def test_recurring_meetings_keep_local_time_across_zones(self):
        w = build_world(9)
        series = [m for m in w.meetings if m.weeks > 1]
        assert series and len({m.tz for m in w.meetings}) >= 2
        events = w.seed_for("calendar", person=w.get(series[0].organizer).id)["events"]
        assert len([e for e in events if e["id"].startswith(series[0].id + "-w")]) == series[0].weeks


class TestConsistency:
    def test_every_cross_reference_holds(self, worlds):
        for w in worlds:
            assert w.problems() == [], (w.seed, w.problems()[:5])

    def test_the_checker_finds_a_broken_reference(self):
        w = build_world(3)
        bad = dataclasses.replace(w, deals=(dataclasses.replace(w.deals[0], account="acct-999"), *w.deals[1:]))
        assert any("acct-999" in p for p in bad.problems())
        m = w.threads[0].messages[0]
        ghost = dataclasses.replace(m, to=("ghost@nowhere.example",), attachments=("no/such.xlsx",))
        bad = dataclasses.replace(w, threads=(dataclasses.replace(w.threads[0], messages=(ghost,)), *w.threads[1:]))
        assert {"ghost@nowhere.example", "no/such.xlsx"} <= {x for p in bad.problems() for x in p.split("'")}

    def test_references_resolve_independently(self, worlds):
        """Checked here without World.problems: participants exist, attendees have calendars
        holding the meeting, attachments are office files, deals' accounts exist."""
        for w in worlds[::5]:
            addresses = {p.email for p in w.people} | {x.email for x in w.externals}
            files = w.office_files()
            for t in w.threads:
                for m in t.messages:
                    assert {m.sender, *m.to, *m.cc, *m.bcc} <= addresses
                    assert set(m.attachments) <= set(files)
            assert {d.account for d in w.deals} <= {a.id for a in w.accounts}
            for meeting in w.meetings[:8]:
                for pid in (meeting.organizer, *meeting.attendees):
                    ids = {e["id"] for e in w.seed_for("calendar", person=pid)["events"]}
                    assert any(i == meeting.id or i.startswith(meeting.id + "-w") for i in ids), (w.seed, pid)
            inbox = w.seed_for("mail")["messages"]
            names = {posixpath.basename(p) for p in files}
            assert all(a["name"] in names for m in inbox for a in m["attachments"])


class TestServiceSeeds:
    def test_every_service_seed_validates_with_the_real_models(self, worlds):
        for w in worlds:
            viewers = [None, w.people[(w.seed * 7) % len(w.people)].id]
            for viewer in viewers:
                seeds = w.services_seed(**({"person": viewer} if viewer else {}))
                assert list(seeds) == list(SERVICES)
                for name, data in seeds.items():
                    SERVICES[name].SEED.model_validate(data)
            ServicesSeed.model_validate(w.services_seed())

    def test_seeds_carry_the_world(self):
        w = build_world(6)
        user = w.person()
        mail = w.seed_for("mail")
        assert mail["mailboxes"][0]["address"] == user.email and mail["messages"]
        crm = w.seed_for("crm")
        assert {a["id"] for a in crm["accounts"]} == {a.id for a in w.accounts}
        expenses = w.seed_for("expenses")
        assert expenses["policy"]["limits"]["meals"] > 0 and expenses["policy"]["text"] in \
            {d.text for d in w.documents}
        assert w.seed_for("chat")["user"] == user.handle
        web = {p["url"]: p for p in w.seed_for("web")["pages"]}
        assert {f"https://www.{o.domain}/" for o in w.orgs} | {i.link for i in w.news} == set(web)
        lookalike = next(o for o in w.orgs if o.kind == "lookalike")
        assert web[f"https://www.{lookalike.domain}/"]["title"] == lookalike.name  # the trap is on the web too

    def test_unknown_service_and_selection_are_clear_errors(self):
        w = build_world(1, "small")
        with pytest.raises(CoworkError, match="did you mean 'calendar'"):
            w.seed_for("calender")
        with pytest.raises(CoworkError, match="unknown selection mailbox"):
            w.seed_for("mail", mailbox="x")
        with pytest.raises(CoworkError, match="no person 'nobody'"):
            w.seed_for("mail", person="nobody")


class TestOfficeFiles:
    def test_shapes_are_the_renderer_s(self):
        kinds = set()
        for path, (kind, data) in build_world(8).office_files().items():
            kinds.add(kind)
            assert path.endswith("." + kind)
            if kind == "xlsx":
                assert isinstance(data, dict) and data
                for rows in data.values():
                    for row in rows:
                        assert all(isinstance(c, (str, int, float, date)) for c in row), row
                formulas = [c for rows in data.values() for row in rows for c in row
                            if isinstance(c, str) and c.startswith("=")]
                assert all(len(f) > 1 for f in formulas)
            else:
                for block in data:
                    assert set(block) in ({"heading", "level"}, {"paragraph"}, {"table"}), block
                    if "table" in block:
                        assert all(isinstance(c, str) for row in block["table"] for c in row)
        assert kinds == {"xlsx", "docx", "pdf"}


class TestCli:
    def test_world_summary_json(self, capsys):
        assert main(["synth", "world", "--seed", "4", "--size", "small", "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["seed"] == 4 and summary["counts"]["people"] == 16 and len(summary["time_zones"]) >= 4

    def test_world_out_writes_json_and_service_seeds(self, tmp_path, capsys):
        assert main(["synth", "world", "--seed", "4", "--size", "small", "--out", str(tmp_path)]) == 0
        assert "time zones" in capsys.readouterr().out
        assert json.loads((tmp_path / "world.json").read_text())["seed"] == 4
        ServicesSeed.model_validate(yaml.safe_load((tmp_path / "services.yaml").read_text()))

    def test_bad_size_exits_2(self, capsys):
        assert main(["synth", "world", "--size", "huge"]) == 2
        assert "small, medium, large" in capsys.readouterr().err
