"""Contacts: people and organisations, with look-up and search (same-name people included)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, model_validator

from ..toolhost.errors import ToolError
from .base import (
    READ,
    Email,
    Limit,
    Offset,
    SeedModel,
    ServiceContext,
    Store,
    check_ref,
    check_unique,
    hints,
    matches,
    page,
    tool_adder,
)

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "contacts"
PersonId = Annotated[str, Field(description="Person id, as returned by contacts_search.")]


class Org(SeedModel):
    """An organisation."""

    id: str | None = None
    """Stable id; default ``org-<n>`` by position."""
    name: str = Field(min_length=1)
    """Name."""
    domain: str = ""
    """Mail domain, e.g. ``acme.com``."""
    industry: str = ""
    """Industry."""
    address: str = ""
    """Postal address."""
    phone: str = ""
    """Main phone number."""


class Person(SeedModel):
    """A person."""

    id: str | None = None
    """Stable id; default ``person-<n>`` by position."""
    name: str = Field(min_length=1)
    """Full name; several people may share one."""
    email: Email | None = None
    """Work address."""
    phone: str = ""
    """Phone number."""
    title: str = ""
    """Job title."""
    org_id: str | None = None
    """Organisation they work for."""
    department: str = ""
    """Department or team."""
    location: str = ""
    """City or office."""
    notes: str = ""
    """Free notes."""


class ContactsSeed(SeedModel):
    """Initial state of the contacts service."""

    orgs: list[Org] = []
    """Organisations."""
    people: list[Person] = []
    """People."""

    @model_validator(mode="after")
    def _refs(self) -> "ContactsSeed":
        orgs = set(check_unique(self.orgs, "org", "orgs"))
        check_unique(self.people, "person", "people")
        emails: set[str] = set()
        for n, p in enumerate(self.people):
            check_ref(p.org_id, orgs, f"people[{n}].org_id", "organisation")
            if p.email in emails:
                raise ValueError(f"people[{n}].email: {p.email!r} belongs to another person too")
            if p.email:
                emails.add(p.email)
        return self


SEED = ContactsSeed


def seed(store: Store, data: ContactsSeed) -> None:
    """Write the seed's records."""
    for rid, o in zip(check_unique(data.orgs, "org", "orgs"), data.orgs):
        store.insert("orgs", {**o.model_dump(), "id": rid})
    for rid, p in zip(check_unique(data.people, "person", "people"), data.people):
        store.insert("people", {**p.model_dump(), "id": rid})


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed contacts tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    def with_org(p: dict[str, Any]) -> dict[str, Any]:
        org = store.get("orgs", p["org_id"]) if p["org_id"] else None
        return {**p, "org": org["name"] if org else None}

    def check_org(org_id: str | None) -> None:
        if org_id is not None:
            store.require("orgs", org_id, "organisation")

    def check_email(email: str | None, person_id: str | None = None) -> None:
        for p in store.all("people"):
            if email is not None and p["email"] == email and p["id"] != person_id:
                raise ToolError(f"{email!r} already belongs to {p['name']} ({p['id']})")

    @tool("contacts_search", READ)
    def contacts_search(
        query: Annotated[str, Field(description="Words to find in name, email, title, department, location or organisation.")] = "",
        org_id: Annotated[str | None, Field(description="Only people of this organisation.")] = None,
        offset: Offset = 0, limit: Limit = 20,
    ) -> dict:
        """Search people; people with the same name are all returned, with what tells them apart."""
        with store.tx():
            check_org(org_id)
            people = [with_org(p) for p in store.all("people")]
        hits = [p for p in people if (org_id is None or p["org_id"] == org_id)
                and matches(query, p["name"], p["email"], p["title"], p["department"], p["location"], p["org"])]
        hits.sort(key=lambda p: (p["name"].lower(), p["id"]))
        return page(hits, offset, limit, "people")

    @tool("contacts_get_person", READ)
    def contacts_get_person(person_id: PersonId) -> dict:
        """Read one person with their organisation's name."""
        with store.tx():
            return with_org(store.require("people", person_id, "person"))

    @tool("contacts_lookup_email", READ)
    def contacts_lookup_email(email: Annotated[Email, Field(description="Exact address to look up.")]) -> dict:
        """Find the person who owns an address."""
        with store.tx():
            for p in store.all("people"):
                if p["email"] == email:
                    return with_org(p)
        raise ToolError(f"No person has the address {email!r}")

    @tool("contacts_list_orgs", READ)
    def contacts_list_orgs(query: Annotated[str, Field(description="Words to find in name, domain or industry.")] = "",
                           offset: Offset = 0, limit: Limit = 20) -> dict:
        """List organisations by name."""
        with store.tx():
            orgs = [o for o in store.all("orgs") if matches(query, o["name"], o["domain"], o["industry"])]
        orgs.sort(key=lambda o: (o["name"].lower(), o["id"]))
        return page(orgs, offset, limit, "orgs")

    @tool("contacts_get_org", READ)
    def contacts_get_org(org_id: Annotated[str, Field(description="Organisation id.")]) -> dict:
        """Read one organisation and the people who work there."""
        with store.tx():
            org = store.require("orgs", org_id, "organisation")
            people = [{"id": p["id"], "name": p["name"], "title": p["title"], "email": p["email"]}
                      for p in store.all("people") if p["org_id"] == org_id]
        return {**org, "people": people}

    @tool("contacts_create_person", hints())
    def contacts_create_person(name: Annotated[str, Field(min_length=1)], email: Email | None = None,
                               phone: str = "", title: str = "", org_id: str | None = None,
                               department: str = "", location: str = "", notes: str = "") -> dict:
        """Add a person."""
        with store.tx():
            check_org(org_id)
            check_email(email)
            rid = store.new_id("people", "person")
            rec = {"id": rid, "name": name, "email": email, "phone": phone, "title": title, "org_id": org_id,
                   "department": department, "location": location, "notes": notes}
            store.insert("people", rec)
            store.audit("create_person", [rid], [k for k in rec if k != "id"])
            return with_org(rec)

    @tool("contacts_update_person", hints(destructive=True, idempotent=True))
    def contacts_update_person(person_id: PersonId, name: str | None = None, email: Email | None = None,
                               phone: str | None = None, title: str | None = None, org_id: str | None = None,
                               department: str | None = None, location: str | None = None,
                               notes: str | None = None) -> dict:
        """Change a person's details; only the given fields change."""
        with store.tx():
            store.require("people", person_id, "person")
            check_org(org_id)
            check_email(email, person_id)
            changes = {k: v for k, v in {"name": name, "email": email, "phone": phone, "title": title,
                                         "org_id": org_id, "department": department, "location": location,
                                         "notes": notes}.items() if v is not None}
            rec, changed = store.update("people", person_id, changes)
            if changed:
                store.audit("update_person", [person_id], changed)
            return {**with_org(rec), "changed": changed}
