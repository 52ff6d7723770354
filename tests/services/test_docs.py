"""docs/services.md lists every service, tool and seed field, so the page cannot drift from the code."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from cowork.services.names import SERVICE_TOOLS
from cowork.services.registry import SERVICES

DOC = (Path(__file__).resolve().parents[2] / "docs" / "services.md").read_text()


def section(service: str) -> str:
    m = re.search(rf"^## {service}\n(.*?)(?=^## |\Z)", DOC, re.DOTALL | re.MULTILINE)
    assert m, f"docs/services.md has no '## {service}' section"
    return m.group(1)


def field_names(model: type[BaseModel], seen: set[type] | None = None) -> set[str]:
    """Every field name of a seed model and the seed models nested in it (by alias)."""
    seen = seen if seen is not None else set()
    if model in seen:
        return set()
    seen.add(model)
    names = set()
    for name, info in model.model_fields.items():
        names.add(info.alias or name)
        stack = [info.annotation]
        while stack:
            tp = stack.pop()
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                names |= field_names(tp, seen)
            stack += typing.get_args(tp)
    return names


@pytest.mark.parametrize("service", sorted(SERVICE_TOOLS))
def test_every_tool_has_a_row(service):
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", section(service), re.MULTILINE))
    assert rows == set(SERVICE_TOOLS[service])


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_every_seed_field_is_named(service):
    text = section(service)
    missing = sorted(n for n in field_names(SERVICES[service].SEED) if f"`{n}`" not in text)
    assert not missing, f"{service}: seed fields not in docs/services.md: {missing}"


def test_the_count_in_words_matches():
    words = {14: "fourteen", 15: "fifteen", 16: "sixteen"}
    assert f"serve {words[len(SERVICES)]} stateful mock services" in DOC
    for name in SERVICES:
        assert f"{name}" in DOC.split("\n\n")[1], name
