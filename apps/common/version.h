// What `--version` prints: the cnnrt version and commit, and the CUDA side of this build —
// the architectures compiled in, the runtime linked, the driver and device found.
#pragma once

#include <string>

namespace cnnrt::apps {

// "cnnrt 0.1.0 (commit c0b1da4)\nCUDA: ..." — several lines, no trailing newline.
std::string version_text();

// One line for the start of a test run: whether the GPU tests will run or skip, and why
// ("GPU tests: run on NVIDIA H200 (...)" / "GPU tests: skip: this build has no CUDA backend").
std::string gpu_test_status();

}  // namespace cnnrt::apps
