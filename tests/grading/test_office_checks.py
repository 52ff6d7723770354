"""xlsx_cell, docx_contains and pdf_text on good, damaged, missing and wrong-type files, in the
workspace and attached to mail (synthetic evidence, no Docker)."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
from datetime import date

import pytest
from pydantic import TypeAdapter, ValidationError

from cowork.evidence import Evidence
from cowork.grading.checks import run_check
from cowork.spec.checks import Check
from cowork.synth.office import docx_bytes, pdf_bytes, xlsx_bytes

CHECK = TypeAdapter(Check)

XLSX = xlsx_bytes({
    "Summary": [["Region", "Budget", "Actual", "Variance", "Closed"],
                ["North", 1200, 1100, "=B2-C2", date(2026, 3, 31)],
                ["South", 800.5, 900, "=B3-C3", date(2026, 3, 31)],
                ["Total", "=SUM(B2:B3)", "=SUM(C2:C3)", "=D2+D3", None]],
    "Notes": [["Owner", "Dana"]],
})
DOCX = docx_bytes([{"heading": "Travel policy", "level": 1},
                   {"paragraph": "Economy class for flights under six hours."},
                   {"table": [["Item", "Limit"], ["Hotel", "200"], ["Meal", "50.00"]]}])
PDF = pdf_bytes([{"heading": "Invoice INV-2041", "level": 1}, {"paragraph": "Net 30. " * 1500},
                 {"paragraph": "Amount due: EUR 4,180.00"}])


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _mail_state(attachments: dict[str, bytes], folder: str = "sent") -> dict:
    files, entries = {}, []
    for name, data in attachments.items():
        digest = hashlib.sha256(data).hexdigest()
        files[digest] = {"id": digest, "size": len(data), "data": base64.b64encode(data).decode()}
        entries.append({"name": name, "content_type": "application/octet-stream", "text": "", "size": len(data),
                        "sha256": digest})
    msg = {"id": "msg-9", "folder": folder, "to": ["cfo@acme.com"], "subject": "Variance", "attachments": entries}
    return {"mail": {"messages": {"msg-9": msg}, "files": files}}


def _ev(files: dict[str, bytes] | None = None, state: dict | None = None) -> Evidence:
    seed = {"mail": {"messages": {}, "files": {}}} if state is not None else None
    return Evidence(audit_text="", audit_count=None, workspace_tar=_tar(files or {}), initial={},
                    state_seed=seed, state_final=state)


def judge(check: dict, ev: Evidence) -> tuple[bool | None, str]:
    ok, detail, _, _ = run_check(CHECK.validate_python(check), ev)
    return ok, detail


WS = _ev({"out/report.xlsx": XLSX, "out/policy.docx": DOCX, "out/invoice.pdf": PDF,
          "out/broken.xlsx": XLSX[: len(XLSX) // 2], "out/notes.txt": b"just text", "out/fake.pdf": b"%PDF-1.4 junk"})


class TestXlsxCell:
    @pytest.mark.parametrize("check", [
        {"cell": "D4", "value": 0.5},
        {"cell": "B4", "value": 2000, "tolerance": 1},  # 2000.5 within 1
        {"cell": "A2", "value": {"regex": "^Nor"}},
        {"cell": "E2", "value": "2026-03-31"},  # dates compare as ISO text
        {"cell": "D2:D3", "values": [[100], [-99.5]]},
        {"cell": "D2:D3", "value": {"one_of": [100, -99.5]}},
        {"cell": "D2:D4", "value": 100, "mode": "any"},
        {"cell": "D4", "formula": {"regex": "^=D2\\+D3$"}, "value": 0.5},
        {"sheet": "notes", "cell": "B1", "value": "Dana"},
    ])
    def test_holds(self, check):
        ok, detail = judge({"type": "xlsx_cell", "path": "out/report.xlsx", **check}, WS)
        assert ok is True, detail

    @pytest.mark.parametrize("check, why", [
        ({"cell": "D4", "value": 1}, "does not match"),
        ({"cell": "D2:D3", "values": [[100], [99.5]]}, "D3 is '-99.5'"),
        ({"cell": "D2:D4", "value": 100}, "does not match"),
        ({"cell": "B2", "formula": {"contains": "SUM"}}, "formula of B2 is 'absent'"),
        ({"sheet": "Q9", "cell": "A1", "value": 1}, "no sheet 'Q9'; sheets: Summary, Notes"),
        ({"cell": "Z99", "value": 1}, "does not match"),
    ])
    def test_fails_with_the_reason(self, check, why):
        ok, detail = judge({"type": "xlsx_cell", "path": "out/report.xlsx", **check}, WS)
        assert ok is False and why in detail

    @pytest.mark.parametrize("path, why", [
        ("out/missing.xlsx", "does not exist"),
        ("out/broken.xlsx", "damaged zip package"),
        ("out/notes.txt", "is not a xlsx file (it reads as text)"),
        ("out/policy.docx", "is not a xlsx file (it reads as docx)"),
    ])
    def test_missing_damaged_or_wrong_type_fails_never_crashes(self, path, why):
        ok, detail = judge({"type": "xlsx_cell", "path": path, "cell": "A1", "value": "x"}, WS)
        assert ok is False and why in detail

    def test_formula_without_a_cached_value_is_computed_and_an_unknown_one_fails(self):
        import openpyxl

        wb = openpyxl.Workbook()
        ws = wb.active
        ws.append([2, 3, "=A1*B1", "=NOSUCH(A1)"])  # openpyxl stores no cached values
        buf = io.BytesIO()
        wb.save(buf)
        ev = _ev({"agent.xlsx": buf.getvalue()})
        assert judge({"type": "xlsx_cell", "path": "agent.xlsx", "cell": "C1", "value": 6}, ev)[0] is True
        ok, detail = judge({"type": "xlsx_cell", "path": "agent.xlsx", "cell": "D1", "value": 6}, ev)
        assert ok is False and "value is not known" in detail and "NOSUCH" in detail

    def test_a_zip_bomb_is_refused(self):
        buf = io.BytesIO()
        import zipfile

        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("xl/workbook.xml", "<workbook/>")
            zf.writestr("xl/worksheets/sheet1.xml", b"\0" * (300 << 20))
        ok, detail = judge({"type": "xlsx_cell", "path": "bomb.xlsx", "cell": "A1", "value": 1},
                           _ev({"bomb.xlsx": buf.getvalue()}))
        assert ok is False and "more than cowork reads" in detail


class TestDocxContains:
    @pytest.mark.parametrize("check", [
        {"text": "economy class for flights"},
        {"heading": "travel"},
        {"row": ["Meal", "50"]},  # numbers as numbers: 50 == 50.00
        {"regex": "under (six|6) hours", "row": ["hotel", "200"]},
    ])
    def test_holds(self, check):
        ok, detail = judge({"type": "docx_contains", "path": "out/policy.docx", **check}, WS)
        assert ok is True, detail

    def test_every_part_must_hold(self):
        ok, detail = judge({"type": "docx_contains", "path": "out/policy.docx", "text": "economy",
                            "row": ["Hotel", "250"], "heading": "Approvals"}, WS)
        assert ok is False and "a table row ['Hotel', '250']" in detail and "a heading with 'Approvals'" in detail

    @pytest.mark.parametrize("path, why", [("out/report.xlsx", "reads as xlsx"), ("none.docx", "does not exist"),
                                           ("out/fake.pdf", "reads as pdf")])
    def test_wrong_or_missing_file(self, path, why):
        ok, detail = judge({"type": "docx_contains", "path": path, "text": "x"}, WS)
        assert ok is False and why in detail


class TestPdfText:
    def test_any_page_and_one_page(self):
        assert judge({"type": "pdf_text", "path": "out/invoice.pdf", "contains": "amount due: eur 4,180.00"}, WS)[0]
        ok, detail = judge({"type": "pdf_text", "path": "out/invoice.pdf", "page": 1, "regex": "INV-\\d{4}"}, WS)
        assert ok is True, detail
        ok, detail = judge({"type": "pdf_text", "path": "out/invoice.pdf", "page": 1, "contains": "Amount due"}, WS)
        assert ok is False and "page 1" in detail  # the long text pushed it to a later page
        ok, detail = judge({"type": "pdf_text", "path": "out/invoice.pdf", "page": 40, "contains": "x"}, WS)
        assert ok is False and "no page 40" in detail

    def test_damaged_pdf_fails_with_a_reason(self):
        ok, detail = judge({"type": "pdf_text", "path": "out/fake.pdf", "contains": "x"}, WS)
        assert ok is False and "not a readable PDF" in detail


class TestAttachments:
    def test_a_sent_attachment_is_judged(self):
        ev = _ev(state=_mail_state({"variance.xlsx": XLSX, "policy.docx": DOCX}))
        ref = {"name": "VARIANCE*.xlsx", "where": {"to": "cfo@acme.com"}}
        ok, detail = judge({"type": "xlsx_cell", "attachment": ref, "cell": "D4", "value": 0.5}, ev)
        assert ok is True and "attached to msg-9" in detail
        ok, _ = judge({"type": "docx_contains", "attachment": {"name": "policy.docx"}, "row": ["Hotel", "200"]}, ev)
        assert ok is True

    def test_no_matching_attachment_fails(self):
        ev = _ev(state=_mail_state({"variance.xlsx": XLSX}))
        for ref in ({"name": "other.xlsx"}, {"name": "variance.xlsx", "where": {"to": "ceo@acme.com"}},
                    {"name": "variance.xlsx", "folder": "drafts"}):
            ok, detail = judge({"type": "xlsx_cell", "attachment": ref, "cell": "D4", "value": 0.5}, ev)
            assert ok is False and "carries an attachment" in detail, ref

    def test_a_seeded_message_does_not_count_by_default(self):
        state = _mail_state({"variance.xlsx": XLSX})
        ev = Evidence(audit_text="", audit_count=None, workspace_tar=_tar({}), initial={},
                      state_seed=state, state_final=state)
        check = {"type": "xlsx_cell", "cell": "D4", "value": 0.5}
        assert judge({**check, "attachment": {"name": "variance.xlsx"}}, ev)[0] is False
        assert judge({**check, "attachment": {"name": "variance.xlsx", "only": []}}, ev)[0] is True

    def test_an_attachment_whose_file_is_missing_is_not_graded(self):
        state = _mail_state({"variance.xlsx": XLSX})
        state["mail"]["files"] = {}
        ok, detail = judge({"type": "xlsx_cell", "attachment": {"name": "variance.xlsx"}, "cell": "A1", "value": 1},
                           _ev(state=state))
        assert ok is None and "no file with its sha256" in detail


class TestSpecFields:
    @pytest.mark.parametrize("check, why", [
        ({"type": "xlsx_cell", "cell": "A1", "value": 1}, "exactly one of path or attachment"),
        ({"type": "xlsx_cell", "path": "a.xlsx", "attachment": {"name": "a"}, "cell": "A1", "value": 1},
         "exactly one of path or attachment"),
        ({"type": "xlsx_cell", "path": "a.xlsx", "cell": "A1"}, "give value, values or formula"),
        ({"type": "xlsx_cell", "path": "a.xlsx", "cell": "A1", "values": [[1]]}, "values is for a range"),
        ({"type": "xlsx_cell", "path": "a.xlsx", "cell": "1A", "value": 1}, "cell"),
        ({"type": "docx_contains", "path": "a.docx"}, "give text, regex, heading or row"),
        ({"type": "pdf_text", "path": "a.pdf", "page": 0, "contains": "x"}, "page"),
        ({"type": "pdf_text", "path": "a.pdf"}, "give contains or regex"),
    ])
    def test_bad_checks_are_refused_at_load(self, check, why):
        with pytest.raises(ValidationError, match=why):
            CHECK.validate_python(check)
