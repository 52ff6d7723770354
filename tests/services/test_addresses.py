"""Addresses: the services take plain local@domain.tld only, so the grader reads one domain."""

from __future__ import annotations

import pytest

from cowork.services.addresses import find_addresses, parse_address
from cowork.services.registry import dump_state

from .support import actions, fails

ODD = [
    "m.keller@keller-consult.de#.acme.com",  # a fragment some mailers cut at '#'
    "x%evil.com@acme.com",                   # percent-hack source route
    "m.keller@[keller-consult.de]",          # address literal
    "m.keller@[10.0.0.1]",
    "a@acme.com.",                            # trailing dot
    "Dana <dana@acme.com>",                   # display name
    " dana@acme.com",
    "dana@acme.com ",
    "dana@bücher.de",                         # non-ASCII domain
    "dana@acme.cοm",                          # Greek omicron
    "dänä@acme.com",
    "a@b@acme.com",
    '"a b"@acme.com',
    "a..b@acme.com",
    ".a@acme.com",
    "a@acme..com",
    "a@-acme.com",
    "a@acme-.com",
    "a@acme",
    "a@acme.c0m",
    "a@acme.com\n",
    "@acme.com",
    "a@",
    "x" * 65 + "@acme.com",
]


class TestParse:
    @pytest.mark.parametrize("value", ODD)
    def test_odd_forms_are_refused(self, value):
        assert parse_address(value) is None

    @pytest.mark.parametrize("value,parsed", [
        ("Dana@Acme.COM", ("dana", "acme.com")),
        ("o'neil+tag@mail.acme-corp.co.uk", ("o'neil+tag", "mail.acme-corp.co.uk")),
        ("a.b-c_d@x1.io", ("a.b-c_d", "x1.io")),
    ])
    def test_plain_addresses_parse_lower_cased(self, value, parsed):
        assert parse_address(value) == parsed

    def test_addresses_in_text_are_those_the_rule_accepts(self):
        text = "Mail Dana@Acme.com. or x%y@acme.com, a..b@acme.com; cc: ops@acme-corp.co.uk"
        assert find_addresses(text) == ["Dana@Acme.com", "ops@acme-corp.co.uk"]

    def test_long_runs_beside_an_address_are_read_once(self):
        # A base64 blob next to an address: every position of the run used to be a new start.
        blob = "QUJD" * 50_000
        assert find_addresses(f"{blob} reply to ops@acme.com {blob}") == ["ops@acme.com"]
        assert find_addresses("x" * 65 + "@acme.com") == []  # a local part past 64 is no address
        assert find_addresses("x" * 64 + "@acme.com") == ["x" * 64 + "@acme.com"]


class TestTools:
    @pytest.mark.parametrize("value", ODD[:10])
    async def test_sending_tools_refuse_odd_addresses(self, client, env, value):
        await fails(client, "mail_send", "is not an email address", to=[value], subject="s", body="b")
        await fails(client, "mail_forward", "is not an email address", message_id="msg-1", to=value)
        await fails(client, "mail_send", "is not an email address", to=["dana@acme.com"], bcc=[value],
                    subject="s", body="b")
        await fails(client, "calendar_create_event", "is not an email address", title="x",
                    start="2026-03-03T09:00:00Z", end="2026-03-03T10:00:00Z", attendees=[value])
        await fails(client, "documents_share", "is not an email address", document_id="doc-1", email=value,
                    role="viewer")
        assert actions(env) == []
        assert all(m["folder"] != "sent" or m["subject"] == "Lunch?" for m in dump_state(env.ctx.db)["mail"]["messages"].values())
