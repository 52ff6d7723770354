"""synth.office: the same bytes for the same input, and files that read back as written."""

from __future__ import annotations

import io
import time
import zipfile
from datetime import date, datetime

import openpyxl
import pypdf
import pytest

from cowork.services import office_text
from cowork.synth.family import Draft, write_draft
from cowork.synth.office import docx_bytes, pdf_bytes, xlsx_bytes

SHEETS = {
    "Q1": [["Region", "Budget", "Actual", "Variance", "Closed", "Final"],
           ["North", 1200, 1100, "=B2-C2", date(2026, 3, 31), True],
           ["South", 800.5, 900, "=B3-C3", datetime(2026, 4, 1, 9, 30), False],
           ["Total", "=SUM(B2:B3)", "=SUM(C2:C3)", "=D2+D3", None, None]],
    "Q2": [["Total", "=Q1!B4*1.1"], ["Label", '="over by "&ROUND(Q1!D3,0)'], ["Check", "=IF(Q1!D4>0,\"ok\",\"no\")"]],
    "Empty": [],
}
BLOCKS = [{"heading": "Expense policy", "level": 1},
          {"paragraph": "Meals are refunded up to the limits below. " * 50},
          {"table": [["Category", "Limit", "Approver"], ["Meal", "50", "Manager"], ["Hotel", "200", "Director"]]},
          {"heading": "Exceptions", "level": 2},
          {"paragraph": "Anything over EUR 1,000 needs the CFO (Dana Smith) — in writing."}]


class TestDeterminism:
    def test_same_input_same_bytes_across_time(self, monkeypatch):
        first = (xlsx_bytes(SHEETS), docx_bytes(BLOCKS), pdf_bytes(BLOCKS))
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + 86400 * 400)  # a year later: zip dates come from time
        monkeypatch.setattr(time, "localtime", lambda *a: time.gmtime(real() + 86400 * 400))
        assert (xlsx_bytes(SHEETS), docx_bytes(BLOCKS), pdf_bytes(BLOCKS)) == first

    def test_zip_members_carry_fixed_dates(self):
        for data in (xlsx_bytes(SHEETS), docx_bytes(BLOCKS)):
            assert {i.date_time for i in zipfile.ZipFile(io.BytesIO(data)).infolist()} == {(2026, 1, 1, 0, 0, 0)}

    def test_different_input_different_bytes(self):
        assert xlsx_bytes({"A": [[1]]}) != xlsx_bytes({"A": [[2]]})
        assert pdf_bytes([{"paragraph": "a"}]) != pdf_bytes([{"paragraph": "b"}])


class TestXlsx:
    def test_sheets_values_and_formulas_round_trip(self):
        data = xlsx_bytes(SHEETS)
        wb = openpyxl.load_workbook(io.BytesIO(data))
        assert wb.sheetnames == ["Q1", "Q2", "Empty"]
        assert wb["Q1"]["D2"].value == "=B2-C2" and wb["Q1"]["E2"].value == datetime(2026, 3, 31)
        assert wb["Q1"]["F2"].value is True and wb["Q1"]["B3"].value == 800.5
        cached = openpyxl.load_workbook(io.BytesIO(data), data_only=True)  # what a spreadsheet app would show
        assert cached["Q1"]["D4"].value == 0.5 and cached["Q1"]["B4"].value == 2000.5
        assert cached["Q2"]["B1"].value == pytest.approx(2200.55)
        assert cached["Q2"]["B2"].value == "over by -100" and cached["Q2"]["B3"].value == "ok"

    def test_reader_shows_values_and_lists_formulas(self):
        text = office_text.render(xlsx_bytes(SHEETS), "q.xlsx")
        assert "3 sheet(s): Q1, Q2, Empty" in text and "| 4 | Total | 2000.5 | 2000 | 0.5 |" in text
        assert "| 2 | North | 1200 | 1100 | 100 | 2026-03-31 | TRUE |" in text and "D4 =D2+D3" in text
        assert "## sheet 'Empty' (empty)" in text
        assert "'Q2'" in office_text.render(xlsx_bytes(SHEETS), "q.xlsx", sheet="q2")

    def test_bad_input_is_refused(self):
        with pytest.raises(TypeError, match="sheet 'A' cell B1: list"):
            xlsx_bytes({"A": [[1, [2]]]})
        with pytest.raises(ValueError, match="sheet name"):
            xlsx_bytes({"a/b": [[1]]})
        with pytest.raises(ValueError, match="at least one sheet"):
            xlsx_bytes({})


class TestDocx:
    def test_blocks_round_trip(self):
        assert office_text.read_docx(docx_bytes(BLOCKS), "p.docx") == BLOCKS

    def test_bad_block_is_refused(self):
        with pytest.raises(ValueError, match="block 0: give exactly one of heading, paragraph, table"):
            docx_bytes([{"heading": "x", "paragraph": "y"}])
        with pytest.raises(ValueError, match="block 1: a table"):
            docx_bytes([{"paragraph": "x"}, {"table": []}])


class TestPdf:
    def test_text_wraps_over_pages_and_reads_back(self):
        data = pdf_bytes(BLOCKS * 6)
        reader = pypdf.PdfReader(io.BytesIO(data))
        pages = [p.extract_text() for p in reader.pages]
        assert len(pages) >= 3 and pages[0].startswith("Expense policy")
        whole = " ".join(" ".join(pages).split())
        assert "Meal 50 Manager" in whole and "Hotel 200 Director" in whole
        assert "needs the CFO (Dana Smith)" in whole  # parentheses escaped; the dash is WinAnsi
        assert whole.count("Exceptions") == 6
        assert all(max(len(line) for line in p.splitlines()) < 130 for p in pages)  # wrapped, not one long line

    def test_a_well_formed_file(self):
        data = pdf_bytes([{"paragraph": "x"}])
        assert data.startswith(b"%PDF-1.4") and data.rstrip().endswith(b"%%EOF")
        reader = pypdf.PdfReader(io.BytesIO(data), strict=True)  # xref offsets must be exact
        assert len(reader.pages) == 1 and reader.metadata.producer == "cowork"


def test_write_draft_writes_binary_files(tmp_path):
    xlsx = xlsx_bytes({"S": [[1]]})
    folder = write_draft(Draft({"id": "t-1"}, {"workspace/a.xlsx": xlsx, "workspace/b.md": "# hi\n"}), tmp_path)
    assert (folder / "workspace/a.xlsx").read_bytes() == xlsx and (folder / "workspace/b.md").read_text() == "# hi\n"
