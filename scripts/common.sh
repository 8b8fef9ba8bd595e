# Shared by setup.sh and test.sh: install what the build needs on a Debian machine (only what
# is missing), then configure and build into build/.
set -euo pipefail

CNNRT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CNNRT_BUILD="${CNNRT_BUILD:-$CNNRT_ROOT/build}"
CNNRT_DEB_PACKAGES=(cmake ninja-build g++ pkg-config python3 python3-pip libyaml-cpp-dev libstb-dev
                    nlohmann-json3-dev libgtest-dev)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "error: need root (or sudo) to install: $*" >&2; return 1; fi
}

install_debian_packages() {
  local missing=()
  for package in "${CNNRT_DEB_PACKAGES[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

pip_install() {
  python3 -m pip install -q "$@" 2>/dev/null || python3 -m pip install -q --break-system-packages "$@"
}

# numpy, PyYAML and safetensors for the e2e checks; onnx + onnxruntime for the ONNX importer's
# checks; scikit-learn for the digits model.  (scikit-image is optional: without it the
# coffee.png check of EfficientNet-Lite0 is skipped.)
install_python_packages() {
  local missing=()
  python3 -c 'import numpy' 2>/dev/null || missing+=(numpy)
  python3 -c 'import yaml' 2>/dev/null || missing+=(pyyaml)
  python3 -c 'import safetensors' 2>/dev/null || missing+=(safetensors)
  python3 -c 'import onnx' 2>/dev/null || missing+=(onnx)
  python3 -c 'import onnxruntime' 2>/dev/null || missing+=(onnxruntime)
  python3 -c 'import sklearn' 2>/dev/null || missing+=(scikit-learn)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing Python packages: ${missing[*]}"
    pip_install "${missing[@]}"
  fi
}

configure_and_build() {
  if [ ! -f "$CNNRT_BUILD/build.ninja" ]; then
    cmake -S "$CNNRT_ROOT" -B "$CNNRT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
  fi
  cmake --build "$CNNRT_BUILD" -j "$(nproc)"
}
