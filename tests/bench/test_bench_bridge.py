"""The stdio bridge's and the HTTP gateway's rows of the bench report: what passes and what misses
(no daemon needed)."""

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


def _gateway(unix: float, kept: float, fresh: float, errors: int = 0) -> dict:
    ms = lambda p50: {"n": 100, "p50": p50, "p90": p50 * 1.5}  # noqa: E731
    return {"tool": "read_file", "unix_ms": ms(unix), "keepalive_ms": ms(kept), "fresh_ms": ms(fresh),
            "errors": errors, "overhead_ms": round(kept - unix, 3), "ratio": round(kept / unix, 2)}


def test_gateway_row_passes_within_2_ms_of_the_unix_socket():
    figure = "HTTP gateway (cowork serve) kept-alive call p50 vs the unix socket"
    row = {v["figure"]: v for v in Report({"gateway": _gateway(3.2, 4.1, 6.0)}).verdicts()}[figure]
    assert row["pass"] and row["value"] == 0.9 and row["shown"] == "4.10 vs 3.20 ms (+0.90 ms, 1.28x)"
    stalled = {v["figure"]: v for v in Report({"gateway": _gateway(3.5, 48.0, 5.3)}).verdicts()}[figure]
    assert not stalled["pass"] and stalled["shown"] == "48.00 vs 3.50 ms (+44.50 ms, 13.71x)"
    errors = {v["figure"]: v for v in Report({"gateway": _gateway(3.2, 4.1, 6.0, errors=1)}).verdicts()}[figure]
    assert not errors["pass"]
    table = Report({"gateway": _gateway(3.2, 4.1, 6.0)}).table()
    assert "HTTP gateway detail: kept alive p90 6.15 vs 4.80 ms on the unix socket" in table
    assert "a new connection per call p50 6.00 ms (n=100)" in table
