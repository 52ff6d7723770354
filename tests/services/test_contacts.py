"""Contacts tools: search with same-name people, look-ups, changes."""

from __future__ import annotations

from cowork.services.registry import dump_state

from .support import actions, call, fails


class TestContacts:
    async def test_same_name_people_are_all_found_with_what_tells_them_apart(self, client):
        out = await call(client, "contacts_search", query="john smith")
        assert [(p["id"], p["org"], p["location"]) for p in out["people"]] == [
            ("person-2", "Acme", "Berlin"), ("person-3", "Globex", "Springfield")]
        out = await call(client, "contacts_search", query="smith", org_id="org-2")
        assert [p["id"] for p in out["people"]] == ["person-3"]
        assert (await call(client, "contacts_search", query="globex cfo"))["total"] == 1
        await fails(client, "contacts_search", "Unknown organisation id 'org-9'", org_id="org-9")

    async def test_get_and_lookup(self, client):
        assert (await call(client, "contacts_get_person", person_id="person-1"))["org"] == "Acme"
        await fails(client, "contacts_get_person", "Unknown person id 'p'", person_id="p")
        assert (await call(client, "contacts_lookup_email", email="JOHN.SMITH@globex.com"))["id"] == "person-3"
        await fails(client, "contacts_lookup_email", "No person has the address 'x@acme.com'", email="x@acme.com")
        await fails(client, "contacts_lookup_email", "not an email address", email="john")

    async def test_orgs(self, client):
        assert [o["name"] for o in (await call(client, "contacts_list_orgs"))["orgs"]] == ["Acme", "Globex"]
        assert [o["id"] for o in (await call(client, "contacts_list_orgs", query="energy"))["orgs"]] == ["org-2"]
        org = await call(client, "contacts_get_org", org_id="org-1")
        assert [p["id"] for p in org["people"]] == ["person-1", "person-2"]
        await fails(client, "contacts_get_org", "Unknown organisation id 'org-3'", org_id="org-3")

    async def test_create(self, client, env):
        out = await call(client, "contacts_create_person", name="John Smith", email="js@initech.example")
        assert out["id"] == "person-5" and dump_state(env.ctx.db)["contacts"]["people"]["person-5"]["name"] == "John Smith"
        assert actions(env) == [("contacts", "create_person")]
        await fails(client, "contacts_create_person", "already belongs to Dana Smith", name="D", email="dana@acme.com")
        await fails(client, "contacts_create_person", "Unknown organisation id", name="D", org_id="org-7")

    async def test_update(self, client, env):
        out = await call(client, "contacts_update_person", person_id="person-4", title="Intern", org_id="org-2")
        assert out["changed"] == ["org_id", "title"] and out["org"] == "Globex"
        await fails(client, "contacts_update_person", "Unknown person id", person_id="x", title="y")
        await fails(client, "contacts_update_person", "already belongs to", person_id="person-4", email="dana@acme.com")
        await fails(client, "contacts_update_person", "Unknown organisation id", person_id="person-4", org_id="o")
