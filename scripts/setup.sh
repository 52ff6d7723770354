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
    if ! docker info >/dev/null 2>&1; then
        echo "== starting dockerd in the background (log: /tmp/cowork-dockerd.log)"
        $SUDO sh -c 'nohup dockerd >/tmp/cowork-dockerd.log 2>&1 &'
        for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
        docker info >/dev/null 2>&1 || { echo "dockerd did not come up; see /tmp/cowork-dockerd.log"; exit 1; }
    fi
fi
command -v debootstrap >/dev/null 2>&1 || {
    echo "== installing debootstrap (offline base image)"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq debootstrap >/dev/null
}

echo "== installing cowork-runtime (editable, with test extras)"
"$PY" -m pip install --quiet --disable-pip-version-check -e '.[test]' 2>&1 | grep -v -e "is ignored" -e "Running pip as the 'root'" || true

echo "== building images (base, sandbox) if missing"
"$PY" -m cowork.cli images build
