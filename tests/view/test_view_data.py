"""The view's data and page without a browser or Docker: a hand-made bundle whose task data
is hostile (script tags everywhere), its diffs, the check-to-call links, the escaping, the
results-folder summary and the local server."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from cowork.errors import EvidenceError
from cowork.view import export_html, load_page, make_server, render, url_of
from cowork.view.diffs import state_diff
from cowork.view.source import page_json
from fakes import AFTER, XSS, make_hostile_bundle


def make_results(root: Path, bundle_of) -> Path:
    """A results folder of two samples of the hostile task (bundle_of(dir) writes each)."""
    rows = []
    for s in range(2):
        bundle_of(root / "episodes" / "xss-task" / str(s))
        g = json.loads((root / "episodes" / "xss-task" / str(s) / "grade.json").read_text())
        rows.append({"task": "xss-task", "group": 0, "sample": s, "seed": None, "agent": "scripted",
                     "status": "completed", "grade_status": g["status"], "score": g["score"], "passed": g["passed"],
                     "completion": g["completion"], "safe": g["safe"], "violations": g["violations"],
                     "robustness": None, "reward": [0.0, 0.5][s], "turns": 3, "tool_calls": 2,
                     "durations": {"episode_s": 0.25, "total_s": 1.0}, "infra_failures": [],
                     "evidence": f"episodes/xss-task/{s}", "trajectory": f"episodes/xss-task/{s}/trajectory.json"})
    (root / "run.json").write_text(json.dumps({"group_size": 2, "agent": "scripted", "reward": "score",
                                               "seed": None, "tasks": ["xss-task"]}))
    (root / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.fixture
def bundle(tmp_path) -> Path:
    return make_hostile_bundle(tmp_path / "bundle")


class TestEpisodeData:
    def test_a_violation_links_to_the_call_that_caused_it(self, bundle):
        ep = load_page(bundle)["episodes"][0]["view"]
        rule = next(c for c in ep["checks"] if c["id"] == "no-shell")
        assert rule["status"] == "fail" and rule["group"] == "safety"
        anchors = {i.get("anchor") for i in ep["timeline"]}
        assert rule["evidence"] and all(p["anchor"] in anchors for p in rule["evidence"])
        shell = next(i for i in ep["timeline"] if i.get("tool") == "shell")
        assert shell["anchor"] == "ep0-call-3" and shell["duration_ms"] == 3.5 and shell["args"] == {
            "command": f"echo '{XSS}'"}
        assert shell["output"]["text"] == XSS
        assert [c["id"] for c in shell["cited_by"]] == ["no-shell"]

    def test_a_service_action_belongs_to_the_call_it_happened_in(self, bundle):
        ep = load_page(bundle)["episodes"][0]["view"]
        row = next(a for a in ep["audit"] if a["seq"] == 4)
        assert row["what"] == "mail.send" and row["anchor"] == "ep0-call-3"

    def test_the_workspace_diff_uses_initial_content_only_when_its_hash_matches(self, bundle):
        ws = load_page(bundle)["episodes"][0]["view"]["workspace"]
        (f,) = ws["files"]
        assert f["change"] == "changed" and f["initial_source"] == "the spec's inline content"
        assert "-line two" in f["diff"] and f"+{XSS}" in f["diff"]
        assert f["writes"][0]["anchor"] == "ep0-call-1"
        spec = json.loads((bundle / "spec.json").read_text())
        spec["workspace"]["files"][0]["content"] = "not what was there\n"
        (bundle / "spec.json").write_text(json.dumps(spec))
        (f,) = load_page(bundle)["episodes"][0]["view"]["workspace"]["files"]
        assert "diff" not in f and "initial_source" not in f and f["final"] == AFTER  # said so, final shown

    def test_the_state_diff_has_created_updated_and_deleted_records(self):
        seed = {"crm": {"deals": {"d1": {"stage": "open", "amount": 5}, "d2": {"stage": "lost"}}}}
        final = {"crm": {"deals": {"d1": {"stage": "won", "amount": 5}, "d3": {"stage": "open"}}}}
        (c,) = state_diff(seed, final)
        assert (c["service"], c["collection"]) == ("crm", "deals")
        assert [r["id"] for r in c["created"]] == ["d3"] and [r["id"] for r in c["deleted"]] == ["d2"]
        assert c["updated"] == [{"id": "d1", "fields": [{"field": "stage", "before": "open", "after": "won"}]}]


class TestEscaping:
    def test_no_value_from_the_task_becomes_markup(self, bundle, tmp_path):
        html = export_html(bundle, tmp_path / "page.html").read_text()
        assert len(re.findall(r"<script\b", html, re.IGNORECASE)) == 2  # the data block and the page's own script
        assert len(re.findall(r"</script", html, re.IGNORECASE)) == 2
        assert "<img" not in html and "alert" not in html and "data-pwned','1')</" not in html
        data = re.search(r'<script type="application/json" id="cowork-data">(.*?)</script>', html, re.DOTALL).group(1)
        page = json.loads(data)
        assert page["episodes"][0]["view"]["title"] == f"Title {XSS}"  # the value itself survives, as data

    def test_page_json_escapes_what_could_end_the_script_element(self):
        text = page_json({"x": "</script><!-- & -->"})
        assert "<" not in text and ">" not in text and "&" not in text
        assert json.loads(text) == {"x": "</script><!-- & -->"}


class TestResultsFolder:
    def test_a_results_folder_has_the_per_task_summary_spread_and_charts(self, tmp_path):
        root = make_results(tmp_path / "run", make_hostile_bundle)
        page = load_page(root)
        assert page["kind"] == "results" and [e["row"]["sample"] for e in page["episodes"]] == [0, 1]
        m = page["summary"]["tasks"]["xss-task"]
        assert m["trials"] == 2 and "pass@2" in m and "pass^2" in m
        assert page["spread"]["xss-task"]["min"] == 0.0 and page["spread"]["xss-task"]["max"] == 0.5
        assert {c["title"] for c in page["charts"]} >= {"Mean score and pass@1 per task",
                                                       "Reward of each sample per task (spread)"}

    def test_a_results_line_cannot_point_outside_its_folder(self, tmp_path):
        root = make_results(tmp_path / "run", make_hostile_bundle)
        lines = (root / "results.jsonl").read_text().splitlines()
        row = json.loads(lines[0]) | {"evidence": "../../..", "trajectory": None}
        (root / "results.jsonl").write_text("\n".join([json.dumps(row), lines[1]]) + "\n")
        ep = load_page(root)["episodes"][0]
        assert ep["view"] is None and "no evidence bundle" in ep["error"]

    def test_a_folder_that_is_neither_is_refused_with_the_fix(self, tmp_path):
        with pytest.raises(EvidenceError, match="neither a results folder"):
            load_page(tmp_path)
        with pytest.raises(EvidenceError, match="does not exist"):
            load_page(tmp_path / "nope")

    def test_a_bench_report_is_drawn_as_charts(self, tmp_path):
        report = {"throughput": {"c1": {"calls_per_s": 80.0}, "c32": {"calls_per_s": 400.0}},
                  "targets": [{"figure": "throughput at concurrency 32", "target": ">= 300 calls/s",
                               "shown": "400 calls/s", "pass": True}]}
        (tmp_path / "bench.json").write_text(json.dumps(report))
        page = load_page(tmp_path / "bench.json")
        assert page["bench"]["targets"][0]["pass"] is True
        assert page["bench"]["charts"][0]["bars"][1]["values"] == [400.0]
        assert "Throughput by concurrency" in render(page)


class TestServer:
    def test_get_slash_answers_with_the_page(self, bundle):
        server = make_server(bundle)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            url = url_of(server)
            assert url.startswith("http://127.0.0.1:")
            with urllib.request.urlopen(url, timeout=10) as resp:
                body = resp.read().decode()
                assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/html")
            assert 'id="cowork-data"' in body and "xss-task" in body
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(url + "other", timeout=10)
            assert err.value.code == 404
        finally:
            server.shutdown()
            server.server_close()
            thread.join(5)

    def test_a_wrong_folder_is_refused_before_serving(self, tmp_path):
        with pytest.raises(EvidenceError):
            make_server(tmp_path)
