"""The CRM's export-report action (issue 28, feature 12): a report record graders read, audited,
and a CSV file in the workspace when asked, written with the agent's rights."""

from __future__ import annotations

import csv
import io

from fastmcp import Client

from cowork.evidence import Evidence
from cowork.grading.records import RECORD_CHECKS
from cowork.services.registry import dump_state
from cowork.spec.checks import RecordExists
from fakes import tar_of

from .small import small_env
from .support import actions, call, fails

REPORT = {"title": "VIP customers", "account_ids": ["acct-3", "acct-1"], "summary": "Two gold accounts."}


def reports(env) -> dict:
    return dump_state(env.ctx.db)["crm"].get("reports", {})


async def test_a_report_is_a_record_with_its_rows_and_is_audited(client, env):
    out = await call(client, "crm_export_report", **REPORT)
    assert out["id"] == "report-1" and out["rows"] == 2 and out["path"] is None
    rows = list(csv.DictReader(io.StringIO(out["csv"])))
    assert [(r["id"], r["name"], r["tier"]) for r in rows] == [("acct-3", "Hooli", "gold"), ("acct-1", "Initech", "Gold")]
    assert rows[1]["revenue"] == "1250000" and rows[1]["industry"] == "Software"
    stored = reports(env)["report-1"]
    assert stored["account_ids"] == ["acct-3", "acct-1"] and stored["summary"] == "Two gold accounts."
    assert actions(env) == [("crm", "export_report")]
    assert env.audit[-1]["ids"] == ["report-1"] and "account_ids" in env.audit[-1]["fields"]


async def test_saved_as_a_csv_file_in_the_workspace(client, env):
    out = await call(client, "crm_export_report", **REPORT, path="reports/vip.csv")
    assert out["path"] == "reports/vip.csv"
    rel, data = await env.ctx.files.read("reports/vip.csv", 1 << 20)
    assert data.decode() == out["csv"] and reports(env)["report-1"]["path"] == "reports/vip.csv"
    # An existing file is not replaced unless asked; the refused call leaves no second report.
    await fails(client, "crm_export_report", "exists", **REPORT, path="reports/vip.csv")
    assert list(reports(env)) == ["report-1"]
    assert (await call(client, "crm_export_report", **REPORT, path="reports/vip.csv", overwrite=True))["id"] == "report-2"


async def test_bad_reports_are_refused_and_leave_nothing(client, env):
    await fails(client, "crm_export_report", "Unknown account id 'acct-9'", title="x", account_ids=["acct-1", "acct-9"])
    await fails(client, "crm_export_report", "listed twice", title="x", account_ids=["acct-1", "acct-1"])
    await fails(client, "crm_export_report", "account_ids", title="x", account_ids=[])
    # (Where the agent may write is its uid's business, proven in the sandbox: this process is root.)
    await fails(client, "crm_export_report", "exists already", **REPORT, path=".")
    assert reports(env) == {} and actions(env) == []


async def test_without_a_workspace_a_path_is_refused():
    env = small_env({"crm": {"accounts": [{"name": "A"}]}}, {"crm_export_report"})
    async with Client(env.mcp) as c:
        await fails(c, "crm_export_report", "no workspace", title="t", account_ids=["acct-1"], path="r.csv")
        assert (await call(c, "crm_export_report", title="t", account_ids=["acct-1"]))["rows"] == 1


async def test_a_record_check_grades_which_accounts_the_report_holds(client, env):
    seed = dump_state(env.ctx.db)
    await call(client, "crm_export_report", **REPORT)
    ev = Evidence(audit_text="", audit_count=0, workspace_tar=tar_of({}), initial={}, trace={"messages": []},
                  state_seed=seed, state_final=dump_state(env.ctx.db))

    def holds(account: str) -> bool:
        check = RecordExists.model_validate({"type": "record_exists", "service": "crm", "collection": "reports",
                                             "where": {"account_ids": {"equals": account}}})
        return RECORD_CHECKS["record_exists"](check, ev)[0] is True

    assert holds("acct-3") and holds("acct-1") and not holds("acct-2")
