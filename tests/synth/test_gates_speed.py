"""The static gates and ``synth stats`` give the same answers whichever way the specs load (the
fast path with a cold cache, from the cache, the strict line-mapping path), and a batch parses
each spec at most once. The timings are in docs/performance.md ("Loading specs"); none here.

No Docker needed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cowork import settings
from cowork.cli import main
from cowork.spec import fastyaml
from cowork.spec import loader as spec_loader
from cowork.synth import stats
from cowork.synth.family import generate, write_draft

FAMILIES = ["sales-account-review", "sched_series_exceptions", "support_attachment_filing", "mt_change_of_mind"]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COWORK_CACHE", str(tmp_path / "cache"))
    settings.reload()
    yield tmp_path / "cache" / "spec-yaml"
    settings.get.cache_clear()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    for name in FAMILIES:
        write_draft(generate(name, 7100), out)
    return out


@pytest.fixture
def parses(monkeypatch) -> list[int]:
    counted: list[int] = []
    parse = fastyaml.parse
    monkeypatch.setattr(fastyaml, "parse", lambda text: counted.append(len(text)) or parse(text))
    return counted


def _check(corpus: Path, capsys) -> dict:
    main(["synth", "check", str(corpus), "--static", "--json"])
    return json.loads(capsys.readouterr().out)


def test_the_static_gates_answer_the_same_whichever_way_specs_load(corpus, capsys, monkeypatch, parses, cache):
    cold = _check(corpus, capsys)
    assert len(parses) == len(FAMILIES)  # each spec parsed once, all big enough to be cached
    assert len(list(cache.glob("*.json.z"))) == len(FAMILIES)
    warm = _check(corpus, capsys)
    assert len(parses) == len(FAMILIES)  # all from the cache
    monkeypatch.setattr(spec_loader, "_load_fast", lambda file: None)
    shutil.rmtree(cache.parent / "gate-features")  # so that the specs are loaded again
    strict = _check(corpus, capsys)
    assert cold["specs"] == len(FAMILIES)
    assert cold == warm == strict


def test_a_big_spec_that_does_not_load_is_refused_with_the_strict_message(corpus, tmp_path, capsys, monkeypatch):
    batch = tmp_path / "batch"
    shutil.copytree(corpus, batch)
    broken = sorted(batch.glob("mt_change_of_mind-*/task.yaml"))[0]
    text = broken.read_text()
    broken.write_text(text + "titel: typo\n")
    monkeypatch.chdir(tmp_path)
    refused = _check(Path("batch"), capsys)["refused"]
    shown = str(broken.relative_to(tmp_path))
    assert refused[str(Path("batch") / broken.parent.name)] == [
        f"does not load: {shown}:{text.count(chr(10)) + 1}: titel: unknown field; remove it or check its spelling "
        "(did you mean 'title'?)"]


def test_stats_reads_the_same_figures_through_the_fast_parser_and_its_cache(corpus, monkeypatch, parses):
    cold = stats.collect([corpus]).as_dict()
    warm = stats.collect([corpus]).as_dict()
    assert len(parses) == len(FAMILIES)
    monkeypatch.setattr(stats, "FAST_FROM", 1 << 40)  # every spec through PyYAML, as before
    assert cold == warm == stats.collect([corpus]).as_dict()
    assert len(parses) == len(FAMILIES)


def test_loading_in_processes_gives_the_same_specs_and_errors(corpus, tmp_path, monkeypatch):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "task.yaml").write_text("id: broken\ntitel: x\n")
    targets = [*sorted(corpus.iterdir()), broken]
    serial = spec_loader.load_each(targets)
    monkeypatch.setattr(spec_loader, "PARALLEL_FROM", 1)
    monkeypatch.setattr(spec_loader.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    parallel = spec_loader.load_each(targets)
    assert [x.spec for x in parallel[:-1]] == [x.spec for x in serial[:-1]]
    assert parallel[-1].problems == serial[-1].problems and len(serial[-1].problems) == 5  # kept whole
