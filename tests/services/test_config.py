"""Configuration tools: flags, typed settings, and the change history every change writes."""

from __future__ import annotations

from cowork.services.registry import dump_state

from .support import ME, actions, call, fails


def cfg(env):
    return dump_state(env.ctx.db)["config"]


class TestFlags:
    async def test_list_and_filters(self, client):
        out = await call(client, "config_list_flags")
        assert [f["key"] for f in out["flags"]] == ["dark-mode", "new-checkout"]
        assert out["environments"] == ["dev", "staging", "prod"]
        assert out["flags"][0]["environments"] == ["dev", "staging", "prod"]  # default: all
        keys = lambda out: [f["key"] for f in out["flags"]]
        assert keys(await call(client, "config_list_flags", enabled=False)) == ["new-checkout"]
        assert keys(await call(client, "config_list_flags", environment="prod")) == ["dark-mode"]
        assert keys(await call(client, "config_list_flags", query="checkout flow")) == ["new-checkout"]
        await fails(client, "config_list_flags", "Unknown environment 'qa'; environments: dev, staging, prod", environment="qa")

    async def test_get_shows_history(self, client):
        f = await call(client, "config_get_flag", key="dark-mode")
        assert f["enabled"] is True and [c["reason"] for c in f["history"]] == ["launch"]
        assert f["history"][0]["at"] == "2026-02-23T09:00:00Z"
        await fails(client, "config_get_flag", "Unknown flag 'nope'; flags: dark-mode, new-checkout", key="nope")

    async def test_set_records_who_when_old_new_why(self, client, env):
        out = await call(client, "config_set_flag", key="new-checkout", enabled=True, rollout=10,
                         environments=["prod", "dev"], reason="canary")
        assert out["changed"] == ["enabled", "environments", "rollout"] and out["change_id"] == "chg-2"
        assert out["environments"] == ["dev", "prod"]  # in the seed's order
        assert cfg(env)["history"]["chg-2"] == {
            "id": "chg-2", "target": "flag", "key": "new-checkout",
            "old": {"enabled": False, "environments": ["dev", "staging"], "rollout": 0},
            "new": {"enabled": True, "environments": ["dev", "prod"], "rollout": 10},
            "by": ME, "at": "2026-03-02T09:00:00Z", "reason": "canary"}
        assert cfg(env)["flags"]["new-checkout"]["updated"] == "2026-03-02T09:00:00Z"
        assert env.audit[-1]["ids"] == ["new-checkout", "chg-2"] and actions(env) == [("config", "set_flag")]
        same = await call(client, "config_set_flag", key="new-checkout", enabled=True, reason="again")
        assert same["changed"] == [] and same["change_id"] is None and len(cfg(env)["history"]) == 2

    async def test_set_errors(self, client, env):
        await fails(client, "config_set_flag", "Nothing to change: give enabled, rollout or environments", key="dark-mode", reason="r")
        await fails(client, "config_set_flag", "reason", key="dark-mode", enabled=False, reason="")
        await fails(client, "config_set_flag", "rollout", key="dark-mode", rollout=101, reason="r")
        await fails(client, "config_set_flag", "Unknown environment 'qa'", key="dark-mode", environments=["qa"], reason="r")
        await fails(client, "config_set_flag", "Unknown flag 'x'", key="x", enabled=True, reason="r")
        assert actions(env) == []


class TestSettings:
    async def test_list_and_get(self, client):
        out = await call(client, "config_list_settings")
        values = {s["key"]: (s["type"], s["value"]) for s in out["settings"]}
        assert values == {"beta.enabled": ("bool", False), "checkout.fee": ("float", 1.5), "maintenance.message": ("string", ""),
                          "regions": ("json", ["eu", "us"]), "session.timeout_minutes": ("int", 30)}
        assert [s["key"] for s in (await call(client, "config_list_settings", query="timeout"))["settings"]] == [
            "session.timeout_minutes"]
        got = await call(client, "config_get_setting", key="session.timeout_minutes")
        assert got["value"] == 30 and got["history"] == []
        await fails(client, "config_get_setting", "Unknown setting 'x'", key="x")

    async def test_set_coerces_to_the_type(self, client, env):
        out = await call(client, "config_set_setting", key="session.timeout_minutes", value="45", reason="users asked")
        assert out["value"] == 45 and out["changed"] == ["value"]
        assert cfg(env)["history"][out["change_id"]]["old"] == {"value": 30}
        assert (await call(client, "config_set_setting", key="beta.enabled", value="TRUE", reason="r"))["value"] is True
        assert (await call(client, "config_set_setting", key="checkout.fee", value=2, reason="r"))["value"] == 2.0
        assert (await call(client, "config_set_setting", key="regions", value='["eu"]', reason="r"))["value"] == ["eu"]
        assert (await call(client, "config_set_setting", key="maintenance.message", value="Down at 6", reason="r"))["value"] == "Down at 6"
        assert (await call(client, "config_set_setting", key="checkout.fee", value=2.0, reason="r"))["changed"] == []
        assert actions(env) == [("config", "set_setting")] * 5

    async def test_set_refuses_values_of_the_wrong_type(self, client, env):
        await fails(client, "config_set_setting", r"Bad value for setting 'session.timeout_minutes': 'soon' is not an int "
                    r"\(its type is int\)", key="session.timeout_minutes", value="soon", reason="r")
        await fails(client, "config_set_setting", "is not a bool", key="beta.enabled", value=1, reason="r")
        await fails(client, "config_set_setting", "is not a number", key="checkout.fee", value=True, reason="r")
        await fails(client, "config_set_setting", "is not a string", key="maintenance.message", value=5, reason="r")
        await fails(client, "config_set_setting", "Unknown setting 'nope'", key="nope", value=1, reason="r")
        assert actions(env) == []


class TestHistory:
    async def test_newest_first_and_filters(self, client):
        await call(client, "config_set_setting", key="checkout.fee", value=3, reason="pricing")
        out = await call(client, "config_history")
        assert [(c["key"], c["reason"]) for c in out["changes"]] == [("checkout.fee", "pricing"), ("dark-mode", "launch")]
        assert [c["id"] for c in (await call(client, "config_history", target="flag"))["changes"]] == ["chg-1"]
        assert [c["id"] for c in (await call(client, "config_history", key="checkout.fee"))["changes"]] == ["chg-2"]
        assert (await call(client, "config_history", since="2026-03-01T00:00:00Z"))["total"] == 1
        await fails(client, "config_history", "Bad date for since", since="yesterday")
