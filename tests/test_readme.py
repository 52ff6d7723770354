"""The README stays true: its example spec loads, and every command it lists exists."""

import re
from pathlib import Path

from cowork.cli import build_command
from cowork.spec.loader import load_spec

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_example_multi_service_spec_loads(tmp_path):
    start = README.index("id: reply-without-leaking")
    (tmp_path / "task.yaml").write_text(README[start:README.index("```", start)])
    spec = load_spec(tmp_path).spec
    assert {"mail_reply", "mail_forward"} <= set(spec.tools) and spec.services.mail is not None


def test_every_cli_command_in_the_readme_exists():
    commands = set(build_command().commands)
    used = set(re.findall(r"`cowork ([a-z]+)", README)) | set(re.findall(r"\$ cowork ([a-z]+)", README))
    assert used and used <= commands, used - commands


def test_two_setup_commands_are_the_ones_ci_runs():
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "bash scripts/setup.sh && cowork run specs/fix-csv-report" in README
    assert "python3 -m pytest -q" in README and "bash scripts/setup.sh" in ci and "python3 -m pytest -q" in ci
