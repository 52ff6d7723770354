"""A folder of cowork specs as an Inspect ``Task``."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

from inspect_ai import Task
from inspect_ai.agent import react
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.solver import Solver
from inspect_ai.util import SandboxEnvironmentSpec

from ...errors import SpecError
from ...spec.loader import LoadedSpec, load_spec, load_specs
from .sandbox import SPEC_KEY, _spec_path
from .scoring import cowork_scorer
from .tools import cowork_tools

log = logging.getLogger(__name__)


def cowork_task(specs: str | os.PathLike | Iterable[str | os.PathLike], *, solver: Solver | Any = None,
                name: str | None = None, **task_args: Any) -> Task:
    """An Inspect task from cowork specs: one sample per spec, each in its own cowork sandbox,
    graded by :func:`cowork_scorer`.

    Args:
        specs: A task folder, a task.yaml, a folder of task folders, or several of these.
        solver: Inspect solver or agent (default: ``react`` with :func:`cowork_tools`, ending
            when the model stops calling tools). Each sample's input is the spec's system
            prompt (or cowork's default) and its prompt.
        name: The task's name (default ``cowork``).
        **task_args: More ``Task`` arguments (``epochs``, ``message_limit``, ...).

    Raises:
        SpecError: a spec is invalid, two share an id, or no single-turn spec was given.
    """
    paths = [specs] if isinstance(specs, (str, os.PathLike)) else list(specs)
    loaded: list[LoadedSpec] = []
    for item in load_specs(paths):
        if item.spec.user is not None or item.spec.days or item.spec.events:
            log.warning("cowork_task: %s is multi-turn (user, days or events), which needs cowork's own "
                        "episode driver; left out", item.spec.id)
            continue
        loaded.append(item)
    if not loaded:
        raise SpecError(f"cowork_task: no single-turn cowork spec found in {[str(p) for p in paths]}")
    from ...episode.run import DEFAULT_SYSTEM

    # The spec's system prompt (or cowork's default) travels with each sample, since specs differ.
    samples = [Sample(id=item.spec.id,
                      input=[ChatMessageSystem(content=item.spec.system_prompt or DEFAULT_SYSTEM),
                             ChatMessageUser(content=item.spec.prompt)],
                      metadata={SPEC_KEY: str(item.root.resolve()), "title": item.spec.title},
                      sandbox=SandboxEnvironmentSpec("cowork", str(item.root.resolve())))
               for item in loaded]
    if "message_limit" not in task_args:
        # The spec's turn limit, in messages: each turn is an assistant message and its tool results.
        task_args["message_limit"] = 2 + 2 * max(item.spec.limits.max_turns for item in loaded)
    return Task(dataset=samples, solver=solver if solver is not None else _default_agent(),
                scorer=cowork_scorer(), name=name or "cowork", **task_args)


def _default_agent() -> Any:
    """``react`` with the cowork tools and no submit tool (the model's last reply is its
    answer, as in a cowork episode); the system prompt is the sample's own."""
    return react(prompt=None, tools=[cowork_tools()], submit=False)


def load_spec_for_sample(metadata: dict[str, Any]) -> LoadedSpec:
    """The spec a sample of :func:`cowork_task` was made from (e.g. in a custom scorer).

    Raises:
        SpecError: the metadata names no spec, or it is invalid.
    """
    return load_spec(_spec_path(None, metadata))
