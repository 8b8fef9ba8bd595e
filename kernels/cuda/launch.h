// The one way cnnrt launches its own kernels: cudaLaunchKernelEx, with programmatic stream
// serialisation while a ProgrammaticLaunchScope on this thread asks for it, so that in a captured
// forward each kernel's launch, and the weight prefetch before its griddepcontrol.wait, overlap
// the tail of the one before (the edges become programmatic graph edges).  The kernel must call
// pdl_wait() (pdl.cuh) before it touches memory another kernel writes, which makes that overlap
// safe; every __global__ function in kernels/cuda does (but the two wgmma probes, which are
// launched plainly).
//
// Who asks: the CUDA context, around its forward's launches, on a device with it
// (DeviceTraits::programmatic_launch, decided once per device; CNNRT_PDL=0 turns it off).
// Outside a scope every launch is plain.  The launch's status is checked here: a bad
// configuration throws at the launch site.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "kernels/cuda/cuda_check.h"

namespace cnnrt::cuda {

// Whether launch_kernel on this thread asks for programmatic stream serialisation.
inline thread_local bool programmatic_launch_on = false;

// Sets programmatic_launch_on for its lifetime (restoring the previous value after).
class ProgrammaticLaunchScope {
 public:
  explicit ProgrammaticLaunchScope(bool on) : previous_(programmatic_launch_on) {
    programmatic_launch_on = on;
  }
  ~ProgrammaticLaunchScope() { programmatic_launch_on = previous_; }
  ProgrammaticLaunchScope(const ProgrammaticLaunchScope&) = delete;
  ProgrammaticLaunchScope& operator=(const ProgrammaticLaunchScope&) = delete;

 private:
  bool previous_;
};

template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes,
                   cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute[1] = {};
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = programmatic_launch_on ? 1 : 0;
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (status != cudaSuccess) cudaGetLastError();  // cleared, so no later check reports it again
  CNNRT_CUDA_CHECK(status);
}

}  // namespace cnnrt::cuda
