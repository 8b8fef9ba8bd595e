// --version and the GPU status line; see version.h.  The commit comes from a header the build
// regenerates when HEAD moves (CMakeLists.txt, cnnrt_build_info), so it never goes stale.
#include "apps/common/version.h"

#include "cnnrt/cnnrt.h"
#include "cnnrt_build_info.h"  // CNNRT_VERSION_STRING, CNNRT_GIT_COMMIT, CNNRT_CUDA_ARCHS

#ifdef CNNRT_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace cnnrt::apps {
namespace {

#ifdef CNNRT_WITH_CUDA
// 12040 -> "12.4"
std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// The driver and device as CUDA reports them, or why there is none.
struct CudaStatus {
  std::string runtime, driver, device, problem;
};

CudaStatus cuda_status() {
  CudaStatus status;
  int runtime = 0, driver = 0, count = 0;
  status.runtime =
      cudaRuntimeGetVersion(&runtime) == cudaSuccess ? cuda_version_string(runtime) : "unknown";
  status.driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0
                      ? cuda_version_string(driver)
                      : "none";
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    status.problem = error != cudaSuccess ? cudaGetErrorString(error) : "no CUDA device";
    cudaGetLastError();  // a failed query must not poison later CUDA calls
  } else {
    try {
      status.device = device_info(Device::CUDA).name;
    } catch (const Error& e) {
      status.problem = e.what();
    }
  }
  return status;
}
#endif

}  // namespace

std::string version_text() {
  std::string text =
      std::string("cnnrt ") + CNNRT_VERSION_STRING + " (commit " + CNNRT_GIT_COMMIT + ")\n";
#ifdef CNNRT_WITH_CUDA
  const CudaStatus cuda = cuda_status();
  text += std::string("CUDA backend: compiled for ") + CNNRT_CUDA_ARCHS + "; runtime " +
          cuda.runtime + ", driver " + cuda.driver + "\n";
  text += "device: " + (cuda.problem.empty() ? cuda.device : "none usable (" + cuda.problem + ")");
#else
  text += "CUDA backend: not in this build (configured with CNNRT_WITH_CUDA=OFF or no nvcc)";
#endif
  return text;
}

std::string gpu_test_status() {
#ifdef CNNRT_WITH_CUDA
  const CudaStatus cuda = cuda_status();
  if (cuda.problem.empty())
    return "GPU tests: run on " + cuda.device + " (CUDA runtime " + cuda.runtime + ", driver " +
           cuda.driver + ", compiled for " + CNNRT_CUDA_ARCHS + ")";
  return "GPU tests: skip: no usable CUDA device (" + cuda.problem + "; driver " + cuda.driver +
         ")";
#else
  return "GPU tests: skip: this build has no CUDA backend (configured with CNNRT_WITH_CUDA=OFF or "
         "no nvcc)";
#endif
}

}  // namespace cnnrt::apps
