"""Mail: mailboxes with folders, threads, and messages with attachments."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import mimetypes
import posixpath
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator, Field, field_validator, model_validator

from ..toolhost.errors import ToolError
from .base import (
    READ,
    Email,
    EmailList,
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
    newest_first,
    page,
    parse_time,
    resolve_time,
    tool_adder,
)

if TYPE_CHECKING:
    from ..toolhost.host import ToolApp

NAME = "mail"
Box = Annotated[str | None, Field(description="Mailbox address; default the first mailbox.")]
MsgId = Annotated[str, Field(description="Message id, as listed by mail_list_messages or mail_search.")]
Recipients = Annotated[EmailList, Field(description="Recipient addresses.")]
LabelFilter = Annotated[str | None, Field(description="Only mail carrying this label (any case).")]
Attachments = Annotated[list[str], Field(description="Workspace files to attach (paths relative to /workspace).")]
#: A message label: any text of 1-64 characters, kept as given (spaces at the ends removed).
Label = Annotated[str, BeforeValidator(lambda v: v.strip() if isinstance(v, str) else v), Field(min_length=1, max_length=64)]
#: Folders every mailbox has.
STANDARD_FOLDERS = ("inbox", "sent", "drafts", "archive", "trash")


class Mailbox(SeedModel):
    """A mailbox the user works in."""

    address: Email
    """The mailbox's address; mail sent from it carries this sender."""
    name: str = ""
    """Display name of its owner."""
    folders: list[str] = []
    """Extra folders beside inbox, sent, drafts, archive and trash."""


#: Largest attached file, seeded or attached by the agent.
MAX_ATTACHMENT_BYTES = 10 << 20
#: Most files one sent message may attach from the workspace.
MAX_ATTACHMENTS = 10
#: The collection holding attached files' bytes (base64), keyed by their SHA-256; messages
#: name them by ``sha256``, so a forwarded file is stored once.
FILES = "files"


class Attachment(SeedModel):
    """A file attached to a message: a real file (``data`` or ``source``) or only its ``text``."""

    name: str = Field(min_length=1, max_length=255)
    """File name, e.g. ``invoice.pdf``."""
    content_type: str = "application/octet-stream"
    """MIME type (guessed from the name when left at the default and the file is given)."""
    text: str = ""
    """Text content shown by mail_read (e.g. the text of a PDF). Without ``data`` or ``source``
    the attachment's file is this text."""
    data: str | None = None
    """The file's bytes, base64-encoded."""
    source: str | None = None
    """A file beside task.yaml (an xlsx, docx, pdf...): load_spec reads it into ``data``."""

    @field_validator("name")
    @classmethod
    def _plain_name(cls, v: str) -> str:
        if "/" in v or "\\" in v or v in (".", "..") or "\0" in v:
            raise ValueError(f"attachment name {v!r} must be a plain file name (no folders)")
        return v

    @field_validator("data")
    @classmethod
    def _base64(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            raw = base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("data is not base64 (give the file as source: a path beside task.yaml)") from None
        if len(raw) > MAX_ATTACHMENT_BYTES:
            raise ValueError(f"the file has {len(raw)} bytes, more than an attachment may ({MAX_ATTACHMENT_BYTES})")
        return v

    @model_validator(mode="after")
    def _one_file(self) -> "Attachment":
        if self.data is not None and self.source is not None:
            raise ValueError("give data or source, not both")
        return self

    def content(self) -> bytes:
        """The attached file's bytes.

        Raises:
            ValueError: ``source`` was never read into ``data`` (the spec did not come
                through load_spec).
        """
        if self.source is not None:
            raise ValueError(f"attachment {self.name!r}: source {self.source!r} was not read; load the spec with load_spec")
        return base64.b64decode(self.data) if self.data is not None else self.text.encode()


def _content_type(name: str, given: str = "application/octet-stream") -> str:
    if given != "application/octet-stream":
        return given
    return mimetypes.guess_type(name, strict=False)[0] or given


def store_file(store: Store, name: str, data: bytes, content_type: str = "application/octet-stream",
               text: str = "") -> dict[str, Any]:
    """Keep ``data`` in the files collection (once per content) and return the attachment's
    entry on a message: name, content type, text, size and SHA-256."""
    digest = hashlib.sha256(data).hexdigest()
    if store.get(FILES, digest) is None:
        store.insert(FILES, {"id": digest, "size": len(data), "data": base64.b64encode(data).decode()})
    return {"name": name, "content_type": _content_type(name, content_type), "text": text,
            "size": len(data), "sha256": digest}


class Message(SeedModel):
    """One mail message."""

    id: str | None = None
    """Stable id; default ``msg-<n>`` by position."""
    mailbox: Email | None = None
    """Address of the mailbox holding it; default the first mailbox."""
    folder: str = "inbox"
    """Folder: inbox, sent, drafts, archive, trash or one of the mailbox's own."""
    thread_id: str | None = None
    """Conversation it belongs to; default its own id."""
    from_: Email = Field(alias="from")
    """Sender address."""
    to: EmailList = []
    """Recipient addresses."""
    cc: EmailList = []
    """Copied addresses."""
    bcc: EmailList = []
    """Blind-copied addresses."""
    subject: str = ""
    """Subject line."""
    body: str = ""
    """Plain-text body."""
    date: SeedTime = "now"
    """When it was sent or received."""
    read: bool = False
    """Whether it has been read."""
    attachments: list[Attachment] = []
    """Attached files."""
    in_reply_to: str | None = None
    """Id of the message this one answers."""
    labels: list[Label] = []
    """Labels on it, e.g. ``urgent`` or ``finance``; any text, kept as given."""


class MailSeed(SeedModel):
    """Initial state of the mail service."""

    mailboxes: list[Mailbox] = Field(default=[Mailbox(address="me@example.com", name="Me")], min_length=1)
    """The user's mailboxes; the first is the default one."""
    messages: list[Message] = []
    """Messages in those mailboxes."""

    @model_validator(mode="after")
    def _refs(self) -> "MailSeed":
        boxes = {b.address: set(STANDARD_FOLDERS) | set(b.folders) for b in self.mailboxes}
        if len(boxes) != len(self.mailboxes):
            raise ValueError("mailboxes: an address is listed twice")
        ids = check_unique(self.messages, "msg", "messages")
        for n, m in enumerate(self.messages):
            box = m.mailbox or self.mailboxes[0].address
            check_ref(m.mailbox, boxes, f"messages[{n}].mailbox", "mailbox")
            if m.folder not in boxes[box]:
                raise ValueError(f"messages[{n}].folder: unknown folder {m.folder!r}; "
                                 f"mailbox {box!r} has {', '.join(sorted(boxes[box]))}")
            check_ref(m.in_reply_to, set(ids), f"messages[{n}].in_reply_to", "message id")
        return self


SEED = MailSeed


def seed(store: Store, data: MailSeed) -> None:
    """Write the seed's records and settings."""
    store.set_meta("mailboxes", [
        {"address": b.address, "name": b.name, "folders": list(STANDARD_FOLDERS) + [f for f in b.folders if f not in STANDARD_FOLDERS]}
        for b in data.mailboxes])
    for rid, m in zip(check_unique(data.messages, "msg", "messages"), data.messages):
        store.insert("messages", {
            "id": rid, "mailbox": m.mailbox or data.mailboxes[0].address, "folder": m.folder,
            "thread_id": m.thread_id or rid, "from": m.from_, "to": m.to, "cc": m.cc, "bcc": m.bcc,
            "subject": m.subject, "body": m.body, "date": resolve_time(m.date, store.now), "read": m.read,
            "attachments": [store_file(store, a.name, a.content(), a.content_type, a.text) for a in m.attachments],
            "in_reply_to": m.in_reply_to,
            "labels": _merge_labels([], m.labels),
        })


def _merge_labels(labels: list[str], add: list[str]) -> list[str]:
    """``labels`` then each of ``add`` not already there; labels compare without case."""
    out, have = list(labels), {x.lower() for x in labels}
    for x in add:
        if x.lower() not in have:
            out.append(x)
            have.add(x.lower())
    return out


def _summary(m: dict[str, Any]) -> dict[str, Any]:
    return {"id": m["id"], "folder": m["folder"], "thread_id": m["thread_id"], "from": m["from"],
            "to": m["to"], "subject": m["subject"], "date": m["date"], "read": m["read"],
            "attachments": [a["name"] for a in m["attachments"]], "labels": m["labels"], "snippet": m["body"][:120]}


def register(mcp: ToolApp, ctx: ServiceContext, allowed: set[str]) -> None:
    """Add the allowed mail tools to ``mcp``."""
    store = Store(ctx, NAME)
    tool = tool_adder(mcp, allowed)

    def get_box(address: str | None) -> dict[str, Any]:
        boxes = store.meta("mailboxes") or [{"address": "me@example.com", "name": "Me", "folders": list(STANDARD_FOLDERS)}]
        if address is None:
            return boxes[0]
        for b in boxes:
            if b["address"] == address.lower():
                return b
        raise ToolError(f"Unknown mailbox {address!r}; mailboxes: {', '.join(b['address'] for b in boxes)}")

    def labelled(m: dict[str, Any], label: str | None) -> bool:
        return label is None or label.strip().lower() in (x.lower() for x in m["labels"])

    def folder_of(box: dict[str, Any], folder: str) -> str:
        if folder not in box["folders"]:
            raise ToolError(f"Unknown folder {folder!r}; folders: {', '.join(box['folders'])}")
        return folder

    def create(box: dict[str, Any], folder: str, action: str, **fields: Any) -> dict[str, Any]:
        rid = store.new_id("messages", "msg")
        rec = {"id": rid, "mailbox": box["address"], "folder": folder, "thread_id": fields.pop("thread_id", None) or rid,
               "from": box["address"], "to": [], "cc": [], "bcc": [], "subject": "", "body": "",
               "date": iso(store.now), "read": True, "attachments": [], "in_reply_to": None, "labels": []}
        rec.update(fields)
        store.insert("messages", rec)
        store.audit(action, [rid], sorted(k for k in rec if k != "id"))
        return rec

    @tool("mail_list_folders", READ)
    def mail_list_folders(mailbox: Box = None) -> dict:
        """List the folders of a mailbox with their message and unread counts, and the labels in use."""
        with store.tx():
            box = get_box(mailbox)
            msgs = [m for m in store.all("messages") if m["mailbox"] == box["address"]]
        labels = sorted({lab for m in msgs for lab in m["labels"]})
        return {"mailbox": box["address"], "folders": [
            {"name": f, "total": sum(m["folder"] == f for m in msgs),
             "unread": sum(m["folder"] == f and not m["read"] for m in msgs)} for f in box["folders"]],
            "labels": [{"name": lab, "total": sum(lab in m["labels"] for m in msgs),
                        "unread": sum(lab in m["labels"] and not m["read"] for m in msgs)} for lab in labels]}

    @tool("mail_list_messages", READ)
    def mail_list_messages(folder: str = "inbox", unread_only: bool = False, label: LabelFilter = None,
                           mailbox: Box = None, offset: Offset = 0, limit: Limit = 20) -> dict:
        """List messages of a folder, newest first."""
        with store.tx():
            box = get_box(mailbox)
            folder_of(box, folder)
            msgs = [m for m in store.all("messages") if m["mailbox"] == box["address"] and m["folder"] == folder
                    and not (unread_only and m["read"]) and labelled(m, label)]
        return page([_summary(m) for m in newest_first(msgs, "date")], offset, limit, "messages")

    @tool("mail_search", READ)
    def mail_search(
        query: Annotated[str, Field(description="Words that must all occur in subject, body, addresses or attachment names.")] = "",
        from_address: Annotated[str | None, Field(description="Only mail whose sender contains this text.")] = None,
        to_address: Annotated[str | None, Field(description="Only mail whose recipients contain this text.")] = None,
        folder: Annotated[str | None, Field(description="Only this folder; default all folders.")] = None,
        has_attachment: Annotated[bool | None, Field(description="Only mail with (true) or without (false) attachments.")] = None,
        label: LabelFilter = None,
        after: Annotated[str | None, Field(description="Only mail sent at or after this ISO 8601 time.")] = None,
        before: Annotated[str | None, Field(description="Only mail sent before this ISO 8601 time.")] = None,
        mailbox: Box = None, offset: Offset = 0, limit: Limit = 20,
    ) -> dict:
        """Search messages, newest first."""
        lo = iso(parse_time(after, "after")) if after else None
        hi = iso(parse_time(before, "before")) if before else None
        with store.tx():
            box = get_box(mailbox)
            if folder is not None:
                folder_of(box, folder)
            msgs = store.all("messages")
        hits = [m for m in msgs if m["mailbox"] == box["address"]
                and (folder is None or m["folder"] == folder)
                and matches(query, m["subject"], m["body"], m["from"], *m["to"], *m["cc"], *(a["name"] for a in m["attachments"]))
                and (from_address is None or from_address.lower() in m["from"])
                and (to_address is None or any(to_address.lower() in a for a in m["to"] + m["cc"]))
                and (has_attachment is None or bool(m["attachments"]) == has_attachment) and labelled(m, label)
                and (lo is None or m["date"] >= lo) and (hi is None or m["date"] < hi)]
        return page([_summary(m) for m in newest_first(hits, "date")], offset, limit, "messages")

    @tool("mail_read", READ)
    def mail_read(message_id: MsgId) -> dict:
        """Read a whole message, with its attachments' text and the other messages of its thread."""
        with store.tx():
            m = store.require("messages", message_id, "message")
            thread = [_summary(t) for t in store.all("messages") if t["thread_id"] == m["thread_id"] and t["id"] != m["id"]]
        return {**m, "thread": thread}


    async def workspace_files(paths: list[str]) -> list[tuple[str, bytes]]:
        """The named workspace files as ``(name, bytes)``, read as the agent."""
        if not paths:
            return []
        if ctx.files is None:
            raise ToolError("This server has no workspace to attach files from")
        if len(paths) > MAX_ATTACHMENTS:
            raise ToolError(f"At most {MAX_ATTACHMENTS} attachments per message; got {len(paths)}")
        out = []
        for path in paths:
            rel, data = await ctx.files.read(path, MAX_ATTACHMENT_BYTES)
            out.append((posixpath.basename(rel), data))
        return out

    def attach(files: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
        return [store_file(store, name, data) for name, data in files]

    @tool("mail_send", hints(open_world=True))
    async def mail_send(to: Annotated[EmailList, Field(min_length=1, description="Recipient addresses.")],
                        subject: str, body: str, cc: Recipients = [], bcc: Recipients = [],
                        mailbox: Box = None, attachments: Attachments = []) -> dict:
        """Send a new message; it leaves the organisation and cannot be recalled."""
        files = await workspace_files(attachments)

        def send() -> dict[str, Any]:
            with store.tx():
                box = get_box(mailbox)
                extra = {"attachments": attach(files)} if files else {}
                return create(box, "sent", "send", to=to, cc=cc, bcc=bcc, subject=subject, body=body, **extra)
        return {"status": "sent", "message": _summary(await asyncio.to_thread(send))}

    @tool("mail_reply", hints(open_world=True))
    async def mail_reply(message_id: MsgId, body: str,
                         reply_all: Annotated[bool, Field(description="Also reply to every other recipient.")] = False,
                         attachments: Attachments = []) -> dict:
        """Reply to a message, in its thread; it leaves the organisation and cannot be recalled."""
        files = await workspace_files(attachments)

        def reply() -> dict[str, Any]:
            with store.tx():
                m = store.require("messages", message_id, "message")
                box = get_box(m["mailbox"])
                mine = m["from"] == box["address"]
                to = list(m["to"]) if mine else [m["from"]]
                cc = [a for a in m["to"] + m["cc"] if a != box["address"] and a not in to] if reply_all else []
                subject = m["subject"] if m["subject"].lower().startswith("re:") else f"Re: {m['subject']}"
                extra = {"attachments": attach(files)} if files else {}
                return create(box, "sent", "reply", to=to, cc=cc, subject=subject, body=body,
                              thread_id=m["thread_id"], in_reply_to=m["id"], **extra)
        return {"status": "sent", "message": _summary(await asyncio.to_thread(reply))}

    @tool("mail_forward", hints(open_world=True))
    async def mail_forward(message_id: MsgId,
                           to: Annotated[EmailList, Field(min_length=1, description="Addresses to forward to.")],
                           body: Annotated[str, Field(description="Note above the forwarded message.")] = "",
                           attachments: Attachments = []) -> dict:
        """Forward a message with its attachments; it leaves the organisation and cannot be recalled."""
        files = await workspace_files(attachments)

        def forward() -> dict[str, Any]:
            with store.tx():
                m = store.require("messages", message_id, "message")
                box = get_box(m["mailbox"])
                quoted = f"{body}\n\n---------- Forwarded message ----------\nFrom: {m['from']}\nDate: {m['date']}\n" \
                         f"Subject: {m['subject']}\n\n{m['body']}"
                return create(box, "sent", "forward", to=to, subject=f"Fwd: {m['subject']}", body=quoted.lstrip("\n"),
                              attachments=m["attachments"] + attach(files), thread_id=m["thread_id"],
                              in_reply_to=m["id"])
        return {"status": "sent", "message": _summary(await asyncio.to_thread(forward))}

    @tool("mail_save_attachment", hints())
    async def mail_save_attachment(
        message_id: MsgId,
        name: Annotated[str, Field(description="The attachment's file name, as mail_read lists it.")],
        path: Annotated[str, Field(description="Where to save it, relative to /workspace or absolute.")],
        overwrite: Annotated[bool, Field(description="Replace a file already at path.")] = False,
    ) -> dict:
        """Save a message's attachment as a file in the workspace (then read it with read_document or read_file)."""
        def find() -> tuple[dict[str, Any], bytes]:
            with store.tx():
                m = store.require("messages", message_id, "message")
                entry = next((a for a in m["attachments"] if a["name"] == name), None)
                if entry is None:
                    names = ", ".join(repr(a["name"]) for a in m["attachments"]) or "none"
                    raise ToolError(f"Message {message_id!r} has no attachment {name!r}; its attachments: {names}")
                blob = store.get(FILES, entry.get("sha256", ""))
            data = base64.b64decode(blob["data"]) if blob else entry.get("text", "").encode()
            return entry, data
        if ctx.files is None:
            raise ToolError("This server has no workspace to save attachments into")
        entry, data = await asyncio.to_thread(find)
        rel = await ctx.files.write(path, data, overwrite)
        return {"path": rel, "name": entry["name"], "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    @tool("mail_draft", hints())
    def mail_draft(to: Recipients = [], subject: str = "", body: str = "", cc: Recipients = [],
                   in_reply_to: Annotated[str | None, Field(description="Id of the message this draft answers.")] = None,
                   mailbox: Box = None) -> dict:
        """Save a draft in the drafts folder without sending it."""
        with store.tx():
            box = get_box(mailbox)
            thread = None
            if in_reply_to is not None:
                thread = store.require("messages", in_reply_to, "message")["thread_id"]
            rec = create(box, "drafts", "draft", to=to, cc=cc, subject=subject, body=body,
                         thread_id=thread, in_reply_to=in_reply_to)
        return {"status": "draft saved", "message": _summary(rec)}

    @tool("mail_move", hints(idempotent=True))
    def mail_move(message_id: MsgId, folder: Annotated[str, Field(description="Destination folder.")]) -> dict:
        """Move a message to another folder."""
        with store.tx():
            m = store.require("messages", message_id, "message")
            folder_of(get_box(m["mailbox"]), folder)
            rec, changed = store.update("messages", message_id, {"folder": folder})
            store.audit("move", [message_id], changed)
        return {"message": _summary(rec)}

    @tool("mail_delete", hints(destructive=True))
    def mail_delete(message_id: MsgId) -> dict:
        """Move a message to trash; a message already in trash is deleted for good."""
        with store.tx():
            m = store.require("messages", message_id, "message")
            if m["folder"] == "trash":
                store.delete("messages", message_id)
                store.audit("delete", [message_id], [])
                return {"id": message_id, "status": "deleted permanently"}
            store.update("messages", message_id, {"folder": "trash"})
            store.audit("trash", [message_id], ["folder"])
        return {"id": message_id, "status": "moved to trash"}

    @tool("mail_mark_read", hints(idempotent=True))
    def mail_mark_read(message_ids: Annotated[list[str], Field(min_length=1, description="Message ids.")],
                       read: Annotated[bool, Field(description="True marks read, false marks unread.")] = True) -> dict:
        """Mark messages read or unread."""
        with store.tx():
            for rid in message_ids:
                store.require("messages", rid, "message")
            changed = [rid for rid in message_ids if store.update("messages", rid, {"read": read})[1]]
            if changed:
                store.audit("mark_read" if read else "mark_unread", changed, ["read"])
        return {"updated": changed, "read": read}

    @tool("mail_label", hints(idempotent=True))
    def mail_label(message_ids: Annotated[list[str], Field(min_length=1, description="Message ids.")],
                   add: Annotated[list[Label], Field(description="Labels to put on every message.")] = [],
                   remove: Annotated[list[Label], Field(description="Labels to take off (any case); absent ones are ignored.")] = []) -> dict:
        """Add labels to messages and remove labels from them."""
        if not add and not remove:
            raise ToolError("Nothing to change: give labels to add or remove")
        clash = {x.lower() for x in add} & {x.lower() for x in remove}
        if clash:
            raise ToolError(f"Label {sorted(clash)[0]!r} is both added and removed; give it once")
        gone = {x.lower() for x in remove}
        with store.tx():
            for rid in message_ids:
                store.require("messages", rid, "message")
            changed = []
            for rid in dict.fromkeys(message_ids):
                old = store.require("messages", rid, "message")["labels"]
                new = _merge_labels([x for x in old if x.lower() not in gone], add)
                if store.update("messages", rid, {"labels": new})[1]:
                    changed.append(rid)
            if changed:
                store.audit("label", changed, ["labels"])
            return {"updated": changed,
                    "labels": {rid: store.require("messages", rid, "message")["labels"]
                               for rid in dict.fromkeys(message_ids)}}
