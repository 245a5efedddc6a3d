#!/usr/bin/env bash
# A local Debian base image for `make image`, built with debootstrap because no registry is
# reachable here (the Containerfile's default base, the official python slim image, is what users
# pull). It holds Debian's python3 (bookworm: 3.11, within requires-python >=3.11) and
# python3-venv, nothing else beyond minbase; no compiler.
#
#   scripts/image-base.sh            print the image name, building it only when missing
#
# The root file system lives outside the repository, in FETCHER_IMAGE_CACHE (default
# /var/tmp/fetcher-image), and is reused across runs; it is imported into podman's store as
# $BASE_IMAGE. Environment (all optional):
#   FETCHER_IMAGE_CACHE    where the debootstrap tree lives (a few hundred MB)
#   FETCHER_DEBIAN_MIRROR  the Debian mirror (default http://deb.debian.org/debian)
#   FETCHER_DEBIAN_SUITE   the suite (default bookworm)
set -euo pipefail

SUITE="${FETCHER_DEBIAN_SUITE:-bookworm}"
MIRROR="${FETCHER_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE="${FETCHER_IMAGE_CACHE:-/var/tmp/fetcher-image}"
ROOTFS="$CACHE/rootfs-$SUITE"
BASE_IMAGE="localhost/fetcher-base:debian-$SUITE"
# libltdl7: mssql-python's bundled ODBC driver loads it (SQL Server connections).
PACKAGES=python3,python3-venv,ca-certificates,libltdl7

if podman image exists "$BASE_IMAGE"; then
    echo "$BASE_IMAGE"
    exit 0
fi
if [[ ! -f "$ROOTFS/.complete" ]]; then
    rm -rf "$ROOTFS"
    mkdir -p "$CACHE"
    echo "image-base: debootstrap $SUITE into $ROOTFS" >&2
    debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >&2
    # Keep the base small: no package lists, caches or man pages in the image.
    rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin \
        "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/usr/share/man/* \
        "$ROOTFS"/usr/share/doc/*
    printf 'deb %s %s main\n' "$MIRROR" "$SUITE" >"$ROOTFS/etc/apt/sources.list"
    touch "$ROOTFS/.complete"
fi
echo "image-base: importing $ROOTFS as $BASE_IMAGE" >&2
tar --exclude=./.complete -C "$ROOTFS" -c . | podman import \
    --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$BASE_IMAGE" >&2
echo "$BASE_IMAGE"
