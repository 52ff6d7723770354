"""A seeded company world: one consistent organisation, deterministic from a seed, that every
mock service is seeded from (see docs/world.md).

    from cowork.synth.world import build_world
    world = build_world(7)
    spec_services = world.services_seed(["mail", "calendar", "crm"])
"""

from .base import SIZES
from .build import build_world
from .world import World

__all__ = ["SIZES", "World", "build_world"]
