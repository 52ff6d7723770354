"""Exports: a rollout's episodes as SFT data (OpenAI fine-tuning, TRL) or RL token records.

``cowork export RESULTS --format {openai-sft,trl-sft,rl} --out FILE`` reads rollout output
folders (or results files), keeps what is fit to train on, says why the rest was left out and
writes one file. docs/exports.md gives the formats, the curation rules and the reward modes.

The parts: :mod:`.records` (the episodes read), :mod:`.curation` (what is kept, and the
report), :mod:`.sft` (OpenAI and TRL lines), :mod:`.rl` (token ids, masks, logprobs,
rewards) and :mod:`.write` (:func:`export`, one file). The names below are the API::

    from cowork.export import export, load_episodes, sft_examples, rl_examples
"""

from .curation import DROP_REASONS, CurationReport
from .records import EpisodeRecord, load_episodes
from .rl import rl_examples
from .sft import openai_sft_line, sft_examples, trl_sft_row, validate_openai_sft_line
from .write import FORMATS, export

__all__ = ["DROP_REASONS", "FORMATS", "CurationReport", "EpisodeRecord", "export", "load_episodes",
           "openai_sft_line", "rl_examples", "sft_examples", "trl_sft_row", "validate_openai_sft_line"]
