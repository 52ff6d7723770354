"""Procedural task families: code that turns a seed into a complete, consistent spec.

A family is a function ``build(rng, difficulty) -> Draft`` registered with :func:`family`.
Everything it returns is decided by ``rng`` (a ``random.Random`` seeded from the family
name and the seed), so the same seed always gives the same spec, byte for byte. The draft
holds the task.yaml content (workspace files inline as ``workspace.files[].content``);
oracle, violation, checks and safety rules are built from the same generated facts, so they
agree by construction. ``cowork validate`` still proves every one.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import CoworkError

DIFFICULTIES = ("easy", "medium", "hard")


@dataclass
class Draft:
    """A generated spec: ``spec`` is the task.yaml mapping (its ``id``, ``capabilities`` and
    ``difficulty`` are filled in by :func:`generate` when the family leaves them out)."""

    spec: dict[str, Any]
    #: Extra files beside task.yaml (relative path -> text, or bytes for binary files such as
    #: the xlsx, docx and pdf of synth.office), e.g. under ``workspace/``.
    files: dict[str, str | bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Family:
    """One registered task family."""

    name: str
    capabilities: tuple[str, ...]
    summary: str
    build: Callable[[random.Random, str], Draft]


_FAMILIES: dict[str, Family] = {}


def family(name: str, *, capabilities: tuple[str, ...] | list[str], summary: str):
    """Register ``build(rng, difficulty) -> Draft`` as the family ``name``."""

    def register(build: Callable[[random.Random, str], Draft]) -> Callable[[random.Random, str], Draft]:
        if name in _FAMILIES:
            raise ValueError(f"task family {name!r} registered twice")
        _FAMILIES[name] = Family(name, tuple(capabilities), summary, build)
        return build

    return register


def families() -> dict[str, Family]:
    """Every registered family, by name (imports the built-in ones)."""
    import importlib

    # Not `from . import families`: the package re-exports this function under that name, so
    # the attribute would shadow the subpackage and nothing would be imported.
    importlib.import_module(f"{__package__}.families")  # registers the built-in families
    importlib.import_module(f"{__package__}.generators")  # and the world generators (synth.compose)

    return dict(_FAMILIES)


def _rng(name: str, seed: int) -> random.Random:
    # Not hash(): that is salted per process. The same (family, seed) is the same spec anywhere.
    return random.Random(int.from_bytes(hashlib.sha256(f"{name}:{seed}".encode()).digest()[:8], "big"))


def generate(name: str, seed: int, difficulty: str | None = None) -> Draft:
    """The family's spec for ``seed``: id ``<family>-<seed>``; difficulty cycles through
    easy, medium, hard with the seed unless given."""
    fams = families()
    if name not in fams:
        import difflib

        close = difflib.get_close_matches(name, list(fams), n=3)
        raise CoworkError(f"no task family {name!r}" + (f"; did you mean {' or '.join(map(repr, close))}?" if close
                                                        else f"; families: {', '.join(sorted(fams))}"))
    fam = fams[name]
    level = difficulty or DIFFICULTIES[seed % len(DIFFICULTIES)]
    if level not in DIFFICULTIES:
        raise CoworkError(f"difficulty must be one of {', '.join(DIFFICULTIES)}, not {level!r}")
    draft = fam.build(_rng(name, seed), level)
    spec = {"id": f"{name}-{seed}", **draft.spec}
    spec.setdefault("capabilities", list(fam.capabilities))
    spec.setdefault("difficulty", level)
    spec.setdefault("tags", [])
    if "generated" not in spec["tags"]:
        spec["tags"] = [*spec["tags"], "generated", f"family:{name}"]
    return Draft(spec, dict(draft.files))


# libyaml's emitter where present: the pure-Python one took 90 % of `synth corpus` on world specs
# (0.7 s for an 800 KB spec); the representers below stay Python either way.
class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    pass


def _str(dumper: Any, value: str) -> Any:
    # Multi-line text as a block (readable prompts and file contents).
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def write_draft(draft: Draft, out: Path) -> Path:
    """Write ``out/<id>/task.yaml`` (and the draft's extra files); returns the folder."""
    folder = Path(out) / draft.spec["id"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.yaml").write_text(yaml.dump(draft.spec, Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                                                width=100))
    for rel, content in draft.files.items():
        path = folder / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            raise CoworkError(f"family file {rel!r} is outside the spec folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return folder
