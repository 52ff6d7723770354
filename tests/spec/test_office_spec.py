"""Binary files in specs: workspace sources and mail attachment sources load byte for byte,
and a missing or malformed one is named by file, line and field."""

import base64

import pytest

from cowork.errors import SpecError
from cowork.spec.loader import load_spec
from cowork.synth.office import pdf_bytes, xlsx_bytes

SPEC = """id: office-probe
title: t
prompt: p
tools: [read_document, mail]
workspace:
  files:
    - {{path: data/book.xlsx, source: files/book.xlsx}}
services:
  mail:
    messages:
      - from: dana@acme.com
        attachments:
          - {{name: invoice.pdf, {attachment}}}
checks: [{{type: xlsx_cell, path: data/book.xlsx, cell: A1, value: 1}}]
oracle: [{{tool: read_document, args: {{path: data/book.xlsx}}}}]
"""


def _write(tmp_path, attachment: str):
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "book.xlsx").write_bytes(xlsx_bytes({"S": [[1]]}))
    (tmp_path / "files" / "invoice.pdf").write_bytes(pdf_bytes([{"paragraph": "due"}]))
    (tmp_path / "task.yaml").write_text(SPEC.format(attachment=attachment))
    return tmp_path


def test_binary_sources_load_byte_for_byte(tmp_path):
    loaded = load_spec(_write(tmp_path, "source: files/invoice.pdf"))
    files = {p: data for p, data, _, _ in loaded.workspace_files()}
    assert files["data/book.xlsx"] == (tmp_path / "files" / "book.xlsx").read_bytes()
    att = loaded.spec.services.mail.messages[0].attachments[0]
    assert att.source is None and att.content() == (tmp_path / "files" / "invoice.pdf").read_bytes()


@pytest.mark.parametrize("attachment, words", [
    ("source: files/nope.pdf", "task.yaml:13: services.mail.messages[0].attachments[0].source: file 'files/nope.pdf' not found"),
    ("source: ../../etc/passwd", "not found in the task folder"),
    ("data: '!!notbase64'", "data is not base64"),
    (f"data: {base64.b64encode(b'x').decode()}, source: files/invoice.pdf", "give data or source, not both"),
])
def test_bad_attachment_files_are_named(tmp_path, attachment, words):
    with pytest.raises(SpecError, match="task.yaml:1[0-9]") as info:
        load_spec(_write(tmp_path, attachment))
    assert words in str(info.value)
