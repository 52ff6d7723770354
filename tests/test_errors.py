"""The error hierarchy: one module holds it, every class is raised somewhere, ``cowork`` exports all."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import cowork
from cowork import errors

PACKAGE = Path(cowork.__file__).parent


def _classes() -> list[type]:
    return [c for _, c in inspect.getmembers(errors, inspect.isclass)
            if issubclass(c, errors.CoworkError) and c.__module__ == errors.__name__]


def _trees():
    for path in PACKAGE.rglob("*.py"):
        yield path, ast.parse(path.read_text())


class TestErrors:
    def test_every_cowork_error_class_lives_in_errors(self):
        names = {c.__name__ for c in _classes()}
        outside = []
        for path, tree in _trees():
            if path.name == "errors.py" and path.parent == PACKAGE:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                    if bases & names:
                        outside.append(f"{path.relative_to(PACKAGE)}: {node.name}")
        assert outside == []

    def test_every_class_is_raised_somewhere(self):
        raised = set()
        for _, tree in _trees():
            for node in ast.walk(tree):
                if isinstance(node, ast.Raise) and node.exc is not None:
                    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                    raised.add(exc.id if isinstance(exc, ast.Name) else getattr(exc, "attr", ""))
                    # `raise (A if x else B)(...)`
                    if isinstance(exc, ast.IfExp):
                        raised.update(getattr(e, "id", "") for e in (exc.body, exc.orelse))
        never = [c.__name__ for c in _classes() if c is not errors.CoworkError and c.__name__ not in raised]
        assert never == []

    def test_every_class_is_exported_from_cowork(self):
        assert {c.__name__ for c in _classes()} <= set(cowork.__all__)
        for c in _classes():
            assert getattr(cowork, c.__name__) is c

    def test_an_endpoint_that_cannot_be_reached_is_one_kind_of_policy_failure(self):
        # One class per failure: a policy failing for want of its endpoint is still a policy failure.
        assert issubclass(errors.EndpointUnavailable, errors.PolicyError)
        assert issubclass(errors.EndpointUnavailable, ConnectionError)

    def test_a_missing_extra_names_the_install_line(self):
        assert errors.require_extra("json", "x", "unused") is __import__("json")
        with pytest.raises(errors.PolicyError, match=r"^the x backend needs the 'x' extra: "
                                                     r"pip install 'cowork-runtime\[x\]' \(a note\)$") as info:
            errors.require_extra("cowork_no_such_module", "x", "the x backend needs the 'x' extra", "a note",
                                 error=errors.PolicyError)
        assert isinstance(info.value.__cause__, ImportError)
        with pytest.raises(ImportError, match=r"\[inspect\]'$"):
            errors.require_extra("cowork_no_such_module", "inspect", "it needs Inspect", error=ImportError)
