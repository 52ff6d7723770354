"""The package's layers, read from the code: every import (top level, inside functions, under
``TYPE_CHECKING``) of every module of ``runtime/cowork``, held against the data flow.

A circle hidden in a function is still a circle: the modules cannot be read, tested or moved
one without the other. ``COWORK_LAYERS_ROOT`` points the checks at another checkout's
``runtime`` folder (how the note on the layout showed they fail on the old one).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

RUNTIME = Path(os.environ.get("COWORK_LAYERS_ROOT") or Path(__file__).resolve().parents[1] / "runtime")
PACKAGE = RUNTIME / "cowork"

#: What the sandbox image holds (engine.images.IN_CONTAINER): code there imports nothing else.
IN_CONTAINER = ("cowork", "cowork.formats", "cowork.toolhost", "cowork.services", "cowork.server")
#: Loose modules allowed directly in runtime/cowork (the issue's limit: 8).
MAX_ROOT_MODULES = 8


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{self.source}:{self.line} -> {self.target}"


def _modules(package: Path) -> dict[str, Path]:
    out = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def import_graph(package: Path = PACKAGE) -> dict[str, list[Edge]]:
    """Every module's imports of other cowork modules, wherever in the module they stand."""
    modules = _modules(package)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, list[Edge]] = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = []
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    full = ".".join(base + ([node.module] if node.module else []))
                else:
                    full = node.module or ""
                # `from pkg import mod` imports the module; `from mod import name` the module
                targets = [f"{full}.{a.name}" if f"{full}.{a.name}" in modules else full for a in node.names]
            for target in targets:
                if _within(target, "cowork"):
                    resolved = resolve(target)
                    if resolved and resolved != name:
                        edges.append(Edge(name, resolved, node.lineno))
        graph[name] = edges
    return graph


def circles(graph: dict[str, list[Edge]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted({e.target for e in graph[root]})))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted({e.target for e in graph.get(child, [])}))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _violations(graph: dict[str, list[Edge]], source: str, allowed: tuple[str, ...]) -> list[str]:
    return [str(e) for name, edges in graph.items() if _within(name, source) for e in edges
            if not any(_within(e.target, a) if a != "cowork" else e.target == "cowork" for a in allowed)]


def _forbidden(graph: dict[str, list[Edge]], source: str, forbidden: tuple[str, ...]) -> list[str]:
    return [str(e) for name, edges in graph.items() if _within(name, source) for e in edges
            if any(_within(e.target, f) for f in forbidden)]


@pytest.fixture(scope="module")
def graph() -> dict[str, list[Edge]]:
    return import_graph()


class TestLayers:
    def test_the_graph_sees_imports_inside_functions_and_type_checking(self, tmp_path):
        pkg = tmp_path / "cowork"
        (pkg / "a").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "a" / "__init__.py").write_text("")
        (pkg / "a" / "x.py").write_text("def f():\n    from . import y\n")
        (pkg / "a" / "y.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .x import f\n")
        assert circles(import_graph(pkg)) == [["cowork.a.x", "cowork.a.y"]]

    def test_no_import_circle(self, graph):
        assert circles(graph) == []

    def test_in_container_code_imports_only_the_in_container_set(self, graph):
        for place in ("cowork.server", "cowork.services", "cowork.toolhost"):
            assert _violations(graph, place, IN_CONTAINER) == [], place

    def test_the_tool_framework_knows_no_tool(self, graph):
        assert _violations(graph, "cowork.toolhost", ("cowork.toolhost", "cowork.formats")) == []
        assert _forbidden(graph, "cowork.services", ("cowork.server",)) == []

    def test_graders_never_reach_a_model_policy_docker_or_a_sandbox(self, graph):
        forbidden = ("cowork.agents", "cowork.engine", "cowork.sandbox", "cowork.episode", "cowork.rollout",
                     "cowork.server", "cowork.cli")
        assert _forbidden(graph, "cowork.grading", forbidden) == []

    def test_specs_import_only_their_vocabulary(self, graph):
        # The seed records' models live beside each mock service (services/<name>.py), so the
        # spec and the in-container server validate one definition of them; nothing else.
        allowed = ("cowork.spec", "cowork.formats", "cowork.errors", "cowork.services",
                   "cowork.settings")  # settings: the spec-yaml cache folder
        assert _violations(graph, "cowork.spec", allowed) == []

    def test_policies_know_nothing_of_docker_or_sandboxes(self, graph):
        assert _forbidden(graph, "cowork.agents", ("cowork.engine", "cowork.sandbox", "cowork.server")) == []

    def test_at_most_eight_modules_at_the_root(self):
        loose = sorted(p.name for p in PACKAGE.glob("*.py"))
        assert len(loose) <= MAX_ROOT_MODULES, loose

    def test_in_container_code_never_imports_docker(self):
        for place in ("server", "services", "toolhost"):
            for path in (PACKAGE / place).rglob("*.py"):
                for node in ast.walk(ast.parse(path.read_text())):
                    names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                        [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
                    assert not any(_within(n, "docker") for n in names), path
