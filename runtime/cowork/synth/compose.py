"""Compositional task generators: a generator is (capability, intent) over a seeded world.

A generator is a function ``build(g: Gen) -> Draft | dict`` registered with :func:`generator`.
Where a family (``synth.family``) fills a template, a generator asks a world
(``synth.world.build_world``) for suitable entities, derives the oracle as a program over what
it found (so the number and order of steps follow from the data), writes the request in one of
several phrasings, and takes its checks from the intended end state and its traps from the
world. :class:`Gen` carries what every generator needs:

- ``g.rng`` (seeded from the generator name and the seed) and ``g.difficulty``;
- ``g.world``: the world of this task (its seed is drawn from ``g.rng``, so tasks of one
  generator spread over many worlds; ``world:<seed>`` is added to the tags, which splits a
  corpus by world);
- ``g.say(*phrasings, **fields)``: one phrasing, formatted;
- ``g.trap(kind, announced=False)``: records a trap as ``trap:<kind>`` (and ``trap-announced``
  when the prompt names it), the convention ``cowork synth stats`` reads;
- ``g.office(path, kind, data)``: renders an office file (``synth.office``) into the draft's
  files and returns the ``workspace.files`` entry that copies it into the workspace;
- ``g.text(path, text)``: the same for a text file;
- ``g.spec(...)``: the task.yaml mapping with the world's clock, the named services seeded
  from the world (from the user's viewpoint) and the tags filled in.

Generators register as families too (``family:<name>`` tags, ``cowork synth family``,
``cowork synth corpus``), so everything that works on families works on them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .family import Draft, family

#: How big a world each difficulty draws (a bigger world has more distractors).
WORLD_SIZE = {"easy": "small", "medium": "medium", "hard": "large"}
#: World seeds a generator draws from: wide enough that a corpus spans thousands of worlds.
WORLD_SEEDS = 100_000
#: Names of the registered world generators (a subset of ``family.families()``).
_GENERATORS: set[str] = set()


@dataclass
class Gen:
    """What a generator gets: randomness, difficulty, the world, and the draft being built."""

    name: str
    rng: random.Random
    difficulty: str
    world_seed: int
    _world: Any = None
    traps: list[str] = field(default_factory=list)
    announced: bool = False
    files: dict[str, str | bytes] = field(default_factory=dict)
    workspace: list[dict[str, Any]] = field(default_factory=list)

    @property
    def world(self) -> Any:
        """The task's world (built on first use; ``WORLD_SIZE`` by difficulty)."""
        if self._world is None:
            from .world import build_world

            self._world = build_world(self.world_seed, WORLD_SIZE[self.difficulty])
        return self._world

    def say(self, *phrasings: str, **fields: Any) -> str:
        """One of ``phrasings`` (drawn from ``rng``), formatted with ``fields``."""
        return self.rng.choice(phrasings).format(**fields)

    def trap(self, kind: str, *, announced: bool = False) -> None:
        """Record a trap of ``kind`` (a world fact a careless or unsafe agent falls for);
        ``announced`` when the prompt names it."""
        if kind not in self.traps:
            self.traps.append(kind)
        self.announced = self.announced or announced

    def office(self, path: str, kind: str, data: Any) -> dict[str, Any]:
        """Render an office file (``xlsx``, ``docx`` or ``pdf``) from world data into the draft's
        files under ``workspace/<path>``; returns (and records) its ``workspace.files`` entry."""
        from . import office

        render: dict[str, Callable[[Any], bytes]] = {"xlsx": office.xlsx_bytes, "docx": office.docx_bytes,
                                                      "pdf": office.pdf_bytes}
        if kind not in render:
            raise ValueError(f"office kind must be one of {', '.join(render)}, not {kind!r}")
        return self._file(path, render[kind](data))

    def text(self, path: str, text: str) -> dict[str, Any]:
        """A text file in the workspace, kept beside task.yaml; returns its ``workspace.files`` entry."""
        return self._file(path, text)

    def _file(self, path: str, content: str | bytes) -> dict[str, Any]:
        rel = f"workspace/{path}"
        self.files[rel] = content
        entry = {"path": path, "source": rel}
        self.workspace.append(entry)
        return entry

    def spec(self, *, title: str, prompt: str, services: list[str] | tuple[str, ...], tools: list[str],
             checks: list[dict[str, Any]], safety: list[dict[str, Any]], oracle: list[dict[str, Any]],
             violation: list[dict[str, Any]] | None = None, seeds: dict[str, Any] | None = None,
             **extra: Any) -> dict[str, Any]:
        """The task.yaml mapping: the world's clock and the ``services`` seeded from the world
        (``seeds`` overrides or adds a service's seed), the workspace files added so far, and
        ``world:``/``trap:`` tags. ``extra`` adds any other spec field (``limits``, ``turns``,
        ``days``, ``capabilities``...)."""
        w = self.world
        seeded = {name: w.seed_for(name) for name in services}
        seeded.update(seeds or {})
        tags = [*extra.pop("tags", []), f"world:{self.world_seed}", *(f"trap:{t}" for t in self.traps)]
        if self.traps and self.announced:
            tags.append("trap-announced")
        spec: dict[str, Any] = {"title": title, "prompt": prompt,
                                "clock": w.clock.strftime("%Y-%m-%dT%H:%M:%SZ"), "tools": tools}
        if self.workspace:
            spec["workspace"] = {"files": list(self.workspace)}
        if seeded:
            spec["services"] = seeded
        spec.update({"checks": checks, "safety": safety, "oracle": oracle, "tags": tags})
        if violation:
            spec["violation"] = violation
        spec.update(extra)
        return spec


def generator(name: str, *, capabilities: tuple[str, ...] | list[str], summary: str):
    """Register ``build(g: Gen) -> dict | Draft`` as the generator (and family) ``name``: a
    dict return is the spec (files come from ``g``), a Draft is taken as it is."""

    def register(build: Callable[[Gen], dict[str, Any] | Draft]) -> Callable[[Gen], dict[str, Any] | Draft]:
        def as_family(rng: random.Random, difficulty: str) -> Draft:
            # The world's seed is the task rng's first draw: the same (generator, seed) is the same world anywhere.
            g = Gen(name, rng, difficulty, rng.randrange(WORLD_SEEDS))
            out = build(g)
            if isinstance(out, Draft):
                return out
            tags = out.setdefault("tags", [])
            if "world-generator" not in tags:
                tags.append("world-generator")
            return Draft(out, dict(g.files))

        as_family.__doc__ = build.__doc__
        family(name, capabilities=capabilities, summary=summary)(as_family)
        _GENERATORS.add(name)
        return build

    return register


def generators() -> list[str]:
    """The names of the world generators (the built-in ones imported), sorted."""
    from .family import families

    families()  # imports the built-in families and generators
    return sorted(_GENERATORS)
