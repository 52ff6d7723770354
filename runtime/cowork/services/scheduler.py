"""Scheduler: jobs on cron schedules and their runs with logs; nothing really runs."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from ..toolhost.errors import ToolError
from .base import (
    READ,
    Email,
    Limit,
    Offset,
    SeedModel,
    SeedTime,
    ServiceContext,
    Store,
    check_ref,
    check_unique,
    hints,
    iso,
    matches,
    newest_first,
    page,
    parse_time,
    resolve_time,
    tool_adder,
)

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "scheduler"
RunStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
JobId = Annotated[str, Field(description="Job id, as listed by scheduler_list_jobs.")]
RunId = Annotated[str, Field(description="Run id, as listed by scheduler_list_runs.")]
#: Runs in these statuses are not over: a job has at most one.
ACTIVE = ("queued", "running")
MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
#: (name, lowest, highest) of the five cron fields.
_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 7))
_NAMES = {"month": "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec", "day of week": "sun|mon|tue|wed|thu|fri|sat"}


def check_cron(text: str) -> str:
    """A cron schedule (five fields, or a macro like ``@daily``) with single spaces; ValueError
    naming the field that is wrong."""
    text = " ".join(str(text).split())
    if text.lower() in MACROS:
        return text.lower()
    parts = text.split(" ")
    if len(parts) != 5:
        raise ValueError(f"{text!r} is not a cron schedule: give five fields 'minute hour day-of-month month "
                         f"day-of-week' (e.g. '30 2 * * 1-5') or one of {', '.join(MACROS)}")
    for part, (name, lo, hi) in zip(parts, _FIELDS):
        names = _NAMES.get(name)
        for item in part.split(","):
            base, _, step = item.partition("/")
            if step and not step.isdigit():
                raise ValueError(f"{text!r}: {name} step {step!r} is not a number")
            for value in ([] if base == "*" else base.split("-", 1)):
                if value.isdigit():
                    if not lo <= int(value) <= hi:
                        raise ValueError(f"{text!r}: {name} {value} is outside {lo}-{hi}")
                elif not (names and re.fullmatch(names, value.lower())):
                    raise ValueError(f"{text!r}: {name} {item!r} is not a number, range, list or step")
    return text


Cron = Annotated[str, AfterValidator(check_cron)]


class Job(SeedModel):
    """A scheduled job."""

    id: str | None = None
    """Stable id; default ``job-<n>`` by position."""
    name: str = Field(min_length=1)
    """What it is called, e.g. ``nightly-backup``."""
    schedule: Cron
    """When it runs: five cron fields (``0 2 * * *``) or a macro (``@daily``), in UTC."""
    command: str = ""
    """What it runs, for the reader; nothing is executed."""
    description: str = ""
    """What it is for."""
    enabled: bool = True
    """False: paused, it does not run on schedule and cannot be triggered."""
    owner: Email | None = None
    """Who owns it; default the user."""
    trigger_result: Literal["queued", "succeeded", "failed"] = "succeeded"
    """What a run started by scheduler_trigger_run ends as, decided by the task (no real execution)."""
    trigger_log: str = ""
    """The log of a triggered run; default a line saying it ended as ``trigger_result``."""


class Run(SeedModel):
    """One run of a job."""

    id: str | None = None
    """Stable id; default ``run-<n>`` by position."""
    job_id: str
    """The job it ran."""
    status: RunStatus = "succeeded"
    """queued, running, succeeded, failed or cancelled."""
    trigger: Literal["schedule", "manual"] = "schedule"
    """What started it."""
    started: SeedTime = "now-1d"
    """When it started (or was queued)."""
    finished: SeedTime | None = None
    """When it ended; default ``started`` for a run that is over, unset while queued or running."""
    exit_code: int | None = None
    """The process's exit code; default 0 for succeeded, 1 for failed."""
    log: str = ""
    """What it printed."""
    by: Email | None = None
    """Who triggered a manual run."""


class SchedulerSeed(SeedModel):
    """Initial state of the scheduler."""

    user: Email = "me@example.com"
    """The user's address: owner of jobs by default, recorded on manual runs and pauses."""
    jobs: list[Job] = []
    """Jobs."""
    runs: list[Run] = []
    """Runs, any order."""

    @model_validator(mode="after")
    def _refs(self) -> "SchedulerSeed":
        jobs = check_unique(self.jobs, "job", "jobs")
        check_unique(self.runs, "run", "runs")
        for n, r in enumerate(self.runs):
            check_ref(r.job_id, jobs, f"runs[{n}].job_id", "job")
            if r.status in ACTIVE and r.finished is not None:
                raise ValueError(f"runs[{n}].finished: a {r.status} run has not finished")
        return self


SEED = SchedulerSeed


def seed(store: Store, data: SchedulerSeed) -> None:
    """Write the seed's records and settings."""
    store.set_meta("user", data.user)
    for rid, j in zip(check_unique(data.jobs, "job", "jobs"), data.jobs):
        store.insert("jobs", {**j.model_dump(), "id": rid, "owner": j.owner or data.user, "paused_reason": None,
                              "updated": None})
    for rid, r in zip(check_unique(data.runs, "run", "runs"), data.runs):
        started = resolve_time(r.started, store.now)
        finished = resolve_time(r.finished, store.now) if r.finished else None if r.status in ACTIVE else started
        code = r.exit_code if r.exit_code is not None else {"succeeded": 0, "failed": 1}.get(r.status)
        store.insert("runs", {**r.model_dump(), "id": rid, "started": started, "finished": finished, "exit_code": code})


def _summary(r: dict[str, Any]) -> dict[str, Any]:
    lines = [x for x in r["log"].splitlines() if x.strip()]
    return {**{k: v for k, v in r.items() if k != "log"}, "log_tail": lines[-1][:200] if lines else ""}


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed scheduler tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    def user() -> str:
        return store.meta("user", "me@example.com")

    def runs_of(job_id: str) -> list[dict[str, Any]]:
        return newest_first([r for r in store.all("runs") if r["job_id"] == job_id], "started")

    def view(j: dict[str, Any]) -> dict[str, Any]:
        runs = runs_of(j["id"])
        last = _summary(runs[0]) if runs else None
        return {**j, "last_run": last}

    def set_job(job_id: str, changes: dict[str, Any], action: str) -> dict[str, Any]:
        store.require("jobs", job_id, "job")
        rec, changed = store.update("jobs", job_id, changes)
        if changed:
            rec, _ = store.update("jobs", job_id, {"updated": iso(store.now)})
            store.audit(action, [job_id], changed)
        return {**view(rec), "changed": changed}

    @tool("scheduler_list_jobs", READ)
    def scheduler_list_jobs(query: Annotated[str, Field(description="Words that must all occur in name, command or description.")] = "",
                            enabled: Annotated[bool | None, Field(description="Only running (true) or paused (false) jobs.")] = None,
                            owner: Annotated[str | None, Field(description="Owner address.")] = None,
                            offset: Offset = 0, limit: Limit = 20) -> dict:
        """List jobs by name, each with its schedule and last run."""
        with store.tx():
            items = [view(j) for j in store.all("jobs") if matches(query, j["name"], j["command"], j["description"])
                     and (enabled is None or j["enabled"] == enabled) and (owner is None or j["owner"] == owner.lower())]
        items.sort(key=lambda j: (j["name"], j["id"]))
        return page(items, offset, limit, "jobs")

    @tool("scheduler_get_job", READ)
    def scheduler_get_job(job_id: JobId) -> dict:
        """Read a job with its ten latest runs (without their logs)."""
        with store.tx():
            j = store.require("jobs", job_id, "job")
            return {**view(j), "runs": [_summary(r) for r in runs_of(job_id)[:10]]}

    @tool("scheduler_list_runs", READ)
    def scheduler_list_runs(job_id: Annotated[str | None, Field(description="Only runs of this job.")] = None,
                            status: RunStatus | None = None,
                            since: Annotated[str | None, Field(description="Only runs started at or after this ISO 8601 time.")] = None,
                            offset: Offset = 0, limit: Limit = 20) -> dict:
        """List runs, newest first, each with the last line of its log."""
        lo = iso(parse_time(since, "since")) if since else None
        with store.tx():
            if job_id is not None:
                store.require("jobs", job_id, "job")
            items = [r for r in store.all("runs") if (job_id is None or r["job_id"] == job_id)
                     and (status is None or r["status"] == status) and (lo is None or r["started"] >= lo)]
        return page([_summary(r) for r in newest_first(items, "started")], offset, limit, "runs")

    @tool("scheduler_get_run", READ)
    def scheduler_get_run(run_id: RunId) -> dict:
        """Read one run with its whole log."""
        with store.tx():
            r = store.require("runs", run_id, "run")
            job = store.get("jobs", r["job_id"]) or {}
        return {**r, "job_name": job.get("name")}

    @tool("scheduler_trigger_run", hints())
    def scheduler_trigger_run(job_id: JobId,
                              reason: Annotated[str, Field(description="Why it is run by hand; kept in the run's log.")] = "") -> dict:
        """Start a job now, outside its schedule; a paused job or one with a run not over is refused."""
        with store.tx():
            j = store.require("jobs", job_id, "job")
            if not j["enabled"]:
                raise ToolError(f"Job {job_id!r} ({j['name']}) is paused; resume it first")
            active = [r["id"] for r in runs_of(job_id) if r["status"] in ACTIVE]
            if active:
                raise ToolError(f"Job {job_id!r} already has run {active[0]!r} queued or running; wait for it")
            status = j["trigger_result"]
            now = iso(store.now)
            log = j["trigger_log"] or f"{j['name']}: {status}"
            rid = store.new_id("runs", "run")
            rec = {"id": rid, "job_id": job_id, "status": status, "trigger": "manual", "started": now,
                   "finished": None if status in ACTIVE else now,
                   "exit_code": {"succeeded": 0, "failed": 1}.get(status),
                   "log": f"Triggered by {user()}" + (f": {reason}" if reason else "") + f"\n{log}", "by": user()}
            store.insert("runs", rec)
            store.audit("trigger", [rid], [k for k in rec if k != "id"])
        return rec

    @tool("scheduler_pause_job", hints(idempotent=True))
    def scheduler_pause_job(job_id: JobId,
                            reason: Annotated[str, Field(description="Why it is paused.")] = "") -> dict:
        """Pause a job: it stops running on schedule until resumed."""
        with store.tx():
            j = store.require("jobs", job_id, "job")
            if not j["enabled"]:  # paused already: the first reason stays
                return {**view(j), "changed": []}
            return set_job(job_id, {"enabled": False, "paused_reason": reason or None}, "pause")

    @tool("scheduler_resume_job", hints(idempotent=True))
    def scheduler_resume_job(job_id: JobId) -> dict:
        """Resume a paused job on its schedule."""
        with store.tx():
            return set_job(job_id, {"enabled": True, "paused_reason": None}, "resume")

    @tool("scheduler_update_schedule", hints(destructive=True, idempotent=True))
    def scheduler_update_schedule(job_id: JobId,
                                  schedule: Annotated[str, Field(description="Five cron fields in UTC, e.g. '0 3 * * 1-5', or a macro like '@daily'.")]) -> dict:
        """Replace a job's schedule."""
        try:
            cron = check_cron(schedule)
        except ValueError as exc:
            raise ToolError(f"Bad schedule: {exc}") from None
        with store.tx():
            return set_job(job_id, {"schedule": cron}, "update_schedule")
