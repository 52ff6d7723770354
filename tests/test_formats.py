"""The audit record hash chain shared by server and graders."""

import hashlib
import json

import pytest

from cowork.formats import (
    AUDIT_ARGS_LIMIT,
    AUDIT_STRING_LIMIT,
    GENESIS_HASH,
    INVALID_ARGUMENTS_KEY,
    MAX_ARGUMENTS_BYTES,
    ArgumentsRefused,
    audit_lines,
    audited_arguments,
    canonical_json,
    check_arguments,
    cut_covering,
    merge_tool_calls,
    replace_surrogates,
    seal,
    verify_chain,
)


def _log(n: int) -> list[str]:
    prev, lines = GENESIS_HASH, []
    for i in range(n):
        rec = seal({"seq": i, "kind": "tool_call", "tool": "shell", "args": {"command": f"echo {i}"}}, prev)
        prev = rec["hash"]
        lines.append(canonical_json(rec))
    return lines


class TestChain:
    def test_valid_chain_verifies(self):
        rep = verify_chain(_log(5), expected_count=5)
        assert rep.valid and len(rep.records) == 5

    def test_edited_line_breaks_chain_at_that_line(self):
        lines = _log(4)
        rec = json.loads(lines[2])
        rec["args"]["command"] = "rm -rf /"
        lines[2] = canonical_json(rec)
        rep = verify_chain(lines)
        assert not rep.valid and rep.line == 3 and "hash" in rep.error

    def test_forged_line_with_recomputed_hash_breaks_next_link(self):
        lines = _log(4)
        rec = json.loads(lines[1])
        rec["args"]["command"] = "true"
        forged = seal({k: v for k, v in rec.items() if k not in ("hash", "prev")}, rec["prev"])
        lines[1] = canonical_json(forged)
        rep = verify_chain(lines)
        assert not rep.valid and rep.line == 3

    def test_reordered_lines_fail(self):
        lines = _log(4)
        lines[1], lines[2] = lines[2], lines[1]
        assert not verify_chain(lines).valid

    def test_deleted_middle_line_fails(self):
        lines = _log(4)
        del lines[2]
        rep = verify_chain(lines)
        assert not rep.valid and rep.line == 3

    def test_truncated_tail_fails_against_server_count(self):
        rep = verify_chain(_log(4)[:2], expected_count=4)
        assert not rep.valid and "holds 2 records, the server wrote 4" in rep.error

    def test_missing_log_fails_when_records_were_written(self):
        assert not verify_chain([], expected_count=3).valid

    def test_garbage_line_fails(self):
        lines = _log(2) + ["PASSED all tests"]
        rep = verify_chain(lines)
        assert not rep.valid and rep.line == 3 and "not JSON" in rep.error


def _sealed(records: list[dict]) -> str:
    prev, lines = GENESIS_HASH, []
    for i, r in enumerate(records):
        rec = seal({"seq": i, **r}, prev)
        prev = rec["hash"]
        lines.append(canonical_json(rec))
    return "\n".join(lines) + "\n"


class TestUnsplittable:
    """Issue 12.3: no content may split a record (it used to: UTF-8 kept, splitlines read)."""

    BREAKERS = "a\u2028b\u2029c\x85d\x1ce\x1df\x1eg\x0bh\x0ci\rj\nk\x00l"

    def test_records_are_ascii_single_lines_whatever_the_content(self):
        text = _sealed([{"kind": "tool_call", "tool": "shell", "args": {"command": self.BREAKERS}},
                        {"kind": "tool_result", "call_seq": 0, "result": self.BREAKERS + "\ud800"}])
        assert text.isascii() and text.count("\n") == 2
        assert len(text.splitlines()) == 2  # even a splitlines reader keeps records whole
        assert len(json.dumps(self.BREAKERS, ensure_ascii=False).splitlines()) > 1  # the old form tore
        rep = verify_chain(text, expected_count=2)
        assert rep.valid, rep.error
        assert rep.records[0]["args"]["command"] == self.BREAKERS and rep.records[1]["result"].endswith("\ud800")

    def test_lines_split_on_newline_only(self):
        assert audit_lines("a\u2028b\nc") == ["a\u2028b", "c"]

    def test_bundles_saved_before_the_ascii_form_still_verify(self):
        import hashlib as h

        body = {"seq": 0, "kind": "tool_call", "tool": "shell", "args": {"command": "echo é"}, "prev": GENESIS_HASH}
        old = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        line = json.dumps({**body, "hash": h.sha256(old.encode()).hexdigest()}, ensure_ascii=False)
        assert verify_chain([line]).valid
        forged = line.replace("echo é", "echo è")
        assert not verify_chain([forged]).valid

    def test_nan_is_never_written(self):
        with pytest.raises(ValueError):
            canonical_json({"x": float("nan")})


class TestArguments:
    """Issue 12.7: one rule on host and server."""

    @pytest.mark.parametrize("args, words", [
        (["ls"], "must be a JSON object, got an array"),
        ("ls", "must be a JSON object, got a string"),
        ({"n": float("nan")}, "not valid JSON"),
        ({"n": [float("inf")]}, "not valid JSON"),
        ({"content": "x" * MAX_ARGUMENTS_BYTES}, "over the limit of 1048576 bytes"),
        ({INVALID_ARGUMENTS_KEY: '["ls"]'}, "must be a JSON object, got \'[\"ls\"]\'"),
        ({1: "a"}, "names must be strings"),
    ])
    def test_refused(self, args, words):
        with pytest.raises(ArgumentsRefused, match=None) as info:
            check_arguments(args)
        assert words in str(info.value)

    def test_deep_nesting_is_refused_not_a_crash(self):
        deep: dict = {}
        cur = deep
        for _ in range(5000):
            cur["x"] = {}
            cur = cur["x"]
        with pytest.raises(ArgumentsRefused, match="nested too deeply"):
            check_arguments(deep)
        assert audited_arguments(deep) == ({}, [{"path": "/args", "length": 0, "sha256": "",
                                                 "nested_too_deeply": True}])

    def test_surrogates_and_unicode_pass_as_escapes(self):
        body = check_arguments({"body": "x\ud800\u2028\U0001F600"})
        assert body.isascii() and b"\\ud800" in body and json.loads(body)["body"] == "x\ud800\u2028\U0001F600"

    def test_size_is_measured_on_the_escaped_form(self):
        check_arguments({"c": "x" * (MAX_ARGUMENTS_BYTES - 20)})
        with pytest.raises(ArgumentsRefused):  # one escaped char is 6 bytes on the wire
            check_arguments({"c": "\u00e9" * (MAX_ARGUMENTS_BYTES // 6 + 1)})

    def test_replace_surrogates_everywhere(self):
        assert replace_surrogates({"k\udc00": ["a\ud800", 1, {"b": "\udfff"}]}) == \
            {"k\ufffd": ["a\ufffd", 1, {"b": "\ufffd"}]}


class TestCut:
    """Issue 12.12: audited strings are bounded, and say so."""

    def test_long_string_keeps_prefix_length_and_digest(self):
        body = "A" * AUDIT_STRING_LIMIT + "SECRET"
        kept, cuts = audited_arguments({"to": ["a@b.c"], "body": body})
        assert kept == {"to": ["a@b.c"], "body": "A" * AUDIT_STRING_LIMIT}
        assert cuts == [{"path": "/args/body", "length": len(body),
                         "sha256": hashlib.sha256(body.encode()).hexdigest()}]
        assert cut_covering(cuts, "/args/body") and not cut_covering(cuts, "/args/to")

    def test_many_long_strings_are_cut_shorter_keeping_every_key(self):
        args = {f"k{i}": "y" * 100_000 for i in range(10)}
        kept, cuts = audited_arguments(args)
        assert set(kept) == set(args) and len(canonical_json(kept)) <= AUDIT_ARGS_LIMIT
        assert len(cuts) == 10 and all(c["length"] == 100_000 for c in cuts)

    def test_too_many_items_drop_the_args_but_say_so(self):
        args = {"message_ids": [f"msg-{i}" for i in range(100_000)]}
        kept, cuts = audited_arguments(args)
        assert kept == {} and cuts[0]["path"] == "/args" and cuts[0]["length"] == len(canonical_json(args))
        assert cut_covering(cuts, "/args/message_ids/3")

    def test_long_keys_and_nan_are_marked(self):
        kept, cuts = audited_arguments({"k" * (AUDIT_STRING_LIMIT + 1): 1, "n": float("nan")})
        assert kept["n"] == "nan" and any(c.get("non_finite") == "nan" for c in cuts)
        assert any(c.get("key") for c in cuts)
        canonical_json(kept)  # writable


class TestMerge:
    """Issue 12.9: a call is recorded before it runs; graders see one merged call."""

    def test_call_merged_with_its_result_at_the_result_position(self):
        recs = [{"seq": 0, "kind": "tool_call", "tool": "mail_send", "args": {"to": ["x@y.z"]}},
                {"seq": 1, "kind": "service_action", "service": "mail", "action": "send", "ids": ["msg-1"]},
                {"seq": 2, "kind": "tool_result", "call_seq": 0, "outcome": "ok", "result": "sent",
                 "structured": {"status": "sent"}, "duration_ms": 1.0}]
        [call] = merge_tool_calls(recs)
        assert call["tool"] == "mail_send" and call["outcome"] == "ok" and call["result"] == "sent"
        assert call["seq"] == 2 and call["call_seq"] == 0 and call["args"] == {"to": ["x@y.z"]}

    def test_call_without_result_is_called_with_outcome_unknown(self):
        recs = [{"seq": 0, "kind": "tool_call", "tool": "shell", "args": {"command": "kill -9 1"}},
                {"seq": 1, "kind": "tool_call", "tool": "read_file", "args": {}},
                {"seq": 2, "kind": "tool_result", "call_seq": 1, "outcome": "error", "error": "nope"}]
        calls = merge_tool_calls(recs)
        assert [(c["tool"], c["outcome"]) for c in calls] == [("shell", "unknown"), ("read_file", "error")]

    def test_interleaved_calls_and_cuts_of_both_records(self):
        recs = [{"seq": 0, "kind": "tool_call", "tool": "a", "args": {}, "cut": [{"path": "/args/x"}]},
                {"seq": 1, "kind": "tool_call", "tool": "b", "args": {}},
                {"seq": 2, "kind": "tool_result", "call_seq": 1, "outcome": "ok"},
                {"seq": 3, "kind": "tool_result", "call_seq": 0, "outcome": "ok", "cut": [{"path": "/result"}]}]
        calls = merge_tool_calls(recs)
        assert [c["tool"] for c in calls] == ["b", "a"]
        assert calls[1]["cut"] == [{"path": "/args/x"}, {"path": "/result"}]

    def test_single_record_form_is_taken_as_is(self):
        [call] = merge_tool_calls([{"seq": 0, "kind": "tool_call", "tool": "t", "args": {}, "outcome": "ok"}])
        assert call["outcome"] == "ok"
