"""Writes this spec's office files from world seed 402 (run from the repository root:
python3 specs/office-contract-renewal-terms/make_files.py).

The parties, fee and people come from the seeded world (Lumen Analytics and its customer
Atlas Insurance Ltd, clock 2026-08-26); the clauses are written out here in full: the executed
agreement and the unsigned draft that preceded it, whose terms differ. Deterministic bytes.
"""

from pathlib import Path

from cowork.synth.office import docx_bytes
from cowork.synth.world import build_world

HERE = Path(__file__).resolve().parent
WORLD = build_world(402, "small")
SELF = next(o for o in WORLD.orgs if o.kind == "self")
ACCOUNT = next(a for a in WORLD.accounts if a.id == "acct-001")
CUSTOMER = next(o for o in WORLD.orgs if o.id == ACCOUNT.org)
FEE = ACCOUNT.revenue * 0.01  # the world's contract fee: 315,870.00 USD


def agreement(*, draft: bool) -> bytes:
    years, notice, uplift = (2, "sixty (60)", "5%") if draft else (3, "ninety (90)", "4%")
    end = "30 November 2025" if draft else "30 November 2026"
    title = f"Master services agreement: {SELF.name} and {CUSTOMER.name}"
    blocks = [{"heading": ("DRAFT v2 - for discussion, not for signature. " if draft else "") + title, "level": 1}]
    if not draft:
        blocks.append({"paragraph": "Executed copy. Signed on 1 December 2023 by Ying Chen (Chief Executive Officer, "
                                    f"{SELF.name}) and Chloé Rousseau (Finance Manager, {CUSTOMER.name})."})
    blocks += [
        {"heading": "1. Definitions", "level": 2},
        {"paragraph": "Effective Date means 1 December 2023. Services means the Lumen analytics platform, support "
                      "and the professional services described in each order form."},
        {"heading": "2. Services", "level": 2},
        {"paragraph": f"{SELF.name} provides the Services to {CUSTOMER.name} and its affiliates under the service "
                      "levels in Schedule 2. Order forms signed under this agreement form part of it."},
        {"heading": "3. Term and renewal", "level": 2},
        {"paragraph": f"3.1 This agreement has an initial term of {years} years from the Effective Date, ending "
                      f"{end}."},
        {"paragraph": "3.2 After the initial term it renews automatically for successive renewal terms of one year "
                      f"each, unless either party gives written notice of non-renewal at least {notice} days before "
                      "the end of the then-current term."},
        {"heading": "4. Fees", "level": 2},
        {"paragraph": f"4.1 Annual fees of {FEE:,.2f} {ACCOUNT.currency}, invoiced yearly in advance."},
        {"paragraph": f"4.2 The annual fee increases by {uplift} at the start of each renewal term."},
        {"table": [["Clause", "Summary"], ["Liability", "Capped at the fees of twelve months."],
                   ["Data", "Processed under the data processing agreement."],
                   ["Termination", "For cause with thirty days to remedy."]]},
        {"heading": "5. Signatures", "level": 2},
        {"paragraph": "[unsigned]" if draft else "Signed for both parties on 1 December 2023."},
    ]
    return docx_bytes(blocks)


if __name__ == "__main__":
    (HERE / "attachments").mkdir(exist_ok=True)
    (HERE / "attachments/atlas-msa-executed.docx").write_bytes(agreement(draft=False))
    (HERE / "attachments/atlas-msa-draft-v2.docx").write_bytes(agreement(draft=True))
