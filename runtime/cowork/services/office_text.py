"""Text, tables and cell values of office files (xlsx, docx, pdf) and of plain text files.

One definition for both sides: the in-container ``read_document`` tool runs this file as a
script in a child process as the agent (``python -I office_text.py PATH ...``), and the
host's graders import it to judge the files an agent produced. So it imports nothing from
cowork, only the standard library and, lazily, openpyxl, python-docx and pypdf.

Every reader is bounded: a zip package whose members would unpack past
:data:`MAX_UNPACKED_BYTES`, a file past :data:`MAX_FILE_BYTES` or a PDF past
:data:`MAX_PDF_PAGES` pages is refused with a :class:`DocumentError`, and every failure of
the third-party parsers comes back as a DocumentError naming the file, never as a crash.
"""

from __future__ import annotations

import io
import math
import re
import sys
import zipfile
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any, Callable

#: Largest file read at all.
MAX_FILE_BYTES = 64 << 20
#: Largest total of a zip package's members once unpacked (a zip bomb stops here).
MAX_UNPACKED_BYTES = 256 << 20
#: Most pages of a PDF read.
MAX_PDF_PAGES = 2000
#: Most cells of one workbook evaluated or shown.
MAX_CELLS = 1_000_000
#: Kinds of document read.
KINDS = ("xlsx", "docx", "pdf", "text")


class DocumentError(ValueError):
    """A file that cannot be read as the document it claims to be (the message says why)."""


# --------------------------------------------------------------------------- kind
def kind_of(data: bytes, name: str = "") -> str:
    """The document kind of ``data``: xlsx, docx, pdf or text (judged by content, not name).

    Raises:
        DocumentError: a zip that is neither workbook nor Word document, or binary data.
    """
    if data.startswith(b"%PDF-"):
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        names = set(_zip(data, name).namelist())
        if "xl/workbook.xml" in names:
            return "xlsx"
        if "word/document.xml" in names:
            return "docx"
        raise DocumentError(f"{name or 'the file'} is a zip archive but neither an xlsx workbook nor a docx document")
    if b"\0" in data[:8192]:
        raise DocumentError(f"{name or 'the file'} is binary data, not an xlsx, docx, pdf or text file")
    return "text"


def _zip(data: bytes, name: str) -> zipfile.ZipFile:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise DocumentError(f"{name or 'the file'} is a damaged zip package: {exc}") from None
    total = sum(i.file_size for i in infos)
    if total > MAX_UNPACKED_BYTES or len(infos) > 10_000:
        raise DocumentError(f"{name or 'the file'} would unpack to {total} bytes in {len(infos)} members, "
                            f"more than cowork reads ({MAX_UNPACKED_BYTES} bytes)")
    return zf


def _expect(data: bytes, name: str, want: str) -> None:
    got = kind_of(data, name)
    if got != want:
        raise DocumentError(f"{name or 'the file'} is not a {want} file (it reads as {got})")


# --------------------------------------------------------------------------- values
_EPOCH = datetime(1899, 12, 30)


def serial(value: Any) -> Any:
    """A date or datetime as an Excel serial number (other values unchanged)."""
    if isinstance(value, datetime):
        return (value.replace(tzinfo=None) - _EPOCH) / timedelta(days=1)
    if isinstance(value, date):
        return (datetime.combine(value, time()) - _EPOCH).days
    return value


def shown(value: Any) -> str:
    """A cell value as text: dates ISO, whole floats without ``.0``, None empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == time() else value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
            return str(int(value))
        return repr(round(value, 10))
    return str(value)


# --------------------------------------------------------------------------- formulas
class FormulaError(ValueError):
    """A formula outside the subset cowork evaluates, or one that fails (a cycle, #DIV/0!)."""


_TOKEN = re.compile(r"""
    \s*(?:
      (?P<ref>(?:(?:'(?:[^']|'')+'|[A-Za-z_][A-Za-z0-9_.]*)!)?\$?[A-Za-z]{1,3}\$?\d+(?::\$?[A-Za-z]{1,3}\$?\d+)?)(?![A-Za-z0-9_(])
     |(?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)
     |(?P<str>"(?:[^"]|"")*")
     |(?P<func>[A-Za-z][A-Za-z0-9.]*)\(
     |(?P<bool>TRUE|FALSE)(?![A-Za-z0-9_(])
     |(?P<op><>|<=|>=|[-+*/^&=<>%(),:])
    )""", re.VERBOSE | re.IGNORECASE)


def _col_index(letters: str) -> int:
    n = 0
    for ch in letters.upper():
        n = n * 26 + ord(ch) - 64
    return n


def col_letters(n: int) -> str:
    """Column number (1-based) as letters: 1 -> A, 28 -> AB."""
    out = ""
    while n:
        n, r = divmod(n - 1, 26)
        out = chr(65 + r) + out
    return out


_CELL = re.compile(r"^\$?([A-Za-z]{1,3})\$?(\d+)$")


def split_ref(ref: str) -> tuple[int, int]:
    """``"B3"`` -> ``(3, 2)`` (row, column), ``$`` signs ignored.

    Raises:
        ValueError: not a cell reference.
    """
    m = _CELL.match(ref.strip())
    if not m or int(m.group(2)) < 1:
        raise ValueError(f"{ref!r} is not a cell reference like 'B3'")
    return int(m.group(2)), _col_index(m.group(1))


def cells_of(ref: str) -> list[list[str]]:
    """The cells of ``"A1"`` or ``"A1:C3"``, as rows of cell names.

    Raises:
        ValueError: not a cell or range reference, or a range of more than MAX_CELLS cells.
    """
    first, _, last = ref.partition(":")
    r1, c1 = split_ref(first)
    r2, c2 = split_ref(last) if last else (r1, c1)
    r1, r2, c1, c2 = min(r1, r2), max(r1, r2), min(c1, c2), max(c1, c2)
    if (r2 - r1 + 1) * (c2 - c1 + 1) > MAX_CELLS:
        raise ValueError(f"range {ref!r} holds more than {MAX_CELLS} cells")
    return [[f"{col_letters(c)}{r}" for c in range(c1, c2 + 1)] for r in range(r1, r2 + 1)]


def _num(v: Any) -> float:
    v = serial(v)
    if v is None or v == "":
        return 0.0
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(str(v))
    except ValueError:
        raise FormulaError(f"#VALUE! ({v!r} is not a number)") from None


def _flat(args: list[Any]) -> list[Any]:
    out: list[Any] = []
    for a in args:
        out.extend(_flat(a) if isinstance(a, list) else [a])
    return out


def _numbers(args: list[Any]) -> list[float]:
    # As spreadsheets do: text and blanks inside ranges are skipped, numbers and dates count.
    return [_num(v) for v in _flat(args) if isinstance(serial(v), (int, float)) and not isinstance(v, bool)]


def _round(x: Any, digits: Any = 0) -> float:
    q = 10 ** int(_num(digits))
    v = _num(x) * q
    return math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1) / q


def _avg(args: list[Any]) -> float:
    nums = _numbers(args)
    if not nums:
        raise FormulaError("#DIV/0! (AVERAGE of no numbers)")
    return sum(nums) / len(nums)


_FUNCS: dict[str, Callable[[list[Any]], Any]] = {
    "SUM": lambda a: sum(_numbers(a)),
    "AVERAGE": _avg,
    "MIN": lambda a: min(_numbers(a), default=0.0),
    "MAX": lambda a: max(_numbers(a), default=0.0),
    "COUNT": lambda a: len(_numbers(a)),
    "COUNTA": lambda a: sum(v not in (None, "") for v in _flat(a)),
    "ROUND": lambda a: _round(*a),
    "ABS": lambda a: abs(_num(a[0])),
    "AND": lambda a: all(bool(serial(v)) for v in _flat(a)),
    "OR": lambda a: any(bool(serial(v)) for v in _flat(a)),
    "NOT": lambda a: not bool(serial(a[0])),
}


class Evaluator:
    """Evaluates the formulas of a workbook over its values (a small, common subset).

    Numbers, text, TRUE/FALSE, cell and range references (other sheets too), ``+ - * / ^ & %``,
    comparisons, and SUM, AVERAGE, MIN, MAX, COUNT, COUNTA, ROUND, ABS, IF, AND, OR, NOT.

    Args:
        values: ``{sheet: {cell: value}}`` of the constant cells.
        formulas: ``{sheet: {cell: "=..."}}``.
    """

    def __init__(self, values: dict[str, dict[str, Any]], formulas: dict[str, dict[str, str]]):
        self.values = values
        self.formulas = formulas
        self.done: dict[tuple[str, str], Any] = {}
        self._busy: set[tuple[str, str]] = set()
        self._steps = 0

    def cell(self, sheet: str, ref: str) -> Any:
        """The value of one cell, its formula evaluated (raises FormulaError)."""
        ref = ref.replace("$", "").upper()
        key = (sheet, ref)
        if key in self.done:
            return self.done[key]
        text = self.formulas.get(sheet, {}).get(ref)
        if text is None:
            return self.values.get(sheet, {}).get(ref)
        if key in self._busy:
            raise FormulaError(f"circular reference at {sheet}!{ref}")
        self._busy.add(key)
        try:
            value = _Parser(self, sheet, text.lstrip("=")).parse()
        finally:
            self._busy.discard(key)
        self.done[key] = value
        return value

    def step(self, n: int = 1) -> None:
        """Count work; FormulaError past MAX_CELLS steps (a workbook built to stall the reader)."""
        self._steps += n
        if self._steps > MAX_CELLS:
            raise FormulaError(f"evaluation passed {MAX_CELLS} steps")


class _Parser:
    def __init__(self, ev: Evaluator, sheet: str, text: str):
        self.ev, self.sheet, self.text = ev, sheet, text
        self.toks = self._lex(text)
        self.i = 0

    @staticmethod
    def _lex(text: str) -> list[tuple[str, str]]:
        toks, pos = [], 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise FormulaError(f"cannot read the formula at {text[pos:pos + 12]!r}")
            kind = m.lastgroup or ""
            toks.append((kind, m.group(kind)))
            pos = m.end()
        return toks

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, op: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (op is not None and tok != ("op", op)):
            raise FormulaError(f"expected {op or 'more'} in ={self.text}")
        self.i += 1
        return tok

    def parse(self) -> Any:
        value = self.compare()
        if self.peek() is not None:
            raise FormulaError(f"unexpected {self.peek()[1]!r} in ={self.text}")  # type: ignore[index]
        return value

    def _binary(self, ops: tuple[str, ...], sub: Callable[[], Any], fn: Callable[[str, Any, Any], Any]) -> Any:
        left = sub()
        while (tok := self.peek()) is not None and tok[0] == "op" and tok[1] in ops:
            self.i += 1
            left = fn(tok[1], left, sub())
        return left

    def compare(self) -> Any:
        return self._binary(("=", "<>", "<", ">", "<=", ">="), self.concat, _compare)

    def concat(self) -> Any:
        return self._binary(("&",), self.additive, lambda _, a, b: shown(a) + shown(b))

    def additive(self) -> Any:
        return self._binary(("+", "-"), self.term, lambda op, a, b: _num(a) + _num(b) if op == "+" else _num(a) - _num(b))

    def term(self) -> Any:
        return self._binary(("*", "/"), self.power, _mul_div)

    def power(self) -> Any:
        return self._binary(("^",), self.unary, lambda _, a, b: _num(a) ** _num(b))

    def unary(self) -> Any:
        tok = self.peek()
        if tok in (("op", "-"), ("op", "+")):
            self.i += 1
            v = self.unary()
            return -_num(v) if tok == ("op", "-") else _num(v)
        v = self.primary()
        if self.peek() == ("op", "%"):
            self.i += 1
            return _num(v) / 100
        return v

    def primary(self) -> Any:
        kind, text = self.take()
        self.ev.step()
        if kind == "num":
            return float(text)
        if kind == "str":
            return text[1:-1].replace('""', '"')
        if kind == "bool":
            return text.upper() == "TRUE"
        if kind == "ref":
            return self.reference(text)
        if kind == "func":
            return self.call(text.upper())
        if (kind, text) == ("op", "("):
            v = self.compare()
            self.take(")")
            return v
        raise FormulaError(f"unexpected {text!r} in ={self.text}")

    def reference(self, text: str) -> Any:
        sheet = self.sheet
        if "!" in text:
            name, _, text = text.rpartition("!")
            sheet = name[1:-1].replace("''", "'") if name.startswith("'") else name
            if sheet not in self.ev.values and sheet not in self.ev.formulas:
                raise FormulaError(f"#REF! (no sheet {sheet!r})")
        try:
            rows = cells_of(text)
        except ValueError as exc:
            raise FormulaError(str(exc)) from None
        if ":" not in text:
            return self.ev.cell(sheet, rows[0][0])
        self.ev.step(sum(len(r) for r in rows))
        return [self.ev.cell(sheet, ref) for row in rows for ref in row]

    def call(self, name: str) -> Any:
        args: list[Any] = []
        if self.peek() != ("op", ")"):
            while True:
                args.append(self.compare())
                if self.peek() == ("op", ","):
                    self.i += 1
                    continue
                break
        self.take(")")
        if name == "IF":
            if not 2 <= len(args) <= 3:
                raise FormulaError("IF takes 2 or 3 arguments")
            return args[1] if bool(serial(args[0])) else (args[2] if len(args) == 3 else False)
        fn = _FUNCS.get(name)
        if fn is None:
            raise FormulaError(f"function {name} is not one cowork evaluates")
        try:
            return fn(args)
        except (TypeError, IndexError):
            raise FormulaError(f"wrong arguments for {name}") from None


def _mul_div(op: str, a: Any, b: Any) -> float:
    if op == "*":
        return _num(a) * _num(b)
    d = _num(b)
    if d == 0:
        raise FormulaError("#DIV/0!")
    return _num(a) / d


def _compare(op: str, a: Any, b: Any) -> bool:
    a, b = serial(a), serial(b)
    if isinstance(a, str) or isinstance(b, str):
        a, b = shown(a).casefold(), shown(b).casefold()
    else:
        a, b = _num(a), _num(b)
    return {"=": a == b, "<>": a != b, "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]


# --------------------------------------------------------------------------- xlsx
@dataclass
class Sheet:
    """One worksheet: values (formulas evaluated: the file's cached result, else cowork's) and formulas."""

    name: str
    values: dict[str, Any] = field(default_factory=dict)
    formulas: dict[str, str] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)
    """Formula cells with no cached value that cowork could not evaluate: cell -> why."""
    rows: int = 0
    cols: int = 0


def read_xlsx(data: bytes, name: str = "") -> list[Sheet]:
    """Every worksheet of a workbook, in order.

    Raises:
        DocumentError: not a workbook, damaged, or too large.
    """
    _expect(data, name, "xlsx")
    try:
        import openpyxl
    except ImportError as exc:  # pragma: no cover - a broken install
        raise DocumentError(f"reading xlsx needs openpyxl ({exc})") from None
    try:
        formulas_wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=False)
        cached_wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        sheets = [_sheet(formulas_wb[n], cached_wb[n]) for n in formulas_wb.sheetnames
                  if getattr(formulas_wb[n], "iter_rows", None) is not None]
    except DocumentError:
        raise
    except Exception as exc:  # noqa: BLE001 - openpyxl raises anything on a damaged file
        raise DocumentError(f"{name or 'the file'} is not a readable xlsx workbook: {type(exc).__name__}: {exc}") from None
    _evaluate(sheets)
    return sheets


def _sheet(fws: Any, cws: Any) -> Sheet:
    out = Sheet(fws.title)
    count = 0
    for frow, crow in zip(fws.iter_rows(), cws.iter_rows()):
        for fcell, ccell in zip(frow, crow):
            raw = getattr(fcell, "value", None)
            if raw is None:
                continue
            count += 1
            if count > MAX_CELLS:
                raise DocumentError(f"sheet {fws.title!r} holds more than {MAX_CELLS} cells")
            ref = f"{col_letters(fcell.column)}{fcell.row}"
            out.rows, out.cols = max(out.rows, fcell.row), max(out.cols, fcell.column)
            if isinstance(raw, str) and raw.startswith("=") and getattr(fcell, "data_type", "") == "f":
                out.formulas[ref] = raw
                cached = getattr(ccell, "value", None)
                if cached is not None:
                    out.values[ref] = cached
            else:
                out.values[ref] = raw
    return out


def _evaluate(sheets: list[Sheet]) -> None:
    pending = {s.name: {r: f for r, f in s.formulas.items() if r not in s.values} for s in sheets}
    if not any(pending.values()):
        return
    ev = Evaluator({s.name: s.values for s in sheets}, pending)
    for s in sheets:
        for ref in pending[s.name]:
            try:
                s.values[ref] = ev.cell(s.name, ref)
            except (FormulaError, OverflowError, RecursionError, ValueError) as exc:
                s.unknown[ref] = str(exc)
    for s in sheets:
        for ref, value in list(s.values.items()):
            if isinstance(value, float) and not math.isfinite(value):
                del s.values[ref]
                s.unknown[ref] = "not a finite number"


# --------------------------------------------------------------------------- docx
def read_docx(data: bytes, name: str = "") -> list[dict[str, Any]]:
    """The blocks of a Word document in order: ``{"heading": str, "level": int}``,
    ``{"paragraph": str}`` and ``{"table": [[str, ...], ...]}``.

    Raises:
        DocumentError: not a docx document, damaged, or too large.
    """
    _expect(data, name, "docx")
    try:
        import docx
        from docx.table import Table
        from docx.text.paragraph import Paragraph
    except ImportError as exc:  # pragma: no cover
        raise DocumentError(f"reading docx needs python-docx ({exc})") from None
    try:
        doc = docx.Document(io.BytesIO(data))
        blocks: list[dict[str, Any]] = []
        for child in doc.element.body.iterchildren():
            tag = child.tag.rsplit("}", 1)[-1]
            if tag == "p":
                blocks.extend(_paragraph(Paragraph(child, doc)))
            elif tag == "tbl":
                rows = [[cell.text for cell in row.cells] for row in Table(child, doc).rows]
                blocks.append({"table": rows})
    except DocumentError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise DocumentError(f"{name or 'the file'} is not a readable docx document: {type(exc).__name__}: {exc}") from None
    return blocks


def _paragraph(p: Any) -> list[dict[str, Any]]:
    text = p.text
    if not text.strip():
        return []
    style = (getattr(p.style, "name", "") or "") if p.style is not None else ""
    m = re.match(r"Heading (\d)", style)
    if m:
        return [{"heading": text, "level": int(m.group(1))}]
    if style == "Title":
        return [{"heading": text, "level": 0}]
    return [{"paragraph": text}]


# --------------------------------------------------------------------------- pdf
def read_pdf(data: bytes, name: str = "") -> list[str]:
    """The text of each page of a PDF.

    Raises:
        DocumentError: not a PDF, damaged, encrypted, or too many pages.
    """
    _expect(data, name, "pdf")
    try:
        import pypdf
    except ImportError as exc:  # pragma: no cover
        raise DocumentError(f"reading pdf needs pypdf ({exc})") from None
    import logging

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # damaged files are reported, not logged
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            raise DocumentError(f"{name or 'the file'} is an encrypted PDF")
        n = len(reader.pages)
        if n > MAX_PDF_PAGES:
            raise DocumentError(f"{name or 'the file'} has {n} pages, more than cowork reads ({MAX_PDF_PAGES})")
        return [page.extract_text() or "" for page in reader.pages]
    except DocumentError:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf raises anything on a damaged file
        raise DocumentError(f"{name or 'the file'} is not a readable PDF: {type(exc).__name__}: {exc}") from None


# --------------------------------------------------------------------------- rendering
def _table(rows: list[list[str]]) -> list[str]:
    def cell(s: str) -> str:
        return " ".join(s.split()).replace("|", "\\|")

    width = max((len(r) for r in rows), default=0)
    out = []
    for i, row in enumerate(rows):
        out.append("| " + " | ".join(cell(c) for c in row + [""] * (width - len(row))) + " |")
        if i == 0:
            out.append("|" + "---|" * width)
    return out


def _render_xlsx(data: bytes, name: str, sheet: str | None) -> str:
    sheets = read_xlsx(data, name)
    names = [s.name for s in sheets]
    if sheet is not None:
        chosen = [s for s in sheets if s.name == sheet] or [s for s in sheets if s.name.casefold() == sheet.casefold()]
        if not chosen:
            raise DocumentError(f"{name} has no sheet {sheet!r}; sheets: {', '.join(names)}")
        sheets = chosen[:1]
    lines = [f"# {name}: xlsx workbook, {len(names)} sheet(s): {', '.join(names)}"]
    for s in sheets:
        lines.append("")
        if not s.values and not s.formulas:
            lines.append(f"## sheet {s.name!r} (empty)")
            continue
        lines.append(f"## sheet {s.name!r} (A1:{col_letters(s.cols)}{s.rows})")
        header = ["row"] + [col_letters(c) for c in range(1, s.cols + 1)]
        body = []
        for r in range(1, s.rows + 1):
            cells = [_cell_text(s, f"{col_letters(c)}{r}") for c in range(1, s.cols + 1)]
            if any(cells):
                body.append([str(r)] + cells)
        lines.extend(_table([header] + body))
        if s.formulas:
            lines.append("formulas (their values are shown above): " +
                         "; ".join(f"{ref} {f}" for ref, f in s.formulas.items()))
    return "\n".join(lines)


def _cell_text(s: Sheet, ref: str) -> str:
    if ref in s.unknown:
        return f"{s.formulas.get(ref, '')} (value unknown: {s.unknown[ref]})"
    return shown(s.values.get(ref))


def _render_docx(data: bytes, name: str) -> str:
    lines = [f"# {name}: docx document"]
    for block in read_docx(data, name):
        lines.append("")
        if "heading" in block:
            lines.append("#" * (int(block["level"]) + 1) + " " + block["heading"])
        elif "table" in block:
            lines.extend(_table(block["table"]))
        else:
            lines.append(block["paragraph"])
    return "\n".join(lines)


def page_numbers(spec: str, total: int) -> list[int]:
    """Pages named by ``"1-3,5"`` (1-based), within ``total``.

    Raises:
        DocumentError: a malformed list or a page outside 1..total.
    """
    out: list[int] = []
    for part in spec.replace(" ", "").split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise DocumentError(f"pages {spec!r}: give page numbers like '2' or '1-3,5'")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if not 1 <= lo <= hi <= total:
            raise DocumentError(f"pages {spec!r}: the document has pages 1-{total}")
        out.extend(range(lo, hi + 1))
    return list(dict.fromkeys(out))


def _render_pdf(data: bytes, name: str, pages: str | None) -> str:
    texts = read_pdf(data, name)
    chosen = page_numbers(pages, len(texts)) if pages else list(range(1, len(texts) + 1))
    lines = [f"# {name}: pdf, {len(texts)} page(s)"]
    for n in chosen:
        lines += ["", f"## page {n}", texts[n - 1].strip()]
    return "\n".join(lines)


def render(data: bytes, name: str, *, sheet: str | None = None, pages: str | None = None) -> str:
    """The text and tables of a document, for people and models: xlsx sheets as tables of
    values with their formulas listed, docx headings, paragraphs and tables in order, PDF
    page texts, text files as they are.

    Raises:
        DocumentError: unreadable, of a kind not read, or a sheet or page it does not have.
    """
    kind = kind_of(data, name)
    if sheet is not None and kind != "xlsx":
        raise DocumentError(f"sheet is for xlsx workbooks; {name} is {kind}")
    if pages is not None and kind != "pdf":
        raise DocumentError(f"pages is for PDF files; {name} is {kind}")
    if kind == "xlsx":
        return _render_xlsx(data, name, sheet)
    if kind == "docx":
        return _render_docx(data, name)
    if kind == "pdf":
        return _render_pdf(data, name, pages)
    return data.decode("utf-8", "replace")


def clip(text: str, max_chars: int) -> str:
    """At most ``max_chars`` characters, saying how many there were."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n[document text truncated: showed {max_chars} of {len(text)} characters]"


# --------------------------------------------------------------------------- child process
def _limit_self(memory_bytes: int) -> None:
    """The reader child's own limits: a memory ceiling and first place for the OOM killer."""
    import resource

    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    except (ValueError, OSError):
        pass
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")
    except OSError:
        pass


def _read_path(path: str) -> bytes:
    import os
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise DocumentError(f"{path!r} is a directory; use list_files")
        if not stat.S_ISREG(st.st_mode):
            raise DocumentError(f"{path!r} is not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise DocumentError(f"{path!r} has {st.st_size} bytes, more than read_document reads ({MAX_FILE_BYTES})")
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)


#: Exit status of the child when the document could not be read (its output is the reason).
EXIT_UNREADABLE = 3


def main(argv: list[str]) -> int:
    """``office_text.py PATH MAX_CHARS MEMORY_BYTES [--sheet S] [--pages P]``: print the document's text."""
    path, max_chars, memory = argv[1], int(argv[2]), int(argv[3])
    opts = dict(zip(argv[4::2], argv[5::2]))
    _limit_self(memory)
    try:
        data = _read_path(path)
        text = render(data, path, sheet=opts.get("--sheet"), pages=opts.get("--pages"))
    except DocumentError as exc:
        sys.stdout.write(str(exc))
        return EXIT_UNREADABLE
    except FileNotFoundError:
        sys.stdout.write(f"File not found: {path!r}")
        return EXIT_UNREADABLE
    except PermissionError:
        sys.stdout.write(f"Permission denied: {path!r}")
        return EXIT_UNREADABLE
    except MemoryError:
        sys.stdout.write(f"{path!r} needs more memory to read than read_document has ({memory >> 20} MiB)")
        return EXIT_UNREADABLE
    except OSError as exc:
        sys.stdout.write(f"Cannot read {path!r}: {exc.strerror}")
        return EXIT_UNREADABLE
    sys.stdout.write(clip(text, max_chars))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
