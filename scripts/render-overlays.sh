#!/usr/bin/env bash
# Renders every Kustomize overlay (deploy/kubernetes/overlays/*) with `kubectl kustomize` into
# DIR/<overlay>.yaml, for `make lint` to validate and tests/deploy to read.
#
#   scripts/render-overlays.sh DIR
#
# The overlays use the Kustomization fields that Debian 12's kubectl (1.20, kustomize 2.0.3)
# knows as well as current ones (`bases`, `patchesStrategicMerge`); current kustomize prints a
# deprecation warning for them, which is dropped here, while any other message stays.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:?usage: scripts/render-overlays.sh DIR}"
mkdir -p "$DIR"
for overlay in deploy/kubernetes/overlays/*/; do
    name=$(basename "$overlay")
    kubectl kustomize "$overlay" >"$DIR/$name.yaml.tmp" 2> >(grep -v "is deprecated. Please use" >&2)
    mv "$DIR/$name.yaml.tmp" "$DIR/$name.yaml"
done
