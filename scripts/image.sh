#!/usr/bin/env bash
# The OCI image a team ships (docs/deployment.md "The image"), with podman.
#
#   scripts/image.sh build TAG            build the Containerfile as TAG on the debootstrap base
#                                         (scripts/image-base.sh); the previous image of that tag
#                                         is removed once the new one exists; prints the image ID
#   scripts/image.sh report TAG [ARCHIVE] print TAG's ID, size and digest; with ARCHIVE, also
#                                         write it there as an OCI archive (`podman save
#                                         --format oci-archive`) and print its size, SHA-256
#                                         and the manifest digest it holds
#
# ARCHIVE must lie outside this repository (a multi-hundred-MB file has no place in the tree).
# Environment: FETCHER_IMAGE_PIP_CA, a CA bundle handed to the build as the secret `pip-ca`
# (default /etc/ssl/certs/ca-certificates.crt when it exists), never stored in the image;
# REVISION and SOURCE, the label values (default: this checkout's commit and origin).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)

log() { echo "image: $*" >&2; }

build() {
    local tag="$1" base previous new started=$SECONDS
    base=$(scripts/image-base.sh | tail -n 1)
    previous=$(podman image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
    local pip_ca="${FETCHER_IMAGE_PIP_CA:-/etc/ssl/certs/ca-certificates.crt}" secret=()
    [[ -f "$pip_ca" ]] && secret=("--secret=id=pip-ca,src=$pip_ca")
    local revision="${REVISION:-$(git rev-parse HEAD 2>/dev/null || true)}"
    local source="${SOURCE:-$(git remote get-url origin 2>/dev/null || echo "file://$ROOT")}"
    podman build --isolation=chroot --format=docker --layers=false \
        --build-arg="BASE_IMAGE=$base" --build-arg="REVISION=$revision" \
        --build-arg="SOURCE=$source" "${secret[@]}" --tag="$tag" --file=Containerfile . >&2
    new=$(podman image inspect --format '{{.Id}}' "$tag")
    # The old build lost its tag; remove it so that rebuilding never piles up images.
    if [[ -n "$previous" && "$previous" != "$new" ]]; then
        podman rmi "$previous" >/dev/null 2>&1 || log "kept $previous (still in use)"
    fi
    log "built $tag in $((SECONDS - started)) s"
    echo "$new"
}

report() {
    local tag="$1" archive="${2:-}"
    echo "image: $tag"
    echo "image id: $(podman image inspect --format '{{.Id}}' "$tag")"
    echo "image size: $(podman image inspect --format '{{.Size}}' "$tag") bytes"
    echo "image digest: $(podman image inspect --format '{{.Digest}}' "$tag")"
    [[ -n "$archive" ]] || return 0
    local dir
    mkdir -p "$(dirname "$archive")"
    dir=$(cd "$(dirname "$archive")" && pwd -P)
    if [[ "$dir/" == "$ROOT/"* ]]; then
        log "refused: $archive is inside the repository; give a path outside it"
        exit 2
    fi
    rm -f "$archive"
    podman save --format oci-archive --output "$archive" "$tag"
    echo "archive: $archive"
    echo "archive size: $(stat -c %s "$archive") bytes"
    echo "archive sha256: $(sha256sum "$archive" | cut -d' ' -f1)"
    echo "archive manifest digest: $(tar -xOf "$archive" index.json |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["manifests"][0]["digest"])')"
}

case "${1:-}" in
    build) build "${2:?usage: scripts/image.sh build TAG}" ;;
    report) report "${2:?usage: scripts/image.sh report TAG [ARCHIVE]}" "${3:-}" ;;
    *) echo "usage: scripts/image.sh build TAG | report TAG [ARCHIVE]" >&2; exit 2 ;;
esac
