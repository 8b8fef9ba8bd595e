// The backend table (see backends.h).  The only file of the generic runtime that knows which
// backends were compiled in.
#include "runtime/backends.h"

#include <algorithm>
#include <thread>

#ifdef CNNRT_WITH_CUDA
#include "kernels/cuda/device_traits.h"
#include "runtime/cuda/cuda_backend.h"
#endif

namespace cnnrt {
namespace {

// The CPU's peak rates are unknown (0): nothing portable reports them, and a guessed figure
// made "% peak" columns meaningless, so profiles print achieved rates only.
DeviceInfo cpu_info() {
  DeviceInfo info;
  info.name = "cpu";
  info.multiprocessors = static_cast<int>(std::thread::hardware_concurrency());
  return info;
}

}  // namespace

const std::vector<BackendInfo>& backend_table() {
  static const std::vector<BackendInfo> table = {
      {Device::CPU, [] { return true; }, cpu_info,
       [](KernelRegistry& registry) {
         register_cpu_kernels(registry);
         register_cpu_int8_kernels(registry);
         register_cpu_sparse_kernels(registry);
       },
       make_cpu_backend, nullptr, nullptr},
#ifdef CNNRT_WITH_CUDA
      {Device::CUDA, cuda::cuda_device_present, cuda::cuda_device_info, cuda::register_cuda_kernels,
       cuda::make_cuda_backend,
       [](const std::string& target) -> std::shared_ptr<void> {
         return std::make_shared<cuda::PlanTargetScope>(cuda::target_traits(target));
       },
       cuda::cuda_warm_up},
#endif
  };
  return table;
}

const BackendInfo* find_backend(Device device) {
  for (const BackendInfo& row : backend_table())
    if (row.device == device) return &row;
  return nullptr;
}

}  // namespace cnnrt
