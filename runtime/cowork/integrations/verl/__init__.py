"""cowork tasks in verl: an agent loop that runs graded sandbox episodes, and the task dataset.

Two parts, each importable alone:

- :func:`verl_dataset` (``dataset``): a task list as the parquet file verl's ``RLHFDataset``
  reads, one row per task, every row naming the ``cowork`` agent loop. Needs pyarrow only.
- :class:`CoworkAgentLoop` (``loop``): verl's ``AgentLoopBase`` registered as ``cowork``; per
  row it runs the task in a pooled sandbox, the model generating on verl's server, grades the
  evidence and returns ``AgentLoopOutput``. Needs verl (imported on first use of the name).

Register the loop in verl's config with a file named by
``actor_rollout_ref.rollout.agent.agent_loop_config_path``::

    - name: cowork
      _target_: cowork.integrations.verl.CoworkAgentLoop
      max_sandboxes: 16

See docs/training.md (the verl section) and docs/exports.md.
"""

from __future__ import annotations

from typing import Any

from .dataset import AGENT_NAME, COLUMNS, first_messages, task_rows, verl_dataset

_LOOP_NAMES = ("CoworkAgentLoop", "LoopOptions", "close", "episode_output", "record_output")


def __getattr__(name: str) -> Any:
    """The agent loop's names, imported with verl on first use (hydra's ``_target_`` finds them here)."""
    if name in _LOOP_NAMES:
        from . import loop

        return getattr(loop, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AGENT_NAME", "COLUMNS", "CoworkAgentLoop", "LoopOptions", "close", "episode_output", "first_messages",
           "record_output", "task_rows", "verl_dataset"]
