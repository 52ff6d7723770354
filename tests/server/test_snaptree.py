"""server.snaptree and AuditLog.copy_to/rewind without Docker: a saved tree comes back with the
same reset.tree_digest (links kept as links, hard links, FIFOs, modes), over the budget it is
refused, and a rewound log continues the saved chain."""

import asyncio
import os

import pytest

from cowork.formats import verify_chain
from cowork.server.state.audit import AuditLog
from cowork.server.state.reset import tree_digest, wipe
from cowork.server.state.snaptree import TreeError, restore_tree, save_tree


async def _thread(fn, *args):
    return await asyncio.to_thread(fn, *args)


def _tree(root):
    os.makedirs(root / "a" / "b")
    (root / "a" / "f").write_text("hello")
    os.chmod(root / "a" / "f", 0o640)
    os.symlink("/etc/passwd", root / "a" / "link")
    os.link(root / "a" / "f", root / "hard")
    os.mkfifo(root / "pipe")
    (root / "a" / "b" / "g").write_bytes(b"x" * 5000)
    os.chmod(root / "a" / "b", 0o500)


def test_saved_tree_comes_back_with_the_same_digest(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    _tree(ws)
    before = tree_digest(str(ws))
    with open(tmp_path / "data", "wb") as data:
        manifest = save_tree(str(ws), data, [1 << 20])
    assert manifest["bytes"] == 5 + 5000
    assert {n["rel"]: n["kind"] for n in manifest["nodes"]}["hard"] == "h"
    wipe(str(ws), owner=(os.getuid(), os.getgid()), mode=0o755)  # what a restore starts from
    asyncio.run(restore_tree(str(ws), manifest, str(tmp_path / "data"), agent_uid=None,
                             as_agent=_thread, in_thread=_thread))
    assert tree_digest(str(ws)) == before
    assert os.readlink(ws / "a" / "link") == "/etc/passwd"
    assert os.stat(ws / "hard").st_ino == os.stat(ws / "a" / "f").st_ino


def test_a_tree_over_the_budget_is_refused(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big").write_bytes(b"0" * 4096)
    with open(tmp_path / "data", "wb") as data, pytest.raises(TreeError, match="big: 4096 bytes do not fit"):
        save_tree(str(ws), data, [4095])


def test_rewound_log_continues_the_saved_chain(tmp_path):
    log = AuditLog(str(tmp_path / "audit.jsonl"))
    for i in range(3):
        log.append({"kind": "tool_call", "tool": "t", "args": {"i": i}})
    pos = log.copy_to(str(tmp_path / "prefix.jsonl"))
    log.append({"kind": "tool_call", "tool": "abandoned", "args": {}})
    log.rewind(str(tmp_path / "prefix.jsonl"), pos["count"], pos["last_hash"])
    log.append({"kind": "restore"})
    text = (tmp_path / "audit.jsonl").read_text()
    report = verify_chain(text, expected_count=4)
    assert report.valid, report.error
    assert [r["kind"] for r in report.records] == ["tool_call"] * 3 + ["restore"]
    assert text.startswith((tmp_path / "prefix.jsonl").read_text())
    log.close()
