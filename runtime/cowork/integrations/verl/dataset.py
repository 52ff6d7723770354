"""A cowork task list as the parquet file verl's ``RLHFDataset`` reads (one row per task)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...errors import CoworkError, SpecError, require_extra
from ...spec.loader import LoadedSpec, load_specs
from ...synth.dataset import resolve_tasks

#: The columns of each row, in verl's names (verl 0.9.1, ``verl/utils/dataset/rl_dataset.py``).
COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info", "agent_name")
#: The name the agent loop is registered under (``agent_name`` picks the loop per row).
AGENT_NAME = "cowork"


def first_messages(spec: Any) -> list[dict[str, str]]:
    """The messages a cowork episode of ``spec`` starts with (system, then the task's prompt)."""
    from ...episode.run import DEFAULT_SYSTEM

    return [{"role": "system", "content": spec.system_prompt or DEFAULT_SYSTEM},
            {"role": "user", "content": spec.prompt}]


def task_rows(tasks: Iterable[str | os.PathLike[str] | LoadedSpec], *, agent_name: str = AGENT_NAME,
              data_source: str = "cowork", split: str = "train") -> list[dict[str, Any]]:
    """One verl dataset row per task, in order.

    Each row's columns, as verl uses them:

    - ``data_source``: groups validation metrics (``val-core/<data_source>/...``); the reward
      never comes from verl's reward functions, since the agent loop scores every episode.
    - ``prompt``: the episode's first messages (system, then the task's prompt) as chat
      messages: verl's prompt-length filter and its logs read it. The episode itself starts
      from the spec (the tools are rendered in as well), not from this column.
    - ``ability``: ``"agent"`` (a free label in verl).
    - ``reward_model``: ``{"style": "cowork", "ground_truth": <task id>}``: the reward comes
      from grading the sandbox's evidence, there is no ground-truth string.
    - ``extra_info``: ``index`` (the row; verl groups a prompt's samples by it in traces),
      ``split``, ``task_id``, ``task_dir`` (the absolute spec folder the agent loop starts a
      sandbox of: it must exist on every node that runs agent loop workers), ``capabilities``.
    - ``agent_name``: the registered agent loop (:data:`AGENT_NAME`).

    Args:
        tasks: Task folders, task.yaml files, folders of task folders, dataset references
            (``cowork synth dataset``), or loaded specs.
        agent_name: The agent loop every row runs with.
        data_source: The ``data_source`` of every row.
        split: Recorded in ``extra_info.split``.

    Raises:
        SpecError: a task does not load, or two share an id.
    """
    loaded: list[LoadedSpec] = []
    for item in resolve_tasks(list(tasks)):
        loaded += [item] if isinstance(item, LoadedSpec) else load_specs([item])
    seen: dict[str, Path] = {}
    for ld in loaded:
        if seen.setdefault(ld.spec.id, ld.root) != ld.root:
            raise SpecError(f"{ld.path}: id: duplicate task id {ld.spec.id!r}, also used by {seen[ld.spec.id]}")
    rows = []
    for index, ld in enumerate(loaded):
        spec = ld.spec
        rows.append({
            "data_source": data_source,
            "prompt": first_messages(spec),
            "ability": "agent",
            "reward_model": {"style": "cowork", "ground_truth": spec.id},
            "extra_info": {"index": index, "split": split, "task_id": spec.id, "task_dir": str(ld.root.resolve()),
                           "capabilities": [str(c) for c in spec.capabilities]},
            "agent_name": agent_name,
        })
    return rows


def verl_dataset(tasks: Iterable[str | os.PathLike[str] | LoadedSpec], out: str | os.PathLike[str], *,
                 agent_name: str = AGENT_NAME, data_source: str = "cowork", split: str = "train") -> int:
    """Write ``tasks`` as a parquet file for verl's ``data.train_files`` / ``data.val_files``.

    See :func:`task_rows` for the columns. verl repeats each row
    ``actor_rollout_ref.rollout.n`` times (the GRPO group), so one row per task is enough.

    Returns:
        The number of rows written.

    Raises:
        SpecError: a task does not load, or two share an id.
        CoworkError: no task was given, or pyarrow (the ``hf`` extra) is not installed.
    """
    rows = task_rows(tasks, agent_name=agent_name, data_source=data_source, split=split)
    if not rows:
        raise CoworkError("no task to write: give task folders, folders of them, or a dataset reference")
    pa = require_extra("pyarrow", "hf", "writing a verl dataset needs pyarrow")
    import pyarrow.parquet as pq

    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    """``python -m cowork.integrations.verl TASK... --out FILE``: :func:`verl_dataset` from
    the shell (``--split``, ``--data-source``, ``--agent-name``); prints the row count."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m cowork.integrations.verl",
                                     description="Write cowork tasks as the parquet file verl's RLHFDataset reads.")
    parser.add_argument("tasks", nargs="+", help="task folders, folders of them, or dataset references")
    parser.add_argument("--out", required=True, help="the parquet file to write")
    parser.add_argument("--split", default="train", help="recorded in extra_info.split")
    parser.add_argument("--data-source", default="cowork", help="the data_source column")
    parser.add_argument("--agent-name", default=AGENT_NAME, help="the agent loop every row runs with")
    args = parser.parse_args(argv)
    n = verl_dataset(args.tasks, args.out, agent_name=args.agent_name, data_source=args.data_source, split=args.split)
    print(f"wrote {n} task row(s) to {args.out}")  # noqa: T201 - this is a command
    return 0


__all__ = ["AGENT_NAME", "COLUMNS", "first_messages", "main", "task_rows", "verl_dataset"]
