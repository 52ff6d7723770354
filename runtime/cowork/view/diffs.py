"""What an episode changed: the workspace diff (files added, changed, deleted) and the
service-state diff (records created, updated field by field, deleted).

A bundle keeps only the *hashes* of the initial workspace (``initial.json``), so the
initial text of a changed file is shown only where it can be recovered and proven: inline
content in ``spec.json``, the task folder on disk, or what the agent's own ``read_file``
returned before it first wrote the file, each accepted only when its SHA-256 equals the
recorded initial hash. Otherwise the page says so and shows the final text and the agent's
``write_file`` / ``edit_file`` arguments instead.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import tarfile
from pathlib import Path
from typing import Any

from ..errors import EvidenceError
from ..evidence import Evidence
from ..formats import diff_state

#: Largest text shown whole (final content, initial content); longer ones are cut, and said so.
TEXT_LIMIT = 64 * 1024
#: Largest pair of texts diffed line by line (difflib is quadratic in the worst case).
DIFF_LIMIT = 256 * 1024
#: Tools whose arguments say what the agent wrote to a file.
_WRITE_TOOLS = ("write_file", "edit_file")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _text(data: bytes) -> str | None:
    """The bytes as text, or None for binary content."""
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _cut(text: str) -> tuple[str, bool]:
    return (text[:TEXT_LIMIT], True) if len(text) > TEXT_LIMIT else (text, False)


def spec_folders(task: str) -> list[Path]:
    """Task folders that may hold a task's workspace: ``specs/<task>`` under the current
    folder and under the checkout this package runs from. Anything read there is used only
    when its hash matches the bundle's, so a newer or different spec is never shown as the
    initial state."""
    here = Path(__file__).resolve().parents[3]  # runtime/cowork/view -> the checkout
    out = []
    for root in (Path.cwd(), here):
        d = root / "specs" / task
        if d.is_dir() and d not in out:
            out.append(d)
    return out


def _initial_candidates(path: str, spec: dict[str, Any] | None, task: str) -> list[tuple[bytes, str]]:
    """Possible initial contents of ``path`` with where each came from (unverified)."""
    out: list[tuple[bytes, str]] = []
    ws = (spec or {}).get("workspace") or {}
    entry = next((f for f in ws.get("files") or [] if f.get("path") == path), None)
    if entry and isinstance(entry.get("content"), str):
        out.append((entry["content"].encode("utf-8"), "the spec's inline content"))
    for folder in spec_folders(task):
        rels = [f"{ws.get('dir') or 'workspace'}/{path}"]
        if entry and entry.get("source"):
            rels.insert(0, str(entry["source"]))
        for rel in rels:
            p = (folder / rel).resolve()
            if folder.resolve() in p.parents and p.is_file() and p.stat().st_size <= DIFF_LIMIT:
                out.append((p.read_bytes(), f"the task folder {folder}"))
    return out


def _read_before_write(calls: list[dict[str, Any]], path: str) -> list[tuple[bytes, str]]:
    """What the agent's read_file calls of ``path`` returned before its first write of it."""
    out = []
    for c in calls:
        if (c.get("args") or {}).get("path") != path:
            continue
        if c.get("tool") in _WRITE_TOOLS:
            break
        if c.get("tool") == "read_file" and c.get("outcome") == "ok" and isinstance(c.get("result"), str) \
                and not c.get("cut"):
            out.append((c["result"].encode("utf-8"), f"the agent's read_file (audit seq {c.get('seq')})"))
    return out


def _unified(before: str, after: str, path: str) -> list[str] | None:
    if len(before) + len(after) > DIFF_LIMIT:
        return None
    return [line.rstrip("\n") for line in difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"a/{path}", tofile=f"b/{path}", n=3)]


def _only_global_header(data: bytes) -> bool:
    """An archive of a global pax header and no member (an empty workspace): Python's
    tarfile refuses it ("end of file header") though it is well formed."""
    try:
        head = tarfile.TarInfo.frombuf(data[:512], "utf-8", "surrogateescape")
    except tarfile.TarError:
        return False
    end = 512 + -(-head.size // 512) * 512
    return head.type == tarfile.XGLTYPE and not data[end:end + 1024].strip(b"\0")


def final_files(ev: Evidence) -> tuple[dict[str, bytes], dict[str, str], bool]:
    """The final workspace's files, those left out, and whether the list is complete.

    Raises:
        EvidenceError: the archive is unreadable (and not merely empty).
    """
    try:
        return ev.files, ev.omitted, ev.export_complete
    except EvidenceError:
        if _only_global_header(ev.workspace_tar):
            return {}, {}, True
        raise


def workspace_diff(ev: Evidence, spec: dict[str, Any] | None, anchor_of: dict[Any, str]) -> dict[str, Any]:
    """Files added, changed and deleted between the initial and the final workspace.

    Args:
        ev: The episode's evidence.
        spec: ``spec.json`` as a dict (None when the bundle has none).
        anchor_of: Element id of the timeline call for each audit seq (for links to writes).

    Returns:
        ``{"files": [...], "complete": bool, "initial_known": int}``; each file has ``path``,
        ``change`` (added / changed / deleted), ``binary``, ``size``, and where known
        ``diff`` (unified diff lines), ``initial_source`` (how the initial text was proven),
        ``final`` (text, cut to TEXT_LIMIT), ``writes`` (the agent's write/edit calls),
        ``omitted`` (why the export left the content out), ``by_actor`` (the user or the
        world changed it too).
    """
    task = str((spec or {}).get("id") or ev.meta.get("task") or "")
    try:
        files, omitted, complete = final_files(ev)
    except EvidenceError as exc:
        return {"files": [], "complete": False, "initial_known": 0, "error": str(exc)}
    initial, final = ev.initial, {p: _sha(d) for p, d in files.items()}
    calls = ev.tool_calls
    by_actor = {p for w in ev.world_changes for p in (w.get("files") or {})}
    out = []
    for path in sorted(set(initial) | set(final)):
        if path in initial and path in final and initial[path] == final[path]:
            continue
        change = "added" if path not in initial else "deleted" if path not in final else "changed"
        item: dict[str, Any] = {"path": path, "change": change, "by_actor": path in by_actor}
        before_text = None
        if path in initial:
            for data, where in _initial_candidates(path, spec, task) + _read_before_write(calls, path):
                if _sha(data) == initial[path]:
                    before_text = _text(data)
                    item["initial_source"] = where
                    break
        if path in final:
            data = files[path]
            item["size"] = len(data)
            if path in omitted:
                item["omitted"] = omitted[path]
            after_text = None if path in omitted else _text(data)
            item["binary"] = after_text is None and path not in omitted
            if after_text is not None:
                item["final"], item["final_cut"] = _cut(after_text)
                if before_text is not None:
                    item["diff"] = _unified(before_text, after_text, path)
        elif before_text is not None:
            item["initial"], item["initial_cut"] = _cut(before_text)
        item["writes"] = [{"tool": c.get("tool"), "args": c.get("args") or {}, "outcome": c.get("outcome"),
                           "seq": c.get("seq"), "anchor": anchor_of.get(c.get("seq"))}
                          for c in calls if c.get("tool") in _WRITE_TOOLS and (c.get("args") or {}).get("path") == path]
        out.append(item)
    return {"files": out, "complete": complete,
            "initial_known": sum(1 for f in out if "initial_source" in f)}


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def state_diff(seed: dict[str, Any] | None, final: dict[str, Any] | None,
               world: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Records created, updated (each changed field before and after) and deleted, per
    service and collection, from the seeded and the final service state.

    Returns:
        One entry per changed collection: ``service``, ``collection``, ``created`` and
        ``deleted`` (``{"id", "record"}``), ``updated`` (``{"id", "fields": [{"field",
        "before", "after"}]}``); values as display text. ``by_actor`` lists the ids the
        user or the world touched (their change is in the diff too).
    """
    if seed is None and final is None:
        return []
    seed, final = seed or {}, final or {}
    touched: dict[tuple[str, str], set[str]] = {}
    for w in world or []:
        for svc, colls in (w.get("records") or {}).items():
            for coll, recs in (colls or {}).items():
                touched.setdefault((svc, coll), set()).update(recs)
    out = []
    for svc, colls in diff_state(seed, final).items():
        for coll, d in colls.items():
            before, after = seed.get(svc, {}).get(coll, {}), final.get(svc, {}).get(coll, {})
            out.append({
                "service": svc, "collection": coll,
                "created": [{"id": rid, "record": _show(after.get(rid))} for rid in d["created"]],
                "deleted": [{"id": rid, "record": _show(before.get(rid))} for rid in d["deleted"]],
                "updated": [{"id": rid, "fields": [{"field": f, "before": _show(before[rid].get(f)),
                                                    "after": _show(after[rid].get(f))} for f in fields]}
                            for rid, fields in d["updated"].items()],
                "by_actor": sorted(touched.get((svc, coll), set())),
            })
    return out
