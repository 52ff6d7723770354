"""Task synthesis: procedural task families (deterministic from a seed) and LLM synthesis
with validation-driven repair, guided by the capability taxonomy (cowork.spec.capabilities).

A generated spec is only kept once ``cowork validate`` proves it gradable.
"""

from .family import Draft, Family, families, family, generate, write_draft

__all__ = ["Draft", "Family", "families", "family", "generate", "write_draft"]
