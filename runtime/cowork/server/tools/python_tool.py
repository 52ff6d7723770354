"""The ``python`` tool: the agent's code runs as the agent and calls the other allowed tools.

Programmatic tool calling: instead of one model turn per tool call, the agent writes Python
that calls tools as functions (``from cowork_tools import mail; mail.search(query="x")``)
and keeps intermediate results in variables rather than in its context.

The code runs like a ``shell`` command (WorkspaceTools.run_as_agent: the agent's ids, the
task's time limit and output cap, leftovers killed). Its only way back to the server is one
end of a socketpair it inherits (fd number in ``COWORK_TOOLS_FD``), speaking one JSON
object per line; the module it imports (agentlib/cowork_tools.py) is a thin client of that
channel. Everything on the channel is the agent's and is treated as untrusted: lines are
bounded, bad JSON and bad shapes are answered with errors, and every request that names a
tool goes through the same FastMCP app that serves the agent, ``app.call_tool``, so the
allow-list, argument validation, audit middleware (records with ``parent``: the python
call's seq) and fault injection are exactly those of a direct call. The server closes its
end when the python call returns: a process the code left behind can call nothing more.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from ...formats import MAX_ARGUMENTS_BYTES, PYTHON_TOOL
from ...services.names import TOOL_SERVICE
from ...toolhost.errors import ToolError
from ..state.audit import CALL, PARENT
from .workspace import WorkspaceTools

if TYPE_CHECKING:
    from ...toolhost.host import ToolApp

log = logging.getLogger(__name__)

#: Folder of the module the agent's code imports (``cowork_tools``); nothing else is in it,
#: so the agent's interpreter gets no path to the server's own package.
AGENT_LIB = str(Path(__file__).parents[1] / "agentlib")
#: The variable that tells the agent's module which descriptor is its channel.
FD_ENV = "COWORK_TOOLS_FD"
#: Longest request line: arguments are refused past MAX_ARGUMENTS_BYTES anyway; the margin
#: lets such a request reach the audit middleware and be refused there, as a direct call is.
MAX_LINE = 4 * MAX_ARGUMENTS_BYTES
#: Seconds an inner call still running when the code's process ended may take to finish
#: (beyond the task's tool timeout) before it is cancelled.
DRAIN_GRACE_S = 5.0
#: What the agent's interpreter runs: the client module first on sys.path (a cowork_tools.py
#: in /workspace cannot stand in for it), then the code it fetches over the channel.
BOOT = f"import sys; sys.path.insert(0, {AGENT_LIB!r}); import cowork_tools; cowork_tools._main()"

DESCRIPTION = (
    "Run Python 3 code in /workspace as the agent user; returns exit code and combined output. "
    "The code can call the other tools of this task as functions and keep their results in "
    "variables: `from cowork_tools import mail, workspace` then `mail.search(query='x')`, "
    "`workspace.read_file('a.txt')`; `cowork_tools.tools()` lists them with their arguments. "
    "A tool call returns the tool's structured result (dicts, lists, strings); a failed one "
    "raises cowork_tools.ToolError. Print what you want to see."
)


class ProgTool:
    """Registers the ``python`` tool and serves the calls its code makes.

    Args:
        workspace: Runs the code as the agent (WorkspaceTools.run_as_agent).
        app: The app serving the agent: every inner call goes through its middleware and
            reaches only the tools it serves.
    """

    def __init__(self, workspace: WorkspaceTools, app: ToolApp):
        self.workspace = workspace
        self.app = app
        self._manifest: dict[str, Any] | None = None
        self._python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "/usr/bin/python3"

    def register(self, mcp: ToolApp) -> None:
        """Add the ``python`` tool to ``mcp``."""

        @mcp.tool(name=PYTHON_TOOL, description=DESCRIPTION,
                  annotations={"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
                               "openWorldHint": False})
        async def python(
            code: Annotated[str, Field(description="Python 3 source, run as a script in /workspace.")],
            timeout_s: Annotated[float | None, Field(description="Seconds before it is killed (capped by the task's limit).")] = None,
        ) -> dict:
            return await self.run(code, timeout_s)

    async def manifest(self) -> dict[str, Any]:
        """The tools the code may call: ``{name: {namespace, function, description, input_schema}}``.

        Every tool the app serves except ``python`` itself (no recursion). Built on first use:
        by then the services have registered their tools.
        """
        if self._manifest is None:
            out: dict[str, Any] = {}
            for tool in await self.app.list_tools():
                if tool.name == PYTHON_TOOL:
                    continue
                service = TOOL_SERVICE.get(tool.name)
                namespace, function = (service, tool.name[len(service) + 1:]) if service else ("workspace", tool.name)
                out[tool.name] = {"namespace": namespace, "function": function,
                                  "description": tool.description or "", "input_schema": tool.parameters}
            self._manifest = out
        return self._manifest

    async def run(self, code: str, timeout_s: float | None = None) -> dict:
        """Run ``code`` as the agent, serving its tool calls until it ends.

        Raises:
            ToolError: called from the code of another python call, or the code ran past
                the time limit (killed; the message holds the output so far).
        """
        if PARENT.get() is not None:
            raise ToolError("the python tool cannot be called from python code; call the tools you need directly")
        parent = CALL.get()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        channel = _Channel(self, code, parent)
        try:
            reader, writer = await asyncio.open_unix_connection(sock=mine, limit=MAX_LINE)
            server = asyncio.ensure_future(channel.serve(reader, writer))
            try:
                return await self.workspace.run_as_agent(
                    [self._python, "-c", BOOT], timeout_s,
                    env={FD_ENV: str(theirs.fileno()), "PYTHONUNBUFFERED": "1"}, pass_fds=(theirs.fileno(),))
            finally:
                theirs.close()
                await channel.close(server, writer, self.workspace.cfg.tool_timeout_s + DRAIN_GRACE_S)
        finally:
            theirs.close()
            mine.close()


class _Channel:
    """One python call's end of the channel: reads requests, answers each in turn."""

    def __init__(self, tool: ProgTool, code: str, parent: int | None):
        self.tool = tool
        self.code = code
        self.parent = parent
        #: Set when the code's process has ended: no request is served after it.
        self.closed = False

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer requests until the other end closes, a line is too long, or the call ends;
        then close the channel (the code's next call sees it closed rather than waiting)."""
        try:
            await self._serve(reader, writer)
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not self.closed:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError:
                await self._send(writer, {"id": None, "ok": False, "error": f"request line over {MAX_LINE} "
                                          "bytes; the channel is closed", "type": "ProtocolError"})
                return
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            if self.closed:
                return
            reply = await self.answer(line)
            if not await self._send(writer, reply):
                return

    async def _send(self, writer: asyncio.StreamWriter, reply: dict[str, Any]) -> bool:
        try:
            data = json.dumps(reply, default=str, allow_nan=False)
        except ValueError:  # a NaN in a tool's result: JSON cannot hold it, say so
            data = json.dumps({"id": reply.get("id"), "ok": False, "type": "ProtocolError",
                               "error": "the tool's result holds a value JSON cannot carry (NaN or infinity)"})
        try:
            writer.write(data.encode("ascii") + b"\n")
            await writer.drain()
        except (ConnectionError, RuntimeError):
            return False
        return True

    async def answer(self, line: bytes) -> dict[str, Any]:
        """One request line to its reply; never raises."""
        try:
            req = json.loads(line)
        except (ValueError, RecursionError) as exc:
            return {"id": None, "ok": False, "type": "ProtocolError", "error": f"request is not JSON: {exc}"}
        if not isinstance(req, dict):
            return {"id": None, "ok": False, "type": "ProtocolError", "error": "a request must be a JSON object"}
        rid = req.get("id") if isinstance(req.get("id"), (int, str)) else None
        op = req.get("op", "call")
        if op == "start":
            return {"id": rid, "ok": True, "code": self.code, "tools": await self.tool.manifest()}
        if op != "call":
            return {"id": rid, "ok": False, "type": "ProtocolError", "error": f"unknown op {str(op)[:100]!r}"}
        name, args = req.get("tool"), req.get("args", {})
        if not isinstance(name, str) or not isinstance(args, dict):
            return {"id": rid, "ok": False, "type": "ProtocolError",
                    "error": "a call needs `tool` (a string) and `args` (a JSON object)"}
        return {"id": rid, **await self.call(name, args)}

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """Call ``name`` through the agent's app, as the agent's own MCP call would be."""
        token = PARENT.set(self.parent)
        try:
            result = await self.tool.app.call_tool(name, args)
        except Exception as exc:  # noqa: BLE001 - whatever the tool raised is the code's to handle
            return {"ok": False, "type": type(exc).__name__, "error": str(exc) or type(exc).__name__}
        finally:
            PARENT.reset(token)
        return {"ok": True, "value": _value(result)}

    async def close(self, server: asyncio.Future, writer: asyncio.StreamWriter, grace_s: float) -> None:
        """End the channel: nothing more is read; a call already running may finish (its
        effect has its audit record; cut off, its outcome would be unknown)."""
        self.closed = True
        writer.transport.abort()  # the reader sees the end at once; the other end gets EOF
        try:
            await asyncio.wait_for(asyncio.shield(server), grace_s)
        except TimeoutError:
            log.warning("an inner call of a python call outlived it by %.0fs; cancelled", grace_s)
            server.cancel()
        except Exception:  # noqa: BLE001 - the channel is gone either way
            log.exception("python tool channel ended with an error")


def _value(result: Any) -> Any:
    """What the code gets back: the structured result if there is one, else the text."""
    structured = getattr(result, "structured_content", None)
    meta = (getattr(result, "meta", None) or {}).get("fastmcp") or {}
    if structured is not None:
        return structured.get("result") if meta.get("wrap_result") and isinstance(structured, dict) else structured
    texts = [getattr(block, "text", None) for block in getattr(result, "content", None) or []]
    return "\n".join(t for t in texts if t is not None)
