"""Writes this spec's office file from world 941 (run from the repository
root: python3 specs/thread-stock-recount-to-auditor/make_files.py).

The March stock count is world 941's own (operations/stock-count-2026-03.xlsx): it goes into the
workspace (read-only there) and is the attachment of the count mail. The same bytes every time.
"""

from pathlib import Path

from cowork.synth.office import xlsx_bytes
from cowork.synth.world import build_world

HERE = Path(__file__).resolve().parent
PATH = "operations/stock-count-2026-03.xlsx"


def stock_count() -> bytes:
    kind, sheets = build_world(941, "small").office_files()[PATH]
    assert kind == "xlsx", kind
    return xlsx_bytes(sheets)


if __name__ == "__main__":
    data = stock_count()
    (HERE / "workspace/operations").mkdir(parents=True, exist_ok=True)
    (HERE / "attachments").mkdir(exist_ok=True)
    (HERE / "workspace" / PATH).write_bytes(data)
    (HERE / "attachments/stock-count-2026-03.xlsx").write_bytes(data)
