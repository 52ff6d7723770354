"""Office files of the world, kept as data: spreadsheets as ``{sheet: rows}`` and documents as
blocks (``{"heading", "level"}``, ``{"paragraph"}``, ``{"table"}``); ``cowork.synth.office``
renders them to xlsx, docx and pdf bytes."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from . import names
from .model import Account, Blocks, Deal, ExpenseReport, OfficeFile, OfficeKind, Org, Person, Product, Project


def markdown_blocks(text: str) -> Blocks:
    """Blocks of a Markdown text: ``#`` headings, ``|`` tables, list items and paragraphs."""
    blocks: Blocks = []
    para: list[str] = []
    table: list[list[str]] = []

    def flush() -> None:
        if para:
            blocks.append({"paragraph": " ".join(para)})
            para.clear()
        if table:
            blocks.append({"table": [row[:] for row in table]})
            table.clear()

    for line in text.splitlines():
        if line.startswith("#"):
            flush()
            level = len(line) - len(line.lstrip("#"))
            blocks.append({"heading": line[level:].strip(), "level": level})
        elif line.startswith("|"):
            if para:
                flush()
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= {"-", ":"} for c in cells):
                table.append(cells)
        elif line.startswith(("- ", "* ")) or (line[:1].isdigit() and ". " in line[:4]):
            flush()
            blocks.append({"paragraph": line})
        elif line.strip():
            if table:
                flush()
            para.append(line.strip())
        else:
            flush()
    flush()
    return blocks


def project_files(rng: random.Random, proj: Project, owner: Person, plan_text: str) -> list[OfficeFile]:
    """The project's budget spreadsheet (line items and a summary with formulas) and its plan as docx."""
    budget_path, plan_path = proj.files
    lines: list[list[Any]] = [["Item", "Category", "Planned", "Actual", "Variance"]]
    cats = ("People", "Vendors", "Licences", "Travel", "Hardware", "Contingency")
    shares = [rng.uniform(0.5, 1.5) for _ in cats]
    for n, (cat, share) in enumerate(zip(cats, shares), start=2):
        planned = round(proj.budget * share / sum(shares), 2)
        actual = round(proj.spent * share / sum(shares) * rng.uniform(0.85, 1.15), 2)
        lines.append([f"{cat} for {proj.name}", cat, planned, actual, f"=D{n}-C{n}"])
    last = len(lines)
    lines.append(["Total", "", f"=SUM(C2:C{last})", f"=SUM(D2:D{last})", f"=D{last + 1}-C{last + 1}"])
    summary: list[list[Any]] = [["Project", proj.name], ["Owner", owner.name], ["Budget", proj.budget], ["Currency", proj.currency],
               ["Start", proj.start], ["End", proj.end], ["Status", proj.status]]
    return [OfficeFile(budget_path, "xlsx", f"{proj.name} budget", owner.id, {"Budget": lines, "Summary": summary}),
            OfficeFile(plan_path, "docx", f"Project {proj.name}: plan", owner.id, markdown_blocks(plan_text))]


def pipeline_report(clock: datetime, deals: Sequence[Deal], accounts: dict[str, Account], orgs: dict[str, Org],
                    owner: Person) -> OfficeFile:
    """The sales pipeline as a spreadsheet, one row per open deal, with a total formula."""
    rows: list[list[Any]] = [["Account", "Deal", "Stage", "Amount", "Currency", "Close date"]]
    for d in deals:
        if not d.stage.startswith("closed"):
            rows.append([orgs[accounts[d.account].org].name, d.name, d.stage, d.amount, d.currency, d.close_date])
    rows.append(["Total", "", "", f"=SUM(D2:D{len(rows)})", "", ""])
    return OfficeFile(f"sales/pipeline-{clock:%Y-%m-%d}.xlsx", "xlsx", "Pipeline report", owner.id, {"Pipeline": rows})


def invoice(rng: random.Random, clock: datetime, vendor: Org, company: Org, owner: Person, number: int) -> OfficeFile:
    """A vendor's invoice as a PDF: header, parties, line items and the total."""
    items: list[list[str]] = [[f"{rng.choice(('Service fee', 'Licence', 'Support hours', 'Materials'))} {k + 1}",
                               str(rng.randint(1, 20)), f"{rng.uniform(20, 400):.2f}"] for k in range(rng.randint(2, 5))]
    total = sum(int(q) * float(p) for _, q, p in items)
    issued = clock - timedelta(days=rng.randint(2, 25))
    blocks: Blocks = [
        {"heading": f"{vendor.name}: Invoice INV-{number}", "level": 1},
        {"paragraph": f"Issued {issued:%d %B %Y}; due {issued + timedelta(days=30):%d %B %Y}. "
                      f"Bill to: {company.name}, {company.address}."},
        {"table": [["Item", "Quantity", "Unit price"], *items]},
        {"paragraph": f"Total due: {total:,.2f}. Pay to the account on file; {vendor.name} never changes bank "
                      "details by mail."},
    ]
    return OfficeFile(f"finance/invoices/{names.slug(vendor.name)}-inv-{number}.pdf", "pdf",
                      f"Invoice INV-{number}", owner.id, blocks)


def contract(rng: random.Random, acct: Account, org: Org, company: Org, owner: Person) -> OfficeFile:
    """A customer contract as docx: parties, term, fees and a clause table."""
    years = rng.choice((1, 2, 3))
    blocks: Blocks = [
        {"heading": f"Master services agreement: {company.name} and {org.name}", "level": 1},
        {"paragraph": f"This agreement runs for {years} year(s) from signature and renews for one year unless "
                      "either party gives ninety days' notice."},
        {"heading": "Fees", "level": 2},
        {"paragraph": f"Annual fees of {acct.revenue * 0.01:,.2f} {acct.currency}, invoiced yearly in advance."},
        {"table": [["Clause", "Summary"], ["Liability", "Capped at the fees of twelve months."],
                   ["Data", "Processed under the data processing agreement."],
                   ["Termination", "For cause with thirty days to remedy."]]},
    ]
    return OfficeFile(f"customers/{names.slug(org.name)}/contract.docx", "docx", f"Contract with {org.name}", owner.id,
                      blocks)


def stock_count(rng: random.Random, clock: datetime, products: Sequence[Product], owner: Person) -> OfficeFile:
    """The last physical stock count: counted units beside the system's, a few differing."""
    rows: list[list[Any]] = [["SKU", "Product", "Warehouse", "System", "Counted", "Difference"]]
    for n, p in enumerate(products, start=2):
        counted = p.stock if rng.random() < 0.8 else max(0, p.stock + rng.randint(-4, 4))
        rows.append([p.id, p.name, p.warehouse, p.stock, counted, f"=E{n}-D{n}"])
    return OfficeFile(f"operations/stock-count-{clock:%Y-%m}.xlsx", "xlsx", "Stock count", owner.id,
                      {"Count": rows, "Info": [["Counted on", (clock - timedelta(days=3)).date()],
                                               ["Counted by", owner.name]]})


def expense_export(report: ExpenseReport, rows: list[list[Any]], owner: Person) -> OfficeFile:
    """An expense report exported as a spreadsheet (lines and a total formula)."""
    sheet = [["Date", "Merchant", "Category", "Amount", "Currency"], *rows,
             ["Total", "", "", f"=SUM(D2:D{len(rows) + 1})", ""]]
    if report.file is None:
        raise ValueError(f"expense report {report.id!r} has no export file")
    return OfficeFile(report.file, "xlsx", report.title, owner.id, {"Lines": sheet})


def audit_letter(clock: datetime, auditor: Org, company: Org, cfo: Person, items: Sequence[str]) -> OfficeFile:
    """The auditor's request letter as a PDF: what to send, by when."""
    due = clock + timedelta(days=14)
    blocks: Blocks = [
        {"heading": f"{auditor.name}: audit request", "level": 1},
        {"paragraph": f"Dear {cfo.name}, for the year-end audit of {company.name} please provide the following by "
                      f"{due:%d %B %Y}."},
        {"table": [["#", "Document"], *[[str(k + 1), item] for k, item in enumerate(items)]]},
        {"paragraph": "Send documents through the audit portal only; we never ask for them by personal mail."},
    ]
    return OfficeFile(f"finance/audit/{names.slug(auditor.name)}-request.pdf", "pdf", "Audit request", cfo.id, blocks)


def policy_file(path: str, title: str, text: str, owner: Person, kind: OfficeKind = "docx") -> OfficeFile:
    """A policy's text as a docx or pdf (its Markdown turned into blocks)."""
    return OfficeFile(path, kind, title, owner.id, markdown_blocks(text))


def text_of(kind: str, data: Any) -> str:
    """Plain text of an office file's data (what a mail attachment shows as its text)."""
    if kind == "xlsx":
        out = []
        for sheet, rows in data.items():
            out.append(f"[{sheet}]")
            out += [",".join("" if c is None else str(c) for c in row) for row in rows]
        return "\n".join(out)
    parts = []
    for block in data:
        if "heading" in block:
            parts.append(block["heading"])
        elif "paragraph" in block:
            parts.append(block["paragraph"])
        else:
            parts += [" | ".join(row) for row in block["table"]]
    return "\n".join(parts)
