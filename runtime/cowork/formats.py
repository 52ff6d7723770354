"""Formats shared by the in-container server and the host-side graders.

This module imports nothing from ``cowork.server`` nor from host-side modules, so the
server writes and the grader verifies exactly the same definitions: the audit record,
its hash chain, and the fixed paths inside a sandbox.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable

#: Hash that stands before the first audit record.
GENESIS_HASH = "0" * 64

#: Where things live inside a sandbox container.
WORKSPACE_DIR = "/workspace"
RUN_DIR = "/run/cowork"  # bind-mounted from the host; root-only (0700)
MCP_SOCKET = "mcp.sock"
CONTROL_SOCKET = "control.sock"
AUDIT_LOG = "audit.jsonl"
EXPORT_DIR = "export"
TASK_DIR = "/opt/cowork/task"  # public part of the task, baked into the per-task image
SEED_DIR = "/opt/cowork/task/seed"
TASK_CONFIG = "/opt/cowork/task/task.json"

#: The unprivileged user agent commands run as.
AGENT_UID = 1000
AGENT_GID = 1000
AGENT_USER = "agent"


def canonical_json(obj: Any) -> str:
    """Serialise ``obj`` as canonical JSON: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


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


@dataclass(frozen=True)
class ChainReport:
    """Outcome of verifying an audit log's hash chain."""

    valid: bool
    records: list[dict[str, Any]]
    error: str | None = None
    #: 1-based line where the chain broke, when it did.
    line: int | None = None


def verify_chain(lines: Iterable[str], expected_count: int | None = None) -> ChainReport:
    """Parse and verify a JSON-lines audit log.

    Args:
        lines: The log's lines, in file order.
        expected_count: When known (the server's own counter), the number of records the
            log must hold; fewer means the log was truncated.

    Returns:
        A ChainReport; ``valid`` is False with the first broken line when any record is
        malformed, out of sequence, edited, reordered or missing.
    """
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
        if record.get("hash") != record_hash(record):
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
WORKSPACE_TOOLS = ("shell", "read_file", "write_file", "edit_file", "list_files", "grep")
