"""What a Claw-Eval mock service needs: the files to copy and the packages it imports.

A service runs in cowork's companion container, whose Python has the standard library and the
wheelhouse's web stack (fastapi, uvicorn, pydantic, starlette, yaml) and nothing else, and no
network beyond loopback. The importer reads each service's code with ``ast`` (never runs it):
its own modules inside the checkout are followed, any other import must be one the image has.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: Packages the sandbox image's Python has beside the standard library (and what they bring).
AVAILABLE = frozenset({
    "fastapi", "uvicorn", "pydantic", "pydantic_core", "starlette", "yaml", "anyio", "sniffio", "h11",
    "click", "typing_extensions", "annotated_types",
})
#: Imports that mean the service talks to the live web (an HTTP client or a scraper).
LIVE_WEB = frozenset({"httpx", "requests", "aiohttp", "urllib3", "trafilatura", "websockets", "httpcore", "playwright",
                      "selenium", "openai", "anthropic"})
#: Environment names that mean the service needs a credential for an outside API.
SECRET_WORDS = ("API_KEY", "TOKEN", "SECRET", "PASSWORD")


@dataclass
class ServiceCode:
    """The result of reading one service's code."""

    script: Path
    """The server script, inside the checkout."""
    files: set[Path] = field(default_factory=set)
    """Checkout files the service needs: its folder's files and the local modules it imports."""
    missing: set[str] = field(default_factory=set)
    """Top-level packages it imports that the image lacks."""
    unreadable: list[str] = field(default_factory=list)
    """Files that could not be parsed, with why."""


def _imports(tree: ast.AST) -> list[tuple[str, int, bool]]:
    """(module, level, maybe-a-name) of every import, the nested and conditional ones too; the
    third is true for ``from pkg import x`` read as module ``pkg.x`` (x may be a plain name)."""
    found: list[tuple[str, int, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, 0, False) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", node.level, False))
            prefix = f"{node.module}." if node.module else ""
            found += [(prefix + alias.name, node.level, True) for alias in node.names]
    return found


def _local(module: str, roots: list[Path]) -> Path | None:
    """The file of a module found under one of ``roots`` (a .py file or a package's __init__)."""
    parts = module.split(".")
    for root in roots:
        base = root.joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        if base.is_dir():  # a namespace package: its parent folders count, no file
            return base
    return None


def read_service(root: Path, script: Path) -> ServiceCode:
    """Follow ``script``'s imports through the checkout at ``root``: its folder's files, the
    local modules it needs, and the outside packages it imports that the image lacks
    (``missing``). Run from the checkout's root, a service imports from there."""
    out = follow_imports(root, script, [script.parent, root], AVAILABLE)
    out.files |= {p for p in script.parent.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    return out


def follow_imports(root: Path, entry: Path, search: list[Path], available: frozenset[str]) -> ServiceCode:
    """Read ``entry`` and every module of the checkout it imports (found under the importing
    file's folder or ``search``): the files, and the outside packages not in ``available``
    or the standard library."""
    out = ServiceCode(script=entry)
    todo = [entry]
    seen: set[Path] = set()
    stdlib = set(sys.stdlib_module_names)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        out.files.add(path)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as exc:
            out.unreadable.append(f"{path.relative_to(root)}: {exc}")
            continue
        for module, level, maybe_name in _imports(tree):
            if not module:
                continue
            if level:  # relative: resolved against the importing file's package
                base = path.parent
                for _ in range(level - 1):
                    base = base.parent
                roots = [base]
            else:
                roots = [path.parent, *search]
            found = _local(module, roots)
            if found is not None:
                if found.is_file():
                    todo.append(found)
                    todo += _package_inits(found, root)
                continue
            top = module.split(".")[0]
            if maybe_name or level or top in stdlib or top in available or _local(top, roots) is not None:
                continue
            out.missing.add(top)
    return out


def _package_inits(module: Path, root: Path) -> list[Path]:
    """The ``__init__.py`` files of the packages a local module sits in (they run on import)."""
    inits = []
    for parent in module.parents:
        if parent == root or not parent.is_relative_to(root):
            break
        if (parent / "__init__.py").is_file():
            inits.append(parent / "__init__.py")
    return inits
