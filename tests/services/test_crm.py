"""CRM tools: accounts, contacts, deals, activities."""

from __future__ import annotations

from cowork.services.registry import dump_state

from .support import ME, actions, call, fails


def crm(env):
    return dump_state(env.ctx.db)["crm"]


class TestReading:
    async def test_search(self, client):
        out = await call(client, "crm_search", query="globex")
        assert [(r["type"], r["id"]) for r in out["results"]] == [("account", "acct-2"), ("deal", "deal-2")]
        out = await call(client, "crm_search", query="peter", kind="contacts")
        assert out["results"][0]["account"] == "Initech"
        await fails(client, "crm_search", "kind", kind="leads")

    async def test_account_and_deal(self, client):
        a = await call(client, "crm_get_account", account_id="acct-1")
        assert [c["id"] for c in a["contacts"]] == ["con-1"] and [d["id"] for d in a["deals"]] == ["deal-1"]
        assert [x["subject"] for x in a["activities"]] == ["Pricing call"]
        d = await call(client, "crm_get_deal", deal_id="deal-1")
        assert d["account"] == "Initech" and d["close_date"] == "2026-04-01" and d["owner"] == ME
        await fails(client, "crm_get_account", "Unknown account id 'a'", account_id="a")
        await fails(client, "crm_get_deal", "Unknown deal id 'd'", deal_id="d")

    async def test_list_deals(self, client):
        out = await call(client, "crm_list_deals")
        assert [d["id"] for d in out["deals"]] == ["deal-2", "deal-1"]  # pipeline order
        assert out["total_amount"] == {"USD": 50000, "EUR": 1000}
        assert [d["id"] for d in (await call(client, "crm_list_deals", stage="proposal"))["deals"]] == ["deal-1"]
        assert (await call(client, "crm_list_deals", account_id="acct-2", owner=ME))["total"] == 1
        await fails(client, "crm_list_deals", "Unknown stage 'won'", stage="won")
        await fails(client, "crm_list_deals", "Unknown account id", account_id="x")


class TestWriting:
    async def test_create_account(self, client, env):
        out = await call(client, "crm_create_account", name="Umbrella", industry="Pharma")
        assert crm(env)["accounts"][out["id"]]["owner"] == ME
        await fails(client, "crm_create_account", "An account named 'initech' exists already: 'acct-1'", name="initech")

    async def test_create_contact_and_deal(self, client, env):
        c = await call(client, "crm_create_contact", account_id="acct-2", name="Hank", email="hank@globex.com")
        assert crm(env)["contacts"][c["id"]]["account_id"] == "acct-2"
        await fails(client, "crm_create_contact", "Unknown account id", account_id="x", name="y")
        d = await call(client, "crm_create_deal", account_id="acct-2", name="Big", amount=5, close_date="2026-06-30")
        assert d["stage"] == "prospecting" and d["close_date"] == "2026-06-30"
        await fails(client, "crm_create_deal", "Unknown stage", account_id="acct-2", name="y", amount=1, stage="won")
        await fails(client, "crm_create_deal", "Bad date for close_date", account_id="acct-2", name="y", amount=1,
                    close_date="soon")
        await fails(client, "crm_create_deal", "amount", account_id="acct-2", name="y", amount=-1)
        await fails(client, "crm_create_deal", "currency", account_id="acct-2", name="y", amount=1, currency="euro")
        assert actions(env) == [("crm", "create_contact"), ("crm", "create_deal")]

    async def test_update_deal(self, client, env):
        out = await call(client, "crm_update_deal", deal_id="deal-1", stage="closed_won", amount=55000)
        assert out["changed"] == ["amount", "stage"] and crm(env)["deals"]["deal-1"]["stage"] == "closed_won"
        await fails(client, "crm_update_deal", "Nothing to change", deal_id="deal-1")
        await fails(client, "crm_update_deal", "Unknown deal id", deal_id="x", amount=1)
        await fails(client, "crm_update_deal", "Unknown stage", deal_id="deal-1", stage="lost")

    async def test_update_contact(self, client, env):
        out = await call(client, "crm_update_contact", contact_id="con-1", account_id="acct-2", phone="555")
        assert out["changed"] == ["account_id", "phone"]
        await fails(client, "crm_update_contact", "Unknown contact id", contact_id="x", phone="1")
        await fails(client, "crm_update_contact", "Unknown account id", contact_id="con-1", account_id="x")

    async def test_log_activity_infers_account(self, client, env):
        out = await call(client, "crm_log_activity", kind="email", subject="Sent quote", contact_id="con-1")
        assert out["account_id"] == "acct-1" and out["by"] == ME and out["at"] == "2026-03-02T09:00:00Z"
        await fails(client, "crm_log_activity", "must concern a record", kind="note", subject="x")
        await fails(client, "crm_log_activity", "Unknown deal id", kind="note", subject="x", account_id="acct-1", deal_id="d")
        await fails(client, "crm_log_activity", "Unknown contact id", kind="note", subject="x", contact_id="c")
        await fails(client, "crm_log_activity", "kind", kind="lunch", subject="x", account_id="acct-1")


class TestAccountsV2:
    async def test_seeded_fields_and_defaults(self, client, env):
        accounts = crm(env)["accounts"]
        assert accounts["acct-1"]["tier"] == "Gold" and accounts["acct-1"]["status"] == "active"
        assert accounts["acct-1"]["revenue"] == 1250000 and accounts["acct-1"]["currency"] == "USD"
        assert accounts["acct-1"]["last_contact"] == "2026-01-21T09:00:00Z"  # now-40d
        assert accounts["acct-2"]["last_contact"] is None and accounts["acct-3"]["revenue"] is None

    async def test_search_by_tier_and_status(self, client):
        ids = lambda out: [(r["type"], r["id"]) for r in out["results"]]
        out = await call(client, "crm_search", tier="GOLD", kind="accounts")
        assert ids(out) == [("account", "acct-1"), ("account", "acct-3")]
        assert out["results"][0]["revenue"] == 1250000 and out["results"][0]["status"] == "active"
        assert ids(await call(client, "crm_search", tier="gold")) == [
            ("account", "acct-1"), ("account", "acct-3"), ("contact", "con-1"), ("deal", "deal-1")]
        assert ids(await call(client, "crm_search", status="churned")) == [("account", "acct-2"), ("deal", "deal-2")]
        assert ids(await call(client, "crm_search", tier="gold", status="prospect")) == [("account", "acct-3")]
        assert (await call(client, "crm_search", tier="platinum"))["total"] == 0
        await fails(client, "crm_search", "status", status="lost")

    async def test_export_is_csv_in_the_result(self, client, env):
        before = dump_state(env.ctx.db)
        out = await call(client, "crm_export")
        assert out["rows"] == 3 and out["columns"][:3] == ["id", "name", "domain"]
        assert out["csv"].splitlines() == [
            "id,name,domain,industry,tier,status,revenue,currency,last_contact,owner",
            f"acct-1,Initech,initech.example,Software,Gold,active,1250000,USD,2026-01-21T09:00:00Z,{ME}",
            f"acct-2,Globex,globex.com,,silver,churned,80000.5,EUR,,{ME}",
            f"acct-3,Hooli,hooli.example,,gold,prospect,,USD,,{ME}"]
        gold = await call(client, "crm_export", tier="gold", status="prospect")
        assert gold["rows"] == 1 and gold["csv"].splitlines()[1].startswith("acct-3,Hooli")
        assert (await call(client, "crm_export", tier="none"))["csv"] == "id,name,domain,industry,tier,status,revenue,currency,last_contact,owner\n"
        assert dump_state(env.ctx.db) == before and actions(env) == []
        await fails(client, "crm_export", "status", status="gone")

    async def test_create_account_with_new_fields(self, client, env):
        out = await call(client, "crm_create_account", name="Umbrella", tier="bronze", revenue=5e5, currency="EUR")
        rec = crm(env)["accounts"][out["id"]]
        assert rec["status"] == "prospect" and rec["tier"] == "bronze" and rec["revenue"] == 500000
        assert rec["last_contact"] is None and rec["currency"] == "EUR"
        await fails(client, "crm_create_account", "revenue", name="Neg", revenue=-1)
        await fails(client, "crm_create_account", "status", name="Odd", status="lead")

    async def test_update_account(self, client, env):
        out = await call(client, "crm_update_account", account_id="acct-1", status="churned", tier="silver",
                         last_contact="2026-03-01T10:00:00+01:00", revenue=0)
        assert out["changed"] == ["last_contact", "revenue", "status", "tier"]
        assert crm(env)["accounts"]["acct-1"]["last_contact"] == "2026-03-01T09:00:00Z"
        assert actions(env) == [("crm", "update_account")]
        again = await call(client, "crm_update_account", account_id="acct-1", status="churned")
        assert again["changed"] == [] and actions(env) == [("crm", "update_account")]
        await fails(client, "crm_update_account", "Nothing to change", account_id="acct-1")
        await fails(client, "crm_update_account", "Unknown account id 'x'", account_id="x", tier="gold")
        await fails(client, "crm_update_account", "An account named 'globex' exists already: 'acct-2'",
                    account_id="acct-1", name="globex")
        await fails(client, "crm_update_account", "Bad date for last_contact: 'last week'", account_id="acct-1",
                    last_contact="last week")
