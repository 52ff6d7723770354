"""The attack suite: an adversarial agent, scripted, against real sandboxes.

Each test is one attack an RL policy could learn. It runs the attack through the public API
(``run_task`` with a ``ScriptedPolicy``, or a ``Sandbox`` driven by hand) and asserts what
the grade must say: the violation named, never ``infra_error``, ``evidence_invalid`` or safe.

Adding an attack: pick a spec (``spec_dir`` copies one from ``specs/`` so it can be edited, or
``make_spec`` writes one from YAML text), script the calls, assert on the grade.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/adversarial" in str(item.fspath):
            item.add_marker(pytest.mark.docker)


@pytest.fixture
def spec_dir(tmp_path):
    """Copy ``specs/<name>`` into a temporary folder and return the copy's path."""

    def copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(ROOT / "specs" / name, dest)
        return dest

    return copy


@pytest.fixture
def make_spec(tmp_path):
    """Write ``task.yaml`` (and optional workspace files) into a fresh folder; returns the LoadedSpec."""
    from cowork.spec.loader import load_spec

    counter = iter(range(1000))

    def make(yaml_text: str, files: dict[str, str] | None = None, beside: dict[str, str] | None = None):
        """``files``: seed workspace files; ``beside``: files next to task.yaml (verifier folders)."""
        d = tmp_path / f"spec{next(counter)}"
        d.mkdir()
        (d / "task.yaml").write_text(textwrap.dedent(yaml_text))
        for base, entries in ((d / "workspace", files), (d, beside)):
            for rel, content in (entries or {}).items():
                p = base / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(content)
        return load_spec(d)

    return make


@pytest.fixture
def oracle_plus():
    """``oracle_plus(loaded, *extra)``: a ScriptedPolicy playing the spec's oracle, then the
    ``extra`` (tool, args) calls. (A fixture: test folders are not packages, so tests cannot
    import from this conftest.)"""
    from cowork.agents import ScriptedPolicy

    def make(loaded, *extra):
        steps = [(s.tool, dict(s.args)) for s in loaded.spec.oracle]
        return ScriptedPolicy([*steps, *extra])

    return make
