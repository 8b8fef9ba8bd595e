#!/usr/bin/env bash
# Downloads (does not install) the Debian packages the build needs into .deps/, for a GPU
# machine that has nvcc, CMake and PyTorch but no network and no -dev packages.  Carry .deps/
# there and run scripts/gpu_check.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p .deps
cd .deps
apt-get download libyaml-cpp-dev libyaml-cpp0.7 libgtest-dev libgmock-dev googletest libpng-dev \
                 libpng16-16 zlib1g-dev libjpeg-dev libjpeg62-turbo-dev libjpeg62-turbo \
                 nlohmann-json3-dev libcli11-dev
ls -1 *.deb
