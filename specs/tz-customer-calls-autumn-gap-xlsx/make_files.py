"""Writes this spec's workbook from world 544 (run from the repository root:
python3 specs/tz-customer-calls-autumn-gap-xlsx/make_files.py).

The calls are with contacts of the accounts Xin Wu owns in world 544; the times are chosen to
straddle the week of 26 October 2026, when London and Berlin are back on winter time but the US
is not yet (1 November). cowork.synth.office is deterministic, so rerunning changes nothing.
"""

from datetime import date
from pathlib import Path

from cowork.synth.office import xlsx_bytes
from cowork.synth.world import build_world

HERE = Path(__file__).resolve().parent
SEED = 544

#: (account name, contact name, local date, local start, IANA zone, minutes)
CALLS = [
    ("Blue Harbor Pharma LLC", "Anna Bennett", date(2026, 10, 26), "09:00", "America/New_York", 60),
    ("Zephyr Steel Inc", "Rohan Menon", date(2026, 10, 27), "10:00", "America/Los_Angeles", 45),
    ("Northgate Pharma Pty Ltd", "Zofia Krawczyk", date(2026, 10, 28), "08:00", "Australia/Sydney", 30),
    ("Ironbridge Steel KK", "Jae Lee", date(2026, 10, 29), "19:00", "Asia/Tokyo", 60),
    ("Zephyr Steel Inc", "Carmen Ortiz", date(2026, 10, 30), "12:00", "America/New_York", 30),
    ("Blue Harbor Pharma LLC", "Yuki Sato", date(2026, 11, 2), "12:30", "America/New_York", 30),
    ("Polaris Health Ltd", "Ingrid Lund", date(2026, 10, 30), "08:30", "Europe/London", 30),
]


def workbook() -> bytes:
    world = build_world(SEED, "small")
    titles = {world.get(c).name: world.get(c).title for a in world.accounts for c in a.contacts}
    orgs = {world.get(a.org).name for a in world.accounts}
    rows = [["Customer", "Contact", "Local date", "Local start", "Time zone", "Length (min)",
             "London start (HH:MM)", "In Xin's hours? (yes/no)"]]
    for account, contact, day, start, tz, minutes in CALLS:
        assert account in orgs and contact in titles, (account, contact)  # the world still holds them
        rows.append([account, f"{contact} ({titles[contact]})", day, start, tz, minutes, "", ""])
    notes = [["Prepared by", "Diego Vargas, VP Sales (New York)"],
             ["Note", "Times are the customer's local time, as agreed with each customer."],
             ["Note", "Xin's working hours: 10:00-18:00 London time."]]
    return xlsx_bytes({"Calls": rows, "Notes": notes})


if __name__ == "__main__":
    (HERE / "attachments").mkdir(exist_ok=True)
    (HERE / "attachments/customer-calls-wk44.xlsx").write_bytes(workbook())
