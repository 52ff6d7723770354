"""The reaper: removes labelled containers whose owner process is gone."""

from __future__ import annotations

import logging

from . import labels as L
from .client import get_client
from .container import remove_container

log = logging.getLogger(__name__)


def managed_containers() -> list:
    """Every container (running or not) that carries the cowork label."""
    return get_client().containers.list(all=True, filters={"label": f"{L.MANAGED}=true"})


def reap(include_kept: bool = False, everything: bool = False) -> list[str]:
    """Remove orphaned sandboxes.

    Args:
        include_kept: Also remove sandboxes started with ``cowork up`` (labelled keep)
            whose owner is gone.
        everything: Remove every cowork container, owner alive or not.

    Returns:
        Names of the removed containers.
    """
    removed = []
    for c in managed_containers():
        labels = c.labels or {}
        if not everything:
            if labels.get(L.KEEP) == "true" and not include_kept:
                continue
            if L.owner_alive(labels):
                continue
        remove_container(c.id, labels.get(L.RUN_DIR))
        removed.append(c.name)
    if removed:
        log.info("reaped %d orphaned sandbox(es): %s", len(removed), ", ".join(removed))
    return removed
