"""The :class:`World`: a seeded organisation's entities, and what tasks ask of it (service
seeds from a person's viewpoint, office files, a summary, JSON)."""

from __future__ import annotations

import difflib
import json
from collections import Counter
from dataclasses import asdict, fields, is_dataclass
from datetime import date, datetime
from typing import Any

from ...errors import CoworkError
from .base import iso
from .checks import problems
from .model import OfficeKind, Person, WorldData
from .seeds import SEEDERS

#: The selection keys :meth:`World.seed_for` understands.
SELECTION = ("person",)


class World(WorldData):
    """One consistent organisation; build it with :func:`cowork.synth.world.build_world`."""

    def person(self, ref: str | None = None) -> Person:
        """The person with this id or address (default: the user).

        Raises:
            CoworkError: Nobody in the world has that id or address.
        """
        if ref is None:
            return self.get(self.user)
        for p in self.people:
            if ref in (p.id, p.email):
                return p
        raise CoworkError(f"no person {ref!r} in world {self.seed}; give a person id (p-001) or an employee's address")

    def seed_for(self, service: str, **selection: Any) -> dict[str, Any]:
        """The seed of ``service`` (a mapping its ``*Seed`` model validates), as seen by
        ``person=`` (id or address; default the user): their mailbox, their calendar, they
        are the service's user.

        Raises:
            CoworkError: An unknown service or selection key, or an unknown person.
        """
        if service not in SEEDERS:
            close = difflib.get_close_matches(service, list(SEEDERS), n=2)
            raise CoworkError(f"no service {service!r}" + (f"; did you mean {' or '.join(map(repr, close))}?"
                                                           if close else f"; services: {', '.join(SEEDERS)}"))
        unknown = set(selection) - set(SELECTION)
        if unknown:
            raise CoworkError(f"seed_for({service!r}): unknown selection {', '.join(sorted(unknown))}; "
                              f"known: {', '.join(SELECTION)}")
        return SEEDERS[service](self, self.person(selection.get("person")))

    def services_seed(self, services: list[str] | tuple[str, ...] | None = None, **selection: Any) -> dict[str, Any]:
        """The ``services:`` mapping of a spec: :meth:`seed_for` of each of ``services``
        (default: all of them), in that order."""
        return {name: self.seed_for(name, **selection) for name in (services or tuple(SEEDERS))}

    def office_files(self) -> dict[str, tuple[OfficeKind, Any]]:
        """Every office file: path -> (kind, data); ``cowork.synth.office`` renders the data."""
        return {f.path: (f.kind, f.data) for f in self.files}

    def problems(self) -> list[str]:
        """Broken cross-references (empty: every reference holds)."""
        return problems(self)

    def counts(self) -> dict[str, int]:
        """How many of each entity the world holds."""
        out = {f.name: len(getattr(self, f.name)) for f in fields(self)
               if isinstance(getattr(self, f.name), tuple) and not f.name.startswith("_")}
        out["messages"] = sum(len(t.messages) for t in self.threads)
        out["meeting_occurrences"] = sum(m.weeks for m in self.meetings)
        return out

    def summary(self) -> dict[str, Any]:
        """What the world is, in numbers: counts per entity, time zones, domains, cultures, the
        user and the clock."""
        user = self.person()
        kinds = Counter(o.kind for o in self.orgs)
        return {"seed": self.seed, "size": self.size, "clock": iso(self.clock),
                "company": self.get(self.company).name, "user": f"{user.name} <{user.email}>, {user.title}",
                "counts": self.counts(), "org_kinds": dict(sorted(kinds.items())),
                "time_zones": sorted({p.tz for p in self.people}),
                "domains": sorted(o.domain for o in self.orgs),
                "cultures": sorted({p.culture for p in self.people}),
                "longest_document": max(len(d.text) for d in self.documents)}

    def to_dict(self) -> dict[str, Any]:
        """Every entity as plain data (dates and times as ISO text)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self) if not f.name.startswith("_")}

    def to_json(self, indent: int | None = None) -> str:
        """The world as JSON, keys sorted: the same seed gives the same bytes."""
        return json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False, indent=indent)


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in asdict(value).items()}
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value
