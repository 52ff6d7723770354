"""To-do: task lists and tasks with due dates, priorities and notes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from ..toolhost.errors import ToolError
from .base import (
    READ,
    Limit,
    Offset,
    SeedDay,
    SeedModel,
    ServiceContext,
    Store,
    check_ref,
    check_unique,
    hints,
    iso,
    matches,
    page,
    parse_day,
    resolve_day,
    tool_adder,
)

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "todo"
Priority = Literal["low", "normal", "high"]
TaskId = Annotated[str, Field(description="Task id, as listed by todo_list.")]
_ORDER = {"high": 0, "normal": 1, "low": 2}


class TaskList(SeedModel):
    """A list of tasks."""

    id: str = Field(min_length=1)
    """Stable id, e.g. ``inbox``."""
    name: str = ""
    """Display name."""


class Task(SeedModel):
    """One task."""

    id: str | None = None
    """Stable id; default ``task-<n>`` by position."""
    list_id: str | None = None
    """List holding it; default the first list."""
    title: str = Field(min_length=1)
    """What to do."""
    notes: str = ""
    """Details."""
    due: SeedDay | None = None
    """Due date."""
    priority: Priority = "normal"
    """Priority."""
    done: bool = False
    """Whether it is done."""
    tags: list[str] = []
    """Labels."""


class TodoSeed(SeedModel):
    """Initial state of the to-do service."""

    lists: list[TaskList] = Field(default=[TaskList(id="inbox", name="Inbox")], min_length=1)
    """Task lists; the first is the default."""
    tasks: list[Task] = []
    """Tasks."""

    @model_validator(mode="after")
    def _refs(self) -> "TodoSeed":
        lists = {t.id for t in self.lists}
        if len(lists) != len(self.lists):
            raise ValueError("lists: an id is listed twice")
        check_unique(self.tasks, "task", "tasks")
        for n, t in enumerate(self.tasks):
            check_ref(t.list_id, lists, f"tasks[{n}].list_id", "list")
        return self


SEED = TodoSeed


def seed(store: Store, data: TodoSeed) -> None:
    """Write the seed's records and settings."""
    store.set_meta("lists", [t.model_dump() for t in data.lists])
    for rid, t in zip(check_unique(data.tasks, "task", "tasks"), data.tasks):
        store.insert("tasks", {**t.model_dump(), "id": rid, "list_id": t.list_id or data.lists[0].id,
                               "due": resolve_day(t.due, store.now) if t.due else None, "completed": None})


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed to-do tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    def lists() -> list[dict[str, Any]]:
        return store.meta("lists") or [{"id": "inbox", "name": "Inbox"}]

    def list_ok(list_id: str | None) -> str:
        known = [t["id"] for t in lists()]
        if list_id is None:
            return known[0]
        if list_id not in known:
            raise ToolError(f"Unknown list id {list_id!r}; lists: {', '.join(known)}")
        return list_id

    def view(t: dict[str, Any]) -> dict[str, Any]:
        return {**t, "overdue": not t["done"] and t["due"] is not None and t["due"] < iso(store.now)[:10]}

    @tool("todo_list", READ)
    def todo_list(list_id: Annotated[str | None, Field(description="Only this list; default all lists.")] = None,
                  status: Literal["open", "done", "all"] = "open",
                  query: Annotated[str, Field(description="Words that must occur in title, notes or tags.")] = "",
                  offset: Offset = 0, limit: Limit = 50) -> dict:
        """List tasks, soonest due and most important first."""
        with store.tx():
            if list_id is not None:
                list_ok(list_id)
            tasks = [t for t in store.all("tasks") if (list_id is None or t["list_id"] == list_id)
                     and (status == "all" or t["done"] == (status == "done"))
                     and matches(query, t["title"], t["notes"], *t["tags"])]
            all_lists = lists()
        tasks.sort(key=lambda t: (t["due"] or "9999", _ORDER[t["priority"]], t["id"]))
        return {"lists": all_lists, **page([view(t) for t in tasks], offset, limit, "tasks")}

    @tool("todo_create", hints())
    def todo_create(title: Annotated[str, Field(min_length=1)], notes: str = "",
                    due: Annotated[str | None, Field(description="Due date, YYYY-MM-DD.")] = None,
                    priority: Priority = "normal", list_id: str | None = None, tags: list[str] = []) -> dict:
        """Add a task."""
        day = parse_day(due, "due") if due else None
        with store.tx():
            rid = store.new_id("tasks", "task")
            rec = {"id": rid, "list_id": list_ok(list_id), "title": title, "notes": notes, "due": day,
                   "priority": priority, "done": False, "tags": list(tags), "completed": None}
            store.insert("tasks", rec)
            store.audit("create", [rid], [k for k in rec if k != "id"])
        return view(rec)

    @tool("todo_update", hints(destructive=True, idempotent=True))
    def todo_update(task_id: TaskId, title: str | None = None, notes: str | None = None,
                    due: Annotated[str | None, Field(description="Due date, YYYY-MM-DD, or 'none' to clear it.")] = None,
                    priority: Priority | None = None, list_id: str | None = None,
                    tags: list[str] | None = None) -> dict:
        """Change a task's title, notes, due date, priority, list or tags."""
        changes: dict[str, Any] = {k: v for k, v in (("title", title), ("notes", notes), ("priority", priority),
                                                     ("tags", tags)) if v is not None}
        if due is not None:
            changes["due"] = None if due == "none" else parse_day(due, "due")
        with store.tx():
            store.require("tasks", task_id, "task")
            if list_id is not None:
                changes["list_id"] = list_ok(list_id)
            if not changes:
                raise ToolError("Nothing to change: give title, notes, due, priority, list_id or tags")
            rec, changed = store.update("tasks", task_id, changes)
            if changed:
                store.audit("update", [task_id], changed)
        return {**view(rec), "changed": changed}

    @tool("todo_complete", hints(idempotent=True))
    def todo_complete(task_id: TaskId, done: Annotated[bool, Field(description="False reopens the task.")] = True) -> dict:
        """Mark a task done (or open again)."""
        with store.tx():
            store.require("tasks", task_id, "task")
            rec, changed = store.update("tasks", task_id, {"done": done})
            if changed:
                rec, _ = store.update("tasks", task_id, {"completed": iso(store.now) if done else None})
                store.audit("complete" if done else "reopen", [task_id], ["completed", "done"])
        return view(rec)

    @tool("todo_delete", hints(destructive=True))
    def todo_delete(task_id: TaskId) -> dict:
        """Delete a task for good."""
        with store.tx():
            store.require("tasks", task_id, "task")
            store.delete("tasks", task_id)
            store.audit("delete", [task_id], [])
        return {"id": task_id, "status": "deleted"}
