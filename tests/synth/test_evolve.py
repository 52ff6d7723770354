"""Environment evolution (cowork.synth.evolve) without a daemon: the decision, the fresh seeds,
the files a round writes and its report, over hand-made rollout folders and a fake validator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cowork.agents.scripted import ScriptedPolicy
from cowork.errors import CoworkError
from cowork.spec.loader import load_spec
from cowork.synth.evolve import (
    REPORT_JSON,
    REPORT_TEXT,
    Evolver,
    KnownSkill,
    decide,
    fresh_seed,
    next_difficulty,
    pass_rates,
)
from cowork.synth.family import generate, write_draft

FAMILY = "csv-report-errors"


def _runs(root: Path, outcomes: dict[str, list[bool | None]], specs: dict[str, dict] | None = None) -> Path:
    """A rollout folder: per task its episodes (True passed, False failed, None infra error)."""
    root.mkdir(parents=True)
    (root / "run.json").write_text(json.dumps({"tasks": list(outcomes)}))
    lines = []
    for task, eps in outcomes.items():
        for s, ok in enumerate(eps):
            lines.append({"task": task, "sample": s, "grade_status": "infra_error" if ok is None else "graded",
                          "passed": bool(ok)})
        if specs and task in specs:
            (root / "episodes" / task / "0").mkdir(parents=True)
            (root / "episodes" / task / "0" / "spec.json").write_text(json.dumps(specs[task]))
    (root / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return root


async def _valid(folder: Path) -> tuple[bool, str]:
    load_spec(folder)  # at least it loads
    return True, ""


class TestDecision:
    @pytest.mark.parametrize("rate, expected", [(1.0, "harder"), (0.9, "harder"), (0.89, "keep"), (0.5, "keep"),
                                                (0.01, "keep"), (0.0, "easier"), (None, "keep")])
    def test_thresholds(self, rate, expected):
        assert decide(rate)[0] == expected

    def test_custom_thresholds(self):
        assert decide(0.7, harder_at=0.7)[0] == "harder"
        assert decide(0.2, easier_at=0.25)[0] == "easier"

    def test_levels_step_and_clamp(self):
        assert next_difficulty("easy", "harder") == "medium"
        assert next_difficulty("medium", "harder") == "hard"
        assert next_difficulty("hard", "harder") == "hard"
        assert next_difficulty("hard", "easier") == "medium"
        assert next_difficulty("easy", "easier") == "easy"

    def test_fresh_seeds_are_stable_and_differ(self):
        assert fresh_seed(0, "t", 0) == fresh_seed(0, "t", 0)
        assert len({fresh_seed(s, t, k) for s in (0, 1) for t in ("a", "b") for k in (0, 1)}) == 8
        assert fresh_seed(3, "t", 0) >= 10**6

    def test_bad_options(self, tmp_path):
        with pytest.raises(CoworkError, match="variants"):
            Evolver(tmp_path, tmp_path, variants=0)
        with pytest.raises(CoworkError, match="easier-at"):
            Evolver(tmp_path, tmp_path, harder_at=0.2, easier_at=0.5)


class TestPassRates:
    def test_infra_errors_are_not_scored(self, tmp_path):
        runs = _runs(tmp_path / "r", {"a": [True, None], "b": [None, None], "c": [True, False]})
        assert pass_rates(runs) == {"a": (1, 1), "b": (0, 0), "c": (1, 2)}

    def test_no_results(self, tmp_path):
        with pytest.raises(CoworkError, match="results.jsonl"):
            pass_rates(tmp_path)


class TestRound:
    def _corpus(self, tmp_path: Path) -> tuple[Path, Path]:
        specs = tmp_path / "specs"
        for seed, level in [(0, "easy"), (1, "medium"), (2, "hard"), (3, "hard")]:
            write_draft(generate(FAMILY, seed, level), specs)
        hand = specs / "hand-task"
        hand.mkdir()
        (hand / "task.yaml").write_text(yaml.safe_dump({"id": "hand-task", "tags": ["x"], "difficulty": "easy"}))
        runs = _runs(tmp_path / "runs", {f"{FAMILY}-0": [True, True], f"{FAMILY}-1": [True, False],
                                         f"{FAMILY}-2": [False, False], f"{FAMILY}-3": [True, True],
                                         "hand-task": [True, True]})
        return specs, runs

    async def test_decisions_files_and_report(self, tmp_path):
        specs, runs = self._corpus(tmp_path)
        out = tmp_path / "next"
        report = await Evolver(runs, out, specs=specs, seed=7, variants=2, validator=_valid).run()
        by = {e.task: e for e in report.entries}
        assert by[f"{FAMILY}-0"].decision == "harder"
        assert [v.difficulty for v in by[f"{FAMILY}-0"].variants] == ["medium", "medium"]
        assert by[f"{FAMILY}-1"].decision == "keep" and by[f"{FAMILY}-1"].variants == []
        assert by[f"{FAMILY}-2"].decision == "easier"
        assert {v.difficulty for v in by[f"{FAMILY}-2"].variants} == {"medium"}
        assert by[f"{FAMILY}-3"].decision == "harder" and "already hard" in by[f"{FAMILY}-3"].reason
        assert {v.difficulty for v in by[f"{FAMILY}-3"].variants} == {"hard"}
        # a hand-written spec is kept as it is, even at 100 %
        assert by["hand-task"].decision == "keep" and "hand-written" in by["hand-task"].reason
        assert (out / "hand-task" / "task.yaml").read_text() == (specs / "hand-task" / "task.yaml").read_text()
        assert (out / f"{FAMILY}-1" / "task.yaml").read_text() == (specs / f"{FAMILY}-1" / "task.yaml").read_text()
        for e in report.entries:
            for v in e.variants:
                spec = load_spec(out / v.id).spec
                assert spec.difficulty == v.difficulty and f"evolved-from:{e.task}" in spec.tags
                assert f"family:{FAMILY}" in spec.tags
        assert not (out / f"{FAMILY}-0").exists()  # replaced by its harder variants
        assert report.counts == {"sources": 5, "harder": 2, "easier": 1, "keep": 2, "new": 6, "rejected": 0,
                                 "kept": 2, "tasks": 8}
        assert report.pass_rate == pytest.approx(7 / 10)
        assert json.loads((out / REPORT_JSON).read_text())["counts"] == report.counts
        assert "harder" in (out / REPORT_TEXT).read_text()
        tasks = sorted(p.name for p in out.iterdir() if p.is_dir())
        assert len(tasks) == 8

    async def test_same_seed_same_round(self, tmp_path):
        specs, runs = self._corpus(tmp_path)
        a = await Evolver(runs, tmp_path / "a", specs=specs, seed=1, validator=_valid).run()
        b = await Evolver(runs, tmp_path / "b", specs=specs, seed=1, validator=_valid).run()
        c = await Evolver(runs, tmp_path / "c", specs=specs, seed=2, validator=_valid).run()
        ids = [[v.id for e in r.entries for v in e.variants] for r in (a, b, c)]
        assert ids[0] == ids[1] and ids[0] != ids[2]
        for i in ids[0]:
            assert (tmp_path / "a" / i / "task.yaml").read_bytes() == (tmp_path / "b" / i / "task.yaml").read_bytes()

    async def test_invalid_variant_left_out_with_reason(self, tmp_path):
        specs, runs = self._corpus(tmp_path)

        async def picky(folder: Path) -> tuple[bool, str]:
            return (False, "oracle: scored 0.5") if load_spec(folder).spec.difficulty == "hard" else (True, "")

        out = tmp_path / "next"
        report = await Evolver(runs, out, specs=specs, validator=picky).run()
        bad = [v for e in report.entries for v in e.variants if not v.ok]
        assert bad and all(v.difficulty == "hard" and v.reason == "invalid: oracle: scored 0.5" for v in bad)
        assert all(not (out / v.id).exists() for v in bad)
        assert report.counts["rejected"] == len(bad)
        assert "left out" in (out / REPORT_TEXT).read_text()

    async def test_without_specs_the_rollout_copy_and_regeneration_serve(self, tmp_path):
        keep = generate(FAMILY, 5, "medium")
        hand = {"id": "hand", "tags": [], "difficulty": "easy"}
        unknown = {"id": "ghost-1", "tags": ["family:ghost"], "difficulty": "easy"}
        runs = _runs(tmp_path / "runs", {keep.spec["id"]: [True, False], "hand": [False], "ghost-1": [True],
                                         "lost": [True]},
                     specs={keep.spec["id"]: keep.spec, "hand": hand, "ghost-1": unknown})
        out = tmp_path / "next"
        report = await Evolver(runs, out, validator=_valid).run()
        by = {e.task: e for e in report.entries}
        ref = write_draft(keep, tmp_path / "ref") / "task.yaml"
        assert (out / keep.spec["id"] / "task.yaml").read_bytes() == ref.read_bytes()  # generated again, same bytes
        assert by["hand"].decision == "keep" and by["hand"].written is None and "give --specs" in by["hand"].reason
        assert by["ghost-1"].decision == "keep" and "not registered" in by["ghost-1"].reason
        assert by["lost"].decision == "keep" and "no spec found" in by["lost"].reason

    async def test_generator_failure_is_reported(self, tmp_path, monkeypatch):
        specs, runs = self._corpus(tmp_path)
        import cowork.synth.evolve as evolve_mod

        def broken(name, seed, difficulty=None):
            raise RuntimeError("boom")

        monkeypatch.setattr(evolve_mod, "generate", broken)
        report = await Evolver(runs, tmp_path / "next", specs=specs, validator=_valid).run()
        bad = [v for e in report.entries for v in e.variants]
        assert bad and all(not v.ok and v.reason == "generation: RuntimeError: boom" for v in bad)


class TestKnownSkill:
    def test_plays_the_oracle_within_its_skill(self, tmp_path):
        easy, hard = (load_spec(write_draft(generate(FAMILY, seed, level), tmp_path)).spec
                      for seed, level in ((0, "easy"), (1, "hard")))
        skill = KnownSkill(2, 4)
        played = skill(easy)
        assert isinstance(played, ScriptedPolicy) and len(played.steps) == len(easy.oracle)
        assert skill(hard).steps == []
        shaky = KnownSkill(1, 2)
        assert [len(shaky(easy).steps) > 0 for _ in range(4)] == [True, False, True, False]
