// The one way cnnrt launches its own kernels: cudaLaunchKernelEx, with programmatic stream
// serialisation where the device has it (compute capability 9.0+; device_traits), so that in a
// captured forward each kernel's launch and ramp overlap the tail of the one before (the edges
// become programmatic graph edges).  The kernel must begin with pdl_enter() (pdl.cuh), which
// makes that overlap safe; every __global__ function in kernels/cuda does.
//
// CNNRT_PDL=0 in the environment turns it off (read once per device, for A/B timing).  The
// launch's status is checked here: a bad configuration throws at the launch site.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/cuda_check.h"

namespace cnnrt::cuda {

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
  config.numAttrs = device_traits().programmatic_launch ? 1 : 0;
  CNNRT_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace cnnrt::cuda
