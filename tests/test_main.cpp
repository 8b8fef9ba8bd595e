#include <gtest/gtest.h>

#ifdef CNNRT_TEST_GPU_STATUS
#include <iostream>

#include "apps/common/version.h"
#endif

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
#ifdef CNNRT_TEST_GPU_STATUS
  // Binaries with GPU tests say first whether they will run or skip, and why.  Not while
  // listing: gtest_discover_tests parses that output.
  if (!::testing::GTEST_FLAG(list_tests)) std::cout << cnnrt::apps::gpu_test_status() << std::endl;
#endif
  return RUN_ALL_TESTS();
}
