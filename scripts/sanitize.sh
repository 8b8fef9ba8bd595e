#!/usr/bin/env bash
# The sanitizer pass CI runs after scripts/test.sh: the CPU build and its whole test suite under
# AddressSanitizer + UndefinedBehaviorSanitizer (clang), then every libFuzzer target for a
# bounded time from its seed corpus (scripts/fuzz.sh).  Build folder: build-sanitize/.
#   scripts/sanitize.sh [SECONDS_PER_FUZZ_TARGET]      (default 45; 0 skips the fuzzing)
# Each target runs as one process per core for that time (the tests are done by then).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
fuzz_seconds="${1:-45}"
build="${CNNRT_SANITIZE_BUILD:-$CNNRT_ROOT/build-sanitize}"

install_debian_packages
install_python_packages
start=$(date +%s)
configure_sanitizer_build "$build"
echo "== sanitizer build: $(( $(date +%s) - start )) s"

# The packaging checks build an outside project against the installed (instrumented) static
# libraries with their own flags, and `pip install .` rebuilds the library; they are
# build-system tests and run in the plain pass.  (The Python module is not built here: an
# ASan-instrumented extension cannot load into an uninstrumented python3.)  The
# harness's conv and linear tables and the zoo / EfficientNet-Lite0 forward passes are the
# same reference loops over big tensors, 1-2.5 min each under ASan, and so is the AlexNet golden
# check (the CLI on a 61 M-parameter fp32 forward, 43 s under ASan; the CLI's paths are the
# small e2e checks' too): they run in the plain pass, and the sanitizer pass keeps every other
# test (parsers, CLIs, engines, the other harness tables) to stay within CI's 20 minutes.
start=$(date +%s)
(cd "$build" && ctest --output-on-failure -j "$(nproc)" \
  -E 'e2e\.test_(find_package|pip_install)|harness\.(conv|linear)$|e2e\.test_model_zoo|e2e\.test_efficientnet_lite0|e2e\.test_alexnet_golden')
echo "== test suite under ASan+UBSan: $(( $(date +%s) - start )) s"

if [ "$fuzz_seconds" -gt 0 ]; then
  CNNRT_FUZZ_BUILD="$build" "$CNNRT_ROOT/scripts/fuzz.sh" --time "$fuzz_seconds" --jobs "$(nproc)"
fi
