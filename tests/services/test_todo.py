"""To-do tools."""

from __future__ import annotations

from cowork.services.registry import dump_state

from .support import actions, call, fails


def tasks(env):
    return dump_state(env.ctx.db)["todo"]["tasks"]


class TestTodo:
    async def test_list(self, client):
        out = await call(client, "todo_list")
        assert [(t["id"], t["overdue"]) for t in out["tasks"]] == [("task-3", True), ("task-1", False)]
        assert [t["id"] for t in (await call(client, "todo_list", status="done"))["tasks"]] == ["task-2"]
        assert [t["id"] for t in (await call(client, "todo_list", list_id="work"))["tasks"]] == ["task-1"]
        assert [t["id"] for t in (await call(client, "todo_list", query="finance", status="all"))["tasks"]] == ["task-3"]
        await fails(client, "todo_list", "Unknown list id 'home'", list_id="home")

    async def test_create(self, client, env):
        out = await call(client, "todo_create", title="Book flight", due="2026-03-10", list_id="work")
        assert tasks(env)[out["id"]]["due"] == "2026-03-10"
        assert (await call(client, "todo_create", title="Inbox item"))["list_id"] == "inbox"
        await fails(client, "todo_create", "Bad date for due: 'friday'", title="x", due="friday")
        await fails(client, "todo_create", "Unknown list id", title="x", list_id="home")

    async def test_update(self, client, env):
        out = await call(client, "todo_update", task_id="task-1", due="none", list_id="inbox", notes="later")
        assert out["changed"] == ["due", "list_id", "notes"]
        await fails(client, "todo_update", "Nothing to change", task_id="task-1")
        await fails(client, "todo_update", "Unknown task id", task_id="t", title="x")
        await fails(client, "todo_update", "Unknown list id", task_id="task-1", list_id="home")
        await fails(client, "todo_update", "Bad date", task_id="task-1", due="someday")

    async def test_complete_and_reopen(self, client, env):
        out = await call(client, "todo_complete", task_id="task-1")
        assert out["done"] is True and out["completed"] == "2026-03-02T09:00:00Z"
        assert (await call(client, "todo_complete", task_id="task-1", done=False))["completed"] is None
        assert actions(env) == [("todo", "complete"), ("todo", "reopen")]
        await fails(client, "todo_complete", "Unknown task id", task_id="x")

    async def test_delete(self, client, env):
        await call(client, "todo_delete", task_id="task-2")
        assert "task-2" not in tasks(env)
        await fails(client, "todo_delete", "Unknown task id 'task-2'", task_id="task-2")
