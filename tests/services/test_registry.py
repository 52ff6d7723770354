"""Seeding, reset, state dumps and diffs, and seed validation errors."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from pydantic import ValidationError

from cowork.services.base import ServiceContext, open_db, resolve_time
from cowork.services.registry import ServicesSeed, diff_state, dump_state, reset, seed_all, state_hash

from .support import SEED_DATA, call


def fresh_hash(seed: ServicesSeed, clock=None) -> str:
    ctx = ServiceContext(db=open_db(), **({"clock": clock} if clock else {}))
    seed_all(ctx, seed)
    return state_hash(dump_state(ctx.db))


async def mutate(client) -> None:
    await call(client, "mail_send", to=["x@y.com"], subject="s", body="b")
    await call(client, "mail_delete", message_id="msg-4")
    await call(client, "calendar_cancel_event", event_id="evt-1")
    await call(client, "documents_delete", document_id="doc-1")
    await call(client, "tickets_close", ticket_id="tkt-1", resolution="done")
    await call(client, "chat_send_dm", user="sam", text="hi")
    await call(client, "todo_create", title="new")
    await call(client, "inventory_create_order", customer="x", lines=[{"product_id": "WID-100", "quantity": 1}])
    await call(client, "config_set_flag", key="dark-mode", enabled=False, reason="r")
    await call(client, "scheduler_trigger_run", job_id="job-2")
    await call(client, "news_subscribe", url="https://security.example/rss")
    await call(client, "expenses_create_report", title="t", transaction_ids=["txn-4"])


class TestReset:
    async def test_reset_restores_the_fresh_seed_hash(self, client, env):
        expected = fresh_hash(env.seed)
        assert state_hash(dump_state(env.ctx.db)) == expected
        await mutate(client)
        assert state_hash(dump_state(env.ctx.db)) != expected
        reset(env.ctx, env.seed)
        assert state_hash(dump_state(env.ctx.db)) == expected

    async def test_ten_resets_in_a_row(self, client, env):
        expected = fresh_hash(env.seed)
        ids = []
        for _ in range(10):
            await mutate(client)
            dump = dump_state(env.ctx.db)
            ids.append([sorted(dump[s][c]) for s, c in (("todo", "tasks"), ("inventory", "orders"), ("inventory", "movements"),
                                                       ("config", "history"), ("scheduler", "runs"), ("news", "items"))])
            reset(env.ctx, env.seed)
            assert state_hash(dump_state(env.ctx.db)) == expected
        assert all(i == ids[0] for i in ids)  # new ids restart after a reset

    def test_new_seed_or_clock_reseeds(self, env):
        ctx = ServiceContext(db=open_db())
        seed_all(ctx, env.seed)
        other = ServicesSeed.model_validate({"todo": {"tasks": [{"title": "only"}]}})
        reset(ctx, other)
        assert dump_state(ctx.db) == {"todo": {"tasks": {"task-1": {
            "id": "task-1", "list_id": "inbox", "title": "only", "notes": "", "due": None, "priority": "normal",
            "done": False, "tags": [], "completed": None}}}}
        ctx.clock = datetime(2027, 1, 1, tzinfo=timezone.utc)
        reset(ctx, env.seed)
        assert state_hash(dump_state(ctx.db)) == fresh_hash(env.seed, ctx.clock)
        assert state_hash(dump_state(ctx.db)) != fresh_hash(env.seed)

    def test_same_seed_same_hash_across_databases(self, env, tmp_path):
        ctx = ServiceContext(db=open_db(str(tmp_path / "services.db")))
        seed_all(ctx, ServicesSeed.model_validate(json.loads(json.dumps(SEED_DATA))))
        assert state_hash(dump_state(ctx.db)) == fresh_hash(env.seed)


class TestDumpAndDiff:
    def test_dump_is_canonical_json(self, env):
        dump = dump_state(env.ctx)
        assert json.loads(json.dumps(dump)) == dump
        assert set(dump) == {"mail", "calendar", "contacts", "documents", "tickets", "crm", "chat", "kb", "expenses", "todo",
                             "inventory", "config", "scheduler", "news", "web", "memory"}
        assert list(dump["mail"]["messages"]) == sorted(dump["mail"]["messages"])

    def test_empty_seed_dumps_nothing(self):
        ctx = ServiceContext(db=open_db())
        seed_all(ctx, ServicesSeed())
        assert dump_state(ctx.db) == {}

    async def test_diff_reports_created_updated_deleted(self, client, env):
        before = dump_state(env.ctx.db)
        await call(client, "mail_send", to=["x@y.com"], subject="s", body="b")
        await call(client, "mail_mark_read", message_ids=["msg-1"])
        await call(client, "todo_delete", task_id="task-2")
        diff = diff_state(before, dump_state(env.ctx.db))
        assert diff == {
            "mail": {"messages": {"created": ["msg-6"], "updated": {"msg-1": ["read"]}, "deleted": []}},
            "todo": {"tasks": {"created": [], "updated": {}, "deleted": ["task-2"]}},
        }
        assert diff_state(before, before) == {}
        assert diff_state({}, {"kb": {"pages": {"p": {}}}}) == {"kb": {"pages": {"created": ["p"], "updated": {}, "deleted": []}}}


class TestSeedErrors:
    def errors(self, data) -> list[str]:
        with pytest.raises(ValidationError) as info:
            ServicesSeed.model_validate(data)
        return [".".join(map(str, e["loc"])) + ": " + e["msg"] for e in info.value.errors()]

    def test_field_errors_name_the_record_and_field(self):
        msgs = [{"from": "a@b.com"}] * 3 + [{"from": "a@b.com", "to": ["ok@b.com", "bad"]}]
        assert self.errors({"mail": {"messages": msgs}}) == [
            "mail.messages.3.to.1: Value error, 'bad' is not an email address; give a plain local@domain.tld "
            "(letters, digits, dots and hyphens in the domain; no display name, spaces, '%', '#', brackets or "
            "trailing dot)"]
        assert self.errors({"calendar": {"events": [{"title": "x", "start": "tomorrow", "end": "now"}]}})[0].startswith(
            "calendar.events.0.start: Value error, 'tomorrow' is not a time")
        assert self.errors({"crm": {"deals": [{"account_id": "a", "name": "n", "amount": -5}]}})[0].startswith(
            "crm.deals.0.amount:")
        assert self.errors({"todo": {"tasks": [{"title": "t", "colour": "red"}]}}) == [
            "todo.tasks.0.colour: Extra inputs are not permitted"]
        assert self.errors({"calendar": {"calendars": [{"id": "c", "time_zone": "Mars/Base"}]}})[0].endswith(
            "unknown time zone 'Mars/Base'; use an IANA name like 'Europe/Berlin'")
        assert self.errors({"email": {}}) == ["email: Extra inputs are not permitted"]

    @pytest.mark.parametrize("data, message", [
        ({"mail": {"messages": [{"from": "a@b.com", "folder": "Junk"}]}}, "messages[0].folder: unknown folder 'Junk'"),
        ({"mail": {"messages": [{"from": "a@b.com", "id": "m"}, {"from": "a@b.com", "id": "m"}]}},
         "messages[1].id: duplicate id 'm'"),
        ({"calendar": {"events": [{"title": "x", "start": "now+1h", "end": "now"}]}}, "events[0].end: 'now' is not after start"),
        ({"calendar": {"events": [{"title": "x", "start": "now", "end": "now+1h", "calendar_id": "work"}]}},
         "events[0].calendar_id: unknown calendar 'work'"),
        ({"contacts": {"people": [{"name": "A", "org_id": "org-1"}]}}, "people[0].org_id: unknown organisation 'org-1'"),
        ({"documents": {"documents": [{"title": "A", "folder_id": "f"}]}}, "documents[0].folder_id: unknown folder 'f'"),
        ({"tickets": {"tickets": [{"title": "A", "requester": "a@b.com", "assignee": "x@b.com"}]}},
         "tickets[0].assignee: 'x@b.com' is not an agent"),
        ({"crm": {"accounts": [{"name": "A"}], "deals": [{"account_id": "acct-1", "name": "D", "stage": "won"}]}},
         "deals[0].stage: unknown stage 'won'"),
        ({"chat": {"messages": [{"channel_id": "general", "author": "me", "text": "x"}]}},
         "messages[0].channel_id: unknown channel 'general'"),
        ({"kb": {"web": [{"url": "https://a.example/x", "title": "t"}] * 2}}, "web[1].url: 'https://a.example/x' is listed twice"),
        ({"todo": {"tasks": [{"title": "t", "list_id": "home"}]}}, "tasks[0].list_id: unknown list 'home'"),
    ])
    def test_cross_reference_errors(self, data, message):
        (error,) = self.errors(data)
        assert message in error and error.startswith(next(iter(data)))


class TestTime:
    def test_relative_times(self):
        clock = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
        assert resolve_time("now", clock) == "2026-03-02T09:00:00Z"
        assert resolve_time("now-1d-2h30m", clock) == "2026-03-01T06:30:00Z"
        assert resolve_time("now+1w@10:00", clock) == "2026-03-09T10:00:00Z"
        assert resolve_time("now+1d@10:00", clock, "America/New_York") == "2026-03-03T15:00:00Z"

    def test_yaml_datetimes_and_naive_times_are_utc(self):
        seed = ServicesSeed.model_validate({"todo": {"tasks": [{"title": "t", "due": datetime(2026, 5, 1, 8)}]},
                                            "kb": {"pages": [{"title": "p", "updated": "2026-01-01T10:00:00+02:00"}]}})
        ctx = ServiceContext(db=open_db())
        seed_all(ctx, seed)
        dump = dump_state(ctx.db)
        assert dump["todo"]["tasks"]["task-1"]["due"] == "2026-05-01"
        assert dump["kb"]["pages"]["page-1"]["updated"] == "2026-01-01T08:00:00Z"

    def test_schema_documents_fields(self):
        schema = ServicesSeed.model_json_schema()
        message = schema["$defs"]["Message"]["properties"]
        assert "from" in message and message["to"].get("description") == "Recipient addresses."


class TestSeedErrorsV2:
    @pytest.mark.parametrize("data, message", [
        ({"expenses": {"reports": [{"title": "r", "transaction_ids": ["txn-1"]}]}},
         "reports[0].transaction_ids[0]: unknown transaction 'txn-1'"),
        ({"expenses": {"transactions": [{"amount": 1}], "reports": [{"title": "a", "transaction_ids": ["txn-1"]},
                                                                     {"title": "b", "transaction_ids": ["txn-1"]}]}},
         "reports[1].transaction_ids[0]: transaction 'txn-1' is on reports[0] already"),
        ({"inventory": {"products": [{"name": "p", "warehouse": "paris"}]}}, "products[0].warehouse: unknown warehouse 'paris'"),
        ({"inventory": {"orders": [{"customer": "c", "lines": [{"product_id": "X", "quantity": 1}]}]}},
         "orders[0].lines[0].product_id: unknown product 'X'"),
        ({"config": {"flags": [{"key": "a"}, {"key": "a"}]}}, "flags[1].key: duplicate key 'a'"),
        ({"config": {"flags": [{"key": "a", "environments": ["qa"]}]}}, "flags[0].environments: unknown environment 'qa'"),
        ({"config": {"settings": [{"key": "n", "type": "int", "value": "ten"}]}}, "settings[0].value: 'ten' is not an int"),
        ({"scheduler": {"runs": [{"job_id": "job-1"}]}}, "runs[0].job_id: unknown job 'job-1'"),
        ({"scheduler": {"jobs": [{"name": "j", "schedule": "* *"}], "runs": []}}, "'* *' is not a cron schedule"),
        ({"scheduler": {"jobs": [{"name": "j", "schedule": "0 25 * * *"}]}}, "hour 25 is outside 0-23"),
        ({"scheduler": {"jobs": [{"name": "j", "schedule": "@daily"}],
                        "runs": [{"job_id": "job-1", "status": "running", "finished": "now"}]}},
         "runs[0].finished: a running run has not finished"),
        ({"news": {"items": [{"feed_id": "feed-1", "title": "t"}]}}, "items[0].feed_id: unknown feed 'feed-1'"),
        ({"news": {"available": [{"url": "u", "title": "t"}] * 2}}, "available[1].url: 'u' is listed twice"),
        ({"tickets": {"tickets": [{"title": "t", "requester": "a@b.com", "priority": "p1"}]}}, "tickets.tickets.0.priority"),
        ({"mail": {"messages": [{"from": "a@b.com", "labels": [""]}]}}, "mail.messages.0.labels.0"),
        ({"crm": {"accounts": [{"name": "a", "status": "lead"}]}}, "crm.accounts.0.status"),
    ])
    def test_new_fields_and_services_name_the_record(self, data, message):
        with pytest.raises(ValidationError) as info:
            ServicesSeed.model_validate(data)
        errors = [".".join(map(str, e["loc"])) + ": " + e["msg"] for e in info.value.errors()]
        assert len(errors) == 1 and message in errors[0] and errors[0].startswith(next(iter(data))), errors

    def test_existing_seeds_keep_their_meaning(self):
        """Left out, the new fields take defaults that change nothing an older spec relied on."""
        seed = ServicesSeed.model_validate({"tickets": {"tickets": [{"title": "t", "requester": "a@b.com"}]},
                                            "crm": {"accounts": [{"name": "A"}]}})
        ctx = ServiceContext(db=open_db())
        seed_all(ctx, seed)
        dump = dump_state(ctx.db)
        assert dump["tickets"]["tickets"]["tkt-1"]["priority"] == "normal"
        assert dump["tickets"]["tickets"]["tkt-1"]["due"] == "2026-03-03T08:00:00Z"
        assert dump["crm"]["accounts"]["acct-1"]["status"] == "active"
