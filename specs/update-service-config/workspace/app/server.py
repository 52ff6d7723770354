"""orders-api: load the configuration and serve (the HTTP part is elided in this repo copy)."""

import argparse
import json
import os
import sys


def load_config(folder: str) -> dict:
    """Read settings.json and the few app.yaml keys the service needs (no YAML dependency)."""
    with open(os.path.join(folder, "settings.json"), encoding="utf-8") as fh:
        settings = json.load(fh)
    app: dict = {}
    section = None
    with open(os.path.join(folder, "app.yaml"), encoding="utf-8") as fh:
        for raw in fh:
            line = raw.split("#", 1)[0].rstrip()
            if not line:
                continue
            if not line.startswith(" "):
                section = line.rstrip(":")
                app[section] = {}
            elif section:
                key, _, value = line.strip().partition(":")
                app[section][key] = value.strip()
    return {"app": app, "settings": settings}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orders-api")
    parser.add_argument("--config", default="config")
    args = parser.parse_args(argv)
    cfg = load_config(args.config)
    server = cfg["app"]["server"]
    payments = cfg["settings"]["upstreams"]["payments"]
    print(f"orders-api on {server['host']}:{server['port']} "
          f"(payments timeout {payments['timeout_ms']} ms, flags {sorted(k for k, v in cfg['settings']['features'].items() if v)})")
    for name in ("DB_PASSWORD", "PAYMENTS_API_KEY"):
        if name not in os.environ:
            print(f"warning: {name} is not set; export it from your secrets store", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
