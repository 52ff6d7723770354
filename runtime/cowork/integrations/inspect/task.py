"""A folder of cowork specs as an Inspect ``Task``."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from inspect_ai import Task
from inspect_ai._util.registry import is_registry_object
from inspect_ai.agent import as_solver, is_agent, react
from inspect_ai.dataset import Sample
from inspect_ai.solver import Solver, system_message
from inspect_ai.util import SandboxEnvironmentSpec

from ...errors import SpecError
from ...spec.loader import LoadedSpec, load_spec, load_specs
from .sandbox import SPEC_KEY, _spec_path
from .scoring import cowork_scorer
from .tools import cowork_tools

log = logging.getLogger(__name__)


#: The sample metadata key holding the spec's system prompt (or cowork's default), which the
#: task's first solver, Inspect's ``system_message``, puts in a system message.
SYSTEM_KEY = "cowork_system_prompt"


class CoworkTask(Task):
    """An Inspect ``Task`` named like any other: by its ``name=``, else by the ``@task``
    function that returns it (Inspect's registry name), else - built and run directly, with no
    ``@task`` around it - by its specs (see :func:`cowork_task`), where Inspect would say
    ``task``."""

    def __init__(self, *args: Any, default_name: str, **kwargs: Any):
        self._cowork_default_name = default_name
        super().__init__(*args, **kwargs)

    @property
    def name(self) -> str:
        """``name=``, else the ``@task`` function's registry name, else the specs' name."""
        if self._name is None and not is_registry_object(self):
            return self._cowork_default_name
        return super().name

    @property
    def display_name(self) -> str:
        """``display_name=`` or ``name=``, else the ``@task`` function's name, else the specs' name."""
        if self._display_name is None and self._name is None and not is_registry_object(self):
            return self._cowork_default_name
        return super().display_name


def cowork_task(specs: str | os.PathLike | Iterable[str | os.PathLike], *, solver: Solver | Any = None,
                name: str | None = None, evidence_dir: str | None = None, judge_role: str | None = "grader",
                **task_args: Any) -> Task:
    """An Inspect task from cowork specs: one sample per spec, each in its own cowork sandbox,
    graded by :func:`cowork_scorer`.

    Args:
        specs: A task folder, a task.yaml, a folder of task folders, or several of these.
        solver: Inspect solver or agent (default: ``react`` with :func:`cowork_tools`, ending
            when the model stops calling tools). It runs after Inspect's ``system_message``
            solver, which gives each sample the spec's system prompt (or cowork's default) as
            a system message; the sample's input is the spec's prompt, the user's request.
        name: The task's name. Default: the name of the ``@task`` function that returns it,
            as for any Inspect task; built without one, the spec's id (one spec), the folder's
            name (one folder of specs) or ``cowork`` (several).
        evidence_dir: Save each sample's evidence bundle and results line here (see
            :func:`cowork_scorer`; default ``$COWORK_INSPECT_EVIDENCE``, else none saved).
        judge_role: The model role that judges ``judge`` checks (``--model-role grader=MODEL``,
            or ``model_roles=`` here); none bound: they are not graded (see :func:`cowork_scorer`).
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

    # The input is the user's request alone (what Inspect View lists per sample); the system
    # prompt differs between specs, so it travels in the metadata to the system_message solver.
    samples = [Sample(id=item.spec.id, input=item.spec.prompt,
                      metadata={SPEC_KEY: str(item.root.resolve()), "title": item.spec.title,
                                SYSTEM_KEY: item.spec.system_prompt or DEFAULT_SYSTEM},
                      sandbox=SandboxEnvironmentSpec("cowork", str(item.root.resolve())))
               for item in loaded]
    if "message_limit" not in task_args:
        # The spec's turn limit, in messages: each turn is an assistant message and its tool results.
        task_args["message_limit"] = 2 + 2 * max(item.spec.limits.max_turns for item in loaded)
    return CoworkTask(dataset=samples, solver=[system_message("{" + SYSTEM_KEY + "}"), *_solvers(solver)],
                      scorer=cowork_scorer(evidence_dir, judge_role=judge_role), name=name, default_name=_default_name(paths, loaded),
                      **task_args)


def _solvers(solver: Any) -> list[Solver]:
    """The user's solver, agent or list of them (default: :func:`_default_agent`) as solvers."""
    items = [_default_agent()] if solver is None else list(solver) if isinstance(solver, (list, tuple)) else [solver]
    return [as_solver(s) if is_agent(s) else s for s in items]


def _default_name(paths: list[str | os.PathLike], loaded: list[LoadedSpec]) -> str:
    """The name of a task built without ``@task`` or ``name=``: the spec's id for one spec,
    the folder's name for one folder of specs, else ``cowork``."""
    if len(loaded) == 1:
        return loaded[0].spec.id
    if len(paths) == 1:
        return Path(paths[0]).resolve().name or "cowork"
    return "cowork"


def _default_agent() -> Any:
    """``react`` with the cowork tools and no submit tool (the model's last reply is its
    answer, as in a cowork episode); the system prompt is the sample's own (already in the
    conversation, from the system_message solver before it)."""
    return react(prompt=None, tools=[cowork_tools()], submit=False)


def load_spec_for_sample(metadata: dict[str, Any]) -> LoadedSpec:
    """The spec a sample of :func:`cowork_task` was made from (e.g. in a custom scorer).

    Raises:
        SpecError: the metadata names no spec, or it is invalid.
    """
    return load_spec(_spec_path(None, metadata))
