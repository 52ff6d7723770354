"""Writes the tool catalog at image build: every tool registered on a real FastMCP app, as
its ``tools/list`` answers (``python -m cowork.server.catalog_build [OUT]``)."""

from __future__ import annotations

import json
import sys

from ..toolhost.catalog import CATALOG_PATH
from .app import build_catalog


def main(argv: list[str]) -> int:
    """``python -m cowork.server.catalog_build [OUT]``: write the catalog (default: the image's path)."""
    out = argv[1] if len(argv) > 1 else CATALOG_PATH
    catalog = build_catalog()
    with open(out, "w") as fh:
        json.dump(catalog, fh, sort_keys=True, separators=(",", ":"))
    print(f"{len(catalog)} tools -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
