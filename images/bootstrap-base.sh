#!/usr/bin/env bash
# Build the offline base image (Debian bookworm + Python 3) with debootstrap and
# `docker import`, for machines that reach Debian's package mirror but no container
# registry. Usage: images/bootstrap-base.sh [IMAGE_NAME]   (default cowork-base:bookworm-2)
# Bump the tag (here and in cowork.settings.base_image) when the package list changes, so
# that machines with an older base bootstrap the new one.
set -euo pipefail
name="${1:-cowork-base:bookworm-2}"
mirror="${COWORK_DEBIAN_MIRROR:-}"
if docker image inspect "$name" >/dev/null 2>&1; then
    echo "base image $name already present"; exit 0
fi
command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; }
root="$(mktemp -d /tmp/cowork-rootfs.XXXXXX)"
trap 'rm -rf "$root"' EXIT
echo "debootstrap bookworm into $root (about a minute)"
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,procps bookworm "$root" $mirror >/dev/null
# Trim what a sandbox never needs: package caches, docs, man pages.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
       "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
tar -C "$root" -c . | docker import \
    -c 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["/bin/bash"]' - "$name" >/dev/null
echo "imported $name"
