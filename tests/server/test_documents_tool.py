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


async def test_a_document_read_again_is_answered_from_its_content(host, tmp_path, monkeypatch):
    # Episodes in one sandbox read the same documents after each reset: same bytes and
    # arguments, same answer, no new reader child. Anything else runs the reader again.
    from cowork.server.tools.documents import DocumentTool

    mcp, _ = host
    children = []
    real = DocumentTool._run_reader

    async def counted(self, *args):
        children.append(args[0])
        return await real(self, *args)

    monkeypatch.setattr(DocumentTool, "_run_reader", counted)
    first = await read(mcp, path="book.xlsx")
    assert await read(mcp, path="book.xlsx") == first and len(children) == 1
    # The same file named another way shows the name it was asked by.
    assert (await read(mcp, path=str(tmp_path / "ws" / "book.xlsx"))).startswith(f"# {tmp_path}/ws/book.xlsx:")
    assert len(children) == 1
    assert await read(mcp, path="book.xlsx", sheet="B") != first and len(children) == 2  # other arguments
    from cowork.synth.office import xlsx_bytes

    (tmp_path / "ws" / "book.xlsx").write_bytes(xlsx_bytes({"A": [["changed", 5]]}))
    changed = await read(mcp, path="book.xlsx")
    assert "changed" in changed and len(children) == 3  # new bytes, a new reading
    (tmp_path / "ws" / "book.xlsx").unlink()
    with pytest.raises(ToolError, match="File not found"):  # never a stale answer for a file gone
        await read(mcp, path="book.xlsx")
    calls = [line for line in (tmp_path / "audit.jsonl").read_text().splitlines() if DOCUMENT_TOOL in line]
    assert len(calls) >= 5  # answered from memory or not, every call is on the record
