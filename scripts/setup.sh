#!/usr/bin/env bash
# One command on a fresh Debian machine: install the build dependencies, build cnnrt, and run
# the main job — alexnet_infer on the shipped sample photograph.
#   scripts/setup.sh
# Uses models/alexnet.safetensors when present (export it with tools/export_torchvision.py on
# a machine with torch + torchvision); otherwise runs with deterministic random weights, whose
# labels are meaningless, so that the whole pipeline is still exercised.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

install_debian_packages
configure_and_build

cd "$CNNRT_ROOT"
image=models/samples/chelsea.png
if [ -f models/alexnet.safetensors ]; then
  "$CNNRT_BUILD/bin/alexnet_infer" "$image"
else
  echo "== models/alexnet.safetensors not found: running with random weights"
  echo "   (for real predictions: python3 tools/export_torchvision.py --out models/alexnet.safetensors)"
  "$CNNRT_BUILD/bin/alexnet_infer" "$image" --random-weights 0
fi
