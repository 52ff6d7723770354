"""The README and docs/ stay true: the example spec loads, the commands, counts and tables match
the code, every page is indexed, and every link, path and module they name exists."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from cowork.cli import build_command, exits
from cowork.services.registry import SERVICES
from cowork.settings import Settings
from cowork.spec.loader import load_spec

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "runtime" / "cowork"
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
PAGES = sorted(DOCS.glob("*.md"))
TEXTS = {p: p.read_text() for p in [ROOT / "README.md", *PAGES]}

NUMBERS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
#: Dotted names in the docs that are not modules: entry-point groups and a container label.
NOT_MODULES = {"cowork.checks", "cowork.backends", "cowork.managed"}


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same or a higher level."""
    start = text.index(heading + "\n")
    level = heading.split(" ")[0]
    end = re.search(rf"^#{{1,{len(level)}}} ", text[start + len(heading):], re.M)
    return text[start:start + len(heading) + end.start()] if end else text[start:]


def _table_rows(text: str) -> list[list[str]]:
    """The cells of the first Markdown table in ``text`` (header and rule left out); ``\\|``
    inside a cell is not a separator."""
    lines = text[text.index("\n|"):].strip().splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return rows


def _without_code_blocks(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def _code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.M | re.S)


def _leaf_commands() -> set[str]:
    """Every command the Typer app defines, groups opened: ``run``, ``synth list``, ..."""
    def walk(cmd, prefix):
        subs = getattr(cmd, "commands", None)
        if not subs:
            return {prefix}
        return set().union(*(walk(c, f"{prefix} {n}".strip()) for n, c in subs.items()))
    return walk(build_command(), "")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


@cache
def _top_names(module: Path) -> frozenset[str]:
    """Names a module defines or imports at top level (and lists in ``__all__``)."""
    names: set[str] = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                names |= {e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)}
    return frozenset(names)


def _resolves(dotted: str) -> bool:
    """``cowork.a.b.name`` names a module of runtime/cowork, or a top-level name of one (read
    from the source, so optional extras need not be installed)."""
    here = PKG
    parts = dotted.split(".")[1:]
    for i, part in enumerate(parts):
        if (here / part / "__init__.py").is_file():
            here = here / part
        elif (here / f"{part}.py").is_file():
            rest = parts[i + 1:]
            return not rest or rest[0] in _top_names(here / f"{part}.py")
        else:
            return part in _top_names(here / "__init__.py")
    return True


# --------------------------------------------------------------------------- the README itself
class TestReadme:
    def test_it_is_a_front_door_of_at_most_200_lines(self):
        assert len(README.splitlines()) <= 200, len(README.splitlines())

    def test_example_multi_service_spec_loads(self, tmp_path):
        start = README.index("id: reply-without-leaking")
        (tmp_path / "task.yaml").write_text(README[start:README.index("```", start)])
        spec = load_spec(tmp_path).spec
        assert {"mail_reply", "mail_forward"} <= set(spec.tools) and spec.services.mail is not None

    def test_two_setup_commands_are_the_ones_ci_runs(self):
        ci = (ROOT / ".ci" / "run").read_text()
        assert "bash scripts/setup.sh && cowork run specs/fix-csv-report" in README
        assert "python3 -m pytest -q" in README and "bash scripts/setup.sh" in ci and "python3 -m pytest -q" in ci

    def test_the_service_count_is_the_registry_s(self):
        """Every "<number> ... mock services" and "the <number> services" in the README and
        docs says len(SERVICES)."""
        number = rf"({'|'.join(NUMBERS)}|\d+)"
        pattern = re.compile(rf"\bthe {number} services\b|\b{number}\b[\w ,*-]{{0,30}}?\bmock\b[\w *-]{{0,10}}\bservices\b",
                             re.I)
        stated = {}
        for path, text in TEXTS.items():
            for m in pattern.finditer(" ".join(text.split())):
                word = (m.group(1) or m.group(2)).lower()
                stated[f"{path.name}: {m.group(0)}"] = int(word) if word.isdigit() else NUMBERS[word]
        assert any(k.startswith("README.md") for k in stated), "the README states no service count"
        assert all(n == len(SERVICES) for n in stated.values()), (len(SERVICES), stated)

    def test_layout_table_has_one_row_per_module_and_folder(self):
        rows = _table_rows(_section(README, "## Layout"))
        listed = [re.fullmatch(r"`([^`]+)`", row[0]).group(1) for row in rows]
        present = {p.name + "/" if p.is_dir() else p.name for p in PKG.iterdir()
                   if (p.is_dir() and p.name != "__pycache__") or p.suffix == ".py"}
        assert len(listed) == len(set(listed)), listed
        assert set(listed) == present, {"not in the table": present - set(listed), "not in the package": set(listed) - present}

    def test_exit_code_table_is_the_code_s(self):
        rows = _table_rows(_section(README, "### Exit codes"))
        codes = [exits.OK, exits.GATE_FAILED, exits.BAD_INPUT, exits.INFRASTRUCTURE, exits.INTERRUPTED]
        assert [int(r[0]) for r in rows] == codes

    def test_every_cli_command_named_exists(self):
        """A `cowork NAME` in the README or any page is a command of the Typer app."""
        commands = set(build_command().commands)
        for path, text in TEXTS.items():
            used = set(re.findall(r"`cowork ([a-z]+)", text)) | set(re.findall(r"\$ cowork ([a-z]+)", text))
            assert used <= commands, (path.name, used - commands)


# --------------------------------------------------------------------------- docs/
class TestDocs:
    def test_index_links_every_page(self):
        index = (DOCS / "index.md").read_text()
        linked = set(re.findall(r"\]\(([\w-]+\.md)\)", index))
        pages = {p.name for p in PAGES} - {"index.md"}
        assert linked == pages, {"not indexed": pages - linked, "no such page": linked - pages}

    def test_readme_links_the_index(self):
        assert "(docs/index.md)" in README

    def test_cli_table_lists_exactly_the_commands(self):
        """docs/cli.md's table names every command of the Typer app (groups opened) and no
        other, and every option it shows exists on its command."""
        root = build_command()
        listed = set()
        for row in _table_rows(_section((DOCS / "cli.md").read_text(), "## Commands")):
            for span in re.findall(r"`(cowork [^`]*)`", row[0]):
                words = span.split()[1:]
                cmd, path = root.commands[words[0]], [words[0]]
                if getattr(cmd, "commands", None):
                    cmd, path = cmd.commands[words[1]], path + [words[1]]
                listed.add(" ".join(path))
                options = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
                shown = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b", span))
                assert shown <= options, (" ".join(path), shown - options)
        leaves = _leaf_commands()
        assert listed == leaves, {"not in the table": leaves - listed, "not a command": listed - leaves}

    def test_settings_table_is_the_settings_object(self):
        rows = _table_rows(_section((DOCS / "api.md").read_text(), "## Settings"))
        listed = {re.fullmatch(r"`(COWORK_\w+)`", r[0]).group(1) for r in rows}
        assert listed == {f"COWORK_{name.upper()}" for name in Settings.model_fields}


# --------------------------------------------------------------------------- links, paths, modules
@pytest.mark.parametrize("path", list(TEXTS), ids=lambda p: p.name)
class TestReferences:
    def test_relative_links_and_anchors_resolve(self, path):
        text = _without_code_blocks(TEXTS[path])
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            assert dest.exists(), f"{path.name}: link to missing {target}"
            if anchor and dest.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", _without_code_blocks(dest.read_text()), re.M)
                assert anchor in {_slug(h) for h in headings}, f"{path.name}: no heading for #{anchor} in {file}"

    def test_named_files_exist(self, path):
        """Source paths named in the text exist: `runtime/cowork/...`, `cowork/...`, `tests/...`,
        `scripts/...`, `examples/...` and `<package folder>/<file>`."""
        folders = "|".join(p.name for p in PKG.iterdir() if p.is_dir() and p.name != "__pycache__")
        missing = []
        for m in re.finditer(r"(?<![\w./-])((?:runtime/)?cowork|tests|scripts|examples|images|" + folders
                             + r")/([\w./-]*[\w/])", TEXTS[path]):
            head, rest = m.groups()
            if not re.search(r"\.(py|c|sh|yaml|toml)$", rest) and not head.endswith("cowork"):
                continue
            base = {"runtime/cowork": ROOT, "cowork": ROOT / "runtime"}.get(head)
            candidates = [base / head / rest] if base else [ROOT / head / rest, PKG / head / rest]
            if not any(c.exists() for c in candidates):
                missing.append(m.group(0))
        assert not missing, f"{path.name}: {missing}"

    def test_named_modules_exist(self, path):
        """`cowork.a.b` in the text, and `from cowork.a import b` in its Python examples, name
        modules and top-level names that exist."""
        text = TEXTS[path]
        dotted = {m.rstrip(".") for m in re.findall(r"\bcowork(?:\.[A-Za-z_]\w*)+", text)} - NOT_MODULES
        for block in _code_blocks(text, "python"):
            for m in re.finditer(r"^\s*from (cowork(?:\.[\w.]+)?) import ([\w, ]+)", block, re.M):
                dotted |= {f"{m.group(1)}.{name.strip()}" for name in m.group(2).split(",")}
        missing = sorted(d for d in dotted if not _resolves(d))
        assert not missing, f"{path.name}: {missing}"
