"""Writes this spec's office files from world seed 449 (run from the repository root:
python3 specs/office-stock-count-reorder/make_files.py).

The stock count workbook is the world's own (Northpeak Energy, counted 2026-08-08 by the Head
of Operations: system and counted units with difference formulas), with one more line found
short (Docking Station 2, water-damaged stock written off on the floor). Deterministic bytes.
"""

from pathlib import Path

from cowork.synth.office import xlsx_bytes
from cowork.synth.world import build_world

HERE = Path(__file__).resolve().parent
WORLD = build_world(449, "small")
PATH = "operations/stock-count-2026-08.xlsx"


def stock_count() -> bytes:
    kind, sheets = WORLD.office_files()[PATH]
    assert kind == "xlsx"
    count = [row[:] for row in sheets["Count"]]
    for row in count[1:]:
        if row[0] == "DOC-106":
            row[4] = 14
    info = [row[:] for row in sheets["Info"]]
    info.append(["Note", "DOC-106: 26 units water-damaged, removed from the shelf."])
    info.append(["Scope", "All three warehouses; system figures as of the count."])
    return xlsx_bytes({"Count": count, "Info": info})


if __name__ == "__main__":
    (HERE / "workspace/operations").mkdir(parents=True, exist_ok=True)
    (HERE / "workspace" / PATH).write_bytes(stock_count())
