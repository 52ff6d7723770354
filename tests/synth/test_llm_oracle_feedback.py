"""What validation tells the model about an oracle call that returned an error: the step's index
in ``oracle``, the tool, the tool's error, and the argument at fault (issue 25: a misspelt
argument used to give only "0 inventory.orders record(s) match")."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pydantic
import pytest
import yaml

from cowork.episode.trajectory import StepRecord
from cowork.services.registry import SERVICES
from cowork.spec import load_spec
from cowork.validate.validate import ValidationReport, _Steps, call_fault, error_text

ORACLE: list[dict[str, Any]] = [
    {"tool": "inventory_list_orders", "args": {"status": "placed"}},
    {"reply": "Checking the stock first."},
    {"tool": "inventory_update_order_status", "args": {"order_id": "ord-1", "statuss": "shipped"}},
    {"tool": "inventory_get_order", "args": {"order_id": "ord-404"}},
]


def _tool(name: str):
    """The service's real tool function (its signature is what the server validates against)."""
    found = {}

    class Recorder:
        def tool(self, name, **_):
            def keep(fn):
                found[name] = fn
                return fn
            return keep

    SERVICES["inventory"].register(Recorder(), None, {name})
    return found[name]


def _server_error(name: str, args: dict) -> str:
    """The text the tool host answers for arguments that do not fit (toolhost.host._validate)."""
    with pytest.raises(pydantic.ValidationError) as info:
        pydantic.TypeAdapter(_tool(name)).validate_python(args)
    return str(info.value)


def _schema(name: str) -> dict:
    params = inspect.signature(_tool(name)).parameters.values()
    return {"properties": {p.name: {} for p in params},
            "required": [p.name for p in params if p.default is inspect.Parameter.empty]}


@pytest.fixture
def spec(tmp_path: Path):
    data = {"id": "ship-order", "title": "Ship an order", "prompt": "Ship ord-1.", "tools": ["inventory"],
            "services": {"inventory": {"products": [{"id": "WID-1", "name": "Widget", "stock": 5}],
                                       "orders": [{"id": "ord-1", "customer": "Ana", "lines": [
                                           {"product_id": "WID-1", "quantity": 1}]}]}},
            "checks": [{"type": "record_exists", "service": "inventory", "collection": "orders",
                        "where": {"id": "ord-1", "status": "shipped"}}],
            "oracle": ORACLE}
    (tmp_path / "task.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(tmp_path)


def _oracle_run(outputs: dict[int, str]):
    """An oracle run as validation sees it: call ids call_1.. numbered over every step, replies
    included, and the tools offered with their parameter schemas."""
    steps = [StepRecord(turn=n, call_id=f"call_{n + 1}", tool=s["tool"], args=s["args"], is_error=n in outputs,
                        output=outputs.get(n, "{}"), duration_ms=1.0)
             for n, s in enumerate(ORACLE) if "tool" in s]
    tools = [{"type": "function", "function": {"name": name, "parameters": _schema(name)}}
             for name in ("inventory_list_orders", "inventory_update_order_status", "inventory_get_order")]
    return SimpleNamespace(trajectory=SimpleNamespace(steps=steps, tools=tools))


class TestOracleCallFindings:
    def test_a_misspelt_argument_names_the_step_the_tool_the_error_and_the_argument(self, spec):
        misspelt = _server_error("inventory_update_order_status", ORACLE[2]["args"])
        report = ValidationReport(spec=str(spec.path), task=spec.spec.id, ok=True)
        _Steps(spec, None, report).oracle_calls(_oracle_run({2: misspelt}), passed=False)
        (finding,) = report.findings
        assert finding.step == "oracle-call" and not finding.ok
        assert finding.field == "oracle[2].args.statuss"  # index 2: the reply step counts
        assert finding.detail == ("oracle[2] inventory_update_order_status returned an error: status: Missing "
                                  "required argument; statuss: Unexpected keyword argument")
        assert finding.hint.startswith("inventory_update_order_status has no argument 'statuss'; did you mean "
                                       "'status'? It takes: order_id, status, tracking?")

    def test_a_tool_error_quoting_a_value_names_that_argument(self, spec):
        report = ValidationReport(spec=str(spec.path), task=spec.spec.id, ok=True)
        error = "Error calling tool 'inventory_get_order': Unknown order id 'ord-404'"
        _Steps(spec, None, report).oracle_calls(_oracle_run({3: error}), passed=True)
        (finding,) = report.findings
        assert finding.ok and finding.field == "oracle[3].args.order_id"  # a note: the oracle passed
        assert finding.detail.endswith("Unknown order id 'ord-404' (the oracle passes anyway)")
        assert "order_id='ord-404'" in finding.hint

    def test_calls_that_worked_give_no_finding(self, spec):
        report = ValidationReport(spec=str(spec.path), task=spec.spec.id, ok=True)
        _Steps(spec, None, report).oracle_calls(_oracle_run({}), passed=True)
        assert report.findings == []


class TestErrorText:
    def test_pydantic_problems_become_one_line_without_links(self):
        text = _server_error("inventory_adjust_stock", {"product_id": 5, "delta": "many", "reason": "count"})
        assert "errors.pydantic.dev" in text
        line = error_text(text)
        assert line == ("product_id: Input should be a valid string; delta: Input should be a valid integer, "
                        "unable to parse string as an integer")

    def test_a_missing_argument_alone(self):
        text = _server_error("inventory_adjust_stock", {"product_id": "WID-1", "delta": 2})
        arg, hint = call_fault("inventory_adjust_stock", {"product_id": "WID-1", "delta": 2}, text,
                               _schema("inventory_adjust_stock"))
        assert arg == "reason" and hint == ("give inventory_adjust_stock its required argument 'reason' "
                                            "(it takes: product_id, delta, reason)")

    def test_an_error_that_names_no_argument_points_at_the_step(self):
        assert call_fault("shell", {"command": "ls"}, "tool timed out after 20s", None) == (
            None, "fix the call's tool or arguments (docs/services.md), or seed the record it needs")
        assert error_text("x" * 700).endswith("...") and len(error_text("x" * 700)) == 603
