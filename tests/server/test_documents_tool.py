"""read_document through the real tool host (no Docker): the reader runs in a child process, a
damaged file is a tool error and the server goes on; every call is audited."""

import pytest

from cowork.formats import DOCUMENT_TOOL, WORKSPACE_TOOLS
from cowork.server.app import ServerConfig, build_app
from cowork.server.state.audit import AuditLog
from cowork.server.tools.workspace import WorkspaceConfig
from cowork.synth.office import docx_bytes, pdf_bytes, xlsx_bytes
from cowork.toolhost.errors import ToolError


@pytest.fixture
def host(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "book.xlsx").write_bytes(xlsx_bytes({"A": [["x", 2, "=B1*3"]], "B": [["only b"]]}))
    (ws / "memo.docx").write_bytes(docx_bytes([{"heading": "Memo", "level": 1}, {"table": [["k", "v"], ["a", "1"]]}]))
    (ws / "scan.pdf").write_bytes(pdf_bytes([{"paragraph": "page one text"}]))
    (ws / "long.md").write_text("# notes\n" + "word " * 8000)
    (ws / "bad.docx").write_bytes(b"PK\x03\x04" + b"\0" * 50)
    (ws / "blob.bin").write_bytes(b"\0\1\2\3" * 10)
    audit = AuditLog(str(tmp_path / "audit.jsonl"))
    cfg = ServerConfig(task_id="t", tools=[*WORKSPACE_TOOLS, DOCUMENT_TOOL],
                       workspace=WorkspaceConfig(root=str(ws), tool_timeout_s=20, output_limit=4000))
    mcp, fs = build_app(cfg, audit)
    yield mcp, audit
    fs.close()
    audit.close()


async def read(mcp, **args) -> str:
    return (await mcp.call_tool(DOCUMENT_TOOL, args)).content[0].text


async def test_each_kind_reads_as_text(host):
    mcp, _ = host
    assert "| 1 | x | 2 | 6 |" in await read(mcp, path="book.xlsx")  # the formula's value
    only_b = await read(mcp, path="book.xlsx", sheet="B")
    assert "only b" in only_b and "## sheet 'A'" not in only_b
    assert "## Memo" in await read(mcp, path="memo.docx") and "| a | 1 |" in await read(mcp, path="memo.docx")
    assert "page one text" in await read(mcp, path="scan.pdf", pages="1")


async def test_limits_and_errors(host, tmp_path):
    mcp, _ = host
    text = await read(mcp, path="long.md", max_chars=500)
    assert len(text) < 700 and "[document text truncated: showed 500 of" in text
    for args, words in [({"path": "bad.docx"}, "damaged zip package"), ({"path": "blob.bin"}, "is binary data"),
                        ({"path": "missing.pdf"}, "File not found"), ({"path": "scan.pdf", "pages": "2"}, "pages 1-1"),
                        ({"path": "memo.docx", "sheet": "A"}, "sheet is for xlsx"),
                        ({"path": "/proc/self/environ"}, "Permission denied")]:
        with pytest.raises(ToolError, match=words):
            await read(mcp, **args)
    assert "only b" in await read(mcp, path="book.xlsx", sheet="b")  # still serving
    calls = [line for line in (tmp_path / "audit.jsonl").read_text().splitlines() if DOCUMENT_TOOL in line]
    assert len(calls) >= 16  # each call and its result are on the record
