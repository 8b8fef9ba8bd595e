# Shared by setup.sh and test.sh: install what the build needs on a Debian machine (only what
# is missing), then configure and build into build/.
set -euo pipefail

CNNRT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CNNRT_BUILD="${CNNRT_BUILD:-$CNNRT_ROOT/build}"
CNNRT_DEB_PACKAGES=(cmake ninja-build g++ pkg-config python3 python3-pip libyaml-cpp-dev libpng-dev
                    libjpeg-dev nlohmann-json3-dev libgtest-dev libcli11-dev)

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
# checks; scikit-learn for the digits model; nanobind, scikit-build-core and pytest for the
# Python module (python/, pyproject.toml) and its tests.  (scikit-image is optional: without it the
# coffee.png check of EfficientNet-Lite0 is skipped.)
install_python_packages() {
  local missing=()
  python3 -c 'import numpy' 2>/dev/null || missing+=(numpy)
  python3 -c 'import yaml' 2>/dev/null || missing+=(pyyaml)
  python3 -c 'import safetensors' 2>/dev/null || missing+=(safetensors)
  python3 -c 'import onnx' 2>/dev/null || missing+=(onnx)
  python3 -c 'import onnxruntime' 2>/dev/null || missing+=(onnxruntime)
  python3 -c 'import sklearn' 2>/dev/null || missing+=(scikit-learn)
  python3 -c 'import nanobind' 2>/dev/null || missing+=(nanobind)
  python3 -c 'import scikit_build_core' 2>/dev/null || missing+=(scikit-build-core)
  python3 -c 'import pytest' 2>/dev/null || missing+=(pytest)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing Python packages: ${missing[*]}"
    pip_install "${missing[@]}"
  fi
}

# Extra CMake arguments come from CNNRT_CMAKE_ARGS (CI narrows the CUDA targets with it).
configure_and_build() {
  if [ ! -f "$CNNRT_BUILD/build.ninja" ]; then
    # shellcheck disable=SC2086  # word splitting of the extra arguments is intended
    cmake -S "$CNNRT_ROOT" -B "$CNNRT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      ${CNNRT_CMAKE_ARGS:-} "$@"
  fi
  cmake --build "$CNNRT_BUILD" -j "$(nproc)"
}

# ASan + UBSan build with clang (scripts/sanitize.sh, scripts/fuzz.sh): the CPU engine, the
# GoogleTest suite and the libFuzzer targets, all instrumented (-fsanitize=fuzzer-no-link adds
# only coverage counters, so the test binaries run as usual).  Installs clang and the libFuzzer
# runtime when missing.
# Build type "Sanitize" has no flags of its own (Release would add -O3, Debug full debug info):
# -O1 keeps the tests fast, line tables are all a sanitizer stack needs, asserts stay on.
CNNRT_SANITIZE_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined \
-fsanitize=fuzzer-no-link -fno-omit-frame-pointer -gline-tables-only -O1"
configure_sanitizer_build() {
  local build="$1"
  if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    echo "== installing clang and its sanitizer/libFuzzer runtime"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-dev >/dev/null
  fi
  if [ ! -f "$build/build.ninja" ]; then
    local launcher=()
    command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    CC=clang CXX=clang++ cmake -S "$CNNRT_ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize \
      -DCNNRT_WITH_CUDA=OFF -DCNNRT_BUILD_FUZZERS=ON -DCNNRT_BUILD_PYTHON=OFF -DCNNRT_SHARED=OFF \
      "${launcher[@]}" \
      -DCMAKE_CXX_FLAGS="$CNNRT_SANITIZE_FLAGS" >/dev/null
  fi
  nice cmake --build "$build" -j "$(nproc)"
}

# Sanitizer reports must fail the run, with a stack.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
