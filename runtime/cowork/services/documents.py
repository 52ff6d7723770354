"""Documents: a drive of folders and text documents with sharing permissions and versions."""

from __future__ import annotations

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
    check_ref,
    check_unique,
    hints,
    iso,
    matches,
    page,
    resolve_time,
    snippet,
    tool_adder,
)

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "documents"
Role = Literal["viewer", "commenter", "editor"]
DocId = Annotated[str, Field(description="Document id, as listed by documents_list or documents_search.")]
_RANK = {"viewer": 1, "commenter": 2, "editor": 3, "owner": 4}


class Folder(SeedModel):
    """A folder of the drive."""

    id: str | None = None
    """Stable id; default ``folder-<n>`` by position."""
    name: str = Field(min_length=1)
    """Folder name."""
    parent_id: str | None = None
    """Enclosing folder; none for the top level."""


class Revision(SeedModel):
    """An earlier version of a document."""

    content: str
    """The text of that version."""
    author: Email | None = None
    """Who wrote it; default the owner."""
    at: SeedTime = "now-1d"
    """When it was saved."""


class Document(SeedModel):
    """A text document."""

    id: str | None = None
    """Stable id; default ``doc-<n>`` by position."""
    title: str = Field(min_length=1)
    """Title."""
    content: str = ""
    """Current text."""
    folder_id: str | None = None
    """Folder holding it; none for the top level."""
    owner: Email | None = None
    """Owner; default the user."""
    shared_with: dict[Email, Role] = {}
    """Addresses the document is shared with, and their roles."""
    visibility: Literal["private", "org"] = "private"
    """``org`` lets everyone in the organisation view it."""
    modified: SeedTime = "now-1d"
    """When the current version was saved."""
    history: list[Revision] = []
    """Earlier versions, oldest first; the current text is the version after them."""


class DocumentsSeed(SeedModel):
    """Initial state of the documents service."""

    user: Email = "me@example.com"
    """The user's address; permissions are checked against it."""
    folders: list[Folder] = []
    """Folders."""
    documents: list[Document] = []
    """Documents."""

    @model_validator(mode="after")
    def _refs(self) -> "DocumentsSeed":
        folders = set(check_unique(self.folders, "folder", "folders"))
        for n, f in enumerate(self.folders):
            check_ref(f.parent_id, folders, f"folders[{n}].parent_id", "folder")
        check_unique(self.documents, "doc", "documents")
        for n, d in enumerate(self.documents):
            check_ref(d.folder_id, folders, f"documents[{n}].folder_id", "folder")
        return self


SEED = DocumentsSeed


def seed(store: Store, data: DocumentsSeed) -> None:
    """Write the seed's records and settings."""
    store.set_meta("user", data.user)
    for rid, f in zip(check_unique(data.folders, "folder", "folders"), data.folders):
        store.insert("folders", {"id": rid, "name": f.name, "parent_id": f.parent_id})
    for rid, d in zip(check_unique(data.documents, "doc", "documents"), data.documents):
        owner = d.owner or data.user
        modified = resolve_time(d.modified, store.now)
        for n, r in enumerate(d.history, start=1):
            store.insert("versions", {"id": f"{rid}@v{n}", "document_id": rid, "version": n, "title": d.title,
                                      "content": r.content, "author": r.author or owner,
                                      "at": resolve_time(r.at, store.now)})
        version = len(d.history) + 1
        store.insert("versions", {"id": f"{rid}@v{version}", "document_id": rid, "version": version, "title": d.title,
                                  "content": d.content, "author": owner, "at": modified})
        store.insert("documents", {"id": rid, "title": d.title, "content": d.content, "folder_id": d.folder_id,
                                   "owner": owner, "shared_with": dict(d.shared_with), "visibility": d.visibility,
                                   "version": version, "modified": modified, "modified_by": owner})


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed documents tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    def user() -> str:
        return store.meta("user", "me@example.com")

    def role(d: dict[str, Any]) -> str | None:
        me = user()
        if d["owner"] == me:
            return "owner"
        return d["shared_with"].get(me) or ("viewer" if d["visibility"] == "org" else None)

    def visible() -> list[dict[str, Any]]:
        return [d for d in store.all("documents") if role(d)]

    def access(document_id: str, need: str) -> dict[str, Any]:
        d = store.require("documents", document_id, "document")
        have = role(d)
        if have is None:
            raise ToolError(f"Permission denied: document {document_id!r} is not shared with {user()!r}")
        if _RANK[have] < _RANK[need]:
            raise ToolError(f"Permission denied: {need} rights needed on document {document_id!r}, you are {have}")
        return d

    def summary(d: dict[str, Any]) -> dict[str, Any]:
        return {"id": d["id"], "title": d["title"], "folder_id": d["folder_id"], "owner": d["owner"],
                "version": d["version"], "modified": d["modified"], "your_role": role(d)}

    def save(d: dict[str, Any], changes: dict[str, Any], action: str) -> tuple[dict[str, Any], list[str]]:
        version = d["version"] + 1
        changes = {**changes, "version": version, "modified": iso(store.now), "modified_by": user()}
        rec, changed = store.update("documents", d["id"], changes)
        vid = f"{d['id']}@v{version}"
        store.insert("versions", {"id": vid, "document_id": d["id"], "version": version, "title": rec["title"],
                                  "content": rec["content"], "author": user(), "at": iso(store.now)})
        store.audit(action, [d["id"], vid], changed)
        return rec, changed

    @tool("documents_list", READ)
    def documents_list(folder_id: Annotated[str | None, Field(description="Folder to list; default the top level.")] = None,
                       offset: Offset = 0, limit: Limit = 20) -> dict:
        """List the sub-folders and the documents you can see in a folder."""
        with store.tx():
            if folder_id is not None:
                store.require("folders", folder_id, "folder")
            folders = [f for f in store.all("folders") if f["parent_id"] == folder_id]
            docs = sorted((summary(d) for d in visible() if d["folder_id"] == folder_id), key=lambda d: d["title"].lower())
        return {"folder_id": folder_id, "folders": folders, **page(docs, offset, limit, "documents")}

    @tool("documents_search", READ)
    def documents_search(query: Annotated[str, Field(description="Words that must all occur in the title or text.")],
                         offset: Offset = 0, limit: Limit = 20) -> dict:
        """Search the documents you can see, with a snippet of each hit."""
        with store.tx():
            hits = [{**summary(d), "snippet": snippet(d["content"], query)} for d in visible()
                    if matches(query, d["title"], d["content"])]
        return page(hits, offset, limit, "documents")

    @tool("documents_read", READ)
    def documents_read(document_id: DocId,
                       version: Annotated[int | None, Field(ge=1, description="An earlier version to read; default the current.")] = None) -> dict:
        """Read a document's text and sharing, or one of its earlier versions."""
        with store.tx():
            d = access(document_id, "viewer")
            if version is None:
                return {**d, "your_role": role(d)}
            v = store.get("versions", f"{document_id}@v{version}")
            if v is None:
                raise ToolError(f"Document {document_id!r} has no version {version}; it has 1 to {d['version']}")
            return {**v, "current_version": d["version"]}

    @tool("documents_versions", READ)
    def documents_versions(document_id: DocId) -> dict:
        """List a document's versions, oldest first."""
        with store.tx():
            access(document_id, "viewer")
            versions = [{k: v[k] for k in ("version", "title", "author", "at")} | {"chars": len(v["content"])}
                        for v in store.all("versions") if v["document_id"] == document_id]
        return {"document_id": document_id, "versions": sorted(versions, key=lambda v: v["version"])}

    @tool("documents_create", hints())
    def documents_create(title: Annotated[str, Field(min_length=1)], content: str = "",
                         folder_id: Annotated[str | None, Field(description="Folder; default the top level.")] = None) -> dict:
        """Create a document owned by you."""
        with store.tx():
            if folder_id is not None:
                store.require("folders", folder_id, "folder")
            rid = store.new_id("documents", "doc")
            now = iso(store.now)
            rec: dict[str, Any] = {"id": rid, "title": title, "content": content, "folder_id": folder_id, "owner": user(),
                   "shared_with": {}, "visibility": "private", "version": 1, "modified": now, "modified_by": user()}
            store.insert("documents", rec)
            store.insert("versions", {"id": f"{rid}@v1", "document_id": rid, "version": 1, "title": title,
                                      "content": content, "author": user(), "at": now})
            store.audit("create", [rid, f"{rid}@v1"], [k for k in rec if k != "id"])
        return summary(rec)

    @tool("documents_edit", hints(destructive=True))
    def documents_edit(
        document_id: DocId,
        content: Annotated[str | None, Field(description="The whole new text.")] = None,
        append: Annotated[str | None, Field(description="Text to add at the end.")] = None,
        old_text: Annotated[str | None, Field(description="Exact text to replace (with new_text); must occur once.")] = None,
        new_text: Annotated[str | None, Field(description="Replacement for old_text.")] = None,
        title: Annotated[str | None, Field(min_length=1, description="A new title.")] = None,
    ) -> dict:
        """Edit a document (needs editor rights); each edit saves a new version."""
        given = [name for name, v in (("content", content), ("append", append), ("old_text", old_text)) if v is not None]
        if len(given) > 1:
            raise ToolError(f"Give only one of content, append, old_text; got {', '.join(given)}")
        if not given and title is None:
            raise ToolError("Nothing to change: give content, append, old_text/new_text or title")
        if (old_text is None) != (new_text is None):
            raise ToolError("old_text and new_text go together")
        with store.tx():
            d = access(document_id, "editor")
            text = d["content"]
            if content is not None:
                text = content
            elif append is not None:
                text = text + append
            elif old_text is not None:
                count = text.count(old_text)
                if count != 1:
                    raise ToolError(f"old_text {old_text[:60]!r} occurs {count} times in {document_id!r}; it must occur once")
                text = text.replace(old_text, new_text)
            rec, changed = save(d, {"content": text, **({"title": title} if title else {})}, "edit")
        return {**summary(rec), "changed": changed}

    @tool("documents_share", hints(idempotent=True, open_world=True))
    def documents_share(document_id: DocId, email: Annotated[Email, Field(description="Address to share with.")],
                        role: Annotated[Literal["viewer", "commenter", "editor", "none"],
                                        Field(description="Role to grant; 'none' removes access.")]) -> dict:
        """Share a document with someone, change their role, or remove their access (needs editor rights)."""
        with store.tx():
            d = access(document_id, "editor")
            if email == d["owner"]:
                raise ToolError(f"{email!r} owns document {document_id!r}; an owner's role cannot change")
            shared = {k: v for k, v in d["shared_with"].items() if k != email}
            if role != "none":
                shared[email] = role
            rec, changed = store.update("documents", document_id, {"shared_with": dict(sorted(shared.items()))})
            if changed:
                store.audit("share", [document_id], changed)
        return {"id": document_id, "shared_with": rec["shared_with"]}

    @tool("documents_delete", hints(destructive=True))
    def documents_delete(document_id: DocId) -> dict:
        """Delete a document and all its versions for good (owner only)."""
        with store.tx():
            access(document_id, "owner")
            ids = [v["id"] for v in store.all("versions") if v["document_id"] == document_id]
            store.delete("documents", document_id)
            for vid in ids:
                store.delete("versions", vid)
            store.audit("delete", [document_id, *ids], [])
        return {"id": document_id, "status": "deleted"}
