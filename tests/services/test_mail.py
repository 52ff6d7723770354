"""Mail tools: happy paths and every error path."""

from __future__ import annotations

from cowork.services.registry import dump_state

from .support import ME, actions, call, fails


def messages(env):
    return dump_state(env.ctx.db)["mail"]["messages"]


class TestReading:
    async def test_folders_count_unread(self, client):
        out = await call(client, "mail_list_folders")
        folders = {f["name"]: f for f in out["folders"]}
        assert out["mailbox"] == ME and "projects" in folders
        assert folders["inbox"] == {"name": "inbox", "total": 3, "unread": 3}
        await fails(client, "mail_list_folders", "Unknown mailbox 'x@y.com'", mailbox="x@y.com")

    async def test_list_newest_first_and_other_mailbox(self, client):
        out = await call(client, "mail_list_messages")
        assert [m["id"] for m in out["messages"]] == ["msg-2", "msg-5", "msg-1"]
        support = await call(client, "mail_list_messages", mailbox="support@acme.com")
        assert [m["id"] for m in support["messages"]] == ["sup-1"]
        await fails(client, "mail_list_messages", "Unknown folder 'spam'", folder="spam")
        await fails(client, "mail_list_messages", "Unknown mailbox", mailbox="nobody@acme.com")

    async def test_search_filters(self, client):
        ids = lambda out: [m["id"] for m in out["messages"]]
        assert ids(await call(client, "mail_search", query="q3 report")) == ["msg-5", "msg-1"]
        assert ids(await call(client, "mail_search", has_attachment=True)) == ["msg-1"]
        assert ids(await call(client, "mail_search", from_address="acme-security")) == ["msg-2"]
        assert ids(await call(client, "mail_search", to_address="carol@")) == ["msg-5"]
        assert ids(await call(client, "mail_search", folder="sent")) == ["msg-3"]
        assert ids(await call(client, "mail_search", after="2026-03-01T12:00:00Z", before="2026-03-02T06:00:00Z")) == ["msg-5"]
        assert ids(await call(client, "mail_search", query="revenue")) == []  # attachment text is not searched
        await fails(client, "mail_search", r"Bad date for after: 'yesterday'", after="yesterday")
        await fails(client, "mail_search", "Unknown folder 'x'", folder="x")

    async def test_read_shows_thread_and_attachment_text(self, client):
        m = await call(client, "mail_read", message_id="msg-1")
        assert m["attachments"][0]["text"] == "Revenue up 12%"
        assert [t["id"] for t in m["thread"]] == ["msg-5"]
        assert m["read"] is False  # reading changes nothing; mail_mark_read does
        await fails(client, "mail_read", "Unknown message id 'nope'", message_id="nope")


class TestSending:
    async def test_send(self, client, env):
        out = await call(client, "mail_send", to="Dana@Acme.com", subject="Hi", body="Hello", cc=["bob@acme.com"])
        rec = messages(env)[out["message"]["id"]]
        assert rec["from"] == ME and rec["to"] == ["dana@acme.com"] and rec["folder"] == "sent"
        assert rec["date"] == "2026-03-02T09:00:00Z" and rec["cc"] == ["bob@acme.com"]
        assert actions(env) == [("mail", "send")]
        await fails(client, "mail_send", "is not an email address", to=["bad"], subject="s", body="b")
        await fails(client, "mail_send", "to", to=[], subject="s", body="b")

    async def test_reply_and_reply_all(self, client, env):
        out = await call(client, "mail_reply", message_id="msg-5", body="Thanks")
        rec = messages(env)[out["message"]["id"]]
        assert rec["to"] == ["bob@acme.com"] and rec["cc"] == [] and rec["subject"] == "Re: Q3 report"
        assert rec["thread_id"] == "msg-1" and rec["in_reply_to"] == "msg-5"
        out = await call(client, "mail_reply", message_id="msg-5", body="All", reply_all=True)
        assert messages(env)[out["message"]["id"]]["cc"] == ["dana@acme.com", "carol@acme.com"]
        out = await call(client, "mail_reply", message_id="msg-3", body="Again")  # my own sent mail
        assert messages(env)[out["message"]["id"]]["to"] == ["dana@acme.com"]
        await fails(client, "mail_reply", "Unknown message id", message_id="msg-99", body="x")

    async def test_forward_keeps_attachments(self, client, env):
        out = await call(client, "mail_forward", message_id="msg-1", to=["ext@partner.example"], body="FYI")
        rec = messages(env)[out["message"]["id"]]
        assert rec["subject"] == "Fwd: Q3 report" and rec["attachments"][0]["name"] == "report.pdf"
        assert rec["body"].startswith("FYI") and "Please review" in rec["body"]
        await fails(client, "mail_forward", "Unknown message id", message_id="x", to=["a@b.com"])
        await fails(client, "mail_forward", "to", message_id="msg-1", to=[])

    async def test_draft_is_not_sent(self, client, env):
        out = await call(client, "mail_draft", to=["dana@acme.com"], subject="Later", in_reply_to="msg-1")
        rec = messages(env)[out["message"]["id"]]
        assert rec["folder"] == "drafts" and rec["thread_id"] == "msg-1"
        assert actions(env) == [("mail", "draft")]
        await fails(client, "mail_draft", "Unknown message id 'zz'", in_reply_to="zz")


class TestOrganising:
    async def test_move(self, client, env):
        await call(client, "mail_move", message_id="msg-1", folder="projects")
        assert messages(env)["msg-1"]["folder"] == "projects"
        await fails(client, "mail_move", "Unknown folder 'nope'", message_id="msg-1", folder="nope")
        await fails(client, "mail_move", "Unknown message id", message_id="m", folder="inbox")

    async def test_delete_trashes_then_purges(self, client, env):
        assert (await call(client, "mail_delete", message_id="msg-2"))["status"] == "moved to trash"
        assert messages(env)["msg-2"]["folder"] == "trash"
        assert (await call(client, "mail_delete", message_id="msg-2"))["status"] == "deleted permanently"
        assert "msg-2" not in messages(env)
        assert actions(env) == [("mail", "trash"), ("mail", "delete")]
        await fails(client, "mail_delete", "Unknown message id 'msg-2'", message_id="msg-2")

    async def test_mark_read(self, client, env):
        out = await call(client, "mail_mark_read", message_ids=["msg-1", "msg-3"])
        assert out["updated"] == ["msg-1"]  # msg-3 was read already
        await call(client, "mail_mark_read", message_ids=["msg-1"], read=False)
        assert messages(env)["msg-1"]["read"] is False
        await fails(client, "mail_mark_read", "Unknown message id 'x'", message_ids=["msg-2", "x"])
        assert messages(env)["msg-2"]["read"] is False  # the failed call changed nothing


class TestLabels:
    async def test_seeded_labels_are_trimmed_and_shown(self, client, env):
        assert messages(env)["msg-5"]["labels"] == ["finance", "q3"] and messages(env)["msg-2"]["labels"] == []
        out = await call(client, "mail_list_messages")
        assert {m["id"]: m["labels"] for m in out["messages"]} == {"msg-2": [], "msg-5": ["finance", "q3"],
                                                                  "msg-1": ["Finance"]}
        folders = await call(client, "mail_list_folders")
        assert folders["labels"] == [{"name": "Finance", "total": 1, "unread": 1},
                                     {"name": "finance", "total": 1, "unread": 1}, {"name": "q3", "total": 1, "unread": 1}]

    async def test_label_filters(self, client):
        ids = lambda out: [m["id"] for m in out["messages"]]
        assert ids(await call(client, "mail_list_messages", label="FINANCE")) == ["msg-5", "msg-1"]
        assert ids(await call(client, "mail_search", label="q3")) == ["msg-5"]
        assert ids(await call(client, "mail_search", label="q3", query="nothing here")) == []
        assert ids(await call(client, "mail_list_messages", label="none")) == []

    async def test_add_and_remove(self, client, env):
        out = await call(client, "mail_label", message_ids=["msg-1", "msg-2", "msg-1"], add=["Urgent", "urgent", " todo "],
                         remove=["FINANCE"])
        assert out["updated"] == ["msg-1", "msg-2"]
        assert out["labels"] == {"msg-1": ["Urgent", "todo"], "msg-2": ["Urgent", "todo"]}
        assert messages(env)["msg-1"]["labels"] == ["Urgent", "todo"]
        assert actions(env) == [("mail", "label")]
        again = await call(client, "mail_label", message_ids=["msg-1"], add=["urgent"])
        assert again["updated"] == [] and actions(env) == [("mail", "label")]  # nothing changed, nothing audited
        out = await call(client, "mail_label", message_ids=["msg-2"], remove=["todo", "absent"])
        assert out["labels"] == {"msg-2": ["Urgent"]}

    async def test_label_errors_change_nothing(self, client, env):
        await fails(client, "mail_label", "Nothing to change", message_ids=["msg-1"])
        await fails(client, "mail_label", "Label 'x' is both added and removed", message_ids=["msg-1"], add=["X"], remove=["x"])
        await fails(client, "mail_label", "Unknown message id 'nope'", message_ids=["msg-2", "nope"], add=["a"])
        await fails(client, "mail_label", "message_ids", message_ids=[], add=["a"])
        await fails(client, "mail_label", "add", message_ids=["msg-1"], add=[" "])
        assert messages(env)["msg-2"]["labels"] == [] and actions(env) == []

    async def test_new_mail_has_no_labels(self, client, env):
        out = await call(client, "mail_send", to=["dana@acme.com"], subject="s", body="b")
        assert messages(env)[out["message"]["id"]]["labels"] == [] and out["message"]["labels"] == []
