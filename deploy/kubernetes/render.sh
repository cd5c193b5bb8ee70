#!/bin/sh
# Renders the kustomizations into the single-file manifests beside this script (for
# `kubectl apply -f` without kustomize). Needs kustomize, or kubectl (which has it built in).
# tests/test_deploy_kubernetes.py renders them again wherever kustomize is found and compares.
set -eu
cd "$(dirname "$0")"
if command -v kustomize >/dev/null 2>&1; then build="kustomize build"; else build="kubectl kustomize"; fi
render() {
    { echo "# Rendered from deploy/kubernetes/$1 by render.sh: edit the kustomization, then run render.sh."
      $build "$1"; } > "$2"
}
render overlays/full gpudiag-exporter.yaml
render overlays/minimal gpudiag-exporter-minimal.yaml
render node-problem-detector gpudiag-node-problem-detector.yaml
