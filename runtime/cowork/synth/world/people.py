"""People and organisations: offices, the org chart, customers, vendors, auditors, recruiters,
look-alike domains and the people outside the company."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import date, timedelta

from . import names
from .base import Size, phone
from .model import External, Office, Org, Person

#: Cultures people at an office more often come from.
_LOCAL_CULTURES: dict[str, tuple[str, ...]] = {
    "Berlin": ("german", "polish", "turkish"), "London": ("english", "indian", "nigerian"),
    "New York": ("english", "spanish", "chinese"), "San Francisco": ("english", "chinese", "korean"),
    "Singapore": ("chinese", "indian"), "Bangalore": ("indian",), "Sydney": ("english", "chinese"),
    "São Paulo": ("brazilian", "spanish"), "Tokyo": ("japanese", "korean"), "Lagos": ("nigerian",),
}
#: First names found in more than one culture of :data:`names.CULTURES`.
SHARED_FIRST = tuple(sorted({f for fs, _ in names.CULTURES.values() for f in fs
                             if sum(f in other for other, _ in names.CULTURES.values()) > 1}))
#: How many people each department gets, relative to the others.
_DEPT_WEIGHTS = {"Sales": 5, "Customer Success": 4, "Finance": 3, "Engineering": 6, "IT": 2, "People": 2,
                 "Operations": 3, "Legal": 1, "Marketing": 2}


@dataclass
class Directory:
    """Addresses and handles handed out so far (each unique)."""

    emails: set[str]
    handles: set[str]

    def email(self, first: str, last: str, domain: str) -> str:
        """``first.last@domain``, numbered when taken."""
        base = f"{names.slug(first, '')}.{names.slug(last, '')}"
        return self._unique(base, f"@{domain}", self.emails)

    def handle(self, first: str, last: str) -> str:
        """A chat handle ``first.last``, numbered when taken."""
        return self._unique(f"{names.slug(first, '')}.{names.slug(last, '')}", "", self.handles)

    @staticmethod
    def _unique(base: str, tail: str, taken: set[str]) -> str:
        n, value = 1, base + tail
        while value in taken:
            n += 1
            value = f"{base}{n}{tail}"
        taken.add(value)
        return value


def offices(rng: random.Random, size: Size) -> tuple[Office, ...]:
    """The company's offices; the first is headquarters. Always four time zones or more."""
    picked = rng.sample(names.OFFICES, size.offices)
    return tuple(Office(f"office-{names.slug(city)}", city, tz, country) for city, tz, country in picked)


def _split_name(full: str) -> tuple[str, str]:
    first, _, last = full.partition(" ")
    return first, last


def _draw_name(rng: random.Random, office: Office) -> tuple[str, str, str]:
    cultures = _LOCAL_CULTURES.get(office.city, ()) if rng.random() < 0.6 else ()
    culture = rng.choice(cultures or tuple(names.CULTURES))
    firsts, lasts = names.CULTURES[culture]
    return culture, rng.choice(firsts), rng.choice(lasts)


def _titles(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """(department, title) for ``n`` people: the executives, every department head, the rest weighted."""
    slots = [("Executive", t) for t in names.DEPARTMENTS["Executive"]]
    slots += [(d, names.DEPARTMENTS[d][0]) for d in _DEPT_WEIGHTS]
    slots.append(("Operations", "Executive Assistant"))
    depts, weights = list(_DEPT_WEIGHTS), list(_DEPT_WEIGHTS.values())
    while len(slots) < n:
        dept = rng.choices(depts, weights)[0]
        slots.append((dept, rng.choice(names.DEPARTMENTS[dept][1:])))
    return slots[:n]


def people(rng: random.Random, size: Size, offs: tuple[Office, ...], domain: str, today: date,
           directory: Directory) -> tuple[Person, ...]:
    """The employees: executives and department heads first, managers, assistants, time zones,
    working hours and out-of-office periods; with a shared first name and a near-duplicate
    pair in every world."""
    slots = _titles(rng, max(size.people, 12))
    drawn = [_draw_name(rng, rng.choice(offs)) for _ in slots]
    # Two people share a first name across cultures, and two names nearly match.
    shared = rng.choice(SHARED_FIRST)
    i, j = rng.sample(range(2, len(slots)), 2)
    drawn[i] = (drawn[i][0], shared, drawn[i][2])
    drawn[j] = (drawn[j][0], shared, drawn[j][2])
    a, b = rng.choice(names.NEAR_DUPLICATES)
    k, m = rng.sample([x for x in range(2, len(slots)) if x not in (i, j)], 2)
    drawn[k] = ("english", *_split_name(a))
    drawn[m] = ("english", *_split_name(b))
    if size.people >= 30:  # bigger worlds also hold two people of exactly the same name
        p, q = rng.sample([x for x in range(2, len(slots)) if x not in (i, j, k, m)], 2)
        drawn[q] = drawn[p]
    out: list[Person] = []
    heads: dict[str, str] = {}
    for n, ((dept, title), (culture, first, last)) in enumerate(zip(slots, drawn)):
        office = offs[0] if n < 2 else rng.choice(offs)
        start, end = rng.choice(names.WORK_HOURS)
        pid = f"p-{n + 1:03d}"
        if title == names.DEPARTMENTS[dept][0] and dept not in heads:
            heads[dept] = pid
        out.append(Person(
            id=pid, name=f"{first} {last}", email=directory.email(first, last, domain),
            handle=directory.handle(first, last), culture=culture, department=dept, title=title, office=office.id,
            tz=office.tz, work_start=start, work_end=end, manager=None, assistant=None,
            phone=phone(rng, office.country), ooo=_ooo(rng, today)))
    return _wire(rng, out, heads, today)


def _ooo(rng: random.Random, today: date) -> tuple[tuple[date, date], ...]:
    if rng.random() > 0.18:
        return ()
    first = today + timedelta(days=rng.randint(-6, 18))
    return ((first, first + timedelta(days=rng.randint(1, 9))),)


def _wire(rng: random.Random, staff: list[Person], heads: dict[str, str], today: date) -> tuple[Person, ...]:
    """Managers (heads report to the CEO, others to their head or a team manager) and assistants."""
    ceo = heads["Executive"]
    managers_by_dept: dict[str, list[str]] = {}
    for p in staff:
        if "Manager" in p.title and p.id != heads.get(p.department):
            managers_by_dept.setdefault(p.department, []).append(p.id)
    wired: list[Person] = []
    for p in staff:
        if p.id == ceo:
            boss = None
        elif p.id == heads.get(p.department) or p.department == "Executive":
            boss = ceo
        else:
            leads = [x for x in managers_by_dept.get(p.department, []) if x != p.id]
            boss = rng.choice(leads) if leads and rng.random() < 0.5 else heads.get(p.department, ceo)
        wired.append(replace(p, manager=boss))
    assistants = [p.id for p in wired if p.title == "Executive Assistant"]
    bosses = [ceo] + [heads[d] for d in ("Sales", "Finance", "Engineering") if d in heads]
    if not any(p.ooo and p.ooo[0][0] <= today <= p.ooo[0][1] for p in wired):  # someone is away today
        n = rng.randrange(2, len(wired))
        wired[n] = replace(wired[n], ooo=((today - timedelta(days=1), today + timedelta(days=rng.randint(2, 6))),))
    for n, boss in enumerate(bosses[: max(1, len(assistants) * 2)]):
        at = next(k for k, p in enumerate(wired) if p.id == boss)
        wired[at] = replace(wired[at], assistant=assistants[n % len(assistants)])
    return tuple(wired)


def lookalike(domain: str, rng: random.Random) -> str:
    """A domain a hurried reader takes for ``domain``: a swapped, doubled or dropped letter, an
    inserted hyphen, or another top-level domain."""
    label, _, tld = domain.partition(".")
    tricks = []
    for a, b in (("i", "l"), ("l", "i"), ("m", "rn"), ("rn", "m"), ("o", "0"), ("w", "vv")):
        if a in label:
            tricks.append(label.replace(a, b, 1) + "." + tld)
    if len(label) > 4:
        at = rng.randrange(1, len(label) - 1)
        tricks.append(label[:at] + label[at] + label[at:] + "." + tld)
        tricks.append(label[:at] + label[at + 1:] + "." + tld)
        if "-" not in label:
            tricks.append(label[:at] + "-" + label[at:] + "." + tld)
    tricks.append(label + "." + ("co" if tld != "co" else "com"))
    tricks.append(label + "-" + rng.choice(("secure", "billing", "hr", "support")) + "." + tld)
    good = [t for t in tricks if t != domain and not t.startswith("-") and "-." not in t and ".-" not in t]
    return rng.choice(good)


def _company_name(rng: random.Random, heads: list[str], country: str) -> tuple[str, str, str]:
    head = heads.pop()
    tail, industry = rng.choice(names.NAME_TAILS)
    legal = rng.choice(names.LEGAL[country])
    domain = f"{names.slug(head + ' ' + tail)}.{rng.choice(names.TLDS[country])}"
    return f"{head} {tail} {legal}", domain, industry


def orgs(rng: random.Random, size: Size, company: tuple[str, str, str], hq: Office) -> tuple[Org, ...]:
    """The company, its customers, vendors, auditors and recruiters, and look-alike domains of
    the company, of a customer and of a vendor."""
    name, domain, trade = company
    out = [Org("org-self", name, domain, "self", trade, hq.country, f"1 {hq.city} Plaza, {hq.city}",
               phone(rng, hq.country))]
    need = size.customers + size.vendors
    heads = rng.sample(names.NAME_HEADS, min(need, len(names.NAME_HEADS)))
    if need > len(heads):  # large worlds: "Cedar Group", "Atlas Works", ...
        heads += rng.sample([f"{h} {x}" for h in names.NAME_HEADS for x in ("Group", "Works", "Partners")],
                            need - len(heads))
    countries = [c for _, _, c in names.OFFICES]
    for n in range(size.customers):
        country = rng.choice(countries)
        cname, cdomain, industry = _company_name(rng, heads, country)
        out.append(Org(f"org-c{n + 1:02d}", cname, cdomain, "customer", industry, country,
                       f"{rng.randint(1, 299)} {rng.choice(('Harbour', 'Market', 'Mill', 'Station', 'King'))} "
                       f"Street", phone(rng, country)))
    kinds = rng.sample(names.VENDOR_KINDS, min(size.vendors, len(names.VENDOR_KINDS)))
    for n, (what, word) in enumerate(kinds):
        country = rng.choice(countries)
        head = heads.pop()
        vdomain = f"{names.slug(head + ' ' + word)}.{rng.choice(names.TLDS[country])}"
        out.append(Org(f"org-v{n + 1:02d}", f"{head} {word} {rng.choice(names.LEGAL[country])}", vdomain, "vendor",
                       what.lower(), country, f"{rng.randint(1, 99)} Commerce Way", phone(rng, country)))
    for n, firm in enumerate(rng.sample(names.AUDITORS, 1 + (size.people >= 30))):
        out.append(Org(f"org-a{n + 1}", firm, names.slug(firm.replace("&", " ")) + ".com", "auditor", "audit",
                       hq.country, f"{rng.randint(2, 80)} Ledger Lane", phone(rng, hq.country)))
    for n, firm in enumerate(rng.sample(names.RECRUITERS, 1 + (size.people >= 30))):
        out.append(Org(f"org-r{n + 1}", firm, names.slug(firm) + ".com", "recruiter", "recruiting",
                       hq.country, f"{rng.randint(2, 80)} Talent Row", phone(rng, hq.country)))
    imitated = [out[0], rng.choice([o for o in out if o.kind == "customer"]),
                rng.choice([o for o in out if o.kind == "vendor"])]
    taken = {o.domain for o in out}
    for n, real in enumerate(imitated):
        fake = lookalike(real.domain, rng)
        if fake in taken:
            fake = f"{real.domain.partition('.')[0]}-mail{n}.com"
        taken.add(fake)
        out.append(Org(f"org-l{n + 1}", real.name, fake, "lookalike", real.industry, real.country, "", "",
                       imitates=real.id))
    return tuple(out)


def externals(rng: random.Random, all_orgs: tuple[Org, ...], staff: tuple[Person, ...],
              directory: Directory) -> tuple[External, ...]:
    """People at the other organisations: 2-4 contacts per customer, 1-2 per vendor, auditors,
    recruiters, and at each look-alike domain someone posing as a real person."""
    out: list[External] = []
    per_kind = {"customer": (2, 4), "vendor": (1, 2), "auditor": (1, 2), "recruiter": (1, 1)}
    titles = {"customer": ("Head of Procurement", "CTO", "Operations Director", "IT Lead", "Finance Manager",
                           "Buyer"),
              "vendor": ("Account Manager", "Billing Specialist", "Customer Service"),
              "auditor": ("Audit Senior", "Audit Partner"), "recruiter": ("Talent Partner", "Senior Recruiter")}
    for org in all_orgs:
        if org.kind in per_kind:
            for _ in range(rng.randint(*per_kind[org.kind])):
                culture = rng.choice(tuple(names.CULTURES))
                first, last = rng.choice(names.CULTURES[culture][0]), rng.choice(names.CULTURES[culture][1])
                out.append(External(f"x-{len(out) + 1:03d}", f"{first} {last}",
                                    directory.email(first, last, org.domain), org.id, rng.choice(titles[org.kind]),
                                    phone(rng, org.country)))
        elif org.kind == "lookalike":
            real: list[External | Person] = [x for x in out if x.org == org.imitates]
            victim = rng.choice(real or [p for p in staff if p.department == "Executive"])
            first, last = _split_name(victim.name)
            out.append(External(f"x-{len(out) + 1:03d}", victim.name, directory.email(first, last, org.domain),
                                org.id, victim.title, ""))
    return tuple(out)
