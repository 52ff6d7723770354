"""Names a task declares for its own HTTP tools and services, while its spec or config validates.

Pure data, shared by host and container: a spec's tool-name fields and fault rules may name the
task's HTTP tools and services beside the built-in ones (see cowork.spec.http_services), and
the in-container server validates the task's fault rules with the same names.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

#: ``(tool names, service names)`` of the task's own HTTP tools and services while its spec
#: (or task.json) validates; empty otherwise.
DECLARED: ContextVar[tuple[frozenset[str], frozenset[str]]] = ContextVar(
    "cowork_http_declared", default=(frozenset(), frozenset()))


@contextlib.contextmanager
def declared(tools: Any, services: Any) -> Iterator[None]:
    """Make ``tools`` and ``services`` (names) the declared HTTP ones while the block runs."""
    token = DECLARED.set((frozenset(t for t in tools if isinstance(t, str)),
                          frozenset(s for s in services if isinstance(s, str))))
    try:
        yield
    finally:
        DECLARED.reset(token)


def declared_in(data: Any) -> tuple[list[str], list[str]]:
    """The HTTP tool and service names a raw spec (or task.json) declares."""
    if not isinstance(data, dict):
        return [], []

    def names(key: str) -> list[str]:
        items = data.get(key)
        return [i["name"] for i in items if isinstance(i, dict) and isinstance(i.get("name"), str)] \
            if isinstance(items, list) else []
    return names("http_tools"), names("http_services")
