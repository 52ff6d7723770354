"""The audit record hash chain shared by server and graders."""

import json

from cowork.formats import GENESIS_HASH, canonical_json, seal, verify_chain


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
