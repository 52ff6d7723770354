r"""Formats shared by the in-container server and the host-side graders.

This module imports nothing from ``cowork.server`` nor from host-side modules, so the
server writes and the grader verifies exactly the same definitions: the audit record,
its hash chain, the limits on tool arguments and audited strings, and the fixed paths
inside a sandbox.

The audit log is JSON lines of ASCII-escaped canonical JSON: no content (U+2028, U+0085,
a lone surrogate, a NUL) can put a line break or an unencodable character into a record,
and readers split on ``"\n"`` only (:func:`audit_lines`), never ``str.splitlines``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

#: Hash that stands before the first audit record.
GENESIS_HASH = "0" * 64

#: Where things live inside a sandbox container.
WORKSPACE_DIR = "/workspace"
RUN_DIR = "/run/cowork"  # bind-mounted from the host; root-only (0700)
MCP_SOCKET = "mcp.sock"  # streamable HTTP, for external clients (fastmcp loaded on the first connection)
RPC_SOCKET = "rpc.sock"  # newline-delimited JSON-RPC, the host's own path (server.rpc)
CONTROL_SOCKET = "control.sock"
AUDIT_LOG = "audit.jsonl"
EXPORT_DIR = "export"
TASK_DIR = "/opt/cowork/task"  # public part of the task, baked into the per-task image
SEED_DIR = "/opt/cowork/task/seed"
TASK_CONFIG = "/opt/cowork/task/task.json"

#: PAX keys of the workspace export (written by the server, read by the grader): a global
#: header with the export's summary (JSON: ``complete``, what was omitted, the limits), and
#: per-member headers on a file whose content was left out (why, and its apparent size).
EXPORT_SUMMARY_KEY = "COWORK.export"
EXPORT_OMITTED_KEY = "COWORK.omitted"
EXPORT_SIZE_KEY = "COWORK.size"
#: A member no workspace path can equal, present only when the export is incomplete.
EXPORT_INCOMPLETE_MEMBER = "../COWORK-EXPORT-INCOMPLETE"
#: PAX key naming a member's kind where tar has no type for it: ``socket`` (a FIFO member).
EXPORT_KIND_KEY = "COWORK.kind"


def name_identity(kind: str, detail: str = "") -> str:
    """What a workspace name that is not a regular file is, as graders compare names:
    ``dir:``, ``symlink:<target>``, ``fifo:``, ``socket:``, ``chardev:<major>,<minor>``, ...

    A regular file's identity is the SHA-256 of its content (hex, never holding ``:``), so
    the two never collide and a file replaced by a link of any target counts as changed. The
    server (the actors' record of what they changed) and the grader (the export) both use it.
    """
    return f"{kind}:{detail}"


def is_file_identity(identity: str) -> bool:
    """True when ``identity`` is a regular file's (its content's SHA-256), not a name_identity."""
    return ":" not in identity

#: The unprivileged user agent commands run as.
AGENT_UID = 1000
AGENT_GID = 1000
AGENT_USER = "agent"


#: Largest tool arguments accepted, measured as the length of their canonical JSON (ASCII
#: escaped, so the figure is the same on host and server whatever the text). Bigger
#: arguments are refused as a tool error on the host and again by the server (a raw MCP
#: client can bypass the host). 1 MiB is far above any honest call and keeps an episode's
#: audit log and trace within reach of its disk budget; the server's HTTP layer refuses
#: bodies over 4 MB anyway, with an HTTP error the host could only report as its own fault.
MAX_ARGUMENTS_BYTES = 1 << 20

#: Longest string (in characters) an audit record keeps whole. A longer string (in the
#: arguments, a result or an error) is kept as its first AUDIT_STRING_LIMIT characters and
#: listed under the record's ``cut`` with its full length and SHA-256 (see :func:`cut_strings`).
AUDIT_STRING_LIMIT = 64 * 1024

#: Largest arguments object an audit record keeps, after cutting long strings (many short
#: strings or long keys can still add up); beyond it the record keeps ``args: {}`` and lists
#: the whole object under ``cut`` at path ``""``.
AUDIT_ARGS_LIMIT = 256 * 1024


#: Key under which a policy passes on tool arguments it could not read as a JSON object
#: (the raw text, or the value that was not an object); check_arguments refuses them with
#: a message that quotes it, so the model learns what it did wrong.
INVALID_ARGUMENTS_KEY = "__invalid_json__"


class ArgumentsRefused(ValueError):
    """Tool arguments that no tool may receive; the message is shown to the agent."""


def canonical_json(obj: Any) -> str:
    r"""Serialise ``obj`` as canonical JSON: sorted keys, no spaces, ASCII only.

    ASCII escaping is what makes the audit log unsplittable by content: U+2028, U+2029 and
    U+0085 (which ``str.splitlines`` treats as line breaks) and lone surrogates (which UTF-8
    cannot encode) all become ``\uXXXX`` escapes.

    Raises:
        ValueError: ``obj`` holds NaN or an infinity (not JSON; refused, never written).
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False, default=str)


def audit_lines(text: str) -> list[str]:
    r"""The lines of an audit log: split on ``"\n"`` only, as the server writes them."""
    return text.split("\n")


def string_digest(text: str) -> str:
    """SHA-256 of a string's UTF-8 bytes (lone surrogates kept as their own code units)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def check_arguments(args: Any) -> bytes:
    r"""Check tool arguments and return their canonical JSON bytes.

    The same rule holds on the host (before sending) and in the server (before the call
    is audited and run): arguments are a JSON object with string keys, hold no NaN or
    infinity, and their canonical JSON is at most MAX_ARGUMENTS_BYTES. Lone surrogates
    are allowed here: they travel and are audited as ``\udXXX`` escapes.

    Raises:
        ArgumentsRefused: naming what is wrong, in words the agent can act on.
    """
    if not isinstance(args, dict):
        raise ArgumentsRefused(f"tool arguments must be a JSON object, got {_json_type(args)}")
    if INVALID_ARGUMENTS_KEY in args:
        raw = args[INVALID_ARGUMENTS_KEY]
        shown = raw if isinstance(raw, str) else json.dumps(raw, default=str)
        raise ArgumentsRefused(f"tool arguments must be a JSON object, got {shown[:200]!r}")
    if not all(isinstance(key, str) for key in args):
        raise ArgumentsRefused("tool argument names must be strings")
    try:
        text = canonical_json(args)
    except ValueError as exc:  # NaN / Infinity, or a circular structure
        raise ArgumentsRefused(f"tool arguments are not valid JSON: {exc}; send numbers as finite values "
                               "or as strings") from None
    except TypeError as exc:  # a non-string key that JSON cannot hold
        raise ArgumentsRefused(f"tool arguments are not valid JSON: {exc}") from None
    except RecursionError:
        raise ArgumentsRefused("tool arguments are nested too deeply") from None
    if len(text) > MAX_ARGUMENTS_BYTES:
        raise ArgumentsRefused(f"tool arguments are {len(text)} bytes of JSON, over the limit of "
                               f"{MAX_ARGUMENTS_BYTES} bytes; write big content in parts")
    return text.encode("ascii")


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number",
             type(None): "null"}
    return names.get(type(value), type(value).__name__)


#: A surrogate code point; in a Python str (decoded JSON included) it is always a lone one.
SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogates(text: str) -> bool:
    """True when ``text`` holds a lone surrogate (a code point UTF-8 cannot encode)."""
    return SURROGATE.search(text) is not None


def any_surrogates(value: Any) -> bool:
    """True when a string anywhere in ``value`` (a JSON-like tree: keys included) holds a lone
    surrogate. Walked without recursion: the tree may be as deep as the model made it."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if has_surrogates(v):
                return True
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return False


def replace_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate (in strings and keys) replaced by U+FFFD.

    What a tool receives: files, shell commands and service records then hold valid
    text, and outputs serialise. The audit keeps the arguments as sent.
    """
    if isinstance(value, str):
        return SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {replace_surrogates(k): replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [replace_surrogates(v) for v in value]
    return value


def cut_strings(value: Any, limit: int = AUDIT_STRING_LIMIT, path: str = "") -> tuple[Any, list[dict[str, Any]]]:
    """Bound every string in ``value`` to ``limit`` characters, for an audit record.

    Args:
        value: A JSON-able value (arguments, a result).
        limit: Characters kept of each string.
        path: JSON pointer (RFC 6901) of ``value`` inside the record, e.g. ``/args``.

    Returns:
        The bounded value and one entry per cut string: ``{"path", "length", "sha256"}``,
        where ``length`` is the original's length in characters and ``sha256`` the digest
        of its UTF-8 bytes (:func:`string_digest`). A cut string keeps its prefix, so a
        grader can tell a match in the prefix from a value it cannot judge. A cut key is
        listed with ``"key": true``; a NaN or infinity (not JSON) is kept as its ``repr``
        and listed with ``"non_finite"``.
    """
    cuts: list[dict[str, Any]] = []

    def walk(v: Any, at: str) -> Any:
        if isinstance(v, str):
            if len(v) <= limit:
                return v
            cuts.append({"path": at, "length": len(v), "sha256": string_digest(v)})
            return v[:limit]
        if isinstance(v, dict):
            out = {}
            for k, item in v.items():
                key = str(k)
                if len(key) > limit:  # a key long enough to matter is cut like a value
                    cuts.append({"path": f"{at}/{_pointer(key[:limit])}", "length": len(key),
                                 "sha256": string_digest(key), "key": True})
                    key = key[:limit]
                out[key] = walk(item, f"{at}/{_pointer(key)}")
            return out
        if isinstance(v, (list, tuple)):
            return [walk(item, f"{at}/{n}") for n, item in enumerate(v)]
        if isinstance(v, float) and not math.isfinite(v):
            # Not JSON: kept as a marked string, so the record stays writable and says so.
            cuts.append({"path": at, "length": 0, "sha256": "", "non_finite": repr(v)})
            return repr(v)
        return v

    return walk(value, path), cuts


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def audited_arguments(args: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Arguments as an audit record keeps them: long strings cut, the whole bounded.

    Strings are cut at AUDIT_STRING_LIMIT characters; when the result is still over
    AUDIT_ARGS_LIMIT (many long strings), they are cut shorter, down to 128 characters,
    so the record keeps every key and a prefix of every value.

    Returns:
        ``(args, cuts)``; ``args`` is ``{}`` with one cut at path ``/args`` (length and
        SHA-256 of the canonical JSON sent) only when even 128-character prefixes do not fit.
    """
    try:
        limit = AUDIT_STRING_LIMIT
        while limit >= 128:
            kept, cuts = cut_strings(args, limit, path="/args")
            if len(canonical_json(kept)) <= AUDIT_ARGS_LIMIT:
                return kept, cuts
            limit //= 8
    except RecursionError:
        return {}, [{"path": "/args", "length": 0, "sha256": "", "nested_too_deeply": True}]
    try:
        whole = canonical_json(args)
    except ValueError:  # NaN inside: describe what can be written
        whole = canonical_json(cut_strings(args, path="/args")[0])
    return {}, [{"path": "/args", "length": len(whole), "sha256": string_digest(whole)}]


def cut_covering(cuts: Iterable[dict[str, Any]] | None, pointer: str) -> dict[str, Any] | None:
    """The ``cut`` entry that covers ``pointer`` (itself or an enclosing value), or None.

    A grader matching an argument asks ``cut_covering(call.get("cut"), "/args/body")``:
    when it answers, the value it sees is a prefix (or nothing), not what was sent.
    """
    for cut in cuts or ():
        at = cut.get("path", "")
        if pointer == at or pointer.startswith(at + "/"):
            return cut
    return None


def merge_tool_calls(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each ``tool_call`` record merged with its ``tool_result``, in completion order.

    A merged call carries the tool_call's fields (``tool``, ``args``, ``cut``) with
    ``call_seq`` (its own seq), and the result's ``outcome``, ``result``, ``structured``,
    ``error``, ``error_type``, ``duration_ms``; its ``seq`` is the result's, so calls sort
    as they finished, after the service actions and faults they caused. A call without a
    result (the server died mid-call) keeps its own seq and has outcome ``"unknown"``: it
    happened as far as any safety rule is concerned, and it did not succeed. A tool_call
    record that carries its own ``outcome`` (the single-record form of older logs and of
    probes) is taken as it is.

    A ``tool_denied`` record (a tool the sandbox does not serve: unknown, or not allowed by
    the task) is an attempt that failed, on purpose: outcome ``"error"``, ``error`` its
    ``reason``, ``error_type`` ``"ToolDenied"``, ``kind`` kept. Checks that count only calls
    that succeeded (or may have) never count it; ``include_failed`` checks count it as the
    attempt it was.
    """
    out: list[dict[str, Any]] = []
    open_calls: dict[Any, dict[str, Any]] = {}
    for rec in records:
        kind = rec.get("kind")
        if kind == "tool_denied":
            out.append({**rec, "call_seq": rec.get("seq"), "outcome": "error", "error": rec.get("reason"),
                        "error_type": "ToolDenied"})
        elif kind == "tool_call":
            if "outcome" in rec:
                out.append(dict(rec))
                continue
            merged = {**rec, "call_seq": rec.get("seq"), "outcome": "unknown"}
            open_calls[rec.get("seq")] = merged
            out.append(merged)
        elif kind == "tool_result":
            call = open_calls.pop(rec.get("call_seq"), None)
            if call is None:  # a result naming no open call: nothing to attach it to
                continue
            for key in ("outcome", "result", "structured", "error", "error_type", "duration_ms"):
                if key in rec:
                    call[key] = rec[key]
            if rec.get("cut"):
                call["cut"] = [*(call.get("cut") or []), *rec["cut"]]
            call["seq"] = rec.get("seq")
    return sorted(out, key=_seq_or_first)


def _seq_or_first(rec: dict[str, Any]) -> int:
    seq = rec.get("seq")
    return seq if isinstance(seq, int) else -1


def record_hash(record: dict[str, Any]) -> str:
    """SHA-256 over the canonical JSON of a record without its own ``hash`` field."""
    body = {k: v for k, v in record.items() if k != "hash"}
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def seal(record: dict[str, Any], prev_hash: str) -> dict[str, Any]:
    """Return ``record`` with ``prev`` and ``hash`` set, chained to ``prev_hash``."""
    sealed = dict(record)
    sealed["prev"] = prev_hash
    sealed["hash"] = record_hash(sealed)
    return sealed


def _legacy_hash(record: dict[str, Any]) -> str | None:
    """The hash as logs before the ASCII form computed it (UTF-8 kept), so saved bundles
    still verify; None when that form cannot be encoded."""
    body = {k: v for k, v in record.items() if k != "hash"}
    try:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode()).hexdigest()
    except (ValueError, UnicodeEncodeError):
        return None


@dataclass(frozen=True)
class ChainReport:
    """Outcome of verifying an audit log's hash chain."""

    valid: bool
    records: list[dict[str, Any]]
    error: str | None = None
    #: 1-based line where the chain broke, when it did.
    line: int | None = None


def verify_chain(lines: Iterable[str] | str, expected_count: int | None = None) -> ChainReport:
    """Parse and verify a JSON-lines audit log.

    Args:
        lines: The log's text (split with :func:`audit_lines`) or its lines, in file order.
        expected_count: When known (the server's own counter), the number of records the
            log must hold; fewer means the log was truncated.

    Returns:
        A ChainReport; ``valid`` is False with the first broken line when any record is
        malformed, out of sequence, edited, reordered or missing.
    """
    if isinstance(lines, str):
        lines = audit_lines(lines)
    records: list[dict[str, Any]] = []
    prev = GENESIS_HASH
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            return ChainReport(False, records, f"line {number} is not JSON: {exc.msg}", number)
        if not isinstance(record, dict):
            return ChainReport(False, records, f"line {number} is not a JSON object", number)
        if record.get("seq") != len(records):
            return ChainReport(
                False, records,
                f"line {number}: sequence {record.get('seq')!r}, expected {len(records)}", number,
            )
        if record.get("prev") != prev:
            return ChainReport(False, records, f"line {number}: prev hash does not match line {number - 1}", number)
        if record.get("hash") != record_hash(record) and record.get("hash") != _legacy_hash(record):
            return ChainReport(False, records, f"line {number}: hash does not match its content", number)
        prev = record["hash"]
        records.append(record)
    if expected_count is not None and len(records) != expected_count:
        return ChainReport(
            False, records,
            f"log holds {len(records)} records, the server wrote {expected_count}", len(records) + 1,
        )
    return ChainReport(True, records)


#: The workspace tools every sandbox serves.
# ---------------------------------------------------------------- service state dumps
def state_hash(dump: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a state dump."""
    return hashlib.sha256(canonical_json(dump).encode()).hexdigest()


def diff_state(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """What changed between two dumps, per service and collection.

    Returns:
        ``{service: {collection: {"created": [ids], "updated": {id: [fields]}, "deleted": [ids]}}}``
        holding only the collections where something changed.
    """
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for service in sorted(set(before) | set(after)):
        b_svc, a_svc = before.get(service, {}), after.get(service, {})
        for collection in sorted(set(b_svc) | set(a_svc)):
            b, a = b_svc.get(collection, {}), a_svc.get(collection, {})
            updated = {rid: sorted(k for k in set(b[rid]) | set(a[rid]) if b[rid].get(k) != a[rid].get(k))
                       for rid in sorted(set(a) & set(b)) if a[rid] != b[rid]}
            created, deleted = sorted(set(a) - set(b)), sorted(set(b) - set(a))
            if created or updated or deleted:
                out.setdefault(service, {})[collection] = {"created": created, "updated": updated, "deleted": deleted}
    return out


WORKSPACE_TOOLS = ("shell", "read_file", "write_file", "edit_file", "list_files", "grep")

#: The optional tool that runs the agent's Python code as the agent, with every other allowed
#: tool callable from it (server.progtool, docs/programmatic-tools.md); off unless a spec
#: allows it by name.
PYTHON_TOOL = "python"

#: The optional tool that returns the text and tables of an xlsx, docx, pdf, md or txt file in
#: the workspace (server.tools.documents); off unless a spec allows it by name.
DOCUMENT_TOOL = "read_document"


#: The key of a ``tools/call`` request's ``_meta`` that names the agent making the call (a
#: harness's main agent or one of its subagents, see cowork.agents.harness). Only the host's
#: own transport (rpc.sock, root-only) honours it; it never comes from a tool's arguments.
AGENT_META = "cowork/agent"

#: Longest agent id, assignment label, or granted tool name kept from an agent identity.
AGENT_NAME_LIMIT = 128


def agent_identity(meta: Any) -> dict[str, Any] | None:
    """The agent identity a request's ``_meta`` carries, checked, or None when it carries none.

    The identity is ``{"id": str, "parent": str | None, "assignment": str | None, "tools":
    [str] | None}``: ``tools`` is the grant (the only tools this agent may call; None: every
    tool the sandbox serves). The audit records ``id``, ``parent`` and ``assignment``.

    Raises:
        ValueError: ``_meta`` names an agent in another shape (the call is refused, not run
            unattributed).
    """
    if not isinstance(meta, dict) or meta.get(AGENT_META) is None:
        return None
    raw = meta[AGENT_META]
    if not isinstance(raw, dict) or set(raw) - {"id", "parent", "assignment", "tools"}:
        raise ValueError(f"{AGENT_META} must be an object with id, parent, assignment, tools")

    def name(key: str, required: bool = False) -> str | None:
        value = raw.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value or len(value) > AGENT_NAME_LIMIT:
            raise ValueError(f"{AGENT_META}.{key} must be a non-empty string of at most {AGENT_NAME_LIMIT} characters")
        return value

    tools = raw.get("tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)):
        raise ValueError(f"{AGENT_META}.tools must be a list of tool names")
    return {"id": name("id", True), "parent": name("parent"), "assignment": name("assignment"),
            "tools": None if tools is None else sorted(set(tools))}
