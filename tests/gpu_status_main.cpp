// `cnnrt_gpu_status`: the line CTest prints before any test runs (CTEST_CUSTOM_PRE_TEST,
// tests/CMakeLists.txt) saying whether the GPU tests will run or skip, and why.
#include <iostream>

#include "apps/common/version.h"

int main() {
  std::cout << cnnrt::apps::gpu_test_status() << std::endl;
  return 0;
}
