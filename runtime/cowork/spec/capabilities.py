"""The capability taxonomy (capabilities.yaml beside this module): what a task exercises.

Every spec names its capabilities and a difficulty; task families (cowork.synth) and LLM
synthesis are guided by it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import AfterValidator

#: How hard a task is, by the steps and services its oracle needs and the traps it sets.
Difficulty = Literal["easy", "medium", "hard"]


@dataclass(frozen=True)
class Capability:
    """One entry of the taxonomy."""

    name: str
    exercises: str
    services: tuple[str, ...]
    tools: tuple[str, ...]
    checks: tuple[str, ...]
    traps: tuple[str, ...]


@functools.cache
def capabilities() -> dict[str, Capability]:
    """The taxonomy, by name, in file order."""
    raw = yaml.safe_load((Path(__file__).with_name("capabilities.yaml")).read_text())
    return {e["name"]: Capability(e["name"], e["exercises"], tuple(e["services"]), tuple(e["tools"]),
                                  tuple(e["checks"]), tuple(e["traps"])) for e in raw}


def _capability_name(name: str) -> str:
    if name not in capabilities():
        import difflib

        close = difflib.get_close_matches(str(name), list(capabilities()), n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(repr(c) for c in close)}?" if close else \
            f"one of: {', '.join(capabilities())}"
        raise ValueError(f"unknown capability {name!r}; {hint} (see docs/synthesis.md)")
    return name


CapabilityName = Annotated[str, AfterValidator(_capability_name)]
