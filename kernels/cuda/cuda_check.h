// Checked CUDA / cuBLASLt calls: every return code becomes a cnnrt::Error carrying the statement,
// file and line.  Library code never aborts on a failed call.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/device_traits.h"

namespace cnnrt::cuda {

[[noreturn]] inline void throw_cuda_error(const char* what, const char* detail, const char* file,
                                          int line) {
  throw Error(std::string("CUDA call failed: ") + what + ": " + detail + " (" + file + ":" +
              std::to_string(line) + ")");
}

}  // namespace cnnrt::cuda

#define CNNRT_CUDA_CHECK(call)                                                            \
  do {                                                                                    \
    cudaError_t cnnrt_status_ = (call);                                                   \
    if (cnnrt_status_ != cudaSuccess)                                                     \
      ::cnnrt::cuda::throw_cuda_error(#call, cudaGetErrorString(cnnrt_status_), __FILE__, \
                                      __LINE__);                                          \
  } while (0)

// After a plain <<< >>> launch (the labs): reports launch-configuration errors immediately.
// cnnrt's own kernels go through launch_kernel (launch.h), which checks its launch itself.
#define CNNRT_CUDA_CHECK_LAUNCH() CNNRT_CUDA_CHECK(cudaGetLastError())

#define CNNRT_CUBLAS_CHECK(call)                                                               \
  do {                                                                                         \
    cublasStatus_t cnnrt_status_ = (call);                                                     \
    if (cnnrt_status_ != CUBLAS_STATUS_SUCCESS)                                                \
      ::cnnrt::cuda::throw_cuda_error(#call, cublasLtGetStatusString(cnnrt_status_), __FILE__, \
                                      __LINE__);                                               \
  } while (0)

namespace cnnrt::cuda {

// Multiprocessor count of the current device, or of the described target while planning
// without one (kernels size grids and fallback thresholds by it; device_traits.h).
inline int current_sm_count() { return device_traits().sms; }

}  // namespace cnnrt::cuda
