"""JSON objects out of prose: a model's reply (an agent's answer, a judge's verdict) that holds
an object among other text, in a fenced ``json`` block or bare.

One reading for every such reply: a single pass over the text for its outermost balanced
``{...}`` spans (braces inside JSON strings do not count), each kept when it parses as an
object. Linear in the text, which may be an agent's and adversarial, and only its first
:data:`JSON_SCAN_LIMIT` characters are read. Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

#: Longest reply read for JSON (an object further on is not looked for).
JSON_SCAN_LIMIT = 200_000


def json_objects(text: str, limit: int = JSON_SCAN_LIMIT) -> Iterator[dict[str, Any]]:
    """Every JSON object of the text, in order: each outermost balanced ``{...}`` span of its
    first ``limit`` characters that parses as an object (a span that does not parse is skipped
    whole, its inner braces included)."""
    text = text[:limit]
    depth, start, in_str, escaped = 0, -1, False, False
    for i, ch in enumerate(text):
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"' and depth:
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                try:
                    obj = json.loads(text[start:i + 1])
                except (json.JSONDecodeError, RecursionError):
                    continue
                if isinstance(obj, dict):
                    yield obj


def first_json(text: str) -> dict[str, Any] | None:
    """The first JSON object in the text (see :func:`json_objects`), or None."""
    return next(json_objects(text), None)
