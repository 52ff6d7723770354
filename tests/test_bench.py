"""`cowork bench --quick --json` completes, reports every figure and leaves nothing behind.

No timed assertions: the figures depend on the machine; only their presence is checked.
"""

from __future__ import annotations

import json

import pytest

from cowork.bench.report import TARGETS, Report, pct, summary
from cowork.cli import main


class TestReport:
    def test_percentiles_are_nearest_rank(self):
        samples = [float(v) for v in range(1, 11)]
        assert pct(samples, 50) == 5.0
        assert pct(samples, 90) == 9.0
        assert pct([], 50) is None
        assert summary([2.0, 1.0])["p50"] == 1.0

    def test_missing_figures_show_as_misses_not_errors(self):
        verdicts = Report({}).verdicts()
        assert len(verdicts) == len(TARGETS)
        assert all(v["pass"] is False and v["shown"] == "-" for v in verdicts)
        assert "figure" in Report({}).table()


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_quick_bench_reports_every_figure_and_cleans_up(capsys, no_leftovers):
    from cowork.bench.probes import session_containers

    before = set(session_containers())
    assert main(["bench", "--quick", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)

    lat = data["latency"]
    for key in ("read_file", "shell_true"):
        assert lat[key]["n"] >= 200 and lat[key]["errors"] == 0
        assert lat[key]["p50"] > 0 and lat[key]["p90"] >= lat[key]["p50"]
    assert lat["docker_exec"]["n"] > 0 and lat["ratio_read_file"] > 0 and lat["ratio_shell"] > 0

    start = data["start"]
    assert start["sandbox_s"]["n"] >= 1 and start["docker_run_s"]["n"] >= 1 and start["first_start_s"] > 0

    mem = data["memory"]
    assert mem["working_set_mib"]["n"] >= 10 and mem["working_set_mib"]["mean"] > 0 and mem["source"]

    scale = data["scale"]
    assert scale["n"] == 8 and scale["started"] == 8 and scale["failures"] == 0 and scale["left_behind"] == 0
    assert scale["wall_s"] > 0 and scale["peak_memory_mib"] > 0

    for level in ("c1", "c8", "c32"):
        assert data["throughput"][level]["calls_per_s"] > 0 and data["throughput"][level]["errors"] == 0

    assert data["grading"]["passed"] and data["grading"]["ms"]["p50"] > 0
    assert data["build"]["unchanged_s"]["p50"] >= 0 and data["build"]["new_layer_s"] > 0

    assert [t["figure"] for t in data["targets"]] == [t.figure for t in TARGETS]
    assert all(t["value"] is not None for t in data["targets"])
    assert data["left_behind"] == 0
    assert not [c.name for cid, c in session_containers().items() if cid not in before]
