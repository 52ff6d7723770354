"""``cowork synth dataset``: a corpus as a Hugging Face dataset split by world, and the way back
to spec folders that ``cowork run``, the rollout runner and the TRL adapter share."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cowork.cli import main
from cowork.errors import CoworkError, SpecError
from cowork.rollouts.runner import _load_tasks
from cowork.spec.loader import load_spec
from cowork.synth.dataset import (
    CARD,
    PARQUET_DIR,
    REJECTS,
    SPLITS,
    build,
    dataset_ref,
    materialise,
    resolve_tasks,
    split_of,
    verdicts,
)
from cowork.synth.stats import collect

datasets = pytest.importorskip("datasets")
ROOT = Path(__file__).resolve().parents[2]


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """64 generated specs (``cowork synth corpus --dataset``) and their dataset."""
    base = tmp_path_factory.mktemp("ds")
    corpus, ds = base / "corpus", base / "dataset"
    assert main(["synth", "corpus", "--out", str(corpus), "--n", "64", "--only", "generators", "--seed", "0",
                 "--dataset", str(ds)]) == 0
    return corpus, ds


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    """Materialised rows go under this test's folder (the resolver's default cache)."""
    from cowork import settings

    monkeypatch.setenv("COWORK_CACHE", str(tmp_path / "cache"))
    settings.get.cache_clear()
    yield tmp_path / "cache" / "datasets"
    settings.get.cache_clear()


class TestSplits:
    def test_no_world_seed_is_in_two_splits(self, built):
        _, ds = built
        loaded = datasets.load_from_disk(str(ds))
        assert list(loaded) == list(SPLITS)
        assert sum(len(loaded[s]) for s in SPLITS) == 64
        worlds = {s: set(loaded[s]["world_seed"]) for s in SPLITS}
        assert None not in set().union(*worlds.values())  # every generated spec names its world
        for i, a in enumerate(SPLITS):
            for b in SPLITS[i + 1:]:
                assert not worlds[a] & worlds[b], (a, b)
        for s in SPLITS:
            assert all(split_of(r["world_seed"], r["id"]) == s for r in loaded[s])
        assert len(loaded["train"]) > len(loaded["test"]) > 0

    def test_a_spec_without_a_world_splits_by_its_id(self):
        assert split_of(None, "a") == split_of(None, "a")
        assert {split_of(None, f"t{i}") for i in range(200)} == set(SPLITS)
        assert split_of(7, "x") == split_of(7, "y")

    def test_rows_carry_the_facts_stats_reads(self, built):
        corpus, ds = built
        loaded = datasets.load_from_disk(str(ds))
        row = next(r for s in SPLITS for r in loaded[s] if r["days"] > 1 or r["turns"] > 1)
        assert row["multi"] and row["family"] and row["capability"] == row["capabilities"][0]
        assert row["difficulty"] in ("easy", "medium", "hard") and row["oracle_calls"] > 0
        assert row["n_services"] == len(row["services"]) and row["n_traps"] == len(row["traps"])
        assert f"world:{row['world_seed']}" in row["tags"]

    def test_the_parquet_files_hold_the_same_rows(self, built):
        import pyarrow.parquet as pq

        _, ds = built
        loaded = datasets.load_from_disk(str(ds))
        for s in SPLITS:
            table = pq.read_table(ds / PARQUET_DIR / f"{s}-00000-of-00001.parquet")
            assert table.column("id").to_pylist() == loaded[s]["id"]


class TestRoundTrip:
    def test_rows_become_the_same_files_and_load(self, built, cache):
        corpus, ds = built
        folders = materialise(ds)
        assert len(folders) == 64 and all(f.parent.parent == cache for f in folders)
        for folder in folders:
            assert _tree(folder) == _tree(corpus / folder.name), folder.name
        for folder in folders[::8]:  # load_spec takes ~0.1 s for a generated spec
            assert load_spec(folder).spec.id == folder.name

    def test_a_split_by_name_by_folder_and_by_argument_is_the_same_and_cached(self, built, cache):
        _, ds = built
        by_name = materialise(f"{ds}:test")
        assert materialise(ds / "test") == by_name == materialise(ds, "test")
        assert [f.name for f in by_name] == datasets.load_from_disk(str(ds))["test"]["id"]
        assert len(list(cache.iterdir())) == 1  # written once

    def test_an_unknown_split_names_the_splits_there(self, built, cache):
        _, ds = built
        with pytest.raises(SpecError, match="no split 'dev'; it has train, validation, test"):
            materialise(f"{ds}:dev")

    def test_only_dataset_references_are_resolved(self, built, tmp_path):
        _, ds = built
        assert dataset_ref(tmp_path) is None and dataset_ref(f"{tmp_path}:test") is None
        assert dataset_ref(f"{ds}:test") == (ds, "test")
        assert resolve_tasks(["specs/fix-csv-report"]) == ["specs/fix-csv-report"]


class TestRejects:
    @pytest.fixture()
    def small(self, built, tmp_path) -> Path:
        """Three specs of the corpus, in folders A, B, C (a spec's folder name is its id)."""
        corpus, _ = built
        out = tmp_path / "small"
        for name in sorted(p.name for p in corpus.iterdir() if (p / "task.yaml").is_file())[:3]:
            shutil.copytree(corpus / name, out / name)
        return out

    def test_a_failed_validation_is_listed_with_its_reason(self, small, tmp_path):
        a, b, c = sorted(p.name for p in small.iterdir())
        report = [
            {"spec": str(small / a / "task.yaml"), "task": a, "ok": True, "findings": []},
            {"spec": str(small / b / "task.yaml"), "task": b, "ok": False,
             "findings": [{"step": "schema", "ok": True, "detail": "ok"},
                          {"step": "oracle", "ok": False, "detail": "score 0.5: check c1 failed\nmore"}]},
        ]
        (tmp_path / "report.json").write_text(json.dumps(report))
        out = tmp_path / "ds"
        assert main(["synth", "dataset", str(small), "--out", str(out), "--validation",
                     str(tmp_path / "report.json")]) == 1
        rejects = {r["id"]: r for r in map(json.loads, (out / REJECTS).read_text().splitlines())}
        assert rejects[b]["reason"] == "oracle: score 0.5: check c1 failed"
        assert rejects[b]["stage"] == "validation"
        assert "not validated" in rejects[c]["reason"]  # in no report: not proven
        ids = [i for s in SPLITS for i in datasets.load_from_disk(str(out))[s]["id"]]
        assert ids == [a]
        assert "Only specs that `cowork validate` proved" in (out / CARD).read_text()

    def test_a_spec_that_does_not_read_and_what_the_corpus_recorded_are_listed(self, small, tmp_path):
        broken = sorted(p.name for p in small.iterdir())[-1]
        (small / broken / "task.yaml").write_text("id: [unclosed\n")
        (small / "_invalid" / "x-1").mkdir(parents=True)
        (small / "_invalid" / "x-1" / "validation.json").write_text(json.dumps(
            {"spec": "x", "task": "x-1", "ok": False, "findings": [{"step": "nop", "ok": False, "detail": "nop passes"}]}))
        (small / "generation-failures.json").write_text(json.dumps({"gen-3": "ValueError: no such entity"}))
        report = build(small, tmp_path / "ds")
        got = {(r.id, r.stage): r.reason for r in report.rejects}
        assert "not YAML" in got[(broken, "read")]
        assert got[("x-1", "validation")] == "nop: nop passes"
        assert got[("gen-3", "generation")] == "ValueError: no such entity"
        assert sum(report.splits.values()) == 2 and not report.validated

    def test_a_validated_corpus_keeps_only_what_its_record_passed(self, small, tmp_path):
        from cowork.validate.validate import ValidationReport

        names = sorted(p.name for p in small.iterdir())
        reports = [ValidationReport(spec="a", task=name, ok=name != names[-1]) for name in names]
        assert verdicts(reports)[names[-1]] == "validation failed"
        (small / "validation.json").write_text(json.dumps([r.model_dump() for r in reports]))
        report = build(small, tmp_path / "ds")
        assert report.validated and [r.id for r in report.rejects] == [names[-1]]

    def test_a_folder_that_is_not_a_dataset_is_not_overwritten(self, small, tmp_path):
        (tmp_path / "busy").mkdir()
        (tmp_path / "busy" / "keep.txt").write_text("x")
        with pytest.raises(CoworkError, match="not a dataset folder"):
            build(small, tmp_path / "busy")


class TestCard:
    def test_the_card_quotes_the_stats_table_and_the_split_sizes(self, built):
        corpus, ds = built
        text = (ds / CARD).read_text()
        for line in collect([corpus]).table():
            assert line in text
        loaded = datasets.load_from_disk(str(ds))
        for s in SPLITS:
            assert f"| {s} | {len(loaded[s])} |" in text
            assert f"path: {PARQUET_DIR}/{s}-*.parquet" in text


class TestTaskLists:
    def test_the_rollout_runner_takes_a_split(self, built, cache):
        _, ds = built
        ids = datasets.load_from_disk(str(ds))["validation"]["id"]
        assert [ld.spec.id for ld in _load_tasks(f"{ds}:validation")] == ids

    def test_the_trl_adapter_takes_a_split(self, built, cache):
        from cowork.integrations.trl import CoworkTRL

        _, ds = built
        trl = CoworkTRL([f"{ds}:test"])
        assert [ld.spec.id for ld in trl.tasks] == datasets.load_from_disk(str(ds))["test"]["id"]

    @pytest.mark.docker
    def test_cowork_run_plays_a_row_of_a_split(self, tmp_path, cache, capsys):
        corpus = tmp_path / "corpus"
        shutil.copytree(ROOT / "specs" / "fix-csv-report", corpus / "fix-csv-report")
        build(corpus, tmp_path / "ds")
        split = split_of(None, "fix-csv-report")  # a hand-written spec: split by its id
        assert main(["run", f"{tmp_path / 'ds'}:{split}", "--agent", "oracle", "--fail-under", "1.0", "--json"]) == 0
        assert "fix-csv-report" in capsys.readouterr().out
