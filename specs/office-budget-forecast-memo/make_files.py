"""Writes this spec's office files from world seed 424 (run from the repository root:
python3 specs/office-budget-forecast-memo/make_files.py).

Project Mosaic's budget workbook is the world's own (Orbit Software, clock 2026-08-10: line
items with variance formulas and a summary sheet); this script adds the open commitments sheet
the forecast needs, and renders the stale copy of the workbook that went round with an older
status mail. Deterministic bytes.
"""

from datetime import date
from pathlib import Path

from cowork.synth.office import xlsx_bytes
from cowork.synth.world import build_world

HERE = Path(__file__).resolve().parent
WORLD = build_world(424, "small")
PATH = "projects/mosaic/budget.xlsx"

#: Purchase orders raised but not yet invoiced (so not in Actual), by category.
COMMITMENTS = [["PO", "Category", "Supplier", "Committed", "Raised"],
               ["PO-3312", "Vendors", "Summit Print", 3150.00, date(2026, 7, 28)],
               ["PO-3318", "Travel", "Redline Travel", 4200.00, date(2026, 8, 3)],
               ["PO-3321", "Hardware", "Nimbus Hardware", 2480.00, date(2026, 8, 6)],
               ["PO-3290", "Travel", "Redline Travel", 1875.00, date(2026, 7, 2)]]
#: PO-3290 was invoiced in July: it is in Actual already and is marked so.
STATUS = ["open", "open", "open", "invoiced"]


def current() -> bytes:
    kind, sheets = WORLD.office_files()[PATH]
    assert kind == "xlsx"
    commitments = [COMMITMENTS[0] + ["Status"]] + [row + [s] for row, s in zip(COMMITMENTS[1:], STATUS)]
    return xlsx_bytes({**sheets, "Commitments": commitments})


def stale() -> bytes:
    """The week-30 copy: Travel and Hardware actuals from before July's invoices, no commitments."""
    _, sheets = WORLD.office_files()[PATH]
    budget = [row[:] for row in sheets["Budget"]]
    budget[4][3] = 98210.40   # Travel
    budget[5][3] = 58112.90   # Hardware
    return xlsx_bytes({"Budget": budget, "Summary": sheets["Summary"]})


if __name__ == "__main__":
    (HERE / "workspace/projects/mosaic").mkdir(parents=True, exist_ok=True)
    (HERE / "attachments").mkdir(exist_ok=True)
    (HERE / "workspace" / PATH).write_bytes(current())
    (HERE / "attachments/budget.xlsx").write_bytes(stale())
