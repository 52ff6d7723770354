"""A small, safe expression for a custom completion score over named check results.

``scoring.formula`` in a spec, e.g. ``"0.6 * found + 0.4 * max(replied, forwarded)"``: each
name is a completion check's id (``-`` and ``.`` read as ``_``) and stands for its credit in
[0, 1] (1 or 0 for a pass/fail check; 0 when it could not be judged). Allowed: numbers,
names, ``+ - * /``, comparisons, ``and or not``, ``x if c else y``, and the functions
``min``, ``max``, ``abs``, ``clamp(x, lo, hi)``. Nothing else parses: no attributes, no
indexing, no calls of anything else, no strings. The result is clamped to [0, 1].

:func:`bounds` reads the same expressions over intervals: with the credits a judge that was
not run could give left open, it says the least and the most the score could be (what
``cowork validate`` can prove without a judge).
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


#: A value known only to lie within [lo, hi]: a check not judged (a judge that was not run)
#: stands for its whole range [0, 1]. A truth value is [1, 1] (true), [0, 0] (false) or
#: [0, 1] (unknown).
Interval = tuple[float, float]
_ANY: Interval = (-float("inf"), float("inf"))


def _iv(values: list[float]) -> Interval:
    # inf * 0 (an unbounded side times a zero end) is nan; the zero end is a real value, whose
    # product 0 the other ends already bound.
    clean = [0.0 if v != v else v for v in values]
    return min(clean), max(clean)


def _truth(v: Interval) -> Interval:
    """The truth of a value as an interval: surely true when 0 is outside it."""
    lo, hi = v
    if lo == hi == 0:
        return 0.0, 0.0
    return (1.0, 1.0) if lo > 0 or hi < 0 else (0.0, 1.0)


def _cmp(op: ast.cmpop, a: Interval, b: Interval) -> Interval:
    if isinstance(op, (ast.Gt, ast.GtE)):
        return _cmp(ast.Lt() if isinstance(op, ast.Gt) else ast.LtE(), b, a)
    if isinstance(op, ast.Lt):
        return (1.0, 1.0) if a[1] < b[0] else (0.0, 0.0) if a[0] >= b[1] else (0.0, 1.0)
    if isinstance(op, ast.LtE):
        return (1.0, 1.0) if a[1] <= b[0] else (0.0, 0.0) if a[0] > b[1] else (0.0, 1.0)
    same = (1.0, 1.0) if a[0] == a[1] == b[0] == b[1] else (0.0, 0.0) if a[1] < b[0] or b[1] < a[0] else (0.0, 1.0)
    return same if isinstance(op, ast.Eq) else (1.0 - same[1], 1.0 - same[0])


def bounds(formula: str, values: dict[str, Interval]) -> Interval:
    """The least and the most the formula can be, clamped to [0, 1], when each check's credit
    is known only to lie in its interval: what validation can prove of a score whose judge
    checks were not run (each then [0, 1]), whatever the judge would say.

    Interval arithmetic over the same expressions :func:`evaluate` reads; a comparison or a
    condition that the intervals leave open takes both ways. The bounds always hold, but may
    be loose where a credit appears twice (``j * (1 - j)``). With every interval a point it
    gives :func:`evaluate`'s value."""
    tree = parse(formula, set(values))

    def ev(n: ast.AST) -> Interval:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant):
            assert isinstance(n.value, (int, float)), "parse() allows only numbers"
            return float(n.value), float(n.value)
        if isinstance(n, ast.Name):
            lo, hi = values[n.id]
            return float(lo), float(hi)
        if isinstance(n, ast.BinOp):
            (a, b), (c, d) = ev(n.left), ev(n.right)
            if isinstance(n.op, ast.Add):
                return a + c, b + d
            if isinstance(n.op, ast.Sub):
                return a - d, b - c
            if isinstance(n.op, ast.Mult):
                return _iv([a * c, a * d, b * c, b * d])
            if c == d == 0:
                return 0.0, 0.0  # division by zero is 0, as evaluate() has it
            if c <= 0 <= d:
                return _ANY  # a divisor that may be zero or tiny: anything (0 included)
            return _iv([a / c, a / d, b / c, b / d])
        if isinstance(n, ast.UnaryOp):
            lo, hi = ev(n.operand)
            if isinstance(n.op, ast.Not):
                t = _truth((lo, hi))
                return 1.0 - t[1], 1.0 - t[0]
            return (-hi, -lo) if isinstance(n.op, ast.USub) else (lo, hi)
        if isinstance(n, ast.BoolOp):
            truths = [_truth(ev(v)) for v in n.values]
            if isinstance(n.op, ast.And):
                return min(t[0] for t in truths), min(t[1] for t in truths)
            return max(t[0] for t in truths), max(t[1] for t in truths)
        if isinstance(n, ast.Compare):
            left, out = ev(n.left), (1.0, 1.0)
            for op, comp in zip(n.ops, n.comparators):
                right = ev(comp)
                t = _cmp(op, left, right)
                out = (min(out[0], t[0]), min(out[1], t[1]))
                left = right
            return out
        if isinstance(n, ast.IfExp):
            t = _truth(ev(n.test))
            if t == (1.0, 1.0):
                return ev(n.body)
            if t == (0.0, 0.0):
                return ev(n.orelse)
            (a, b), (c, d) = ev(n.body), ev(n.orelse)
            return min(a, c), max(b, d)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):  # parse() allows no other call
            args = [ev(a) for a in n.args]
            name = n.func.id
            if name == "min":
                return min(a[0] for a in args), min(a[1] for a in args)
            if name == "max":
                return max(a[0] for a in args), max(a[1] for a in args)
            if name == "abs":
                (lo, hi), = args
                return (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))
            x, floor, ceiling = args  # clamp(x, lo, hi) = max(lo, min(hi, x))
            inner = (min(ceiling[0], x[0]), min(ceiling[1], x[1]))
            return max(floor[0], inner[0]), max(floor[1], inner[1])
        raise ValueError(f"formula may not use {type(n).__name__}")  # parse() already refused it

    lo, hi = ev(tree)
    lo, hi = (0.0 if lo != lo else lo), (1.0 if hi != hi else hi)  # nan (inf - inf): anything
    return max(0.0, min(1.0, lo)), max(0.0, min(1.0, hi))
