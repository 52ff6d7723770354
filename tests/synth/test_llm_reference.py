"""The compact spec reference ``cowork synth llm`` sends instead of the JSON Schema: small, and
true to the models and the tools it describes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from pydantic import TypeAdapter

from cowork.spec import json_schema
from cowork.spec.checks import Check
from cowork.spec.models import Step, TaskSpec
from cowork.spec.toolnames import known_tools
from cowork.synth import llm

ROOT = Path(__file__).resolve().parents[2]


class TestSize:
    def test_the_reference_is_under_its_bound_and_a_tenth_of_the_schema(self):
        reference = llm.spec_reference()
        assert len(reference) <= llm.REFERENCE_LIMIT
        assert len(reference) * 7 < len(json.dumps(json_schema(), separators=(",", ":")))

    def test_every_first_request_is_under_a_fifth_of_the_old_one(self):
        """Before: the rules, the catalogue, the title-less JSON Schema (183k characters) and two
        examples came to 198k-201k characters (~50k tokens) for every capability."""
        sizes = []
        for capability in ("information-retrieval", "triage", "multi-turn-followup"):
            synth = llm.Synthesizer(llm.SynthOptions(capability=capability, n=1, model="m", out=ROOT / "unused"))
            for index in range(4):
                sizes.append(len(llm.system_message()) + len(llm.request(capability, synth.examples_for(index))))
        assert max(sizes) < 40_000


class TestNoDrift:
    def test_every_backticked_name_in_the_prose_exists(self):
        names = llm.reference_names()
        prose = llm.REFERENCE_NOTES + llm.SYSTEM
        quoted = {t.rstrip(":") for t in re.findall(r"`([^`\n]+)`", prose)}
        assert len(quoted) > 25
        assert sorted(t for t in quoted if t not in names) == []

    def test_the_name_set_is_the_models_not_anything(self):
        names = llm.reference_names()
        assert {"holds_initially", "distractors", "only", "from", "record_unchanged", "kb_read_page"} <= names
        assert not {"answer_mentions", "holds_initally", "from_", "source", "judge", "dir"} & names

    def test_the_outline_lists_every_field_of_the_spec(self):
        top = next(line for line in llm.spec_reference().splitlines() if line.startswith("TaskSpec{"))
        listed = {f.split(":")[0].split("=")[0].rstrip("*") for f in top[len("TaskSpec{"):-1].split(", ")}
        assert listed == set(TaskSpec.model_fields)

    def test_the_examples_load_with_the_real_models(self):
        examples = yaml.safe_load(llm.REFERENCE_EXAMPLES)
        adapter = TypeAdapter(Check)
        checks = [adapter.validate_python(c) for c in examples["checks"] + examples["safety"]]
        steps = [Step.model_validate(s) for s in examples["oracle"]]
        signatures = llm.tool_signatures()
        for step in steps:
            if step.tool:
                params = {p.rstrip("?") for p in signatures[step.tool].split(", ")}
                assert set(step.args) <= params, step
        for check in checks:
            assert getattr(check, "tool", None) in (None, *known_tools())
        assert len(checks) == 7 and len(steps) == 2

    def test_an_unknown_field_in_an_example_would_fail(self):
        with pytest.raises(ValueError, match="extra"):
            TypeAdapter(Check).validate_python({"type": "record_exists", "service": "crm", "collection": "deals",
                                                "wher": {"id": "d-1"}})

    def test_tool_signatures_match_the_servers_catalogue(self):
        """Every tool a spec may allow, with the parameters and required ones the running server
        validates against (the catalogue the image serves)."""
        from cowork.server.app import build_catalog

        catalog = build_catalog()
        signatures = llm.tool_signatures()
        assert set(signatures) == set(known_tools())
        for name, sig in signatures.items():
            schema = catalog[name]["inputSchema"]
            params = [p for p in sig.split(", ") if p]
            assert [p.rstrip("?") for p in params] == list(schema.get("properties") or {}), name
            assert {p for p in params if not p.endswith("?")} == set(schema.get("required") or []), name
