"""Read a spec's YAML fast: libyaml without the line map, the garbage collector paused, and a
cache of the parsed data keyed by the file's content.

:func:`cowork.spec.loader.load_spec` tries this first and keeps its strict, line-mapping path
for anything this cannot vouch for, so a broken spec still names its file, line and field.
Loading a 635 KB generated spec takes 152 ms of CPU the strict way, 52 ms through this parse
and 15 ms from the cache (validation included; docs/performance.md, "Loading specs").
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

log = logging.getLogger(__name__)

_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Specs from this size are cached: below it a parse takes about a millisecond (the curated
#: specs are at most 24 KB), above it the world generators' specs run to 800 KB.
CACHE_FROM = 64 * 1024
#: When the cache folder grows past this, the oldest entries go (a 2,000-spec corpus takes
#: about 110 MB: zlib-compressed JSON is a fifth of the YAML).
CACHE_BYTES = 1 << 30
#: Bump when what the fast parse returns changes (the key also holds this file's hash).
CACHE_VERSION = 1


class NotPlain(Exception):
    """The document uses something only the strict loader judges (a duplicate or merge key,
    a non-scalar key, a tag on a collection, a YAML error): read it the strict way."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a parse.

    Parsing builds a node and two marks per scalar; every few hundred allocations the collector
    ran, and each full pass walks every object alive, so loading the 2,000th spec of a batch
    cost more than the first. Paused, the 635 KB spec parses in 42 ms of CPU instead of
    104 ms. A YAML tree has no reference cycles unless an alias points at its own ancestor.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Loader(_BASE):
    """libyaml's parser with a leaner resolver: the same implicit rules, without the path
    resolvers a safe loader never has."""

    def resolve(self, kind: Any, value: str, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode:
            if implicit[0]:
                resolvers = self.yaml_implicit_resolvers
                for tag, regexp in resolvers.get(value[:1], ()):
                    if regexp.match(value):
                        return tag
                for tag, regexp in resolvers.get(None, ()):
                    if regexp.match(value):
                        return tag
            return _STR
        return _SEQ if kind is SequenceNode else _MAP

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        pass

    def ascend_resolver(self) -> None:
        pass


assert not _BASE.yaml_path_resolvers, "the lean resolver assumes a loader without path resolvers"


class _Builder:
    """Data from a composed tree, as the strict loader constructs it: an alias gives the same
    object, a scalar with a non-string tag goes through the safe constructor."""

    def __init__(self, loader: Any):
        self.loader = loader
        self.memo: dict[int, Any] = {}
        self.plain = True
        """Whether the data is only str, int, float, bool, None, lists and str-keyed dicts."""

    def scalar(self, node: ScalarNode) -> Any:
        value = self.loader.construct_object(node, deep=True)
        if type(value) not in (int, float, bool, type(None)):
            self.plain = False  # a date, bytes: JSON would not give them back
        return value

    def build(self, node: Any) -> Any:
        kind = type(node)
        if kind is ScalarNode:
            return node.value if node.tag == _STR else self.scalar(node)
        got = self.memo.get(id(node))
        if got is not None:
            return got
        if kind is MappingNode and node.tag == _MAP:
            out: dict[Any, Any] = {}
            self.memo[id(node)] = out
            for key_node, value_node in node.value:
                if type(key_node) is not ScalarNode:
                    raise NotPlain("a key that is a list or mapping")
                if key_node.tag == _STR:
                    key = key_node.value
                else:
                    key = self.scalar(key_node)
                    self.plain = False
                if key in out:
                    raise NotPlain(f"duplicate key {key!r}")
                out[key] = self.build(value_node)
            return out
        if kind is SequenceNode and node.tag == _SEQ:
            items: list[Any] = []
            self.memo[id(node)] = items
            items.extend([self.build(item) for item in node.value])
            return items
        raise NotPlain(f"tag {node.tag!r} on a collection")


def parse(text: str) -> tuple[Any, bool]:
    """The document in ``text`` and whether it is plain JSON-able data.

    Raises:
        NotPlain: when the strict loader must judge it (any YAML error included).
    """
    loader = _Loader(text)
    try:
        with gc_paused():
            node = loader.get_single_node()
            if node is None:
                return None, True
            builder = _Builder(loader)
            return builder.build(node), builder.plain
    except NotPlain:
        raise
    except (yaml.YAMLError, RecursionError, TypeError, ValueError) as exc:
        raise NotPlain(str(exc)) from exc
    finally:
        loader.dispose()


def load(text: str) -> Any:
    """The data of the YAML document ``text``, from the cache when it holds it; a big plain
    document is stored there.

    Raises:
        NotPlain: when the strict loader must judge it.
    """
    entry = _entry(text.encode()) if len(text) >= CACHE_FROM else None
    if entry is not None:
        cached = read_entry(entry)
        if cached is not None:
            return cached
    data, plain = parse(text)
    if entry is not None and plain:
        write_entry(entry, data)
    return data


# --------------------------------------------------------------------------- the cache
_SALT: bytes | None = None


def _salt() -> bytes:
    """What else the parsed data depends on: PyYAML and libyaml, and this module's code."""
    global _SALT
    if _SALT is None:
        try:
            code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
        except OSError:
            code = "unknown"
        libyaml = getattr(yaml, "__with_libyaml__", False)
        _SALT = f"cowork-spec-yaml {CACHE_VERSION} {code} pyyaml {yaml.__version__} libyaml {libyaml}\0".encode()
    return _SALT


def cache_dir() -> Path:
    """The folder of cached parses: ``spec-yaml`` under ``settings.cache`` (``$COWORK_CACHE``,
    default ``~/.cache/cowork``)."""
    from ..settings import get  # a leaf module (pydantic only); imported late, as loading is

    return get().cache / "spec-yaml"


def _entry(text: bytes) -> Path:
    # The key is the text parsed, never the path or mtime: a file rewritten within the same
    # second, or copied elsewhere, is looked up by what it now holds.
    return cache_dir() / f"{hashlib.sha256(_salt() + text).hexdigest()}.json.z"


def read_entry(entry: Path) -> Any:
    """The JSON data of a cache entry (zlib-compressed), ``None`` when it is missing or torn."""
    try:
        return json.loads(zlib.decompress(entry.read_bytes()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, zlib.error) as exc:  # a torn or foreign file: parse again
        log.debug("cache entry %s unreadable (%s)", entry.name, exc)
        return None


_pruned: set[Path] = set()


def write_entry(entry: Path, data: Any, limit: int = CACHE_BYTES) -> None:
    """Write ``data`` as a cache entry atomically; the first write of a process to a folder
    prunes it to ``limit`` bytes (:func:`prune`). A folder that cannot be written is passed
    over: everything works, only slower."""
    try:
        blob = zlib.compress(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode(), 1)
    except (TypeError, ValueError):  # a cycle through an alias
        return
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        if entry.parent not in _pruned:
            _pruned.add(entry.parent)
            prune(entry.parent, limit)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, entry)  # atomic: a reader in another process sees all of it or nothing
    except OSError as exc:  # a read-only home: loading works, only slower
        log.debug("cache entry not written (%s)", exc)


def prune(folder: Path, limit: int) -> int:
    """Remove the oldest entries of ``folder`` until it holds at most three quarters of
    ``limit`` bytes, when it holds more than ``limit``; returns how many went."""
    try:
        entries = [(e.stat().st_mtime, e.stat().st_size, e.path) for e in os.scandir(folder)
                   if e.is_file() and e.name.endswith(".json.z")]
    except OSError:
        return 0
    total = sum(size for _, size, _ in entries)
    if total <= limit:
        return 0
    removed = 0
    for _, size, path in sorted(entries):
        if total <= limit * 3 // 4:
            break
        try:
            os.unlink(path)
        except OSError:
            continue
        total -= size
        removed += 1
    log.info("spec cache: removed %s old entries from %s", removed, folder)
    return removed
