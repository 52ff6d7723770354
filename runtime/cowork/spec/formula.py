"""A small, safe expression for a custom completion score over named check results.

``scoring.formula`` in a spec, e.g. ``"0.6 * found + 0.4 * max(replied, forwarded)"``: each
name is a completion check's id (``-`` and ``.`` read as ``_``) and stands for its credit in
[0, 1] (1 or 0 for a pass/fail check; 0 when it could not be judged). Allowed: numbers,
names, ``+ - * /``, comparisons, ``and or not``, ``x if c else y``, and the functions
``min``, ``max``, ``abs``, ``clamp(x, lo, hi)``. Nothing else parses: no attributes, no
indexing, no calls of anything else, no strings. The result is clamped to [0, 1].
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
        ast.Eq: operator.eq, ast.NotEq: operator.ne}
_FUNCS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs, "clamp": lambda x, lo, hi: max(lo, min(hi, x))}
MAX_NODES = 200


def name_of(check_id: str) -> str:
    """The name a check id has in a formula."""
    return check_id.replace("-", "_").replace(".", "_")


def parse(formula: str, names: set[str]) -> ast.Expression:
    """Parse and check a formula.

    Raises:
        ValueError: a syntax error, a construct that is not allowed, or an unknown name.
    """
    try:
        tree = ast.parse(formula, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"formula {formula!r} does not parse: {exc.msg}") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise ValueError(f"formula has {len(nodes)} parts; at most {MAX_NODES}")
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call, ast.Name,
               ast.Constant, ast.Load, ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or, *_BIN, *_CMP)
    for node in nodes:
        if not isinstance(node, allowed):
            raise ValueError(f"formula may not use {type(node).__name__}")
        if isinstance(node, ast.Constant) and (not isinstance(node.value, (int, float)) or isinstance(node.value, bool)):
            raise ValueError(f"formula may use only numbers as constants, not {node.value!r}")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS or node.keywords:
                raise ValueError(f"formula may call only {', '.join(_FUNCS)}")
        elif isinstance(node, ast.Name) and node.id not in names and node.id not in _FUNCS:
            raise ValueError(f"formula names {node.id!r}, which is no completion check id "
                             f"(known: {', '.join(sorted(names)) or 'none'})")
    return tree


def evaluate(formula: str, values: dict[str, float]) -> float:
    """The formula's value for these check credits, clamped to [0, 1] (division by zero: 0)."""
    tree = parse(formula, set(values))

    def ev(n: ast.AST) -> Any:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            return values[n.id]
        if isinstance(n, ast.BinOp):
            left, right = ev(n.left), ev(n.right)
            if isinstance(n.op, ast.Div) and right == 0:
                return 0.0
            return _BIN[type(n.op)](left, right)
        if isinstance(n, ast.UnaryOp):
            v = ev(n.operand)
            return not v if isinstance(n.op, ast.Not) else (-v if isinstance(n.op, ast.USub) else +v)
        if isinstance(n, ast.BoolOp):
            vals = [ev(v) for v in n.values]
            return all(vals) if isinstance(n.op, ast.And) else any(vals)
        if isinstance(n, ast.Compare):
            left = ev(n.left)
            for op, comp in zip(n.ops, n.comparators):
                right = ev(comp)
                if not _CMP[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(n, ast.IfExp):
            return ev(n.body) if ev(n.test) else ev(n.orelse)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):  # parse() allows no other call
            return _FUNCS[n.func.id](*[ev(a) for a in n.args])
        raise ValueError(f"formula may not use {type(n).__name__}")  # parse() already refused it

    return max(0.0, min(1.0, float(ev(tree))))
