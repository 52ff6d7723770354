"""Scheduler tools: jobs, runs and logs, manual triggers, pause and resume, schedules."""

from __future__ import annotations

import pytest

from cowork.services.registry import dump_state
from cowork.services.scheduler import check_cron

from .support import ME, actions, call, fails


def sched(env):
    return dump_state(env.ctx.db)["scheduler"]


class TestCron:
    @pytest.mark.parametrize("text, expected", [
        ("0 2 * * *", "0 2 * * *"), ("  */15  9-17 * jan-jun mon-fri ", "*/15 9-17 * jan-jun mon-fri"),
        ("@Hourly", "@hourly"), ("0,30 0-23/2 1,15 1-12 0-7", "0,30 0-23/2 1,15 1-12 0-7"),
    ])
    def test_accepted(self, text, expected):
        assert check_cron(text) == expected

    @pytest.mark.parametrize("text, message", [
        ("daily", "is not a cron schedule"), ("60 * * * *", "minute 60 is outside 0-59"),
        ("* * 0 * *", "day of month 0 is outside 1-31"), ("* * * 13 *", "month 13 is outside 1-12"),
        ("* * * * 8", "day of week 8 is outside 0-7"), ("*/x * * * *", "minute step 'x' is not a number"),
        ("* * * * funday", "day of week 'funday' is not a number"),
    ])
    def test_refused(self, text, message):
        with pytest.raises(ValueError, match=message):
            check_cron(text)


class TestJobs:
    async def test_list_with_last_run(self, client):
        out = await call(client, "scheduler_list_jobs")
        assert [(j["name"], j["schedule"], j["enabled"]) for j in out["jobs"]] == [
            ("cleanup", "*/15 9-17 * jan-jun mon-fri", False), ("nightly-backup", "0 2 * * *", True),
            ("report-export", "@daily", True)]
        backup = out["jobs"][1]
        assert backup["last_run"]["id"] == "run-3" and backup["last_run"]["status"] == "running"
        assert backup["owner"] == "ops@acme.com" and out["jobs"][0]["last_run"] is None
        names = lambda out: [j["name"] for j in out["jobs"]]
        assert names(await call(client, "scheduler_list_jobs", enabled=False)) == ["cleanup"]
        assert names(await call(client, "scheduler_list_jobs", owner=ME.upper())) == ["cleanup", "report-export"]
        assert names(await call(client, "scheduler_list_jobs", query="export")) == ["report-export"]

    async def test_get_job_lists_runs(self, client):
        j = await call(client, "scheduler_get_job", job_id="job-1")
        assert [r["id"] for r in j["runs"]] == ["run-3", "run-1"] and "log" not in j["runs"][0]
        assert j["runs"][1]["log_tail"] == "Done: 12 GB"
        await fails(client, "scheduler_get_job", "Unknown job id 'job-9'", job_id="job-9")


class TestRuns:
    async def test_list_and_filters(self, client):
        out = await call(client, "scheduler_list_runs")
        assert [r["id"] for r in out["runs"]] == ["run-3", "run-2", "run-1"]
        failed = (await call(client, "scheduler_list_runs", status="failed"))["runs"]
        assert [r["id"] for r in failed] == ["run-2"] and failed[0]["log_tail"] == "Error: connection refused to db-1:5432"
        assert failed[0]["exit_code"] == 1 and failed[0]["finished"] == failed[0]["started"]
        assert [r["id"] for r in (await call(client, "scheduler_list_runs", job_id="job-1"))["runs"]] == ["run-3", "run-1"]
        assert (await call(client, "scheduler_list_runs", since="2026-03-02T00:00:00Z"))["total"] == 2
        await fails(client, "scheduler_list_runs", "Unknown job id 'x'", job_id="x")
        await fails(client, "scheduler_list_runs", "status", status="ok")

    async def test_get_run_with_log(self, client):
        r = await call(client, "scheduler_get_run", run_id="run-2")
        assert r["log"].startswith("Starting export\n") and r["job_name"] == "report-export"
        running = await call(client, "scheduler_get_run", run_id="run-3")
        assert running["finished"] is None and running["exit_code"] is None
        await fails(client, "scheduler_get_run", "Unknown run id 'run-9'", run_id="run-9")

    async def test_trigger_is_deterministic(self, client, env):
        out = await call(client, "scheduler_trigger_run", job_id="job-2", reason="rerun after fix")
        assert out["id"] == "run-4" and out["status"] == "failed" and out["trigger"] == "manual" and out["by"] == ME
        assert out["log"] == f"Triggered by {ME}: rerun after fix\nError: connection refused to db-1:5432"
        assert out["started"] == out["finished"] == "2026-03-02T09:00:00Z" and out["exit_code"] == 1
        assert sched(env)["runs"]["run-4"] == out and actions(env) == [("scheduler", "trigger")]
        again = await call(client, "scheduler_trigger_run", job_id="job-2")
        assert again["id"] == "run-5" and again["log"] == f"Triggered by {ME}\nError: connection refused to db-1:5432"

    async def test_trigger_refusals(self, client, env):
        await fails(client, "scheduler_trigger_run", r"Job 'job-3' \(cleanup\) is paused; resume it first", job_id="job-3")
        await fails(client, "scheduler_trigger_run", "Job 'job-1' already has run 'run-3' queued or running", job_id="job-1")
        await fails(client, "scheduler_trigger_run", "Unknown job id", job_id="x")
        assert actions(env) == []


class TestChanges:
    async def test_pause_and_resume(self, client, env):
        out = await call(client, "scheduler_pause_job", job_id="job-2", reason="db migration")
        assert out["enabled"] is False and out["paused_reason"] == "db migration" and out["changed"] == ["enabled", "paused_reason"]
        assert (await call(client, "scheduler_pause_job", job_id="job-2", reason="other"))["paused_reason"] == "db migration"
        await fails(client, "scheduler_trigger_run", "is paused", job_id="job-2")
        out = await call(client, "scheduler_resume_job", job_id="job-2")
        assert out["enabled"] is True and out["paused_reason"] is None
        assert (await call(client, "scheduler_resume_job", job_id="job-2"))["changed"] == []
        assert actions(env) == [("scheduler", "pause"), ("scheduler", "resume")]
        assert sched(env)["jobs"]["job-2"]["updated"] == "2026-03-02T09:00:00Z"
        await fails(client, "scheduler_pause_job", "Unknown job id", job_id="x")
        await fails(client, "scheduler_resume_job", "Unknown job id", job_id="x")

    async def test_update_schedule(self, client, env):
        out = await call(client, "scheduler_update_schedule", job_id="job-1", schedule=" 30  3 * * 1-5")
        assert out["schedule"] == "30 3 * * 1-5" and out["changed"] == ["schedule"]
        assert actions(env) == [("scheduler", "update_schedule")]
        await fails(client, "scheduler_update_schedule", "Bad schedule: '30 3' is not a cron schedule", job_id="job-1",
                    schedule="30 3")
        await fails(client, "scheduler_update_schedule", "Unknown job id", job_id="x", schedule="@daily")
