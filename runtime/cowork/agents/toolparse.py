"""Tool calls written as text by a model: the hermes format and the Qwen variants.

Hermes (Qwen2.5, Qwen3, NousResearch)::

    <tool_call>
    {"name": "read_file", "arguments": {"path": "a.txt"}}
    </tool_call>

Qwen3-Coder (XML parameters)::

    <tool_call>
    <function=read_file>
    <parameter=path>
    a.txt
    </parameter>
    </function>
    </tool_call>

A call the parser cannot read (bad JSON, no name, a block cut off by the token limit) is
never dropped and never raises: it becomes a :class:`ToolCall` whose arguments carry the
raw text under ``INVALID_ARGUMENTS_KEY``, so the sandbox answers with a tool error the model
can learn from.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..formats import INVALID_ARGUMENTS_KEY
from .base import ToolCall, parse_arguments

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(re.escape(OPEN) + r"(.*?)(?:" + re.escape(CLOSE) + r"|\Z)", re.S)
_FUNCTION = re.compile(r"<function=([^>\n]+)>(.*?)(?:</function>|\Z)", re.S)
_PARAM = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)\n?(?:</parameter>|\Z)", re.S)
#: Name given to a call whose tool name could not be read (no tool has it: a tool error).
UNREADABLE = "unreadable_tool_call"


def parse_tool_calls(text: str, *, id_prefix: str = "call") -> tuple[str, list[ToolCall]]:
    """Split a model's text into its prose and its tool calls.

    Returns:
        ``(content, calls)``: the text outside the tool-call blocks (stripped), and one
        ToolCall per block, in order, ids ``{id_prefix}_{n}``.
    """
    calls: list[ToolCall] = []
    for n, m in enumerate(_BLOCK.finditer(text)):
        calls.append(_one(m.group(1), f"{id_prefix}_{n}", closed=m.group(0).endswith(CLOSE)))
    content = _BLOCK.sub("", text).strip()
    return content, calls


def _one(body: str, call_id: str, closed: bool) -> ToolCall:
    raw = body.strip()
    fn = _FUNCTION.search(raw)
    if fn is not None:
        args: dict[str, Any] = {}
        for key, value in _PARAM.findall(fn.group(2)):
            args[key.strip()] = _xml_value(value)
        if not closed:
            args = {INVALID_ARGUMENTS_KEY: raw}
        return ToolCall(id=call_id, name=fn.group(1).strip(), arguments=args)
    try:
        obj = json.loads(raw) if closed else None
    except (ValueError, RecursionError):
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("name"), str) and obj["name"]:
        # "arguments" as an object, or as a JSON string (some models write it so)
        return ToolCall(id=call_id, name=obj["name"], arguments=parse_arguments(obj.get("arguments", {})))
    name = obj.get("name") if isinstance(obj, dict) and isinstance(obj.get("name"), str) else None
    if name is None:
        guess = re.search(r'"name"\s*:\s*"([^"\\]{1,128})"', raw)
        name = guess.group(1) if guess else None
    return ToolCall(id=call_id, name=name or UNREADABLE, arguments={INVALID_ARGUMENTS_KEY: raw})


def _xml_value(text: str) -> Any:
    """A Qwen3-Coder parameter: JSON where it reads as JSON (numbers, lists, objects,
    booleans), else the text itself."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def render_tool_calls(calls: list[ToolCall]) -> str:
    """The hermes text of ``calls`` (what a model trained on that format writes)."""
    return "".join(f"{OPEN}\n{json.dumps({'name': c.name, 'arguments': c.arguments}, ensure_ascii=False)}\n{CLOSE}"
                   for c in calls)


__all__ = ["CLOSE", "OPEN", "UNREADABLE", "parse_tool_calls", "render_tool_calls"]
