"""What ``--json`` prints, one shape per command whatever the number of episodes or specs:
``run``, ``rollout``, ``validate`` and ``grade`` (docs/cli.md, "JSON output", says the same
in words; tests/cli/test_json_shapes.py holds real outputs to these models).

``SHAPES[command].model_validate(json.loads(stdout))`` checks an output; ``json_schema(command)``
is its JSON Schema. The models forbid fields they do not name, so a new field is a change
of the documented shape, made here and in the docs together.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator

from ..grading import Grade
from ..validate.validate import ValidationReport

#: pass@k and pass^k for the k of the run (G, or the number of scored trials).
_PASS_K = re.compile(r"^pass[@^]\d+$")


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class _WithPassK(BaseModel):
    """A mapping that also holds ``pass@<k>`` and ``pass^<k>`` (numbers) for its k."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @model_validator(mode="after")
    def _only_pass_k(self) -> "_WithPassK":
        for key, value in (self.model_extra or {}).items():
            if not _PASS_K.match(key) or not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ValueError(f"unexpected field {key!r}: {value!r} (only pass@<k> and pass^<k> figures)")
        return self


class TaskFigures(_WithPassK):
    """One task's figures (``metrics.tasks[TASK]``); also ``pass@<k>`` and ``pass^<k>``."""

    trials: int = Field(description="scored episodes (infrastructure and model endpoint failures left out)")
    passes: int
    k: int = Field(description="the k of pass@k and pass^k")
    mean_score: float
    pass_at_1: float = Field(alias="pass@1")
    mean_reward: float | None
    unsafe: int = Field(description="episodes that violated a safety rule")
    safety_unknown: int = Field(description="episodes whose safety could not be judged")
    violation_rate: float
    infra_error: int
    policy_error: int
    agent_broke_sandbox: int


class Overall(_WithPassK):
    """The mean of each figure over the tasks (``metrics.overall``); none but ``tasks`` when no
    task was scored; also ``pass@<k>`` and ``pass^<k>``."""

    tasks: int
    mean_score: float | None = None
    pass_at_1: float | None = Field(default=None, alias="pass@1")
    mean_reward: float | None = None
    violation_rate: float | None = None


class Safety(_Shape):
    """Safety over every scored episode (``metrics.safety``)."""

    scored: int
    unsafe: int
    unknown: int
    violation_rate: float | None


class EpisodeCounts(_Shape):
    """Every episode, scored or not (``metrics.episodes``)."""

    total: int
    infra_error: int
    policy_error: int
    policy_error_unsafe: int
    infra_retries: int
    agent_broke_sandbox: int


class Summary(_Shape):
    """``cowork rollout --json``, and ``metrics`` of ``cowork run --json``: the run's figures
    (what ``summary.json`` of an output folder holds)."""

    tasks: dict[str, TaskFigures]
    overall: Overall
    safety: Safety
    episodes: EpisodeCounts
    agents: dict[str, int] = Field(description="episodes per agent (each episode's own), in the order first seen")
    agent: str = Field(description="the agent the run was asked for (run.json's)")
    reward: str
    group_size: int
    episodes_run: int
    episodes_resumed: int
    episodes_per_s: float
    wall_s: float


class EpisodeTrajectory(_Shape):
    """How an episode went (``runs[].trajectory``)."""

    status: str = Field(description="completed, max_turns, timeout, policy_error, infra_error, ...")
    turns: int
    tool_calls: int
    duration_s: float


class RunEpisode(_Shape):
    """One episode of ``cowork run --json`` (``runs[]``), in task order, then trial order."""

    task: str
    trial: int = Field(description="0 .. trials-1")
    agent: str = Field(description="the agent that played it (its policy's name)")
    grade: Grade = Field(description="what `cowork grade --json` prints for its evidence")
    trajectory: EpisodeTrajectory
    evidence: str | None = Field(description="its saved evidence bundle (--evidence), or null")


class RunOutput(_Shape):
    """``cowork run --json``: every episode and the figures, for one episode as for many."""

    runs: list[RunEpisode]
    metrics: Summary


class ValidateOutput(RootModel[list[ValidationReport]]):
    """``cowork validate --json``: one report per spec, in the order given, for one spec as for many."""


#: The shape each command's ``--json`` prints (``grade``: a saved bundle and a running sandbox alike).
SHAPES: dict[str, Any] = {"run": RunOutput, "rollout": Summary, "validate": ValidateOutput, "grade": Grade}


def json_schema(command: str) -> dict[str, Any]:
    """The JSON Schema of ``command``'s ``--json`` output.

    Raises:
        KeyError: a command that has no documented shape here.
    """
    return SHAPES[command].model_json_schema(by_alias=True)


__all__ = ["SHAPES", "EpisodeTrajectory", "RunEpisode", "RunOutput", "Summary", "TaskFigures", "ValidateOutput",
           "json_schema"]
