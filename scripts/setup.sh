#!/usr/bin/env bash
# One-time set-up on a fresh Debian-like machine (as root, or with sudo rights for apt):
# make sure a Docker engine answers, install the package with its test extras, and build
# the sandbox images (offline bootstrap when no registry answers). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

if ! docker info >/dev/null 2>&1; then
    if ! command -v dockerd >/dev/null 2>&1; then
        echo "== installing the Docker engine (docker.io)"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq docker.io >/dev/null
    fi
fi

# gVisor (the optional `gvisor` sandbox backend): install runsc and register it with Docker,
# with --host-uds=create so the in-container server can make its sockets in the run dir.
# Best effort: without it only the gVisor tests fail (in CI) or skip (elsewhere).
if ! command -v runsc >/dev/null 2>&1; then
    echo "== installing gVisor (runsc)"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq runsc >/dev/null 2>&1 \
        || { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq runsc >/dev/null; } \
        || echo "   runsc could not be installed; the gvisor backend will be unavailable"
fi
if command -v runsc >/dev/null 2>&1 && ! grep -q -- "--host-uds=create" /etc/docker/daemon.json 2>/dev/null; then
    echo "== registering the runsc runtime in /etc/docker/daemon.json"
    $SUDO mkdir -p /etc/docker
    $SUDO "$PY" - "$(command -v runsc)" <<'PYEOF'
import json, os, sys
path = "/etc/docker/daemon.json"
conf = json.load(open(path)) if os.path.exists(path) and os.path.getsize(path) else {}
conf.setdefault("runtimes", {})["runsc"] = {"path": sys.argv[1], "runtimeArgs": ["--network=none", "--host-uds=create"]}
with open(path, "w") as fh:
    json.dump(conf, fh, indent=2)
PYEOF
    # A running daemon reloads its runtimes on SIGHUP; a stopped one reads the file at start.
    if pidof dockerd >/dev/null 2>&1; then $SUDO kill -HUP "$(pidof dockerd)"; sleep 1; fi
fi

if ! docker info >/dev/null 2>&1; then
    echo "== starting dockerd in the background (log: /tmp/cowork-dockerd.log)"
    $SUDO sh -c 'nohup dockerd >/tmp/cowork-dockerd.log 2>&1 &'
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { echo "dockerd did not come up; see /tmp/cowork-dockerd.log"; exit 1; }
fi
command -v debootstrap >/dev/null 2>&1 || {
    echo "== installing debootstrap (offline base image)"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq debootstrap >/dev/null
}

# Headless Chromium: the `cowork view` tests render the page in a real browser
# (tests/integration/test_view.py; they fail in CI without one and skip elsewhere).
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    echo "== installing chromium (headless browser for the view's tests)"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null 2>&1 \
        || { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null; } \
        || echo "   chromium could not be installed; the view's browser tests will fail in CI and skip elsewhere"
fi

echo "== installing cowork-runtime (editable, with the test, hf and trl extras)"
# torch first, pinned: its CPU build lies on this machine's disk; an open range would make pip
# fetch a multi-GB CUDA build. With it installed, the hf extra's range adds nothing more.
"$PY" -c "import torch" 2>/dev/null || "$PY" -m pip install --quiet --disable-pip-version-check torch==2.13.0 2>&1 \
    | grep -v -e "Running pip as the 'root'" || true
"$PY" -m pip install --quiet --disable-pip-version-check -e '.[test,hf,trl,ray,inspect,skyrl,openenv,verl]' 2>&1 | grep -v -e "is ignored" -e "Running pip as the 'root'" || true
# OpenEnv without its own requirements: they pin fastmcp<4 (cowork runs on 4.x) and add gradio; the
# openenv extra above holds what its server and clients need (see pyproject.toml).
"$PY" -m pip install --quiet --disable-pip-version-check --no-deps 'openenv>=0.10' 2>&1 \
    | grep -v -e "is ignored" -e "Running pip as the 'root'" || true

# verl without its own requirements: they pin transformers<5.11 and pull CUDA-era packages its
# agent loop never imports; the verl extra above holds what `import verl.experimental.agent_loop` needs.
"$PY" -m pip install --quiet --disable-pip-version-check --no-deps 'verl==0.9.1' 2>&1 \
    | grep -v -e "is ignored" -e "Running pip as the 'root'" || true

echo "== building images (base, sandbox) if missing"
"$PY" -m cowork.cli images build
