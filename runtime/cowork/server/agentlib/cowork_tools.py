"""The task's tools as Python functions, for code run by the ``python`` tool.

    from cowork_tools import mail, workspace, ToolError
    hits = mail.search(query="invoice")
    text = workspace.read_file("notes.txt")

Only the tools this task allows are here, grouped by service (``mail.search`` is the tool
``mail_search``; the workspace tools are under ``workspace``); ``tools()`` lists them with
their arguments, ``call(name, **args)`` calls one by its full name. Each call is a tool call
of the sandbox like any other: checked, audited (as made by this python call) and answered
by the server, which owns every decision; this module only carries requests over the
channel the server opened for this one run (descriptor in COWORK_TOOLS_FD).

This file runs as the agent, in the agent's interpreter; it holds no privilege and no secret.
"""

from __future__ import annotations

import builtins
import inspect
import json
import keyword
import linecache
import os
import socket
import sys
import threading
import traceback
from typing import Any

__all__ = ["ToolError", "call", "tools"]

_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}


class ToolError(Exception):
    """A tool call failed: the tool's error, a refusal, or a closed channel."""


class _Channel:
    """One JSON request per line, one reply per line, one request at a time."""

    def __init__(self, fd: int):
        self._sock = socket.socket(fileno=fd)
        self._sock.set_inheritable(False)  # programs the code starts do not get it
        self._file = self._sock.makefile("rb")
        self._lock = threading.Lock()
        self._next = 0

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._next += 1
            message = {**message, "id": self._next}
            try:
                self._sock.sendall(json.dumps(message).encode("ascii") + b"\n")
                line = self._file.readline()
            except OSError as exc:
                raise ToolError(f"the tool channel is closed ({exc}): tools can be called only while "
                                "the python call that started this code runs") from None
            if not line:
                raise ToolError("the tool channel is closed: tools can be called only while the python "
                                "call that started this code runs")
            reply = json.loads(line)
            if reply.get("id") != self._next:
                raise ToolError(f"the tool channel is out of step: {reply.get('error') or 'reply to another request'}")
            return reply


_channel: _Channel | None = None
_tools: dict[str, dict[str, Any]] = {}
_namespaces: dict[str, "_Namespace"] = {}


def call(name: str, /, **args: Any) -> Any:
    """Call the tool ``name`` (its full name, e.g. ``mail_search``) with keyword arguments.

    Returns:
        The tool's structured result (dict, list, str, ...), else its text.

    Raises:
        ToolError: the tool failed or was refused (a name this task does not allow included).
    """
    return _send(name, args)


def _send(name: str, args: dict[str, Any]) -> Any:
    if _channel is None:
        raise ToolError("no tool channel: cowork_tools works only in code run by the python tool")
    reply = _channel.request({"op": "call", "tool": name, "args": args})
    if not reply.get("ok"):
        raise ToolError(reply.get("error") or "tool call failed")
    return reply.get("value")


def tools() -> dict[str, str]:
    """Every function here, ``namespace.function(signature)``, with its description."""
    return {f"{t['namespace']}.{t['function']}{_signature(t['input_schema'])}": t["description"]
            for t in _tools.values()}


class _Tool:
    """A tool as a function: its signature is the tool's arguments, checked before sending."""

    def __init__(self, name: str, spec: dict[str, Any]):
        self.name = name
        self.__name__ = spec["function"]
        self.__qualname__ = f"{spec['namespace']}.{spec['function']}"
        self.__doc__ = spec["description"]
        self.__signature__ = _signature(spec["input_schema"])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        bound = self.__signature__.bind(*args, **kwargs)  # TypeError for a wrong argument, as Python's own
        sent: dict[str, Any] = {}
        for name, value in bound.arguments.items():  # only what was passed: the tool's defaults apply
            if self.__signature__.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                sent.update(value)
            else:
                sent[name] = value
        return _send(self.name, sent)

    def __repr__(self) -> str:
        return f"<tool {self.__qualname__}{self.__signature__}>"


class _Namespace:
    """The allowed tools of one service (or of the workspace)."""

    def __init__(self, name: str):
        self._name = name
        self._functions: dict[str, _Tool] = {}

    def __getattr__(self, attr: str) -> _Tool:
        try:
            return self.__dict__["_functions"][attr]
        except KeyError:
            raise AttributeError(f"{self.__dict__['_name']}.{attr} is not a tool this task allows; "
                                 f"allowed: {', '.join(sorted(self.__dict__['_functions'])) or 'none'}") from None

    def __dir__(self) -> list[str]:
        return sorted(self._functions)

    def __repr__(self) -> str:
        return f"<tools {self._name}: {', '.join(sorted(self._functions))}>"


def __getattr__(attr: str) -> Any:  # PEP 562: `from cowork_tools import calendar` when it is not allowed
    raise AttributeError(f"cowork_tools has no {attr!r}: not a service this task allows "
                         f"(allowed: {', '.join(sorted(_namespaces)) or 'none'})")


def _annotation(schema: dict[str, Any]) -> Any:
    options = schema.get("anyOf") or [schema]
    kinds = [_TYPES.get(o.get("type"), Any) for o in options if o.get("type") != "null"]
    kind = kinds[0] if len(kinds) == 1 else Any
    return kind | None if any(o.get("type") == "null" for o in options) and kind is not Any else kind


def _signature(schema: dict[str, Any]) -> inspect.Signature:
    props = schema.get("properties") or {}
    if not all(n.isidentifier() and not keyword.iskeyword(n) for n in props):
        # An argument Python cannot name (``from``): the tool takes keyword arguments as given.
        return inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_KEYWORD)])
    required = set(schema.get("required") or [])
    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=_annotation(p))
              for n, p in props.items() if n in required]
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=p.get("default"), annotation=_annotation(p))
               for n, p in props.items() if n not in required]
    return inspect.Signature(params)


def _install(manifest: dict[str, dict[str, Any]]) -> None:
    module = sys.modules[__name__]
    _tools.update(manifest)
    for name, spec in manifest.items():
        namespace = _namespaces.get(spec["namespace"])
        if namespace is None:
            namespace = _namespaces[spec["namespace"]] = _Namespace(spec["namespace"])
            setattr(module, spec["namespace"], namespace)
            __all__.append(spec["namespace"])
        namespace._functions[spec["function"]] = _Tool(name, spec)


def _main() -> None:
    """Fetch the code and the tool list from the server, then run the code as ``__main__``."""
    global _channel
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:  # the agent dies first when memory runs out
            fh.write("1000")
    except OSError:
        pass
    fd = os.environ.pop("COWORK_TOOLS_FD", None)
    if fd is None:
        sys.exit("cowork_tools: no COWORK_TOOLS_FD; run code through the python tool")
    _channel = _Channel(int(fd))
    start = _channel.request({"op": "start"})
    code = start["code"]
    _install(start["tools"])
    filename = "<python>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)  # tracebacks show the lines
    namespace = {"__name__": "__main__", "__builtins__": builtins, "__file__": filename}
    try:
        compiled = compile(code, filename, "exec")
    except SyntaxError as exc:
        traceback.print_exception(type(exc), exc, None)
        sys.exit(1)
    try:
        exec(compiled, namespace)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - reported as Python reports an uncaught one
        tb = exc.__traceback__  # always set on a caught exception
        traceback.print_exception(type(exc), exc, tb.tb_next if tb is not None else None)  # without this frame
        sys.exit(1)
