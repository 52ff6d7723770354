"""Writes this spec's office files from world seed 416 (run from the repository root:
python3 specs/office-expense-policy-pdf-vs-draft/make_files.py).

Both documents are the world's own (Northpeak Energy): the travel and expense policy in force
(v3.0, about 21,000 characters, as pdf) and the v4.0 draft circulated for comments (docx), whose
per-category limits are higher. Deterministic bytes.
"""

from pathlib import Path

from cowork.synth.office import docx_bytes, pdf_bytes
from cowork.synth.world import build_world

HERE = Path(__file__).resolve().parent
WORLD = build_world(416, "small")

if __name__ == "__main__":
    files = WORLD.office_files()
    (HERE / "attachments").mkdir(exist_ok=True)
    kind, blocks = files["policies/expense-policy.pdf"]
    (HERE / "attachments/expense-policy.pdf").write_bytes(pdf_bytes(blocks))
    kind, blocks = files["policies/expense-policy-draft.docx"]
    (HERE / "attachments/expense-policy-draft.docx").write_bytes(docx_bytes(blocks))
