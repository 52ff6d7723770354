"""Real office files for generated worlds: xlsx workbooks, docx documents and PDFs, byte for byte
the same for the same input.

``xlsx_bytes`` and ``docx_bytes`` use openpyxl and python-docx, then fix what those stamp
with the time (zip member dates, document properties). Formula cells get the value cowork
computes for them (services.office_text.Evaluator) as their cached result, so a reader that
takes cached values (read_document, a grader, a spreadsheet's preview) sees numbers, as it
would in a file saved by a spreadsheet application. ``pdf_bytes`` is a small PDF 1.4 writer
of its own: Helvetica text, wrapped lines, tables as rows of columns, as many pages as the
text needs, no dates and a content-derived file id.

Blocks (the world generator's shape): ``{"heading": str, "level": int}``,
``{"paragraph": str}``, ``{"table": [[str, ...], ...]}`` (first row: the header).
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from datetime import date, datetime, timezone
from typing import Any
from xml.sax.saxutils import escape

from ..services.office_text import Evaluator, FormulaError, col_letters

#: What every generated file says about its making (no dates of the run, no user names).
FIXED_TIME = datetime(2026, 1, 1, 0, 0, 0)
_ZIP_TIME = (2026, 1, 1, 0, 0, 0)
CREATOR = "cowork"

Block = dict[str, Any]


# --------------------------------------------------------------------------- zip
def _normalise_zip(data: bytes, replace: dict[str, bytes] | None = None) -> bytes:
    """The same package with fixed member dates and attributes (and some members replaced)."""
    replace = replace or {}
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            member = zipfile.ZipInfo(info.filename, date_time=_ZIP_TIME)
            member.compress_type = zipfile.ZIP_DEFLATED
            member.external_attr = 0o644 << 16
            member.create_system = 3
            dst.writestr(member, replace.get(info.filename, src.read(info.filename)), compresslevel=6)
    return out.getvalue()


def _core_xml(title: str) -> bytes:
    stamp = FIXED_TIME.strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
        f"<dc:title>{escape(title)}</dc:title><dc:creator>{CREATOR}</dc:creator>"
        f"<cp:lastModifiedBy>{CREATOR}</cp:lastModifiedBy>"
        f'<dcterms:created xsi:type="dcterms:W3CDTF">{stamp}</dcterms:created>'
        f'<dcterms:modified xsi:type="dcterms:W3CDTF">{stamp}</dcterms:modified>'
        "</cp:coreProperties>"
    ).encode()


# --------------------------------------------------------------------------- xlsx
def _check_cell(sheet: str, ref: str, value: Any) -> None:
    if value is not None and not isinstance(value, (str, int, float, bool, date, datetime)):
        raise TypeError(f"sheet {sheet!r} cell {ref}: {type(value).__name__} is not a cell value "
                        "(str, int, float, bool, date, datetime or None)")


def xlsx_bytes(sheets: dict[str, list[list[Any]]]) -> bytes:
    """A workbook with one sheet per entry, rows from A1 down; strings starting with ``=`` are
    formulas (stored with the value cowork computes for them as their cached result).

    Raises:
        ValueError: no sheets, or a sheet name Excel refuses.
        TypeError: a cell value of another type.
    """
    import openpyxl

    if not sheets:
        raise ValueError("a workbook needs at least one sheet")
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    values: dict[str, dict[str, Any]] = {}
    formulas: dict[str, dict[str, str]] = {}
    for name, rows in sheets.items():
        if not name or len(name) > 31 or re.search(r"[\[\]:*?/\\]", name):
            raise ValueError(f"sheet name {name!r}: 1-31 characters, none of [ ] : * ? / \\")
        ws = wb.create_sheet(name)
        values[name], formulas[name] = {}, {}
        for r, row in enumerate(rows, start=1):
            for c, value in enumerate(row, start=1):
                ref = f"{col_letters(c)}{r}"
                _check_cell(name, ref, value)
                if value is None:
                    continue
                cell = ws.cell(row=r, column=c, value=value)
                if isinstance(value, datetime):
                    cell.number_format = "yyyy-mm-dd hh:mm"
                elif isinstance(value, date):
                    cell.number_format = "yyyy-mm-dd"
                if isinstance(value, str) and value.startswith("="):
                    formulas[name][ref] = value
                else:
                    values[name][ref] = value
    wb.properties.creator = CREATOR
    buf = io.BytesIO()
    wb.save(buf)
    return _normalise_zip(buf.getvalue(), {"docProps/core.xml": _core_xml(""),
                                           **_cached_results(buf.getvalue(), wb.sheetnames, values, formulas)})


def _cached_results(data: bytes, names: list[str], values: dict[str, dict[str, Any]],
                    formulas: dict[str, dict[str, str]]) -> dict[str, bytes]:
    """The worksheets' XML with each formula's computed value written as its cached result."""
    ev = Evaluator(values, formulas)
    zf = zipfile.ZipFile(io.BytesIO(data))
    out: dict[str, bytes] = {}
    for i, name in enumerate(names, start=1):
        if not formulas[name]:
            continue
        member = f"xl/worksheets/sheet{i}.xml"
        xml = zf.read(member).decode()

        def fill(m: re.Match[str], sheet: str = name) -> str:
            try:
                value = ev.cell(sheet, m.group(1))
            except FormulaError:
                return m.group(0)  # left without a cached value: readers show the formula
            if isinstance(value, bool):
                return f'<c r="{m.group(1)}"{m.group(2)} t="b"><f>{m.group(3)}</f><v>{int(value)}</v></c>'
            if isinstance(value, (int, float)):
                return f'<c r="{m.group(1)}"{m.group(2)}><f>{m.group(3)}</f><v>{repr(float(value))}</v></c>'
            return f'<c r="{m.group(1)}"{m.group(2)} t="str"><f>{m.group(3)}</f><v>{escape(str(value))}</v></c>'

        xml = re.sub(r'<c r="([A-Z]+\d+)"((?: s="\d+")?)><f>(.*?)</f><v\s*(?:/>|></v>)</c>', fill, xml)
        out[member] = xml.encode()
    return out


# --------------------------------------------------------------------------- docx
def _block_kind(block: Block, i: int) -> str:
    kinds = [k for k in ("heading", "paragraph", "table") if k in block]
    if len(kinds) != 1:
        raise ValueError(f"block {i}: give exactly one of heading, paragraph, table (got {sorted(block)})")
    if kinds[0] == "table":
        rows = block["table"]
        if not rows or not all(isinstance(r, list) and r for r in rows):
            raise ValueError(f"block {i}: a table is a non-empty list of non-empty rows")
    return kinds[0]


def docx_bytes(blocks: list[Block]) -> bytes:
    """A Word document of headings, paragraphs and tables (the first row bold as a header).

    Raises:
        ValueError: a block of another shape.
    """
    import docx

    doc = docx.Document()
    title = ""
    for i, block in enumerate(blocks):
        kind = _block_kind(block, i)
        if kind == "heading":
            level = int(block.get("level", 1))
            doc.add_heading(str(block["heading"]), level=max(0, min(level, 9)))
            title = title or str(block["heading"])
        elif kind == "paragraph":
            doc.add_paragraph(str(block["paragraph"]))
        else:
            rows = block["table"]
            width = max(len(r) for r in rows)
            table = doc.add_table(rows=len(rows), cols=width)
            table.style = "Table Grid"
            for r, row in enumerate(rows):
                for c, text in enumerate(row):
                    cell = table.cell(r, c)
                    cell.text = "" if text is None else str(text)
                    if r == 0:
                        for run in cell.paragraphs[0].runs:
                            run.bold = True
    props = doc.core_properties
    props.author = props.last_modified_by = CREATOR
    props.title = title
    props.created = props.modified = FIXED_TIME.replace(tzinfo=timezone.utc)
    props.revision = 1
    buf = io.BytesIO()
    doc.save(buf)
    return _normalise_zip(buf.getvalue(), {"docProps/core.xml": _core_xml(title)})


# --------------------------------------------------------------------------- pdf
#: Helvetica advance widths (1/1000 em) of the printable ASCII characters, from the AFM file
#: of the standard font; other characters count as 556.
_WIDTHS = dict(zip(
    " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~",
    [278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278, *[556] * 10, 278, 278,
     584, 584, 584, 556, 1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778, 667,
     778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556, 333, 556, 556, 500, 556, 556,
     278, 556, 556, 222, 222, 500, 222, 833, 556, 556, 556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500,
     334, 260, 334, 584]))
_PAGE_W, _PAGE_H, _MARGIN = 612, 792, 56


def _width(text: str, size: float, bold: bool = False) -> float:
    return sum(_WIDTHS.get(ch, 556) for ch in text) * size / 1000 * (1.06 if bold else 1.0)


def _wrap(text: str, size: float, width: float, bold: bool = False) -> list[str]:
    lines: list[str] = []
    for para in text.split("\n"):
        line = ""
        for word in para.split():
            trial = f"{line} {word}" if line else word
            if line and _width(trial, size, bold) > width:
                lines.append(line)
                line = word
            else:
                line = trial
            while _width(line, size, bold) > width and len(line) > 1:  # a word wider than the line
                cut = max(1, int(len(line) * width / _width(line, size, bold)))
                lines.append(line[:cut])
                line = line[cut:]
        lines.append(line)
    return lines


def _pdf_text(text: str) -> str:
    """A PDF literal string in WinAnsiEncoding (characters outside it become '?')."""
    raw = text.encode("cp1252", "replace")
    return "(" + raw.decode("latin-1").replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


class _Pages:
    """Lays out lines top-down, starting a new page when one is full."""

    def __init__(self) -> None:
        self.pages: list[list[str]] = [[]]
        self.y: float = _PAGE_H - _MARGIN

    def need(self, height: float) -> None:
        if self.y - height < _MARGIN:
            self.pages.append([])
            self.y = _PAGE_H - _MARGIN

    def text(self, x: float, text: str, size: float, bold: bool = False) -> None:
        font = "F2" if bold else "F1"
        self.pages[-1].append(f"BT /{font} {size:g} Tf {x:.2f} {self.y:.2f} Td {_pdf_text(text)} Tj ET")

    def rule(self, x1: float, x2: float, y: float) -> None:
        self.pages[-1].append(f"0.5 w {x1:.2f} {y:.2f} m {x2:.2f} {y:.2f} l S")


def _lay_out(blocks: list[Block]) -> list[list[str]]:
    pages = _Pages()
    width = _PAGE_W - 2 * _MARGIN
    for i, block in enumerate(blocks):
        kind = _block_kind(block, i)
        if kind in ("heading", "paragraph"):
            bold = kind == "heading"
            size = {0: 18, 1: 16, 2: 13}.get(int(block.get("level", 1)), 11) if bold else 10
            for line in _wrap(str(block[kind]), size, width, bold):
                pages.need(size * 1.4)
                pages.y -= size * 1.4
                pages.text(_MARGIN, line, size, bold)
            pages.y -= size * 0.6
        else:
            _lay_out_table(pages, [["" if c is None else str(c) for c in row] for row in block["table"]], width)
    return pages.pages


def _lay_out_table(pages: _Pages, rows: list[list[str]], width: float) -> None:
    cols = max(len(r) for r in rows)
    col_w = width / cols
    size = 9
    for r, row in enumerate(rows):
        wrapped = [_wrap(cell, size, col_w - 6, r == 0) for cell in row]
        height = max(len(w) for w in wrapped) * size * 1.35
        pages.need(height + 4)
        top = pages.y
        for c, lines in enumerate(wrapped):
            pages.y = top
            for line in lines:
                pages.y -= size * 1.35
                pages.text(_MARGIN + c * col_w, line, size, bold=r == 0)
        pages.y = top - height - 3
        if r == 0:
            pages.rule(_MARGIN, _MARGIN + width, pages.y + 1)
    pages.y -= 8


def pdf_bytes(blocks: list[Block]) -> bytes:
    """A PDF 1.4 document (US Letter, Helvetica) of headings, paragraphs and tables.

    Raises:
        ValueError: a block of another shape.
    """
    pages = _lay_out(blocks)
    objects: list[bytes] = []  # object n is objects[n - 1]
    n_pages = len(pages)
    # 1 catalog, 2 page tree, 3 Helvetica, 4 Helvetica-Bold, 5 info, then (page, content) pairs.
    kids = " ".join(f"{6 + 2 * i} 0 R" for i in range(n_pages))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>")
    objects.append(f"<< /Producer ({CREATOR}) /Creator ({CREATOR}) >>".encode())
    for i, ops in enumerate(pages):
        stream = "\n".join(ops).encode("latin-1")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {_PAGE_W} {_PAGE_H}] "
                       f"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> /Contents {7 + 2 * i} 0 R >>".encode())
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{n} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for off in offsets:
        out.write(f"{off:010d} 00000 n \n".encode())
    file_id = hashlib.md5(out.getvalue(), usedforsecurity=False).hexdigest()
    out.write(f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info 5 0 R /ID [<{file_id}> <{file_id}>] >>\n"
              f"startxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


__all__ = ["docx_bytes", "pdf_bytes", "xlsx_bytes"]
