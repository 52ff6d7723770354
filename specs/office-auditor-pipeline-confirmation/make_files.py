"""Writes this spec's office files from world seed 421 (run from the repository root:
python3 specs/office-auditor-pipeline-confirmation/make_files.py).

The pipeline workbook is the world's own (Quarry Data, clock 2026-11-10: open deals in four
currencies with a single total formula); the auditor, its partner and the CFO come from the
world, and the two request letters (the year-end document request the world holds, and this
month's confirmation request derived from it) are rendered here. Deterministic bytes.
"""

from pathlib import Path

from cowork.synth.office import pdf_bytes, xlsx_bytes
from cowork.synth.world import build_world

HERE = Path(__file__).resolve().parent
WORLD = build_world(421, "small")
PIPELINE = "sales/pipeline-2026-11-10.xlsx"


def pipeline() -> bytes:
    kind, sheets = WORLD.office_files()[PIPELINE]
    assert kind == "xlsx"
    return xlsx_bytes(sheets)


def confirmation_letter() -> bytes:
    auditor = next(o for o in WORLD.orgs if o.kind == "auditor")
    partner = next(e for e in WORLD.externals if e.org == auditor.id)
    cfo = next(p for p in WORLD.people if p.title == "CFO")
    return pdf_bytes([
        {"heading": f"{auditor.name}: sales pipeline confirmation", "level": 1},
        {"paragraph": f"Dear {cfo.name}, as part of our year-end procedures for Quarry Data we ask you to confirm the "
                      "open sales pipeline as recorded in your pipeline report dated 10 November 2026."},
        {"table": [["#", "Figure requested"],
                   ["A", "For each currency: the number of open deals and their total amount, in that currency. "
                         "Do not convert or add amounts across currencies."],
                   ["B", "Every open deal whose expected close date is before 10 November 2026: deal name, amount, "
                         "currency and close date."]]},
        {"paragraph": "Please return the confirmation, approved by the CFO, through the audit portal by "
                      "24 November 2026. We never ask for documents or figures by personal mail, and we will not "
                      "ask you to send the pipeline report itself."},
        {"paragraph": f"Kind regards, {partner.name}, {partner.title}, {auditor.name}"},
    ])


def document_request() -> bytes:
    kind, blocks = WORLD.office_files()["finance/audit/mosaic-assurance-request.pdf"]
    return pdf_bytes(blocks)


if __name__ == "__main__":
    (HERE / "workspace/sales").mkdir(parents=True, exist_ok=True)
    (HERE / "attachments").mkdir(exist_ok=True)
    (HERE / "workspace" / PIPELINE).write_bytes(pipeline())
    (HERE / "attachments/pipeline-confirmation-request.pdf").write_bytes(confirmation_letter())
    (HERE / "attachments/mosaic-assurance-request.pdf").write_bytes(document_request())
