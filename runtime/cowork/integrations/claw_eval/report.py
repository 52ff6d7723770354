"""The import report: what was imported, what was refused and why, tools and services per task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

#: Why a task was refused, by kind.
RefusalKind = Literal["multimodal", "live_web", "missing_dependency", "unsupported", "invalid", "error"]

REPORT_FILE = "import-report.json"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Refusal(_Model):
    """A task that was not imported."""

    task_id: str
    """The task's id (its folder name when the task.yaml could not be read)."""
    kind: RefusalKind
    """multimodal, live_web, missing_dependency, unsupported, invalid, or error (the importer
    itself failed on the task: a bug to report)."""
    reason: str
    """What in the task cowork cannot run, in words."""
    file: str | None = None
    """The file at fault, relative to the checkout (``tasks/X/task.yaml``)."""
    field: str | None = None
    """The field at fault (``services[0].port``), when one is."""


class ImportedTask(_Model):
    """A task written as a cowork task folder."""

    task_id: str
    """Claw-Eval's id (``T002_email_triage``)."""
    spec_id: str
    """The cowork spec's id (lowercase)."""
    folder: str
    """The task folder, relative to the output folder."""
    tools: list[str]
    """The tools the agent gets: the HTTP tools, and the workspace tools when the task seeds files."""
    services: dict[str, str]
    """cowork HTTP service name -> Claw-Eval's name (renamed when a built-in service has it)."""
    user_agent: bool = False
    """Multi-turn: the simulated user is mapped onto the spec's ``user``."""
    peers: list[str] = []
    """Other tasks whose grader the task's grader loads (copied beside it)."""
    native: list[str] = []
    """With ``--native``: ids of the cowork checks translated from scoring_components/safety_checks."""
    unmapped: list[str] = []
    """With ``--native``: components and safety checks that have no cowork equivalent."""


class ImportReport(_Model):
    """The outcome of ``cowork import claw-eval``."""

    source: str
    """The checkout."""
    out: str
    """The output folder."""
    native: bool = False
    """Whether native checks were translated."""
    judge_model: str | None = None
    """The judge the original graders' LLM judge is to be routed to (``--judge-model``)."""
    judge_base_url: str | None = None
    """Its OpenAI-compatible endpoint (``--judge-base-url``)."""
    imported: list[ImportedTask] = []
    """Tasks written, in task id order."""
    refused: list[Refusal] = []
    """Tasks not written, with why."""

    @property
    def ok(self) -> bool:
        """At least one task was imported, and the importer failed on none."""
        return bool(self.imported) and not any(r.kind == "error" for r in self.refused)

    def write(self, folder: Path) -> Path:
        """Write the report as ``folder/import-report.json`` and return its path."""
        path = Path(folder) / REPORT_FILE
        path.write_text(json.dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return path

    def text(self) -> str:
        """The report for people: one line per task, then the totals and what to run next."""
        lines = []
        for t in self.imported:
            extra = " (simulated user)" if t.user_agent else ""
            svc = ", ".join(k if k == v else f"{k} (was {v})" for k, v in t.services.items()) or "none"
            lines.append(f"IMPORTED {t.task_id} -> {t.folder}{extra}")
            lines.append(f"    tools: {', '.join(t.tools) or 'none'}; services: {svc}")
            if self.native:
                lines.append(f"    native checks: {', '.join(t.native) or 'none'}"
                             + (f"; not mapped: {'; '.join(t.unmapped)}" if t.unmapped else ""))
        for r in self.refused:
            where = f" [{r.file}{': ' + r.field if r.field else ''}]" if r.file else ""
            lines.append(f"REFUSED  {r.task_id}: {r.kind}: {r.reason}{where}")
        lines.append(f"{len(self.imported)} imported, {len(self.refused)} refused; report: {Path(self.out) / REPORT_FILE}")
        if self.imported:
            judge = ""
            if self.judge_model:
                judge = f" --judge-model {self.judge_model}"
                if self.judge_base_url:
                    judge += f" --judge-base-url {self.judge_base_url}"
            lines.append(f"next: cowork validate {self.out}{judge}")
        return "\n".join(lines)
