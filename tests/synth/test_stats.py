"""``cowork synth stats``: the corpus figures, computed exactly on a hand-made folder of specs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cowork.cli import main
from cowork.errors import CoworkError
from cowork.services.names import SERVICE_TOOLS
from cowork.synth.stats import collect, p90, prompt_shape

CHECK = [{"id": "c", "type": "file_exists", "path": "x.txt"}]


def _spec(folder: Path, **fields) -> None:
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text(yaml.safe_dump({"title": "t", "checks": CHECK, **fields}, sort_keys=False))


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    _spec(tmp_path / "a", id="a", tags=["family:alpha", "trap:distractor", "trap-announced"], capabilities=["c1"],
          prompt="Ask Dana Keller (dana@acme.com) about deal D-123 by 2026-03-04. See budget.pdf.",
          services={"mail": {"messages": []}, "crm": {"accounts": [{"name": "Globex"}]}},
          oracle=[{"tool": "mail_search", "args": {"query": "x"}}, {"tool": "crm_search"},
                  {"reply": "done"}, {"tool": "crm_update_deal"}])
    _spec(tmp_path / "b", id="b", tags=["family:alpha", "trap:conflict"], capabilities=["c2"],
          prompt="Ask Tom Weber (tom@globex.com) about deal X-999 by 2026-04-01. See budget.pdf.",
          services={"calendar": {"events": []}}, user={"turns": [{"say": "and?"}]},
          workspace={"dir": None, "files": [{"path": "in/report.xlsx", "content": "x"}]},
          oracle=[{"tool": "calendar_free_busy"}, {"tool": "calendar_create_event"}])
    for name, who in (("c", "Priya Nair"), ("c2", "Omar Haddad")):
        _spec(tmp_path / "nested" / name, id=name, tags=["family:beta"], capabilities=["c1", "c3"],
              prompt=f"Open a ticket for {who} and tell the team in chat.",
              **({"events": [{"actions": [{"tool": "chat_post"}]}]} if name == "c" else {}),
              oracle=[{"tool": "contacts_search"}, {"tool": "tickets_create"}, {"tool": "chat_post"}])
    (tmp_path / "nested" / "c" / "workspace" / "data").mkdir(parents=True)
    (tmp_path / "nested" / "c" / "workspace" / "data" / "sheet.XLSX").write_bytes(b"PK")
    _spec(tmp_path / "d", id="d", prompt="Summarise the notes into a document.",
          oracle=[{"tool": "read_file", "args": {"path": "notes.md"}},
                  {"tool": "write_file", "args": {"path": "out/summary.docx", "content": "x"}}])
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "task.yaml").write_text("id: broken\nprompt: [unclosed\n")
    _spec(tmp_path / "_invalid" / "skipped", id="skipped", tags=["family:gamma"], prompt="x", oracle=[{"tool": "x"}])
    return tmp_path


class TestFigures:
    def test_every_figure_exactly(self, corpus):
        s = collect([corpus])
        assert s.specs == 5 and s.hand_written == 1
        assert list(s.unreadable) == [str(corpus / "broken" / "task.yaml")]
        assert "broken/task.yaml:3" in s.unreadable[str(corpus / "broken" / "task.yaml")]
        assert s.generators == 2  # alpha, beta; gamma sits under _invalid
        assert s.capabilities == 3
        assert s.services == ["calendar", "chat", "contacts", "crm", "mail", "tickets"]
        assert s.distinct_oracle_sequences == 4  # c and c2 share one; the reply step is no call
        assert (s.oracle_calls_median, s.oracle_calls_p90) == (3.0, 3)
        assert s.share_3_services == pytest.approx(2 / 5)
        assert s.share_multi == pytest.approx(2 / 5)  # b: user turns, c: world events
        assert s.share_office == pytest.approx(3 / 5)  # b: workspace path, c: file on disk, d: oracle arg
        assert s.trapped == 2 and s.share_trap_announced == pytest.approx(1 / 2)
        assert s.distinct_prompts == 3  # a~b and c~c2 differ only in names, addresses, ids, dates

    def test_reading_in_processes_gives_the_same_figures(self, corpus, monkeypatch):
        from cowork.synth import stats

        serial = collect([corpus]).as_dict()
        monkeypatch.setattr(stats, "PARALLEL_FROM", 1)
        monkeypatch.setattr(stats.os, "cpu_count", lambda: 2)
        assert collect([corpus]).as_dict() == serial

    def test_figures_beside_targets(self, corpus):
        figs = {f.key: f for f in collect([corpus]).figures()}
        assert figs["generators"].value == "2 / 3 / 6" and figs["generators"].met is False
        assert figs["trap_announced"].value == "50.0 %" and figs["trap_announced"].met is False
        assert figs["multi"].met is True and figs["office"].met is True

    def test_no_traps_is_not_judged(self, tmp_path):
        _spec(tmp_path / "x", id="x", prompt="p", oracle=[{"tool": "read_file"}])
        s = collect([tmp_path])
        assert s.share_trap_announced is None
        assert {f.key: f.met for f in s.figures()}["trap_announced"] is None

    def test_empty_or_missing_folder_is_a_clear_error(self, tmp_path):
        with pytest.raises(CoworkError, match="no task.yaml under"):
            collect([tmp_path])
        with pytest.raises(CoworkError, match="no such spec folder"):
            collect([tmp_path / "nope"])

    def test_p90_is_nearest_rank(self):
        assert p90(list(range(1, 11))) == 9 and p90([5]) == 5 and p90([]) is None


class TestPromptShape:
    def test_entities_become_placeholders(self):
        shape = prompt_shape("Please mail Jon Meyer (jon.meyer@acme.com) the Q3 file by 2026-03-04 at 10:30; "
                             "ticket TKT-1001 costs $1,250.50. Book \"Budget sync\" on Tuesday, 5 March.")
        assert shape == ("please mail <name> (<email>) the <name> file by <date> at <time>; ticket <id> costs "
                         "<num>. book <quoted> on <day>, <date>.")

    def test_seeded_names_are_replaced_even_at_a_sentence_start(self):
        assert prompt_shape("Northwind Traders wrote.", ["Northwind Traders"]) == "<name> wrote."


class TestCli:
    def test_text_and_exit_2_for_an_unreadable_spec(self, corpus, capsys):
        assert main(["synth", "stats", str(corpus)]) == 2
        out = capsys.readouterr().out
        assert "distinct oracle tool-name sequences" in out and ">= 2,000" in out and "UNREADABLE" in out

    def test_json(self, corpus, capsys):
        import shutil

        shutil.rmtree(corpus / "broken")
        assert main(["synth", "stats", str(corpus), "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["specs"] == 5 and data["distinct_prompts"] == 3
        assert [f["key"] for f in data["figures"]] == ["generators", "oracle_sequences", "oracle_calls",
                                                       "three_services", "multi", "office", "trap_announced",
                                                       "distinct_prompts"]

    def test_reads_the_curated_specs(self, capsys):
        specs = Path(__file__).resolve().parents[2] / "specs"
        assert main(["synth", "stats", str(specs), "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["specs"] == len(list(specs.glob("*/task.yaml"))) and len(data["services"]) == len(SERVICE_TOOLS)


def test_an_attachment_name_in_seeded_mail_alone_is_not_an_office_task(tmp_path):
    from cowork.synth.stats import facts

    mail = {"mail": {"messages": [{"from": "a@x.com", "attachments": [{"name": "q3.xlsx"}]}]}}
    _spec(tmp_path / "seeded", id="s", prompt="Reply to Ann.", services=mail,
          oracle=[{"tool": "mail_reply", "args": {"message_id": "m1", "body": "ok"}}])
    _spec(tmp_path / "used", id="u", prompt="File the sheet Ann sent.", services=mail,
          oracle=[{"tool": "mail_save_attachment", "args": {"message_id": "m1", "name": "q3.xlsx", "path": "q3.xlsx"}}])
    seeded, used = (facts(yaml.safe_load((tmp_path / n / "task.yaml").read_text()), tmp_path / n)
                    for n in ("seeded", "used"))
    assert (seeded.office, used.office) == (False, True)
