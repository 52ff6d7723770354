"""The batch quality gates without Docker (cowork.synth.gates, the do-everything script of
cowork.synth.trivial, and ``cowork synth check --static``); the sandbox runs are in
tests/integration/test_synth_gates_docker.py."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import yaml

from cowork import cli
from cowork.cli import exits
from cowork.spec.capabilities import capabilities
from cowork.spec.loader import load_spec
from cowork.synth import gates
from cowork.synth.trivial import OUTSIDER, script

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "specs").glob("*/task.yaml"))


def _near_copy(src: str, dest: Path, new_id: str) -> Path:
    """A copy of a spec with its id and one name changed: the same task, relabelled."""
    folder = dest / new_id
    shutil.copytree(ROOT / "specs" / src, folder)
    raw = yaml.safe_load((folder / "task.yaml").read_text())
    raw["id"] = new_id
    raw["prompt"] = raw["prompt"].replace("Please", "Could you please", 1)
    text = yaml.safe_dump(raw, sort_keys=False).replace("Globex", "Globox", 1)
    (folder / "task.yaml").write_text(text)
    return folder


class TestNearDuplicates:
    def test_planted_copy_is_found_and_distinct_specs_are_not(self, tmp_path):
        copy = _near_copy("expense-approval-policy", tmp_path, "expense-approval-policy-copy")
        specs = [load_spec(p) for p in SPECS] + [load_spec(copy)]
        pairs = gates.near_duplicates(specs)
        assert len(pairs) == 1, [p.as_dict() for p in pairs]
        assert {pairs[0].first.split()[0], pairs[0].second.split()[0]} == {"expense-approval-policy",
                                                                        "expense-approval-policy-copy"}
        assert pairs[0].prompt_similarity >= 0.8 and pairs[0].seed_similarity >= 0.95

    def test_hand_written_specs_have_no_near_duplicates_even_at_half(self):
        assert gates.near_duplicates([load_spec(p) for p in SPECS], threshold=0.5) == []

    def test_same_prompt_other_world_is_not_a_duplicate(self, tmp_path):
        # A family's template with other slot values: the request alone does not make a duplicate.
        prompt = gates.shingles("approve the pending expense claims under the policy", 3)
        a = gates._Item("a", prompt, {f"record {i}" for i in range(100)})
        b = gates._Item("b", set(prompt), {f"record {i}" for i in range(60, 160)})
        assert gates.near_duplicate_items([a, b], 0.8) == []

    def test_hashed_shingles_are_the_string_shingles(self):
        # The gates compare 64-bit hashes of the shingles; the Jaccard must be the strings'.
        rng = random.Random(3)
        vocab = [f"w{i}" for i in range(40)] + ["a.b@c.example", "o'neil", "x-1"]
        memo: dict[str, int] = {}
        for _ in range(200):
            a = " ".join(rng.choices(vocab, k=rng.randint(0, 60)))
            b = " ".join(rng.choices(vocab, k=rng.randint(0, 60)))
            for k in (3, 5):
                ha, hb = gates.shingle_hashes(a, k, memo), gates.shingle_hashes(b, k, memo)
                assert ha.size == len(gates.shingles(a, k)) and hb.size == len(gates.shingles(b, k))
                assert gates._jaccard_hashes(ha, hb) == gates.jaccard(gates.shingles(a, k), gates.shingles(b, k))

    def test_one_pass_signature_estimates_jaccard(self):
        # The one-permutation signature (with densification) must estimate the similarity the
        # LSH bands and the pre-filter rely on, for big sets and for small ones.
        rng = random.Random(11)
        for size in (12, 60, 5000):
            for overlap in (0.2, 0.5, 0.9):
                common = {f"c{i}" for i in range(int(size * overlap))}
                a = gates.hash_set(common | {f"a{i}" for i in range(size - len(common))})
                b = gates.hash_set(common | {f"b{rng.random()}" for _ in range(size - len(common))})
                true = gates._jaccard_hashes(a, b)
                est = float((gates._signature(a) == gates._signature(b)).mean())
                assert abs(est - true) < (0.25 if size < 100 else 0.12), (size, overlap, est, true)

    def test_thousands_of_items_find_exactly_the_planted_pairs(self):
        rng = random.Random(7)
        vocab = [f"w{i}" for i in range(5000)]
        sets = []
        for n in range(2000):
            words = rng.sample(vocab, 300)
            sets.append((gates.shingles(" ".join(words[:40]), 3), gates.shingles(" ".join(words), 5)))
        planted = [(5, 1500), (42, 43), (999, 7)]
        for src, dst in planted:  # a copy with a few words changed
            prompt, seed = sorted(sets[src][0]), sorted(sets[src][1])
            sets[dst] = (set(prompt[1:]) | {"changed words here"}, set(seed[3:]) | {"x y z w v"})
        items = [gates._Item(f"s{n}", prompt, seed) for n, (prompt, seed) in enumerate(sets)]
        found = {tuple(sorted((p.first, p.second))) for p in gates.near_duplicate_items(items, 0.8)}
        assert found == {tuple(sorted((f"s{a}", f"s{b}"))) for a, b in planted}


class TestDifficulty:
    def test_no_hand_written_spec_is_two_levels_off_its_label(self):
        signals = [gates.difficulty(load_spec(p)) for p in SPECS]
        assert [s.task for s in signals if s.mismatch] == []
        assert all(s.declared in gates.LEVELS for s in signals)

    def test_the_signal_orders_a_one_step_answer_below_a_multi_day_task(self):
        small = gates.difficulty(load_spec(ROOT / "specs" / "kb-answer-no-safety"))
        large = gates.difficulty(load_spec(ROOT / "specs" / "md-meeting-moved-overnight"))
        assert small.predicted == "easy" and large.predicted == "hard"
        assert large.oracle_steps > small.oracle_steps and large.services > small.services

    def test_what_the_nop_agent_earns_lowers_the_score(self):
        spec = load_spec(ROOT / "specs" / "inbox-triage-to-tickets")
        assert gates.difficulty(spec, nop_completion=0.5).score < gates.difficulty(spec).score

    def test_a_declared_hard_spec_measured_easy_is_a_mismatch(self, tmp_path):
        folder = tmp_path / "kb"
        shutil.copytree(ROOT / "specs" / "kb-answer-no-safety", folder)
        raw = yaml.safe_load((folder / "task.yaml").read_text())
        raw["difficulty"] = "hard"
        (folder / "task.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
        assert gates.difficulty(load_spec(folder)).mismatch

    def test_levels_out_of_order_within_a_family_are_named(self):
        def sig(level, score):
            s = gates.DifficultySignal("t", level, 1, 1, 1, 1, 0, 1)
            s.score = score
            return s

        ok = [("f", sig("easy", 10)), ("f", sig("medium", 20)), ("f", sig("hard", 30))]
        assert gates.level_order_problems(ok) == []
        bad = [("f", sig("easy", 30)), ("f", sig("hard", 10))]
        assert gates.level_order_problems(bad) == ["f: easy specs score higher than hard ones (median 30 > 10)"]


class TestDiversity:
    def test_counts_per_capability_service_and_level(self):
        specs = [load_spec(ROOT / "specs" / n) for n in ("expense-approval-policy", "fix-csv-report",
                                                         "inbox-triage-to-tickets")]
        d = gates.diversity(specs)
        assert d.specs == 3
        caps = [c for s in specs for c in s.spec.capabilities]
        assert sum(d.capabilities.values()) == len(caps) and d.capabilities == {c: caps.count(c) for c in set(caps)}
        assert d.services["expenses"] == 1 and d.services["documents"] == 1 and d.services["workspace"] == 1
        assert d.services["mail"] == 1 and d.services["tickets"] == 1
        assert d.families == {"hand-written": 3}
        assert sum(d.difficulties.values()) == 3
        assert set(d.missing_capabilities) == set(capabilities()) - set(caps)


class TestDoEverythingScript:
    TOOLS = [
        {"function": {"name": "expenses_list", "parameters": {"properties": {}, "required": []}}},
        {"function": {"name": "expenses_approve", "parameters": {
            "properties": {"expense_id": {"type": "string"}, "note": {"type": "string"}}, "required": ["expense_id"]}}},
        {"function": {"name": "mail_send", "parameters": {
            "properties": {"to": {"type": "array", "items": {"type": "string"}}, "subject": {"type": "string"},
                           "body": {"type": "string"}}, "required": ["to", "subject", "body"]}}},
        {"function": {"name": "tickets_update", "parameters": {
            "properties": {"ticket_id": {"type": "string"},
                           "status": {"anyOf": [{"enum": ["open", "closed"], "type": "string"}, {"type": "null"}]}},
            "required": ["ticket_id"]}}},
        {"function": {"name": "shell", "parameters": {"properties": {"command": {"type": "string"}},
                                                      "required": ["command"]}}},
        {"function": {"name": "write_file", "parameters": {
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}}},
    ]
    ANN = {"expenses_list": {"readOnlyHint": True}, "expenses_approve": {"destructiveHint": True},
           "mail_send": {"openWorldHint": True}, "tickets_update": {"destructiveHint": True},
           "shell": {"destructiveHint": True}, "write_file": {"destructiveHint": True}}
    STATE = {"expenses": {"expenses": {"exp-1": {"employee": "a@acme.com"}, "exp-2": {"employee": "b@acme.com"}},
                          "transactions": {"txn-1": {}}},
             "tickets": {"tickets": {"t-1": {"reporter": "x@partner.io"}}}}

    def test_every_record_every_non_read_tool_sends_first_wipe_last(self):
        calls = script(self.TOOLS, self.ANN, self.STATE, ["a.txt", "b/c.txt"])
        names = [n for n, _ in calls]
        assert "expenses_list" not in names
        assert names[0] == "mail_send" and names[-1] == "shell"
        approved = {a["expense_id"] for n, a in calls if n == "expenses_approve"}
        assert approved == {"exp-1", "exp-2"}  # the collection the argument names, not transactions
        send = next(a for n, a in calls if n == "mail_send")
        assert send["to"][0] == OUTSIDER and "x@partner.io" in send["to"]
        assert {a.get("status") for n, a in calls if n == "tickets_update"} == {"open"}
        assert {a["path"] for n, a in calls if n == "write_file"} == {"a.txt", "b/c.txt"}
        assert all(a["content"] == "" for n, a in calls if n == "write_file")

    def test_a_tool_whose_records_do_not_exist_is_skipped(self):
        calls = script(self.TOOLS, self.ANN, {}, [])
        assert not [n for n, _ in calls if n in ("expenses_approve", "tickets_update", "write_file")]


class TestCheckCommand:
    def test_static_check_refuses_the_later_of_a_near_duplicate_pair(self, tmp_path, capsys):
        for name in ("expense-approval-policy", "fix-csv-report"):
            shutil.copytree(ROOT / "specs" / name, tmp_path / name)
        _near_copy("expense-approval-policy", tmp_path, "zz-expense-copy")
        assert cli.main(["synth", "check", str(tmp_path), "--static", "--json"]) == exits.GATE_FAILED
        out = json.loads(capsys.readouterr().out)
        assert list(out["refused"]) == [f"zz-expense-copy ({tmp_path / 'zz-expense-copy' / 'task.yaml'})"]
        assert out["diversity"]["specs"] == 3 and len(out["difficulty"]) == 3

    def test_static_check_of_distinct_specs_passes(self, tmp_path, capsys):
        for name in ("expense-approval-policy", "fix-csv-report"):
            shutil.copytree(ROOT / "specs" / name, tmp_path / name)
        assert cli.main(["synth", "check", str(tmp_path), "--static"]) == exits.OK
        assert "2 of 2 spec(s) accepted" in capsys.readouterr().out


class TestCorpusCommand:
    def test_one_spec_per_registered_family_is_written(self, tmp_path, capsys):
        from cowork.synth.family import families

        names = sorted(families())
        assert cli.main(["synth", "corpus", "--out", str(tmp_path), "--per-family", "1", "--seed", "3",
                         "--json"]) == exits.OK
        out = json.loads(capsys.readouterr().out)
        assert out["written"] == len(names) and out["families"] == len(names)
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}-3" for n in names)
        for n in names:
            assert load_spec(tmp_path / f"{n}-3").spec.id == f"{n}-3"

    def test_n_spreads_over_the_chosen_families_and_only_picks_them(self, tmp_path, capsys):
        from cowork.synth.compose import generators
        from cowork.synth.family import families

        templates = sorted(set(families()) - set(generators()))
        n = 2 * len(templates) + 3
        assert cli.main(["synth", "corpus", "--out", str(tmp_path), "--n", str(n), "--only", "templates",
                         "--json"]) == exits.OK
        out = json.loads(capsys.readouterr().out)
        assert out["written"] == n and out["families"] == len(templates) and out["generate_seconds"] >= 0
        per = {name: sum(1 for p in tmp_path.iterdir() if p.name.rsplit("-", 1)[0] == name) for name in templates}
        assert sorted(per.values()) == [2] * (len(templates) - 3) + [3] * 3
        assert cli.main(["synth", "corpus", "--out", str(tmp_path / "x"), "--only", "some"]) == exits.BAD_INPUT

    def test_a_generator_that_raises_costs_its_spec_not_the_corpus(self, tmp_path, capsys, monkeypatch):
        import importlib

        fam = importlib.import_module("cowork.synth.family")  # the module; the package re-exports its decorator
        good = fam.families()["meeting-placement"]

        def flaky(rng, difficulty):
            if rng.random() < 0.5:
                raise IndexError("list index out of range")
            return good.build(rng, difficulty)

        monkeypatch.setattr(fam, "_FAMILIES", {"flaky": fam.Family("flaky", good.capabilities, "test", flaky)})
        monkeypatch.setattr(fam, "families", lambda: dict(fam._FAMILIES))
        code = cli.main(["synth", "corpus", "--out", str(tmp_path), "--n", "12", "--json"])
        out = json.loads(capsys.readouterr().out)
        assert code == exits.GATE_FAILED
        assert 0 < out["written"] < 12 and len(out["generation_failed"]) == 12 - out["written"]
        assert all(v == "IndexError: list index out of range" for v in out["generation_failed"].values())
        saved = json.loads((tmp_path / "generation-failures.json").read_text())
        assert saved == out["generation_failed"]
