// kernels/cuda/cublaslt_loader.cpp: cnnrt's cuBLASLt calls reach the real library, loaded on the
// first call (no device needed: these run on the CPU-only CI machine too).  That a process which
// never calls cuBLASLt does not map it is checked on the CLI by tests/e2e/test_lazy_libraries.py.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "kernels/cuda/cuda_check.h"

namespace {

std::string mapped_files() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str();
}

TEST(CublasLtLoader, CallsReachTheLibraryLoadedOnFirstUse) {
  // Only the library itself knows these names: a forwarding stub would have nothing to return.
  EXPECT_STREQ(cublasLtGetStatusString(CUBLAS_STATUS_SUCCESS), "success");
  EXPECT_STREQ(cublasLtGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED),
               "the requested functionality is not supported");
  EXPECT_NE(mapped_files().find("libcublasLt.so"), std::string::npos);
}

TEST(CublasLtLoader, DescriptorsAreMadeAndReadByTheLibrary) {
  // A layout made and queried through the forwarded functions: needs no device.
  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16F, 37, 11, 40), CUBLAS_STATUS_SUCCESS);
  const int32_t batch = 3;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                             sizeof(batch)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(layout), CUBLAS_STATUS_SUCCESS);
}

TEST(CublasLtLoader, FailedCallsAreNamedByTheLibrarysStatus) {
  try {
    CNNRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(nullptr, CUDA_R_16F, 1, 1, 1));
    FAIL() << "a null layout pointer was accepted";
  } catch (const cnnrt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("an unsupported value or parameter"), std::string::npos)
        << e.what();
  }
}

}  // namespace
