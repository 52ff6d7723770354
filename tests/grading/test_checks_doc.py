"""docs/checks.md shows every check type, and every example in it is a valid check."""

import re
from pathlib import Path

import yaml

from cowork.grading import CHECK_TYPES
from cowork.spec.models import TaskSpec

DOC = (Path(__file__).resolve().parents[2] / "docs" / "checks.md").read_text()


def _examples():
    for block in re.findall(r"```yaml\n(.*?)```", DOC, re.DOTALL):
        yield from yaml.safe_load(block)


def test_every_check_type_has_an_example():
    shown = {e["type"] for e in _examples()}
    assert set(CHECK_TYPES) <= shown, set(CHECK_TYPES) - shown


def test_every_example_is_a_valid_check():
    examples = list(_examples())
    for i, e in enumerate(examples):
        e["id"] = f"ex-{i}-{e.get('id', '')}"  # the doc repeats some rules in two sections
    spec = TaskSpec.model_validate({"id": "doc", "title": "t", "prompt": "p", "tools": ["shell", "read_file", "mail"],
                                    "checks": examples, "oracle": [{"tool": "shell"}], "violation": [{"tool": "shell"}]})
    assert len(spec.checks) == len(examples)
