"""The capability taxonomy (runtime/cowork/spec/capabilities.yaml) names only real things, the
curated specs in specs/ are tagged with it and cover it, and docs/synthesis.md describes every
capability. No Docker needed.

The taxonomy guides task families and LLM synthesis: a tool or check type in it that does not
exist would steer a generator towards specs that cannot load, so each entry is checked against
the registries the spec loader itself uses.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from cowork.errors import SpecError
from cowork.grading import CHECK_TYPES
from cowork.services.names import SERVICE_TOOLS
from cowork.spec.capabilities import Capability, capabilities
from cowork.spec.loader import load_spec
from cowork.spec.toolnames import known_tools

ROOT = Path(__file__).resolve().parents[2]
SPEC_DIRS = sorted(p.parent for p in (ROOT / "specs").glob("*/task.yaml"))
CAPS = capabilities()


def test_the_loader_reads_every_entry_in_file_order():
    raw = yaml.safe_load((ROOT / "runtime/cowork/spec/capabilities.yaml").read_text())
    assert [e["name"] for e in raw] == list(CAPS)
    assert len(CAPS) >= 12
    for name, cap in CAPS.items():
        assert isinstance(cap, Capability) and cap.name == name
        assert cap.exercises.strip() and cap.services and cap.tools and cap.checks and cap.traps, name


@pytest.mark.parametrize("name", list(CAPS))
def test_tools_are_real_tool_names(name):
    assert set(CAPS[name].tools) <= set(known_tools()), set(CAPS[name].tools) - set(known_tools())


@pytest.mark.parametrize("name", list(CAPS))
def test_checks_are_real_check_types(name):
    assert set(CAPS[name].checks) <= set(CHECK_TYPES), set(CAPS[name].checks) - set(CHECK_TYPES)


@pytest.mark.parametrize("name", list(CAPS))
def test_services_are_real_services_or_workspace(name):
    real = set(SERVICE_TOOLS) | {"workspace"}
    assert set(CAPS[name].services) <= real, set(CAPS[name].services) - real


def test_a_tool_of_a_capability_belongs_to_one_of_its_services():
    """A capability's tools are what tasks on its services call: a service tool whose service
    the entry does not list is a slip (a workspace tool or python goes with any)."""
    owner = {t: svc for svc, tools in SERVICE_TOOLS.items() for t in tools}
    for cap in CAPS.values():
        stray = [t for t in cap.tools if t in owner and owner[t] not in cap.services]
        assert not stray, (cap.name, stray)


SPEC = """\
id: probe
title: Probe
prompt: Write done.txt.
capabilities: [triage, {cap}]
difficulty: {difficulty}
checks:
  - {{id: done, type: file_exists, path: done.txt}}
oracle:
  - tool: write_file
    args: {{path: done.txt, content: "ok"}}
violation:
  - tool: shell
    args: {{command: "rm -rf ."}}
"""


def _load(tmp_path, monkeypatch, cap: str, difficulty: str = "easy"):
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "task.yaml").write_text(SPEC.format(cap=cap, difficulty=difficulty))
    monkeypatch.chdir(tmp_path)
    return load_spec("probe")


def test_known_capabilities_and_difficulty_load(tmp_path, monkeypatch):
    spec = _load(tmp_path, monkeypatch, "data-cleanup", "hard").spec
    assert spec.capabilities == ["triage", "data-cleanup"]
    assert spec.difficulty == "hard"


def test_unknown_capability_is_a_located_error_with_did_you_mean(tmp_path, monkeypatch):
    with pytest.raises(SpecError) as e:
        _load(tmp_path, monkeypatch, "data-claenup")
    assert ("probe/task.yaml:4: capabilities[1]: unknown capability 'data-claenup'; "
            "did you mean 'data-cleanup'?") in str(e.value)


def test_unrelated_capability_lists_the_names(tmp_path, monkeypatch):
    with pytest.raises(SpecError) as e:
        _load(tmp_path, monkeypatch, "juggling")
    assert "capabilities[1]: unknown capability 'juggling'; one of: cross-service-orchestration" in str(e.value)


def test_unknown_difficulty_is_a_located_error(tmp_path, monkeypatch):
    with pytest.raises(SpecError) as e:
        _load(tmp_path, monkeypatch, "triage", "trivial")
    assert "probe/task.yaml:5: difficulty: Input should be 'easy', 'medium' or 'hard' (got 'trivial')" in str(e.value)


# --------------------------------------------------------------------------- specs/
@pytest.mark.parametrize("spec", SPEC_DIRS, ids=[p.name for p in SPEC_DIRS])
def test_every_curated_spec_is_tagged(spec):
    s = load_spec(spec).spec
    assert 1 <= len(s.capabilities) <= 3, s.capabilities
    assert len(set(s.capabilities)) == len(s.capabilities), s.capabilities
    assert s.difficulty in ("easy", "medium", "hard")


def _coverage() -> Counter:
    return Counter(c for d in SPEC_DIRS for c in load_spec(d).spec.capabilities)


def test_curated_specs_cover_every_capability_at_least_twice():
    cov = _coverage()
    thin = {c: cov[c] for c in CAPS if cov[c] < 2}
    assert not thin, f"capabilities with fewer than two specs in specs/: {thin}"


def test_curated_specs_span_every_difficulty():
    assert {load_spec(d).spec.difficulty for d in SPEC_DIRS} == {"easy", "medium", "hard"}


def test_there_are_at_least_forty_curated_specs():
    assert len(SPEC_DIRS) >= 40


# --------------------------------------------------------------------------- docs
def test_synthesis_doc_lists_every_capability_in_its_table():
    doc = (ROOT / "docs" / "synthesis.md").read_text()
    rows = {line.split("|")[1].strip().strip("`") for line in doc.splitlines() if line.startswith("| `")}
    assert set(CAPS) <= rows, set(CAPS) - rows
