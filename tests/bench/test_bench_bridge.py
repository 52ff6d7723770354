"""The stdio bridge's rows of the bench report: what passes and what misses (no daemon needed)."""

from cowork.bench.report import Report


def _bridge(direct: float, bridged: float, ready_s: float, handshake_ms: float, errors: int = 0) -> dict:
    ms = lambda p50: {"n": 100, "p50": p50, "p90": p50 * 1.5}  # noqa: E731
    return {"tool": "read_file", "direct_ms": ms(direct), "bridge_ms": ms(bridged), "errors": errors,
            "overhead_ms": round(bridged - direct, 3), "spawn_to_ready_s": ms(ready_s),
            "initialize_ms": ms(handshake_ms), "exit_codes": [0]}


def _rows(bridge: dict) -> dict:
    return {v["figure"]: v for v in Report({"bridge": bridge}).verdicts() if "connect" in v["figure"]}


def test_within_two_ms_and_half_a_second_pass():
    rows = _rows(_bridge(3.1, 4.6, 0.31, 4.0))
    assert [r["pass"] for r in rows.values()] == [True, True]
    call = rows["stdio bridge (cowork connect) call p50 vs Sandbox.call_tool"]
    assert call["value"] == 1.5 and call["shown"] == "4.60 vs 3.10 ms (+1.50 ms)"
    assert "0.31 s" in rows["cowork connect spawn to initialize answered p50"]["shown"]


def test_over_the_targets_or_with_errors_miss():
    assert [r["pass"] for r in _rows(_bridge(3.0, 5.5, 0.31, 4.0)).values()] == [False, True]
    assert [r["pass"] for r in _rows(_bridge(3.0, 3.5, 0.31, 4.0, errors=1)).values()] == [False, True]
    assert [r["pass"] for r in _rows(_bridge(3.0, 3.5, 0.8, 4.0)).values()] == [True, False]
    assert "stdio bridge detail" in Report({"bridge": _bridge(3.0, 3.5, 0.3, 4.0)}).table()
