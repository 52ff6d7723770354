"""Evidence.names and the baseline fold, without a daemon: every kind of name counts, and an
actor's change folds in only when it is clean and made on a name the agent had not changed."""

from __future__ import annotations

import hashlib
import io
import tarfile

from cowork.evidence import Evidence
from cowork.formats import EXPORT_KIND_KEY


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tar(files: dict[str, bytes], links: dict[str, str] | None = None, fifos: dict[str, str] | None = None,
         dirs: tuple[str, ...] = ()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
        for name, kind in (fifos or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.FIFOTYPE
            if kind != "fifo":
                info.pax_headers = {EXPORT_KIND_KEY: kind}
            tar.addfile(info)
        for name in dirs:
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
    return buf.getvalue()


def _ev(tar: bytes, world: list[dict] | None = None) -> Evidence:
    initial = {"keep/a.txt": _sha(b"a"), "keep/b.txt": _sha(b"b")}
    return Evidence(audit_text="", audit_count=0, workspace_tar=tar, initial=initial, meta={"world": world or []})


def test_every_kind_of_name_is_seen_and_a_folder_only_when_empty():
    ev = _ev(_tar({"keep/a.txt": b"a", "out/x/y.txt": b"y"}, links={"keep/b.txt": "a.txt"},
                  fifos={"keep/p": "fifo", "keep/s": "socket"}, dirs=("keep/empty", "out/x")))
    assert ev.names["keep/b.txt"] == "symlink:a.txt" and ev.names["keep/s"] == "socket:"
    assert "keep/b.txt" not in ev.files  # content checks still read regular files only
    changed, removed, added = ev.name_changes()
    assert (changed, removed) == (["keep/b.txt"], [])
    # out/ and out/x were made on the way to out/x/y.txt: not changes of their own
    assert added == ["keep/empty", "keep/p", "keep/s", "out/x/y.txt"]


def _change(path: str, before: str | None, after: str | None, clean: bool = True) -> dict:
    return {"actor": "user", "audit_count": 0, "records": {},
            "files": {path: {"before": before, "after": after, "clean": clean}}}


def test_the_fold_takes_only_clean_changes_of_names_the_agent_had_not_changed():
    tar = _tar({"keep/a.txt": b"a+user", "keep/b.txt": b"forged+user"})
    folded = _ev(tar, [_change("keep/a.txt", _sha(b"a"), _sha(b"a+user"))])
    assert folded.initial_before["keep/a.txt"] == _sha(b"a+user")
    # the agent had overwritten b.txt before the user's append: its baseline stays the seed
    overwritten = _ev(tar, [_change("keep/b.txt", _sha(b"forged"), _sha(b"forged+user"))])
    assert overwritten.initial_before["keep/b.txt"] == _sha(b"b")
    assert overwritten.name_changes()[0] == ["keep/a.txt", "keep/b.txt"]
    # a change through a hard link or a symlink (clean: false) never folds
    linked = _ev(tar, [_change("keep/a.txt", _sha(b"a"), _sha(b"a+user"), clean=False)])
    assert linked.initial_before["keep/a.txt"] == _sha(b"a")
