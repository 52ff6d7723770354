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
from .formats import (
    EXPORT_INCOMPLETE_MEMBER,
    EXPORT_KIND_KEY,
    EXPORT_OMITTED_KEY,
    EXPORT_SUMMARY_KEY,
    ChainReport,
    audit_lines,
    is_file_identity,
    merge_tool_calls,
    name_identity,
    verify_chain,
)

AUDIT_FILE = "audit.jsonl"
WORKSPACE_FILE = "workspace.tar"
INITIAL_FILE = "initial.json"
TRACE_FILE = "trace.json"
META_FILE = "meta.json"
STATE_SEED_FILE = "state_seed.json"
STATE_FINAL_FILE = "state_final.json"
STATE_DIFF_FILE = "state_diff.json"
BOUNDARIES_FILE = "boundaries.json"
BOUNDARIES_DIR = "boundaries"
BRANCHES_DIR = "branches"


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
    boundaries: list[dict[str, Any]] = field(default_factory=list)
    """Multi-turn tasks: the state as the agent left it at the end of each turn, for checks
    scoped ``after_turn`` / ``after_day``: ``turn``, ``day``, ``audit_count`` (the log's
    length then), ``state`` (service dump), ``state_hash``, ``workspace_sha256`` and
    ``workspace_tar`` (bytes; saved as ``boundaries/turn-<n>.tar``)."""
    branches: list["Evidence"] = field(default_factory=list)
    """The branches restores abandoned on the way to this state (docs/checkpoints.md), each
    as its own bundle (``meta["branch"]`` names it), oldest first; saved as
    ``branches/<n>/``. Graders judge every one: a violation made before a restore stays one.
    ``meta["branch_errors"]`` names, by number, branches that could not be read."""

    _files: dict[str, bytes] | None = field(default=None, repr=False)
    _names: dict[str, str] = field(default_factory=dict, repr=False)
    _omitted: dict[str, str] = field(default_factory=dict, repr=False)
    _complete: bool = field(default=True, repr=False)
    _chain: ChainReport | None = field(default=None, repr=False)
    _calls: tuple[ChainReport, list[dict[str, Any]]] | None = field(default=None, repr=False)
    _before: tuple[tuple[int, int, int], dict[str, Any]] | None = field(default=None, repr=False)

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

        Only the agent's calls: those the simulated user or the world made (``actor``, see
        server.actors) are in :attr:`task_calls`.
        """
        return [r for r in self._merged() if r.get("actor") is None]

    @property
    def task_calls(self) -> list[dict[str, Any]]:
        """Tool calls the task's own actors made (``actor: user`` or ``world``), merged like
        :attr:`tool_calls`."""
        return [r for r in self._merged() if r.get("actor") is not None]

    def _merged(self) -> list[dict[str, Any]]:
        chain = self.chain
        if self._calls is None or self._calls[0] is not chain:  # probes swap the chain of a copy
            self._calls = (chain, merge_tool_calls(chain.records))
        return self._calls[1]

    @property
    def files(self) -> dict[str, bytes]:
        """Regular files of the final workspace, by relative path (symlinks are not followed).

        A file the export left out (over its size limits) is here with placeholder content,
        so it never looks unchanged; :attr:`omitted` names it, and a check that needs its
        content must not judge the placeholder. Every other kind of name is in :attr:`names`.
        """
        return self._read_tar()

    @property
    def names(self) -> dict[str, str]:
        """Every name of the final workspace, by relative path, with its identity: a regular
        file's SHA-256, else a ``formats.name_identity`` (a symlink with its target, a FIFO, a
        socket, a folder; the folders above a name are implied). Rules about what was added,
        changed or removed compare these, so no kind of name is invisible to them."""
        self._read_tar()
        return self._names

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

    def _read_tar(self) -> dict[str, bytes]:
        """Read the workspace archive (once): sets the files, omitted and complete; returns the files."""
        if self._files is not None:
            return self._files
        files: dict[str, bytes] = {}
        names: dict[str, str] = {}
        omitted: dict[str, str] = {}
        complete = True
        try:
            with tarfile.open(fileobj=io.BytesIO(self.workspace_tar), mode="r:") as tar:
                for m in tar.getmembers():
                    if m.name == EXPORT_INCOMPLETE_MEMBER:
                        complete = False
                        continue
                    name = m.name.removeprefix("./").rstrip("/")
                    if m.isfile():
                        fh = tar.extractfile(m)
                        files[name] = fh.read() if fh else b""
                        names[name] = hashlib.sha256(files[name]).hexdigest()
                        if EXPORT_OMITTED_KEY in m.pax_headers:
                            omitted[name] = m.pax_headers[EXPORT_OMITTED_KEY]
                    elif name not in ("", "."):
                        names[name] = _member_identity(m)
                summary = tar.pax_headers.get(EXPORT_SUMMARY_KEY)
        except tarfile.TarError as exc:
            raise EvidenceError(f"workspace archive is unreadable: {exc}") from exc
        if summary is not None:
            try:
                complete = complete and bool(json.loads(summary).get("complete", False))
            except (ValueError, AttributeError):
                complete = False  # a summary we cannot read proves nothing
        self._files, self._names = files, with_folders(names)
        self._omitted, self._complete = omitted, complete
        return files

    # ------------------------------------------------------------------ the task's own actors
    @property
    def world_changes(self) -> list[dict[str, Any]]:
        """What the user and the world changed between the agent's turns, in order: each
        ``{"actor", "audit_count", "records": {service: {collection: {id: change}}}, "files":
        {path: sha256, None when removed, "" when not a regular file}}`` (see server.actors)."""
        return list(self.meta.get("world") or [])

    @property
    def state_before(self) -> dict[str, Any] | None:
        """The service state the agent's changes are measured against: the seed, with every
        record the user or the world created, changed or deleted as they left it. A rule
        about what the agent changed (nothing created, this record unchanged) compares the
        final state with this, so the world's new mail or the user's edit is not the agent's."""
        if self.state_seed is None or not self.world_changes:
            return self.state_seed
        # Computed once per seed and world log (graders ask for it many times); read-only,
        # like the seed itself, which is what it is when the world changed nothing.
        world = self.meta.get("world")
        key = (id(self.state_seed), id(world), len(world or ()))
        if self._before is not None and self._before[0] == key:
            return self._before[1]
        # A shallow copy: a collection is copied when a change first reaches it, and a changed
        # record is a new dict, so the seed's own dicts are never written.
        out = dict(self.state_seed)
        copied: set[tuple[str, str | None]] = set()
        for change in self.world_changes:
            for svc, colls in (change.get("records") or {}).items():
                if (svc, None) not in copied:
                    out[svc] = dict(out.get(svc) or {})
                    copied.add((svc, None))
                for coll, recs in colls.items():
                    if (svc, coll) not in copied:
                        out[svc][coll] = dict(out[svc].get(coll) or {})
                        copied.add((svc, coll))
                    target = out[svc][coll]
                    for rid, what in recs.items():
                        if "created" in what:
                            target[rid] = what["created"]
                        elif what.get("deleted"):
                            target.pop(rid, None)
                        elif rid in target:  # only the fields the actor changed
                            target[rid] = {**target[rid], **(what.get("fields") or {})}
        self._before = (key, out)
        return out

    @property
    def names_before(self) -> dict[str, str]:
        """The workspace names the agent's changes are measured against (identities as in
        :attr:`names`): the initial files and their folders, with what the user or the world
        changed folded in (see :attr:`state_before`).

        A change folds in only when the actor made it on its own: the server marks it
        ``clean`` (no hard link shares the file, no symlink reaches it, so nothing of the
        agent's was written through) and the name was, before the action, what the baseline
        says (the agent had not changed it). Anything else stays the agent's change: bytes a
        user appends to a file the agent had overwritten, or that the world writes through a
        link the agent planted, never become the baseline. Entries of bundles written before
        ``before`` / ``clean`` existed are a plain identity (folded) or ``None`` (removed)."""
        out = with_folders(self.initial)
        for change in self.world_changes:
            for path, what in (change.get("files") or {}).items():
                if isinstance(what, dict):
                    if what.get("clean") is not True or what.get("before") != out.get(path):
                        continue
                    what = what.get("after")
                    if what is not None and not isinstance(what, str):
                        continue
                if what is None:
                    out.pop(path, None)
                elif what:  # legacy "": not a regular file after the action: left as it was
                    out[path] = what
        return with_folders(out)

    @property
    def initial_before(self) -> dict[str, str]:
        """The regular files of :attr:`names_before`: the workspace hashes the agent's changes
        are measured against."""
        return {p: h for p, h in self.names_before.items() if is_file_identity(h)}

    def name_changes(self) -> tuple[list[str], list[str], list[str]]:
        """What the agent changed in the workspace: ``(changed, removed, added)`` names, each
        sorted, :attr:`names_before` against :attr:`names`. Every kind of name counts (a file
        that became a symlink is changed, a FIFO or an empty folder is added); a folder is
        its own entry only when empty: one with names in it is seen through them, so the
        folders made on the way to a new file are not changes of their own."""
        before, after = self.names_before, self.names
        full_before, full_after = _parents(before), _parents(after)
        changed = sorted(p for p in before.keys() & after.keys() if before[p] != after[p])
        removed = sorted(p for p in before.keys() - after.keys() if p not in full_before)
        added = sorted(p for p in after.keys() - before.keys() if p not in full_after)
        return changed, removed, added

    def at_boundary(self, turn: int | None = None, day: int | None = None) -> "Evidence | None":
        """The evidence as it stood when the agent ended ``turn`` (or the last turn of
        ``day``): the audit log up to then, the workspace and services then, the user's and
        the world's changes made before. None when that boundary was never reached."""
        hits = [b for b in self.boundaries
                if (turn is not None and b.get("turn") == turn) or (day is not None and b.get("day") == day)]
        if not hits:
            return None
        b = hits[-1]
        count = int(b["audit_count"])
        lines = audit_lines(self.audit_text)[:count]
        meta = {**self.meta, "world": [w for w in self.world_changes if int(w.get("audit_count", 0)) <= count],
                "boundary_turn": b["turn"]}
        return Evidence(audit_text="".join(line + "\n" for line in lines), audit_count=count,
                        workspace_tar=b["workspace_tar"], initial=self.initial, trace=self.trace, meta=meta,
                        state_seed=self.state_seed, state_final=b.get("state") if self.state_seed is not None else None)

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
        if self.boundaries:
            (d / BOUNDARIES_DIR).mkdir(exist_ok=True)
            index = []
            for b in self.boundaries:
                name = f"{BOUNDARIES_DIR}/turn-{int(b['turn'])}.tar"
                (d / name).write_bytes(b["workspace_tar"])
                index.append({**{k: v for k, v in b.items() if k != "workspace_tar"}, "workspace_file": name})
            (d / BOUNDARIES_FILE).write_text(json.dumps(index, indent=1, sort_keys=True))
        _save_branches(d, self.branches)
        return d

    def state_diff(self) -> dict[str, Any]:
        """Created, updated (with fields) and deleted records per service and collection."""
        from .formats import diff_state

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
                boundaries=_load_boundaries(d),
                branches=_load_branches(d, meta),
            )
        except FileNotFoundError as exc:
            raise EvidenceError(f"evidence folder {d} lacks {Path(exc.filename).name}") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise EvidenceError(f"evidence folder {d} has an unreadable part: {exc}") from exc


def _member_identity(m: tarfile.TarInfo) -> str:
    """The identity of an archive member that is not a regular file (see formats.name_identity)."""
    if m.isdir():
        return name_identity("dir")
    if m.issym():
        return name_identity("symlink", m.linkname)
    if m.islnk():  # the export writes every name in full; a hard-link member is no file we can judge
        return name_identity("hardlink", m.linkname)
    if m.isfifo():
        return name_identity(m.pax_headers.get(EXPORT_KIND_KEY) or "fifo")
    if m.ischr() or m.isblk():
        return name_identity("chardev" if m.ischr() else "blockdev", f"{m.devmajor},{m.devminor}")
    return name_identity("other", repr(m.type))


def with_folders(names: dict[str, str]) -> dict[str, str]:
    """``names`` with every folder above a name added (as a folder) where not already there."""
    out = dict(names)
    for path in names:
        for parent in _ancestors(path):
            out.setdefault(parent, name_identity("dir"))
    return out


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _parents(names: dict[str, str]) -> set[str]:
    """Every path that has a name below it."""
    return {parent for path in names for parent in _ancestors(path)}


def describe_name(identity: str | None) -> str:
    """How a message shows a name that is not a regular file: ``" (a symlink to 'x')"``; ``""``
    for a regular file or nothing."""
    if identity is None or is_file_identity(identity):
        return ""
    kind, _, detail = identity.partition(":")
    shown = {"dir": "a folder", "symlink": f"a symlink to {detail!r}", "fifo": "a FIFO",
             "socket": "a unix socket", "hardlink": f"a hard link to {detail!r}"}.get(kind, f"a {kind} {detail}".rstrip())
    return f" ({shown})"


def _load_boundaries(d: Path) -> list[dict[str, Any]]:
    if not (d / BOUNDARIES_FILE).exists():
        return []
    out = []
    for b in json.loads((d / BOUNDARIES_FILE).read_text()):
        name = str(b.pop("workspace_file", ""))
        # Only the bundle's own files: a name may not climb out of the folder.
        if not name.startswith(f"{BOUNDARIES_DIR}/turn-") or "/" in name[len(BOUNDARIES_DIR) + 1:] or ".." in name:
            raise EvidenceError(f"evidence folder {d}: boundary file {name!r} is not one of its own")
        out.append({**b, "workspace_tar": (d / name).read_bytes()})
    return out


def _save_branches(d: Path, branches: list[Evidence]) -> None:
    """Each abandoned branch as a bundle of its own under ``branches/<n>/``."""
    for i, branch in enumerate(branches, start=1):
        n = (branch.meta.get("branch") or {}).get("branch", i)
        branch.save(d / BRANCHES_DIR / str(int(n)))


def _load_branches(d: Path, meta: dict[str, Any]) -> list[Evidence]:
    """The bundles under ``branches/``, by number; one that does not load is named in
    ``meta["branch_errors"]`` (its safety cannot be judged) instead of failing the whole load."""
    where = d / BRANCHES_DIR
    if not where.is_dir():
        return []
    out: list[tuple[int, Evidence]] = []
    for sub in where.iterdir():
        if not (sub.name.isdigit() and sub.is_dir() and not sub.is_symlink()):
            meta.setdefault("branch_errors", {})[sub.name] = f"{sub.name!r} is not a branch folder of the bundle"
            continue
        try:
            out.append((int(sub.name), Evidence.load(sub)))
        except (EvidenceError, OSError) as exc:
            meta.setdefault("branch_errors", {})[sub.name] = str(exc)
    return [ev for _, ev in sorted(out, key=lambda item: item[0])]
