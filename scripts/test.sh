#!/usr/bin/env bash
# Builds if needed and runs the whole test suite (GoogleTest binaries + Python end-to-end
# checks through CTest).  GPU tests skip cleanly on machines without a CUDA device.
#   scripts/test.sh [extra ctest arguments]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

install_debian_packages
install_python_packages
configure_and_build

cd "$CNNRT_BUILD"
ctest --output-on-failure -j "$(nproc)" "$@"
