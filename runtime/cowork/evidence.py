"""The evidence of one episode: audit log, final workspace, initial workspace, trace.

Graders read only this. It saves to and loads from a folder, so a grade can be
recomputed offline (``cowork grade DIR``).
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import EvidenceError
from .formats import (EXPORT_INCOMPLETE_MEMBER, EXPORT_OMITTED_KEY, EXPORT_SUMMARY_KEY, ChainReport, audit_lines,
                      merge_tool_calls, verify_chain)

AUDIT_FILE = "audit.jsonl"
WORKSPACE_FILE = "workspace.tar"
INITIAL_FILE = "initial.json"
TRACE_FILE = "trace.json"
META_FILE = "meta.json"
STATE_SEED_FILE = "state_seed.json"
STATE_FINAL_FILE = "state_final.json"
STATE_DIFF_FILE = "state_diff.json"


@dataclass
class Evidence:
    """Everything graders may look at."""

    audit_text: str
    """The audit log, as written by the in-container server."""
    audit_count: int | None
    """Records the server says it wrote (None when unknown); fewer in the log means truncation."""
    workspace_tar: bytes
    """The final /workspace as a tar archive."""
    initial: dict[str, str]
    """SHA-256 of each initial workspace file, by path."""
    trace: dict[str, Any] = field(default_factory=dict)
    """The host's record of the conversation (the trajectory)."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Task id, image, tool annotations, hidden-verifier and judge results."""
    state_seed: dict[str, Any] | None = None
    """Service state dump right after seeding (None: the task has no services)."""
    state_final: dict[str, Any] | None = None
    """Service state dump at the end of the episode."""

    _files: dict[str, bytes] | None = field(default=None, repr=False)
    _omitted: dict[str, str] = field(default_factory=dict, repr=False)
    _complete: bool = field(default=True, repr=False)
    _chain: ChainReport | None = field(default=None, repr=False)
    _calls: tuple[ChainReport, list[dict[str, Any]]] | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ views
    @property
    def chain(self) -> ChainReport:
        """The verified audit chain."""
        if self._chain is None:
            # "\n" only: str.splitlines would also break at U+2028, U+0085 and friends.
            self._chain = verify_chain(audit_lines(self.audit_text), self.audit_count)
        return self._chain

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """Tool calls, each merged with its result, in the order they finished.

        See formats.merge_tool_calls: a call the server began but never finished has
        outcome ``"unknown"``; a ``cut`` list names values kept only as a prefix.
        """
        chain = self.chain
        if self._calls is None or self._calls[0] is not chain:  # probes swap the chain of a copy
            self._calls = (chain, merge_tool_calls(chain.records))
        return self._calls[1]

    @property
    def files(self) -> dict[str, bytes]:
        """Regular files of the final workspace, by relative path (symlinks are not followed).

        A file the export left out (over its size limits) is here with placeholder content,
        so it never looks unchanged; :attr:`omitted` names it, and a check that needs its
        content must not judge the placeholder.
        """
        self._read_tar()
        return self._files

    @property
    def omitted(self) -> dict[str, str]:
        """Files whose content the export left out, with why."""
        self._read_tar()
        return self._omitted

    @property
    def export_complete(self) -> bool:
        """False when the export had to stop before listing every file (too many names, too
        deep, out of time): then no rule may judge the file list as a whole (nothing deleted,
        nothing written outside, nothing added)."""
        self._read_tar()
        return self._complete

    def _read_tar(self) -> None:
        if self._files is not None:
            return
        files: dict[str, bytes] = {}
        omitted: dict[str, str] = {}
        complete = True
        try:
            with tarfile.open(fileobj=io.BytesIO(self.workspace_tar), mode="r:") as tar:
                for m in tar.getmembers():
                    if m.name == EXPORT_INCOMPLETE_MEMBER:
                        complete = False
                        continue
                    if m.isfile():
                        fh = tar.extractfile(m)
                        name = m.name.removeprefix("./")
                        files[name] = fh.read() if fh else b""
                        if EXPORT_OMITTED_KEY in m.pax_headers:
                            omitted[name] = m.pax_headers[EXPORT_OMITTED_KEY]
                summary = tar.pax_headers.get(EXPORT_SUMMARY_KEY)
        except tarfile.TarError as exc:
            raise EvidenceError(f"workspace archive is unreadable: {exc}") from exc
        if summary is not None:
            try:
                complete = complete and bool(json.loads(summary).get("complete", False))
            except (ValueError, AttributeError):
                complete = False  # a summary we cannot read proves nothing
        self._files, self._omitted, self._complete = files, omitted, complete

    def file_hashes(self) -> dict[str, str]:
        """SHA-256 of each final workspace file."""
        return {p: hashlib.sha256(d).hexdigest() for p, d in self.files.items()}

    # ------------------------------------------------------------------ folder form
    def save(self, folder: str | Path) -> Path:
        """Write the bundle to ``folder`` (created if needed)."""
        d = Path(folder)
        d.mkdir(parents=True, exist_ok=True)
        (d / AUDIT_FILE).write_text(self.audit_text, encoding="utf-8")
        (d / WORKSPACE_FILE).write_bytes(self.workspace_tar)
        (d / INITIAL_FILE).write_text(json.dumps(self.initial, indent=1, sort_keys=True))
        (d / TRACE_FILE).write_text(json.dumps(self.trace, indent=1, default=str))
        (d / META_FILE).write_text(json.dumps({**self.meta, "audit_count": self.audit_count}, indent=1, default=str))
        if self.state_final is not None:
            (d / STATE_SEED_FILE).write_text(json.dumps(self.state_seed, indent=1, sort_keys=True))
            (d / STATE_FINAL_FILE).write_text(json.dumps(self.state_final, indent=1, sort_keys=True))
            (d / STATE_DIFF_FILE).write_text(json.dumps(self.state_diff(), indent=1, sort_keys=True))
        return d

    def state_diff(self) -> dict[str, Any]:
        """Created, updated (with fields) and deleted records per service and collection."""
        from .services.registry import diff_state

        return diff_state(self.state_seed or {}, self.state_final or {})

    @classmethod
    def load(cls, folder: str | Path) -> "Evidence":
        """Read a bundle written by :meth:`save`.

        Raises:
            EvidenceError: naming the missing or unreadable part.
        """
        d = Path(folder)
        try:
            meta = json.loads((d / META_FILE).read_text())
            return cls(
                audit_text=(d / AUDIT_FILE).read_text(encoding="utf-8") if (d / AUDIT_FILE).exists() else "",
                audit_count=meta.pop("audit_count", None),
                workspace_tar=(d / WORKSPACE_FILE).read_bytes(),
                initial=json.loads((d / INITIAL_FILE).read_text()),
                trace=json.loads((d / TRACE_FILE).read_text()) if (d / TRACE_FILE).exists() else {},
                meta=meta,
                state_seed=json.loads((d / STATE_SEED_FILE).read_text()) if (d / STATE_SEED_FILE).exists() else None,
                state_final=json.loads((d / STATE_FINAL_FILE).read_text()) if (d / STATE_FINAL_FILE).exists() else None,
            )
        except FileNotFoundError as exc:
            raise EvidenceError(f"evidence folder {d} lacks {Path(exc.filename).name}") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise EvidenceError(f"evidence folder {d} has an unreadable part: {exc}") from exc
