"""People named by address or by name (calendar attendees, ticket requesters), and the lookup
of a name in the contacts service.

Real requests name people ("invite Dana Smith"), not only addresses. A name is looked up in
contacts: exactly one person of that name gives their address; none keeps the name as it is,
with no address (nobody is mailed); several is refused, so that a guess never reaches the
wrong Dana. An address is taken as before, and checked as strictly as every address is.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from ..toolhost.errors import ToolError
from .addresses import check_address
from .base import ServiceContext, Store

#: Longest name taken (characters); a name is a label, not a document.
NAME_LIMIT = 200


def check_person(value: str) -> str:
    """An address (lower-cased) or a name (trimmed, inner white space made single spaces).

    Raises:
        ValueError: an empty name, a name over NAME_LIMIT characters, or text with an ``@``
            that is not a plain address (a display name such as ``Dana <dana@acme.com>``).
    """
    if "@" in value:  # an address is refused rather than repaired (spaces too), as everywhere
        return check_address(value)
    text = " ".join(value.split())
    if not text:
        raise ValueError("a person is an email address or a name; got an empty string")
    if len(text) > NAME_LIMIT:
        raise ValueError(f"a name has at most {NAME_LIMIT} characters; got {len(text)}")
    return text


#: An email address or a person's name.
Person = Annotated[str, AfterValidator(check_person)]
#: A list of addresses or names; a single string is taken as a list of one.
PersonList = Annotated[list[Person], BeforeValidator(lambda v: [v] if isinstance(v, str) else v,
                                                     json_schema_input_type=str | list[str])]


def is_address(value: str) -> bool:
    """Whether a checked Person is an address (else it is a name)."""
    return "@" in value


def name_key(name: str) -> str:
    """How names compare: case and white space aside."""
    return " ".join(name.split()).casefold()


def resolve(ctx: ServiceContext, person: str) -> tuple[str | None, str]:
    """``(address, name)`` of a checked Person.

    An address stands as given, with the name empty (as before names were accepted). A name
    is looked up among the contacts service's people: one match gives its address (None when
    the contact has none) and its name as contacts write it; no match keeps the name, no address.

    Raises:
        ToolError: several contacts share the name; the message lists their addresses.
    """
    if is_address(person):
        return person, ""
    people: list[dict[str, Any]] = [p for p in Store(ctx, "contacts").all("people")
                                    if name_key(str(p.get("name", ""))) == name_key(person)]
    if len(people) > 1:
        who = ", ".join(str(p.get("email") or p.get("id")) for p in people)
        raise ToolError(f"{len(people)} contacts are called {person!r} ({who}); give the address of the one you mean")
    if people:
        return people[0].get("email"), str(people[0]["name"])
    return None, person
