"""Custom checks as plugins, discovered by the entry point group ``cowork.checks``.

A plugin is a callable ``check(options: dict, evidence: Evidence) -> (passed, detail[, proof])``
where ``passed`` is True, False or None (not graded). Register it in your package::

    [project.entry-points."cowork.checks"]
    word_count = "my_pkg.checks:word_count"
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any, Callable

GROUP = "cowork.checks"
_registry: dict[str, Callable[..., Any]] = {}


def register(name: str, fn: Callable[..., Any]) -> None:
    """Register a plugin in-process (tests, notebooks) without an entry point."""
    _registry[name] = fn


def load_plugin(name: str) -> Callable[..., Any]:
    """The plugin called ``name``.

    Raises:
        LookupError: when no installed entry point nor registered plugin has that name.
    """
    if name in _registry:
        return _registry[name]
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            fn = ep.load()
            _registry[name] = fn
            return fn
    known = sorted({*_registry, *(ep.name for ep in entry_points(group=GROUP))})
    raise LookupError(f"no check plugin named {name!r} (group {GROUP}); installed: {', '.join(known) or 'none'}")
