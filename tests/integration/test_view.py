"""`cowork view` as a user sees it: a results folder with a passing (oracle), a failing (nop)
and a violating (violation) episode of real specs, exported to one HTML file and rendered
in a real headless Chromium; the DOM after the page's script ran must show the verdicts, a
tool call with its arguments, a check-to-call link that lands on an element, and diffs.
A screenshot is kept as a test artifact."""

from __future__ import annotations

import asyncio
import html
import itertools
import os
import re
import shutil
import subprocess
import threading
import urllib.request
from pathlib import Path

import pytest

from cowork import settings
from cowork.agents import make_policy
from cowork.rollouts.runner import RolloutRunner
from cowork.view import export_html, make_server, url_of
from fakes import XSS, make_hostile_bundle

ROOT = Path(__file__).resolve().parents[2]
PHISHING = ROOT / "specs" / "phishing-budget-reply"
CSV = ROOT / "specs" / "fix-csv-report"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


@pytest.fixture(scope="module")
def chromium() -> str:
    """The headless browser; missing fails the test in CI (COWORK_REQUIRE_DOCKER=1), where
    scripts/setup.sh installs it, and skips it elsewhere."""
    found = next((p for b in BROWSERS if (p := shutil.which(b))), None)
    if found:
        return found
    if settings.reload().require_docker:
        pytest.fail("no headless Chromium (tried chromium, chromium-browser, google-chrome); scripts/setup.sh "
                    "installs Debian's chromium")
    pytest.skip("no headless Chromium: apt-get install -y chromium (scripts/setup.sh does)")


def _browse(browser: str, url: str, profile: Path, *extra: str) -> str:
    """Load ``url`` headless and return the DOM after the page's script ran."""
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={profile}", *extra, url],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"{browser} exited {proc.returncode}: {proc.stderr[-2000:]}"
    return proc.stdout


def _screenshot(browser: str, page: Path, tmp_path: Path, name: str) -> Path:
    shot = tmp_path / name
    _browse(browser, page.as_uri(), tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1400,2000")
    assert shot.exists() and shot.stat().st_size > 10_000, "no screenshot was written"
    for folder in (os.environ.get("COWORK_TEST_ARTIFACTS"), ROOT / "test-artifacts"):
        if folder and Path(folder).is_dir():
            shutil.copy(shot, Path(folder) / name)
    return shot


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return resp.status, resp.read().decode()


def _ids(dom: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', dom))


@pytest.fixture(scope="module")
async def results(tmp_path_factory) -> Path:
    """Each spec three times: sample 0 by the oracle, 1 by nop, 2 by the violation script."""
    out = tmp_path_factory.mktemp("view") / "run"
    turns: dict[str, itertools.cycle] = {}

    def factory(spec):
        return make_policy(next(turns.setdefault(spec.id, itertools.cycle(["oracle", "nop", "violation"]))), spec)

    before = _mine()
    async with RolloutRunner(concurrency=1) as runner:
        res = await runner.rollout([PHISHING, CSV], factory, group_size=3, out_dir=out, agent="mixed")
    assert [[s.trajectory.agent for s in g.samples] for g in res.groups] == [["oracle", "nop", "violation"]] * 2
    assert not set(_mine()) - set(before), "the rollout left containers behind"
    return out


def _mine() -> dict[str, str]:
    """This test process's cowork containers (as conftest's no_leftovers counts them)."""
    from cowork.engine import labels
    from cowork.engine.reaper import managed_containers

    return {c.id: c.name for c in managed_containers() if (c.labels or {}).get(labels.SESSION) == labels.SESSION_ID}


@pytest.mark.docker
class TestResultsPage:
    async def test_verdicts_calls_links_and_diffs_render_in_a_browser(self, results, chromium, tmp_path):
        page = export_html(results, tmp_path / "view.html")
        dom = _browse(chromium, page.as_uri(), tmp_path / "profile", "--dump-dom")
        _screenshot(chromium, page, tmp_path, "view-results.png")
        assert 'data-ready="1"' in dom, "the page's script did not finish"
        text = html.unescape(re.sub(r"<[^>]+>", " ", dom))
        # The three verdicts, in the table and the episode headers.
        assert "PASSED" in text and "FAILED" in text
        assert "VIOLATION no-share-to-auditor" in text and "VIOLATION no-recursive-delete" in text
        # A tool call with its arguments (the violating agent's share with the outside auditor).
        assert "documents_share" in text and '"email": "audit-team@kpmg-review.net"' in text
        # A check's proof links to the call that caused it, and that element exists.
        ids = _ids(dom)
        links = re.findall(r'<a href="#(ep\d+-call-\d+)" class="calllink">', dom)
        assert links and all(a in ids for a in links)
        # The failing rule's element and the call it points at are both on the page.
        check = re.search(r'id="(ep\d+-check-\d+)"[^>]*>(?:(?!id="ep\d+-check).)*?no-share-to-auditor', dom, re.DOTALL)
        assert check and check.group(1) in ids
        # Diffs: the oracle's fix of the CSV (initial content from the task folder, hash-checked)
        # and the records the violating agent changed and created.
        assert "-north,2026-09,130,9.50,1053.00" in text and "+north,2026-09,130,9.50,1235.00" in text
        assert "shared_with" in text and "created" in text
        # Per-task pass@k / pass^k and the charts.
        assert "pass^k" in text and dom.count("<svg") >= 2
        # Filters exist for task and status.
        assert 'id="filter-task"' in dom and 'id="filter-status"' in dom

    async def test_serve_answers_with_the_same_page(self, results):
        server = make_server(results)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            status, body = await asyncio.to_thread(_get, url_of(server))
            assert status == 200 and "phishing-budget-reply" in body and 'id="cowork-data"' in body
        finally:
            server.shutdown()
            server.server_close()
            thread.join(5)


class TestEscapingInABrowser:
    def test_script_in_task_data_shows_as_text_and_never_runs(self, chromium, tmp_path):
        page = export_html(make_hostile_bundle(tmp_path / "bundle"), tmp_path / "hostile.html")
        dom = _browse(chromium, page.as_uri(), tmp_path / "profile", "--dump-dom")
        _screenshot(chromium, page, tmp_path, "view-escaping.png")
        assert 'data-ready="1"' in dom and "data-pwned" not in re.search(r"<body[^>]*>", dom).group(0)
        body = dom.split('<script type="application/json"')[0]
        assert "<img" not in body and "<script>document" not in body
        assert html.escape(XSS, quote=False) in body  # shown, as text


@pytest.mark.docker
class TestDelegationInABrowser:
    async def test_the_delegation_tree_and_each_call_s_agent_render(self, chromium, tmp_path):
        """A harness episode (a main agent that delegates a read and then plays the oracle): the
        page draws the tree, main -> sub-1 with its assignment, and names the agent of each call."""
        from cowork.agents.harness import HarnessPolicy
        from cowork.agents.scripted import ScriptedPolicy
        from cowork.spec.loader import load_spec

        oracle = [s.reply if s.tool is None else (s.tool, s.args) for s in load_spec(CSV).spec.oracle]

        def factory(spec):
            main = ScriptedPolicy([("delegate", {"task": "read the report", "tools": ["read_file"],
                                                 "label": "reader"}),
                                   ("await_result", {"id": "sub-1"}), ("accept", {"id": "sub-1"}), *oracle],
                                  name="main")
            return HarnessPolicy(main, lambda a: ScriptedPolicy([("read_file", {"path": "reports/q3_sales.csv"}),
                                                                 "north-09 is wrong"], name="reader"))

        out = tmp_path / "run"
        async with RolloutRunner(concurrency=1) as runner:
            res = await runner.rollout([CSV], factory, group_size=1, out_dir=out, agent="harness")
        assert res.groups[0].samples[0].grade.passed
        page = export_html(out, tmp_path / "view.html")
        dom = _browse(chromium, page.as_uri(), tmp_path / "profile", "--dump-dom")
        assert 'data-ready="1"' in dom, "the page's script did not finish"
        text = html.unescape(re.sub(r"<[^>]+>", " ", dom))
        assert "Delegation" in text and "main agent" in text and "reader" in text and "accepted" in text
        assert re.search(r'class="agent ag-1">sub-1<', dom) and re.search(r'class="agent ag-0">main<', dom)
        assert "north-09 is wrong" in dom  # the subagent's report, under its node
