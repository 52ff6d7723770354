"""Append-only, hash-chained audit log of every tool call, and the middleware that feeds it.

The rule it keeps: nothing takes effect without its record. A call's ``tool_call`` record
(tool and arguments) is written before the tool runs; when it cannot be written the call
is refused and nothing runs. A ``tool_result`` record (``call_seq``, outcome, result,
duration) follows when the call ends; a call without one (the server died mid-call) is
read by graders as called, with outcome ``unknown``. Services write their
``service_action`` records inside the transaction they describe, so a failed append rolls
the change back.

A call of a tool the sandbox does not serve (a name no tool has, or a real tool the task
did not allow) is written as one ``tool_denied`` record (tool, arguments as audited,
``reason``: ``unknown tool``, ``not allowed``, or ``not granted`` to the harness's agent
calling) and answered with a tool error; nothing
runs. Graders read it as an attempt that failed (see formats.merge_tool_calls).

A call a harness made names its agent (toolhost.agents): every record written during it
carries ``agent`` (``id``, ``parent``, ``assignment``), and a tool outside the agent's grant
is denied as ``not granted``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from contextvars import ContextVar
from typing import Any, Callable

from ...formats import (
    DOCUMENT_TOOL,
    GENESIS_HASH,
    PYTHON_TOOL,
    WORKSPACE_TOOLS,
    ArgumentsRefused,
    any_surrogates,
    audited_arguments,
    canonical_json,
    check_arguments,
    replace_surrogates,
    seal,
    string_digest,
)
from ...toolhost.agents import AGENT
from ...toolhost.errors import FastmcpMiddleware, ToolError

log = logging.getLogger(__name__)

#: Who is acting: None for the agent (its MCP calls), ``"user"`` or ``"world"`` while the task
#: itself changes the sandbox between turns (server.actors). Every record written meanwhile,
#: the services' own included, carries ``actor``, so graders can tell whose action it was.
ACTOR: ContextVar[str | None] = ContextVar("cowork_actor", default=None)

#: The ``seq`` of the tool_call record whose code is making calls now (the ``python`` tool's
#: inner calls, see server.progtool): every tool_call record written meanwhile carries
#: ``parent``, so graders see which call made it.
PARENT: ContextVar[int | None] = ContextVar("cowork_parent", default=None)

#: The ``seq`` of the tool_call record of the call running now (set by AuditMiddleware for
#: the tool's duration): the ``python`` tool reads it to make it the PARENT of its inner calls.
CALL: ContextVar[int | None] = ContextVar("cowork_call", default=None)

#: Kind of the record of a call to a tool the sandbox does not serve (nothing ran).
DENIED = "tool_denied"

#: ``reason`` of a tool_denied record: no tool has the name / a real tool the task did not allow.
UNKNOWN_TOOL, NOT_ALLOWED = "unknown tool", "not allowed"

#: ``reason`` of a tool_denied record: a served tool the calling agent was not granted (a
#: harness's subagent, see toolhost.agents).
NOT_GRANTED = "not granted"

#: Longest tool name (characters) kept in a tool_denied record: a name is the caller's to
#: choose, and only served tools (short names) are checked by name anyway.
NAME_LIMIT = 256

#: Longest tool output (characters) kept in an audit record; graders see it, the log stays small.
RESULT_LIMIT = 8192

#: Audit budget when the task names none: the default disk_mb (64) / 4.
DEFAULT_MAX_BYTES = 16 << 20

#: Smallest budget, whatever disk_mb says: room for a few dozen full records.
MIN_MAX_BYTES = 256 << 10


def audit_budget(disk_mb: Any) -> int:
    """Bytes the audit log may take for a task with ``disk_mb`` of disk: a quarter (at least 256 KiB).

    With the same share for the service database and the dumps about its size, the run
    dir on the host stays within about ``disk_mb`` beside the workspace export.
    """
    try:
        mb = int(disk_mb)
    except (TypeError, ValueError):
        return DEFAULT_MAX_BYTES
    return max(MIN_MAX_BYTES, (mb << 20) // 4)


class AuditFull(OSError):
    """The audit log cannot take another record (budget and reserve spent, or a failed write)."""


class AuditLog:
    """One JSON line per event, each carrying the hash of the line before it.

    The file is opened once with O_APPEND, owned by root and mode 0600; the agent user
    can neither read nor write it.

    Past ``max_bytes`` records lose their bulk (arguments, results: cut, with length and
    digest) and draw on a reserve of a quarter more; once that is spent too, appends fail
    and every call is refused, so the log never passes ``max_bytes + reserve``.

    Args:
        path: The log file (created, truncated).
        max_bytes: Budget of the log (see audit_budget).
        reserve: Bytes past the budget that compacted records may take (default a quarter
            of the budget, at least 64 KiB).
    """

    def __init__(self, path: str, max_bytes: int = DEFAULT_MAX_BYTES, reserve: int | None = None):
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(self._fd, 0o600)
        self._lock = threading.Lock()
        self.count = 0
        self.last_hash = GENESIS_HASH
        self.max_bytes = max_bytes
        self.reserve = max(64 << 10, max_bytes // 4) if reserve is None else reserve
        self.size = 0
        self._broken: str | None = None
        #: Tool calls between their ``tool_call`` record and their end (kept by AuditMiddleware);
        #: a reset waits for them to drain.
        self.in_flight = 0
        #: ``count`` when the workspace was last exported (the host's evidence export); a reset
        #: refuses to start a new chain over records no export has covered.
        self.exported_at = 0
        #: Set while a reset runs: every tool call is refused, unaudited and undone.
        self.paused = False

    def restart(self) -> None:
        """Start a new, empty chain in the same file (a pooled sandbox's next episode).

        The file is truncated: the previous episode's records must already have been read
        (see ``exported_at``); the next record is ``seq`` 0 again after the genesis hash.
        """
        with self._lock:
            os.ftruncate(self._fd, 0)
            self.count = 0
            self.size = 0
            self.last_hash = GENESIS_HASH
            self._broken = None
            self.exported_at = 0

    def copy_to(self, dest: str) -> dict[str, Any]:
        """Copy the whole log as it stands to ``dest`` (mode 0600): a checkpoint's prefix, or an
        abandoned branch's archive (server.checkpoint). Returns ``count``, ``last_hash``, ``size``."""
        with self._lock:
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                with open(self.path, "rb") as src:
                    left = self.size
                    while left:
                        chunk = src.read(min(left, 1 << 20))
                        if not chunk:
                            raise OSError(f"{self.path} is shorter than the {self.size} bytes written")
                        os.write(fd, chunk)
                        left -= len(chunk)
            finally:
                os.close(fd)
            return {"count": self.count, "last_hash": self.last_hash, "size": self.size}

    def rewind(self, prefix: str, count: int, last_hash: str) -> None:
        """Make the log the records of ``prefix`` (an earlier copy_to of this chain, holding
        ``count`` records ending in ``last_hash``); the next record continues that chain.

        The new log is written beside the old one and renamed over it, so the log is always
        either the old branch or the new one, never half of each. The old branch must already
        be archived (a restore copies it first): this is the one place records leave the live log.
        """
        with self._lock:
            tmp = self.path + ".rewind"
            size = os.path.getsize(prefix)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                with open(prefix, "rb") as src:
                    while chunk := src.read(1 << 20):
                        os.write(fd, chunk)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            new = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            os.close(self._fd)
            self._fd = new
            self.count, self.size, self.last_hash = count, size, last_hash
            self._broken = None

    def append(self, record: dict[str, Any],
               compact: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, Any]:
        """Seal ``record`` into the chain and write it; returns the sealed record.

        Args:
            record: The record (``seq``, ``time``, ``prev`` and ``hash`` are added).
            compact: Makes a smaller record, used instead once the budget is spent.

        Raises:
            AuditFull: the record does not fit (budget and reserve spent), or an earlier
                write failed (the chain may be torn: nothing more is accepted).
            ValueError: the record is not JSON (a NaN); nothing is written.
        """
        with self._lock:
            if self._broken:
                raise AuditFull(f"audit log unusable after a failed write: {self._broken}")
            actor = ACTOR.get()
            if actor is not None:
                record = {**record, "actor": actor}
            parent = PARENT.get()
            if parent is not None and record.get("kind") in ("tool_call", DENIED):
                record = {**record, "parent": parent}
            agent = AGENT.get()
            if agent is not None:  # every record of the call, the services' own included
                record = {**record, "agent": {k: agent.get(k) for k in ("id", "parent", "assignment")}}
            line = self._line(record)
            if self.size + len(line) > self.max_bytes and compact is not None:
                line = self._line(compact(record))
            if self.size + len(line) > self.max_bytes + self.reserve:
                raise AuditFull(f"audit log is full ({self.size} bytes, budget {self.max_bytes} + {self.reserve})")
            try:
                written = os.write(self._fd, line)
            except OSError as exc:
                self._broken = str(exc)
                raise AuditFull(f"audit log write failed: {exc}") from exc
            if written != len(line):  # a torn line: the chain is invalid from here on, say so
                self._broken = f"short write ({written} of {len(line)} bytes)"
                raise AuditFull(f"audit log write failed: {self._broken}")
            self.count += 1
            self.size += written
            sealed = json.loads(line)
            self.last_hash = sealed["hash"]
            return sealed

    def _line(self, record: dict[str, Any]) -> bytes:
        sealed = seal({"seq": self.count, "time": time.time(), **record}, self.last_hash)
        return (canonical_json(sealed) + "\n").encode("ascii")

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)


def _result_text(result: Any) -> str:
    parts = []
    for block in getattr(result, "content", None) or []:
        text = getattr(block, "text", None)
        parts.append(text if text is not None else f"<{getattr(block, 'type', 'content')}>")
    return "\n".join(parts)


def _cut(value: str, path: str, limit: int, cuts: list[dict[str, Any]]) -> str:
    if len(value) <= limit:
        return value
    cuts.append({"path": path, "length": len(value), "sha256": string_digest(value)})
    return value[:limit]


def _structured(result: Any, cuts: list[dict[str, Any]]) -> Any:
    data = getattr(result, "structured_content", None)
    if data is None:
        return None
    try:
        text = canonical_json(data)
    except (ValueError, TypeError, RecursionError):
        text = json.dumps(data, default=str, allow_nan=True)
    if len(text) <= RESULT_LIMIT:
        return data
    cuts.append({"path": "/structured", "length": len(text), "sha256": string_digest(text)})
    return None


def _compact_call(record: dict[str, Any]) -> dict[str, Any]:
    """A tool_call record without its arguments (length and digest kept)."""
    if not record.get("args"):
        return record
    try:
        whole = canonical_json(record["args"])
    except ValueError:
        whole = json.dumps(record["args"], default=str, sort_keys=True)
    cuts = [{"path": "/args", "length": len(whole), "sha256": string_digest(whole), "over_budget": True}]
    return {**record, "args": {}, "cut": cuts}


def _compact_result(record: dict[str, Any]) -> dict[str, Any]:
    """A tool_result record without result text or structured content (lengths and digests kept)."""
    out = dict(record)
    cuts = list(record.get("cut") or [])
    for key, limit in (("result", 0), ("error", 256)):
        value = out.get(key)
        if isinstance(value, str) and len(value) > limit:
            out[key] = _cut(value, f"/{key}", limit, cuts)
    if out.get("structured") is not None:
        text = json.dumps(out["structured"], default=str, sort_keys=True)
        cuts.append({"path": "/structured", "length": len(text), "sha256": string_digest(text)})
        out["structured"] = None
    if cuts:
        out["cut"] = cuts
    return out


class AuditMiddleware(FastmcpMiddleware):
    """Audits every tool call: a ``tool_call`` record before it runs, a ``tool_result`` after.

    It also enforces the argument rule shared with the host (formats.check_arguments): a
    call whose arguments are refused is audited (arguments kept as far as JSON can hold
    them) and answered with a tool error, without running. Lone surrogates are replaced by
    U+FFFD before anything else sees them, the tool and the audit alike, and the record
    says so (``surrogates_replaced``): files, commands, service records and graders all
    hold the same valid text.
    """

    def __init__(self, log: AuditLog):
        self.log = log

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        """Audit the call, then run it (unless refused) and audit its result.

        Raises:
            ToolError: the log is paused (an export or reset is under way), the call cannot
                be written to the log, or the tool is unknown or not served here; nothing ran.
        """
        name = context.message.name
        if self.log.paused and ACTOR.get() is None:
            raise ToolError("Refused: the sandbox is exporting its evidence or being reset between episodes; "
                            "nothing was done.")
        args = context.message.arguments if context.message.arguments is not None else {}
        refusal = None
        try:
            check_arguments(args)
        except ArgumentsRefused as exc:
            refusal = str(exc)
        try:
            clean = replace_surrogates(args) if any_surrogates(args) else args
        except RecursionError:  # refused as nested too deeply; audited as {} below
            clean = args
        # What the tool receives is what the audit shows: graders match (and re2 encodes)
        # the same text the tool acted on, and the flag says the text was not sent as is.
        kept, cuts = audited_arguments(clean) if isinstance(clean, dict) else ({}, [])
        denied = await _denied(context, name)
        grant = (AGENT.get() or {}).get("tools")
        if not denied and grant is not None and name not in grant:
            denied = NOT_GRANTED  # the python tool's inner calls carry the same grant
        record: dict[str, Any] = {"kind": DENIED if denied else "tool_call",
                                  "tool": _cut(name, "/tool", NAME_LIMIT, cuts) if denied else name, "args": kept}
        if denied:
            record["reason"] = denied
        if cuts:
            record["cut"] = cuts
        if clean is not args:
            record["surrogates_replaced"] = True
        try:
            call = self.log.append(record, compact=_compact_call)
        except (OSError, ValueError) as exc:
            # No record, no action: the call is refused before anything runs.
            log.error("refused %s: cannot audit it: %s", name[:NAME_LIMIT], exc)
            raise ToolError(f"Refused: this call could not be written to the audit log ({exc}); "
                            "nothing was done.") from None
        if denied:
            shown = record["tool"] + ("..." if len(name) > NAME_LIMIT else "")
            if denied == NOT_GRANTED:
                raise ToolError(f"Tool {shown!r} was not granted to this agent; nothing was done.")
            raise ToolError(f"Unknown tool: {shown!r}" if denied == UNKNOWN_TOOL
                            else f"Tool {shown!r} is not available in this sandbox; nothing was done.")
        start = time.perf_counter()
        self.log.in_flight += 1
        token = CALL.set(call["seq"])
        try:
            return await self._run(context, call_next, call, clean, args, refusal, start)
        finally:
            CALL.reset(token)
            self.log.in_flight -= 1

    async def _run(self, context, call_next, call, clean, args, refusal, start):
        if refusal is not None:
            self._result(call, "error", start, error=refusal, error_type="ArgumentsRefused")
            raise ToolError(f"Refused: {refusal}. Nothing was done.")
        if clean is not args:
            context = context.copy(message=context.message.model_copy(update={"arguments": clean}))
        try:
            result = await call_next(context)
        except Exception as exc:
            self._result(call, "error", start, error=str(exc), error_type=type(exc).__name__)
            raise
        self._result(call, "ok", start, result=result)
        return result

    def _result(self, call: dict[str, Any], outcome: str, start: float, *, result: Any = None,
                error: str | None = None, error_type: str | None = None) -> None:
        """Write the tool_result record; a failure leaves the call ``unknown`` to graders."""
        cuts: list[dict[str, Any]] = []
        record: dict[str, Any] = {"kind": "tool_result", "call_seq": call["seq"], "tool": call["tool"],
                                  "outcome": outcome,
                                  "duration_ms": round((time.perf_counter() - start) * 1000, 3)}
        if outcome == "ok":
            record["result"] = _cut(_result_text(result), "/result", RESULT_LIMIT, cuts)
            record["structured"] = _structured(result, cuts)
        else:
            record["error"] = _cut(error or "", "/error", RESULT_LIMIT, cuts)
            record["error_type"] = error_type
        if cuts:
            record["cut"] = cuts
        try:
            self.log.append(record, compact=_compact_result)
        except (OSError, ValueError, TypeError) as exc:
            try:  # a structured result JSON cannot hold: keep the rest
                self.log.append(_compact_result(record))
            except (OSError, ValueError, TypeError):
                log.error("tool_result of call %s not audited: %s", call["seq"], exc)


async def _denied(context: Any, name: str) -> str | None:
    """Why the server will not run ``name`` (UNKNOWN_TOOL, NOT_ALLOWED), or None when it serves it.

    Asked of the app itself (about 0.1 ms), so every tool it serves counts, whoever registered
    it. Without an app to ask (not seen with fastmcp 4.2) the call goes on, and fastmcp's own
    "Unknown tool" answer is audited as a failed call.
    """
    server = getattr(getattr(context, "fastmcp_context", None), "fastmcp", None)
    if server is None or await server.get_tool(name) is not None:
        return None
    return NOT_ALLOWED if name in _catalogue() else UNKNOWN_TOOL


def _catalogue() -> frozenset[str]:
    """Every tool name a task may allow (the workspace tools, ``python`` and every service's)."""
    from ...services.names import SERVICE_TOOLS

    return frozenset((*WORKSPACE_TOOLS, PYTHON_TOOL, DOCUMENT_TOOL)).union(*SERVICE_TOOLS.values())
