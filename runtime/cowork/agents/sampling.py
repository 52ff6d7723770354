"""The distribution a token is sampled from, for the hf backend: the model's logits with
temperature, top-k and top-p applied, in that order (as vLLM's sampler and transformers'
logits warpers apply them).

The log-probabilities a trajectory records are this distribution's
(``logprobs_mode = "processed_logprobs"``): the probability with which the token was
actually drawn, what an importance-sampling correction between the sampler and the trainer
needs (TRL's GRPO warns when its vLLM server reports anything else). At temperature 0
(greedy) the choice has no distribution of its own: the tokens carry the log-probabilities
at temperature 1 with top-k and top-p applied.

Imports torch lazily (the ``hf`` extra).
"""

from __future__ import annotations

from typing import Any

from .tokens import SamplingSettings


def processed_logprobs(logits: Any, s: SamplingSettings) -> Any:
    """Log-probabilities over the vocabulary of the distribution ``s`` samples from.

    Args:
        logits: The model's logits of one position (a 1-D float tensor).
        s: The sampling settings.

    Returns:
        A tensor like ``logits``: ``log_softmax`` of the temperature-scaled logits restricted
        to the top-k tokens and then to the smallest set of most likely ones whose
        probability reaches top-p; ``-inf`` for every token left out.
    """
    import torch

    scaled = logits.float() / (s.temperature if s.temperature > 0 else 1.0)
    if 0 < s.top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, s.top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if s.top_p < 1.0:
        probs = torch.softmax(scaled, dim=-1)
        sorted_p, order = torch.sort(probs, descending=True)
        # Keep a token while the mass of those before it is below top_p: the smallest
        # nucleus that reaches top_p, and never an empty one.
        drop = (torch.cumsum(sorted_p, 0) - sorted_p) >= s.top_p
        scaled = scaled.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
    return torch.log_softmax(scaled, dim=-1)


def draw(logprobs: Any, s: SamplingSettings, rng: Any) -> int:
    """A token from ``logprobs`` (:func:`processed_logprobs`): the most likely at
    temperature 0, else a sample with ``rng`` (a CPU ``torch.Generator``)."""
    import torch

    if s.temperature == 0:
        return int(torch.argmax(logprobs))
    return int(torch.multinomial(logprobs.exp().cpu(), 1, generator=rng))


__all__ = ["draw", "processed_logprobs"]
