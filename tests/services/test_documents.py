"""Documents tools: permissions, versions, sharing."""

from __future__ import annotations

from cowork.services.registry import dump_state

from .support import ME, actions, call, fails


def docs(env):
    return dump_state(env.ctx.db)["documents"]


class TestReading:
    async def test_list_shows_only_visible_documents(self, client):
        top = await call(client, "documents_list")
        assert [f["id"] for f in top["folders"]] == ["folder-1"]
        assert [d["title"] for d in top["documents"]] == ["Handbook", "Team notes"]  # not "Salaries"
        inner = await call(client, "documents_list", folder_id="folder-1")
        assert [f["id"] for f in inner["folders"]] == ["folder-2"] and inner["documents"][0]["your_role"] == "owner"
        await fails(client, "documents_list", "Unknown folder id 'f'", folder_id="f")

    async def test_search(self, client):
        out = await call(client, "documents_search", query="expense")
        assert [d["id"] for d in out["documents"]] == ["doc-3"] and "Expense" in out["documents"][0]["snippet"]
        assert (await call(client, "documents_search", query="secret"))["total"] == 0

    async def test_read_and_versions(self, client):
        d = await call(client, "documents_read", document_id="doc-1")
        assert d["content"] == "Goals: grow revenue." and d["version"] == 2 and d["your_role"] == "owner"
        assert (await call(client, "documents_read", document_id="doc-1", version=1))["content"] == "Goals: TBD"
        assert [v["version"] for v in (await call(client, "documents_versions", document_id="doc-1"))["versions"]] == [1, 2]
        assert (await call(client, "documents_read", document_id="doc-3"))["your_role"] == "viewer"
        await fails(client, "documents_read", "has no version 5", document_id="doc-1", version=5)
        await fails(client, "documents_read", "Permission denied: document 'doc-2' is not shared", document_id="doc-2")
        await fails(client, "documents_read", "Unknown document id", document_id="doc-9")
        await fails(client, "documents_versions", "Permission denied", document_id="doc-2")


class TestWriting:
    async def test_create(self, client, env):
        out = await call(client, "documents_create", title="Memo", content="Hi", folder_id="folder-2")
        state = docs(env)
        assert state["documents"][out["id"]]["owner"] == ME and f"{out['id']}@v1" in state["versions"]
        await fails(client, "documents_create", "Unknown folder id", title="x", folder_id="nope")

    async def test_edit_modes_make_versions(self, client, env):
        await call(client, "documents_edit", document_id="doc-1", old_text="grow revenue", new_text="cut costs")
        await call(client, "documents_edit", document_id="doc-1", append="\nDone.")
        out = await call(client, "documents_edit", document_id="doc-1", content="New", title="Q4 plan")
        assert out["version"] == 5 and sorted(out["changed"]) == ["content", "title", "version"]
        state = docs(env)
        assert state["versions"]["doc-1@v3"]["content"] == "Goals: cut costs."
        assert state["versions"]["doc-1@v4"]["content"] == "Goals: cut costs.\nDone."
        assert (await call(client, "documents_edit", document_id="doc-4", append="!"))["your_role"] == "editor"
        assert actions(env) == [("documents", "edit")] * 4

    async def test_edit_errors(self, client):
        await fails(client, "documents_edit", "Permission denied: editor rights needed on document 'doc-3', you are viewer",
                    document_id="doc-3", append="x")
        await fails(client, "documents_edit", "not shared", document_id="doc-2", append="x")
        await fails(client, "documents_edit", "Nothing to change", document_id="doc-1")
        await fails(client, "documents_edit", "Give only one of", document_id="doc-1", content="a", append="b")
        await fails(client, "documents_edit", "go together", document_id="doc-1", old_text="Goals")
        await fails(client, "documents_edit", "occurs 0 times", document_id="doc-1", old_text="zzz", new_text="y")
        await fails(client, "documents_edit", "Unknown document id", document_id="d", append="x")

    async def test_share(self, client, env):
        out = await call(client, "documents_share", document_id="doc-1", email="ext@partner.example", role="viewer")
        assert out["shared_with"] == {"dana@acme.com": "editor", "ext@partner.example": "viewer"}
        await call(client, "documents_share", document_id="doc-1", email="dana@acme.com", role="none")
        assert docs(env)["documents"]["doc-1"]["shared_with"] == {"ext@partner.example": "viewer"}
        await call(client, "documents_share", document_id="doc-4", email="sam@acme.com", role="commenter")
        await fails(client, "documents_share", "Permission denied", document_id="doc-3", email="a@b.com", role="viewer")
        await fails(client, "documents_share", "owns document", document_id="doc-4", email="dana@acme.com", role="viewer")
        await fails(client, "documents_share", "role", document_id="doc-1", email="a@b.com", role="admin")

    async def test_delete(self, client, env):
        await call(client, "documents_delete", document_id="doc-1")
        state = docs(env)
        assert "doc-1" not in state["documents"] and not any(v.startswith("doc-1@") for v in state["versions"])
        await fails(client, "documents_delete", "owner rights needed", document_id="doc-4")
        await fails(client, "documents_delete", "Unknown document id", document_id="doc-1")
