"""Office-file checks: a cell of an xlsx, text or a table row of a docx, the text of a pdf page,
in the final workspace or attached to a mail message.

Files are read by services.office_text, the same reader the sandbox's ``read_document`` uses.
A file that is missing, damaged, of another kind or too large fails the check with a reason
that says so; it never passes and never crashes the grader. A file the export left out
(too large to export) cannot be judged: GradingError, so the check is not graded.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
from datetime import date, datetime
from typing import Any, Callable

from ..errors import GradingError
from ..evidence import Evidence
from ..services.office_text import DocumentError, Sheet, cells_of, read_docx, read_pdf, read_xlsx, shown
from ..spec import checks as M
from ..spec.regex import search
from .matching import Verdict, match_field
from .records import _record_matches, episode_records


class _MailMessages:
    """What episode_records reads of a check: the mail messages, limited by ``only``."""

    service, collection = "mail", "messages"

    def __init__(self, only: list[str]):
        self.only = only
        self.where: dict[str, M.Matcher] = {}


def _files(c: Any, ev: Evidence) -> tuple[list[tuple[str, bytes]], str]:
    """The files the check judges as ``(label, bytes)``, or none and why."""
    if c.path is not None:
        if c.path in ev.omitted:
            raise GradingError(f"{c.path}: its content was left out of the export ({ev.omitted[c.path]})")
        data = ev.files.get(c.path)
        return ([(c.path, data)], "") if data is not None else ([], f"{c.path} does not exist")
    ref: M.AttachmentRef = c.attachment
    if ev.state_final is None:
        return [], "the task has no mail state to find attachments in"
    blobs = ((ev.state_final.get("mail") or {}).get("files")) or {}
    out: list[tuple[str, bytes]] = []
    messages = episode_records(_MailMessages(list(ref.only)), ev)
    for rid, msg in sorted(messages.items()):
        if ref.folder is not None and msg.get("folder") != ref.folder:
            continue
        if not _record_matches(msg, ref.where):
            continue
        for att in msg.get("attachments") or []:
            if not fnmatch.fnmatch(str(att.get("name", "")).casefold(), ref.name.casefold()):
                continue
            label = f"{att.get('name')} (attached to {rid})"
            blob = blobs.get(att.get("sha256") or "")
            if blob is None:
                raise GradingError(f"{label}: the mail state holds no file with its sha256")
            try:
                out.append((label, base64.b64decode(blob["data"], validate=True)))
            except (binascii.Error, KeyError, TypeError, ValueError):
                raise GradingError(f"{label}: the mail state holds it damaged") from None
    where = f"in {ref.folder}" if ref.folder else "in any folder"
    return out, ("" if out else f"no mail message {where} matching the check carries an attachment named {ref.name!r}")


def _judge(c: Any, ev: Evidence, one: Callable[[Any, str, bytes], tuple[bool, str]]) -> Verdict:
    """Pass when some judged file satisfies ``one``; otherwise every file's reason."""
    files, why = _files(c, ev)
    if not files:
        return False, why, []
    reasons = []
    for label, data in files:
        try:
            ok, detail = one(c, label, data)
        except DocumentError as exc:
            ok, detail = False, str(exc)
        if ok:
            return True, detail, []
        reasons.append(detail)
    return False, "; ".join(reasons), []


# --------------------------------------------------------------------------- xlsx
def _sheet(sheets: list[Sheet], name: str | None, label: str) -> Sheet:
    if not sheets:
        raise DocumentError(f"{label} has no worksheet")
    if name is None:
        return sheets[0]
    for s in sheets:
        if s.name.casefold() == name.casefold():
            return s
    raise DocumentError(f"{label} has no sheet {name!r}; sheets: {', '.join(s.name for s in sheets)}")


def _comparable(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return shown(value)
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.replace(",", "").strip())
        except ValueError:
            return None
    return None


def _cell_matches(m: M.Matcher, found: bool, value: Any, tolerance: float) -> bool:
    value = _comparable(value)
    if "equals" in m.model_fields_set and _number(m.equals) is not None and _number(value) is not None \
            and not isinstance(m.equals, bool):
        return abs(float(_number(value)) - float(_number(m.equals))) <= max(tolerance, m.tolerance) + 1e-9  # type: ignore[arg-type]
    return match_field(m, found, value)


def _one_xlsx(c: M.XlsxCell, label: str, data: bytes) -> tuple[bool, str]:
    sheet = _sheet(read_xlsx(data, label), c.sheet, label)
    try:
        grid = cells_of(c.cell)
    except ValueError as exc:
        raise DocumentError(str(exc)) from None
    refs = [ref for row in grid for ref in row]
    where = f"{label} {sheet.name}!{c.cell.upper()}"
    unknown = [r for r in refs if r in sheet.unknown]
    if unknown:
        return False, f"{where}: {unknown[0]} holds a formula whose value is not known ({sheet.unknown[unknown[0]]})"
    if c.formula is not None:
        bad = [r for r in refs if not _cell_matches(c.formula, r in sheet.formulas, sheet.formulas.get(r), 0.0)]
        if bad:
            return False, f"{where}: the formula of {bad[0]} is {sheet.formulas.get(bad[0], 'absent')!r}"
    if c.values is not None:
        return _grid(c, sheet, grid, where)
    if c.value is None:
        return True, f"{where}: formula as expected"
    hits = [r for r in refs if _cell_matches(c.value, r in sheet.values, sheet.values.get(r), c.tolerance)]
    ok = len(hits) == len(refs) if c.mode == "all" else bool(hits)
    got = ", ".join(f"{r}={shown(sheet.values.get(r))!r}" for r in refs[:6]) + (" ..." if len(refs) > 6 else "")
    return ok, f"{where} {'matches' if ok else 'does not match'} ({got})"


def _grid(c: M.XlsxCell, sheet: Sheet, grid: list[list[str]], where: str) -> tuple[bool, str]:
    assert c.values is not None
    if len(c.values) != len(grid) or any(len(a) != len(b) for a, b in zip(c.values, grid)):
        return False, f"{where}: values give {len(c.values)} row(s) for a range of {len(grid)} x {len(grid[0])}"
    for want_row, refs in zip(c.values, grid):
        for want, ref in zip(want_row, refs):
            m = M.Matcher(equals=want, tolerance=c.tolerance, ignore_case=False)
            if not _cell_matches(m, ref in sheet.values, sheet.values.get(ref), c.tolerance):
                return False, f"{where}: {ref} is {shown(sheet.values.get(ref))!r}, expected {want!r}"
    return True, f"{where} holds the expected values"


def _xlsx_cell(c: M.XlsxCell, ev: Evidence) -> Verdict:
    return _judge(c, ev, _one_xlsx)


# --------------------------------------------------------------------------- docx
def _flat(text: str) -> str:
    return " ".join(text.split())


def _fold(text: str, ignore_case: bool) -> str:
    return _flat(text).casefold() if ignore_case else _flat(text)


def _same_cell(cell: str, want: str, ignore_case: bool) -> bool:
    a, b = _number(cell), _number(want)
    if a is not None and b is not None:
        return abs(a - b) <= 1e-9
    return _fold(cell, ignore_case) == _fold(want, ignore_case)


def _row_in(row: list[str], want: list[str], ignore_case: bool) -> bool:
    i = 0
    for cell in row:
        if i < len(want) and _same_cell(cell, want[i], ignore_case):
            i += 1
    return i == len(want)


def _one_docx(c: M.DocxContains, label: str, data: bytes) -> tuple[bool, str]:
    blocks = read_docx(data, label)
    parts: list[str] = []
    for b in blocks:
        if "table" in b:
            parts.extend(cell for row in b["table"] for cell in row)
        else:
            parts.append(b.get("heading") or b.get("paragraph") or "")
    text = _flat("\n".join(parts))
    missing = []
    if c.text is not None and _fold(c.text, c.ignore_case) not in _fold(text, c.ignore_case):
        missing.append(f"text {c.text!r}")
    if c.regex is not None and not search(c.regex, text, ignore_case=c.ignore_case):
        missing.append(f"a match of /{c.regex}/")
    if c.heading is not None and not any(
            "heading" in b and _fold(c.heading, c.ignore_case) in _fold(b["heading"], c.ignore_case) for b in blocks):
        missing.append(f"a heading with {c.heading!r}")
    if c.row is not None and not any(
            _row_in(row, c.row, c.ignore_case) for b in blocks if "table" in b for row in b["table"]):
        missing.append(f"a table row {c.row!r}")
    if missing:
        return False, f"{label} lacks " + ", ".join(missing)
    return True, f"{label} holds what the check asks"


def _docx_contains(c: M.DocxContains, ev: Evidence) -> Verdict:
    return _judge(c, ev, _one_docx)


# --------------------------------------------------------------------------- pdf
def _page_ok(c: M.PdfText, text: str) -> bool:
    if c.contains is not None and _fold(c.contains, c.ignore_case) not in _fold(text, c.ignore_case):
        return False
    return c.regex is None or search(c.regex, text, ignore_case=c.ignore_case)


def _one_pdf(c: M.PdfText, label: str, data: bytes) -> tuple[bool, str]:
    pages = read_pdf(data, label)
    want = " and ".join(x for x in (f"{c.contains!r}" if c.contains is not None else "",
                                     f"/{c.regex}/" if c.regex is not None else "") if x)
    if c.page is not None:
        if c.page > len(pages):
            return False, f"{label} has {len(pages)} page(s), no page {c.page}"
        ok = _page_ok(c, pages[c.page - 1])
        return ok, f"page {c.page} of {label} {'holds' if ok else 'lacks'} {want}"
    hits = [n for n, text in enumerate(pages, start=1) if _page_ok(c, text)]
    if hits:
        return True, f"page {hits[0]} of {label} holds {want}"
    return False, f"no page of {label} ({len(pages)} page(s)) holds {want}"


def _pdf_text(c: M.PdfText, ev: Evidence) -> Verdict:
    return _judge(c, ev, _one_pdf)


#: The office checks, by type.
OFFICE_CHECKS: dict[str, Callable[[Any, Evidence], Verdict]] = {
    "xlsx_cell": _xlsx_cell,
    "docx_contains": _docx_contains,
    "pdf_text": _pdf_text,
}
