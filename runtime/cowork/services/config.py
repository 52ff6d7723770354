"""Configuration: feature flags and typed settings, every change kept in a change history."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from ..toolhost.errors import ToolError
from .base import (
    READ,
    Email,
    Limit,
    Offset,
    SeedModel,
    SeedTime,
    ServiceContext,
    Store,
    check_unique,
    hints,
    iso,
    matches,
    newest_first,
    page,
    parse_time,
    resolve_time,
    tool_adder,
)

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "config"
SettingType = Literal["string", "int", "float", "bool", "json"]
Key = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,100}$")]
FlagKey = Annotated[str, Field(description="Flag key, as listed by config_list_flags.")]
SettingKey = Annotated[str, Field(description="Setting key, as listed by config_list_settings.")]
Reason = Annotated[str, Field(min_length=1, description="Why: kept in the change history.")]
Value = str | int | float | bool | list | dict | None


def coerce(value: Any, kind: str) -> Any:
    """``value`` as a setting of type ``kind``; ValueError saying what is expected.

    Text is read as the type where it is unambiguous (``"30"`` for an int, ``"true"`` for a
    bool, JSON text for json), so a value typed as a string by a model still fits.
    """
    if kind == "string":
        if isinstance(value, str):
            return value
        raise ValueError(f"{value!r} is not a string")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ValueError(f"{value!r} is not a bool; give true or false")
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise ValueError(f"{value!r} is not an int")
    if kind == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise ValueError(f"{value!r} is not a number")
    if isinstance(value, str):  # json
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


class Flag(SeedModel):
    """A feature flag."""

    key: Key
    """Unique key, e.g. ``new-checkout``; its id."""
    description: str = ""
    """What it turns on."""
    enabled: bool = False
    """Master switch: off means off everywhere."""
    rollout: int = Field(100, ge=0, le=100)
    """Percentage of users who get it while enabled, 0-100."""
    environments: list[str] | None = None
    """Environments where it applies; default all of the seed's environments."""
    owner: Email | None = None
    """Who owns it."""
    updated: SeedTime = "now-7d"
    """When it last changed."""


class Setting(SeedModel):
    """A typed configuration setting."""

    key: Key
    """Unique key, e.g. ``session.timeout_minutes``; its id."""
    type: SettingType = "string"
    """Type of the value: string, int, float, bool or json."""
    value: Value = None
    """Current value; it must fit ``type`` (text such as ``"30"`` is read as the type)."""
    description: str = ""
    """What it controls."""
    updated: SeedTime = "now-7d"
    """When it last changed."""


class Change(SeedModel):
    """An earlier change, for the history."""

    id: str | None = None
    """Stable id; default ``chg-<n>`` by position."""
    target: Literal["flag", "setting"]
    """What kind of entry changed."""
    key: str
    """Its key."""
    old: dict[str, Any] = {}
    """Fields before the change."""
    new: dict[str, Any] = {}
    """Fields after it."""
    by: Email
    """Who changed it."""
    at: SeedTime = "now-7d"
    """When."""
    reason: str = ""
    """Why, as they wrote it."""


class ConfigSeed(SeedModel):
    """Initial state of the configuration service."""

    user: Email = "me@example.com"
    """The user's address: recorded as ``by`` on their changes."""
    environments: list[str] = Field(default=["dev", "staging", "prod"], min_length=1)
    """Environments flags can apply to."""
    flags: list[Flag] = []
    """Feature flags."""
    settings: list[Setting] = []
    """Settings."""
    history: list[Change] = []
    """Changes made before the task, oldest first."""

    @model_validator(mode="after")
    def _refs(self) -> "ConfigSeed":
        keyed: tuple[tuple[str, Sequence[Flag | Setting]], ...] = (("flags", self.flags), ("settings", self.settings))
        for what, items in keyed:
            seen: set[str] = set()
            for n, x in enumerate(items):
                if x.key in seen:
                    raise ValueError(f"{what}[{n}].key: duplicate key {x.key!r}")
                seen.add(x.key)
        for n, f in enumerate(self.flags):
            for env in f.environments or []:
                if env not in self.environments:
                    raise ValueError(f"flags[{n}].environments: unknown environment {env!r}; "
                                     f"environments: {', '.join(self.environments)}")
        for n, s in enumerate(self.settings):
            try:
                coerce(s.value, s.type)
            except ValueError as exc:
                raise ValueError(f"settings[{n}].value: {exc} (type {s.type})") from None
        check_unique(self.history, "chg", "history")
        return self


SEED = ConfigSeed


def seed(store: Store, data: ConfigSeed) -> None:
    """Write the seed's records and settings."""
    store.set_meta("user", data.user)
    store.set_meta("environments", list(data.environments))
    for f in data.flags:
        store.insert("flags", {"id": f.key, "key": f.key, "description": f.description, "enabled": f.enabled,
                               "rollout": f.rollout, "environments": list(f.environments or data.environments),
                               "owner": f.owner, "updated": resolve_time(f.updated, store.now)})
    for s in data.settings:
        store.insert("settings", {"id": s.key, "key": s.key, "type": s.type, "value": coerce(s.value, s.type),
                                  "description": s.description, "updated": resolve_time(s.updated, store.now)})
    for rid, c in zip(check_unique(data.history, "chg", "history"), data.history):
        store.insert("history", {**c.model_dump(), "id": rid, "at": resolve_time(c.at, store.now)})


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed configuration tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    def require(collection: str, key: str) -> dict[str, Any]:
        rec = store.get(collection, key) if isinstance(key, str) else None
        if rec is None:
            what = collection[:-1]
            known = ", ".join(sorted(r["key"] for r in store.all(collection))) or "none"
            raise ToolError(f"Unknown {what} {key!r}; {collection}: {known}")
        return rec

    def history(target: str, key: str) -> list[dict[str, Any]]:
        return newest_first([c for c in store.all("history") if c["target"] == target and c["key"] == key], "at")[:20]

    def change(collection: str, target: str, key: str, changes: dict[str, Any], reason: str) -> dict[str, Any]:
        """Apply changes, record them in the history; an unchanged entry writes nothing."""
        old = require(collection, key)
        # Compared as JSON: 1 == True in Python, but a json setting changing 1 to true changes it.
        diff = sorted(k for k, v in changes.items() if json.dumps(old[k], sort_keys=True) != json.dumps(v, sort_keys=True))
        if not diff:
            return {**old, "changed": [], "change_id": None}
        cid = store.new_id("history", "chg")
        store.insert("history", {"id": cid, "target": target, "key": key, "old": {k: old[k] for k in diff},
                                 "new": {k: changes[k] for k in diff}, "by": store.meta("user", "me@example.com"),
                                 "at": iso(store.now), "reason": reason})
        rec, _ = store.update(collection, key, {**{k: changes[k] for k in diff}, "updated": iso(store.now)})
        store.audit(f"set_{target}", [key, cid], diff)
        return {**rec, "changed": diff, "change_id": cid}

    @tool("config_list_flags", READ)
    def config_list_flags(query: Annotated[str, Field(description="Words that must all occur in key or description.")] = "",
                          enabled: Annotated[bool | None, Field(description="Only flags switched on (true) or off (false).")] = None,
                          environment: Annotated[str | None, Field(description="Only flags that apply in this environment.")] = None,
                          offset: Offset = 0, limit: Limit = 20) -> dict:
        """List feature flags by key, with the environments there are."""
        with store.tx():
            envs = store.meta("environments", ["dev", "staging", "prod"])
            if environment is not None and environment not in envs:
                raise ToolError(f"Unknown environment {environment!r}; environments: {', '.join(envs)}")
            items = [f for f in store.all("flags") if matches(query, f["key"], f["description"])
                     and (enabled is None or f["enabled"] == enabled)
                     and (environment is None or environment in f["environments"])]
        items.sort(key=lambda f: f["key"])
        return {**page(items, offset, limit, "flags"), "environments": envs}

    @tool("config_get_flag", READ)
    def config_get_flag(key: FlagKey) -> dict:
        """Read a flag with its latest changes."""
        with store.tx():
            return {**require("flags", key), "history": history("flag", key)}

    @tool("config_set_flag", hints(idempotent=True))
    def config_set_flag(key: FlagKey, reason: Reason,
                        enabled: Annotated[bool | None, Field(description="Switch it on or off.")] = None,
                        rollout: Annotated[int | None, Field(ge=0, le=100, description="Percentage of users, 0-100.")] = None,
                        environments: Annotated[list[str] | None, Field(description="Environments where it applies (replaces the list).")] = None) -> dict:
        """Change a flag's switch, rollout or environments; the change and its reason go into the history."""
        changes: dict[str, Any] = {k: v for k, v in (("enabled", enabled), ("rollout", rollout)) if v is not None}
        with store.tx():
            if environments is not None:
                envs = store.meta("environments", ["dev", "staging", "prod"])
                for env in environments:
                    if env not in envs:
                        raise ToolError(f"Unknown environment {env!r}; environments: {', '.join(envs)}")
                changes["environments"] = [e for e in envs if e in environments]
            if not changes:
                raise ToolError("Nothing to change: give enabled, rollout or environments")
            return change("flags", "flag", key, changes, reason)

    @tool("config_list_settings", READ)
    def config_list_settings(query: Annotated[str, Field(description="Words that must all occur in key or description.")] = "",
                             offset: Offset = 0, limit: Limit = 20) -> dict:
        """List settings by key, with their types and values."""
        with store.tx():
            items = [s for s in store.all("settings") if matches(query, s["key"], s["description"])]
        items.sort(key=lambda s: s["key"])
        return page(items, offset, limit, "settings")

    @tool("config_get_setting", READ)
    def config_get_setting(key: SettingKey) -> dict:
        """Read a setting with its latest changes."""
        with store.tx():
            return {**require("settings", key), "history": history("setting", key)}

    @tool("config_set_setting", hints(idempotent=True))
    def config_set_setting(key: SettingKey,
                           value: Annotated[Value, Field(description="New value; it must fit the setting's type (see config_get_setting).")],
                           reason: Reason) -> dict:
        """Change a setting's value; the old and new values and the reason go into the history."""
        with store.tx():
            s = require("settings", key)
            try:
                new = coerce(value, s["type"])
            except ValueError as exc:
                raise ToolError(f"Bad value for setting {key!r}: {exc} (its type is {s['type']})") from None
            return change("settings", "setting", key, {"value": new}, reason)

    @tool("config_history", READ)
    def config_history(key: Annotated[str | None, Field(description="Only changes of this key.")] = None,
                       target: Annotated[Literal["flag", "setting"] | None, Field(description="Only flag or setting changes.")] = None,
                       since: Annotated[str | None, Field(description="Only changes at or after this ISO 8601 time.")] = None,
                       offset: Offset = 0, limit: Limit = 20) -> dict:
        """The change history, newest first: who changed what, when, from what to what, and why."""
        lo = iso(parse_time(since, "since")) if since else None
        with store.tx():
            items = [c for c in store.all("history") if (key is None or c["key"] == key)
                     and (target is None or c["target"] == target) and (lo is None or c["at"] >= lo)]
        return page(newest_first(items, "at"), offset, limit, "changes")
