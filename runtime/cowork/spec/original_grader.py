"""A task graded by its original benchmark's own grader, run in an isolated grader container.

An imported Claw-Eval task keeps its ``grader.py``: after the episode, cowork's trajectory and
the HTTP services' audit data are translated into Claw-Eval's trace format and the grader runs
in a fresh container (network none, read-only, unprivileged), its LLM judge routed to cowork's
judge. In a spec::

    original_grader:
      kind: claw_eval
      files: claw_eval              # folder beside task.yaml: src/claw_eval/** and tasks/<id>/...
      task_id: T002_email_triage    # the task's id in that layout (tasks/<task_id>/grader.py)
      services: {gmail_api: gmail}  # cowork http service -> the name the grader reads
      timeout_s: 600

The folder is never copied into the task image: the agent cannot read the grader or its
fixtures (the loader refuses a folder inside the workspace folder or a service's folder).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: A Claw-Eval task id as its folders are named (``T002_email_triage``, ``C901_trip_budget``).
TASK_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


class OriginalGrader(BaseModel):
    """The original benchmark's grader of an imported task; its result is the task's grade
    (native checks beside it are graded and reported as ``Grade.native``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    kind: Literal["claw_eval"] = "claw_eval"
    """The benchmark whose grader runs: ``claw_eval`` (the only one for now)."""
    files: str = "claw_eval"
    """A folder beside task.yaml holding the benchmark's layout: ``src/claw_eval/`` (its package)
    and ``tasks/<task_id>/`` (task.yaml, grader.py, fixtures), with each peer grader's task
    folder. Mounted read-only into the grader container; never in the task image."""
    task_id: str = Field(pattern=TASK_ID)
    """The task's id in the benchmark (its folder under ``tasks/``)."""
    services: dict[str, str] = {}
    """Each cowork HTTP service whose audit the grader reads, by the name the grader knows it
    under (``{calendar_api: calendar}``); a service left out keeps its own name."""
    timeout_s: float = Field(default=600.0, gt=0, le=3600)
    """Seconds the grader may run (its judge calls included) before it is killed; a grader that
    runs out of time grades nothing (the task is not graded, never passed)."""

    @field_validator("files")
    @classmethod
    def _relative(cls, v: str) -> str:
        if not v or v.startswith("/") or "\\" in v or any(part == ".." for part in v.split("/")):
            raise ValueError(f"{v!r}: give a folder beside task.yaml (a relative path inside the task folder)")
        return v.rstrip("/")

    @field_validator("services")
    @classmethod
    def _names(cls, v: dict[str, str]) -> dict[str, str]:
        for ours, theirs in v.items():
            if not ours or not isinstance(theirs, str) or not theirs:
                raise ValueError(f"services: {ours!r}: map a cowork http service to a non-empty original name")
        originals = list(v.values())
        dup = sorted({n for n in originals if originals.count(n) > 1})
        if dup:
            raise ValueError(f"services: two services are both named {dup[0]!r} for the grader")
        return v
