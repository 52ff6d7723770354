"""The view's first screen says what went wrong before any chart: violations, infrastructure
errors and failures, each episode with its reasons and a link; the header names every agent
that played (no Docker; the page itself in headless Chromium when there is one)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cowork.view import export_html, load_page
from cowork.view.source import ATTENTION_LIMIT, attention
from fakes import make_hostile_bundle

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _row(sample: int, agent: str, **grade) -> dict:
    base = {"task": "xss-task", "group": 0, "sample": sample, "seed": None, "agent": agent, "status": "completed",
            "grade_status": "graded", "score": 1.0, "passed": True, "completion": 1.0, "safe": True,
            "violations": [], "robustness": None, "reward": 1.0, "turns": 2, "tool_calls": 1,
            "durations": {"episode_s": 0.5, "total_s": 1.0}, "infra_failures": [], "evidence": None,
            "trajectory": None}
    return base | grade


def make_mixed(root: Path) -> Path:
    """Four episodes by three agents: one violates (a real graded bundle), one ended on an
    infrastructure failure, one failed, one passed; run.json names only the first agent."""
    make_hostile_bundle(root / "episodes" / "xss-task" / "0")
    g = json.loads((root / "episodes" / "xss-task" / "0" / "grade.json").read_text())
    rows = [_row(0, "violation", grade_status=g["status"], score=g["score"], passed=g["passed"], safe=g["safe"],
                 violations=g["violations"], evidence="episodes/xss-task/0"),
            _row(1, "oracle", grade_status="infra_error", status="infra_error", score=0.0, passed=False, safe=None,
                 reward=None),
            _row(2, "nop", score=0.25, passed=False, completion=0.25, reward=0.25),
            _row(3, "oracle")]
    (root / "run.json").write_text(json.dumps({"group_size": 4, "agent": "violation", "reward": "score", "seed": None,
                                               "tasks": ["xss-task"]}))
    (root / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


class TestAttentionData:
    def test_violations_infra_errors_and_failures_with_their_reasons(self, tmp_path):
        page = load_page(make_mixed(tmp_path / "run"))
        a = page["attention"]
        assert [a[k]["total"] for k in ("violation", "infra", "failure")] == [1, 1, 1]
        (v,) = a["violation"]["episodes"]
        assert v["id"] == "ep0" and v["agent"] == "violation" and v["reasons"][0].startswith("no-shell: ")
        assert any(r.startswith("third-line: ") for r in v["reasons"])  # its failed check too
        (i,) = a["infra"]["episodes"]
        assert i["id"] == "ep1" and i["reasons"][0].startswith("infra_error")
        (f,) = a["failure"]["episodes"]
        assert f["id"] == "ep2" and f["agent"] == "nop"

    def test_every_agent_is_counted(self, tmp_path):
        page = load_page(make_mixed(tmp_path / "run"))
        assert page["agents"] == {"violation": 1, "oracle": 2, "nop": 1}

    def test_the_lists_are_bounded_and_say_how_many_in_all(self):
        eps = [{"id": f"ep{i}", "row": _row(i, "nop", passed=False, score=0.0), "view": None} for i in range(120)]
        a = attention(eps)
        assert a["failure"]["total"] == 120 and len(a["failure"]["episodes"]) == ATTENTION_LIMIT


@pytest.fixture(scope="module")
def chromium() -> str:
    found = next((p for b in BROWSERS if (p := shutil.which(b))), None)
    if not found:
        pytest.skip("no headless Chromium: apt-get install -y chromium (scripts/setup.sh does)")
    return found


def _dom(browser: str, page: Path, profile: Path) -> str:
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_the_first_screen_lists_what_went_wrong_before_the_charts(chromium, tmp_path):
    page = export_html(make_mixed(tmp_path / "run"), tmp_path / "view.html")
    dom = _dom(chromium, page, tmp_path / "profile")
    assert 'data-ready="1"' in dom
    body = dom.split('<script type="application/json"')[0]
    text = html.unescape(re.sub(r"<[^>]+>", " ", body))
    first = text.index("Needs attention")
    assert first < text.index("Figures") and first < text.index("Per task") and first < text.index("Episodes")
    assert body.index('id="attention"') < body.index("<svg")
    for heading in ("Safety violations (1)", "Infrastructure and model endpoint errors (not scored) (1)", "Failures (1)"):
        assert first < text.index(heading) < text.index("Figures"), heading
    assert 'href="#ep0"' in body.split('id="attention"')[1].split("</section>")[0]
    # The header names the mix the episodes were played by, not run.json's one agent.
    params = re.search(r'id="run-params"[^>]*>([^<]*)<', body).group(1)
    assert params.startswith("agents: violation 1, oracle 2, nop 1") and "agent \"violation\"" not in params
