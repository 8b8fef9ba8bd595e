// The layer kernel of the CUDA families whose ops need no state beyond their launch: one closure
// made once by the entry's factory (shapes, attributes and any device data read from the node),
// a fixed tensor type in and out, an in-place flag and an optional workspace per batch.
// prepare() reports those, run() only launches.  Shared by the fp16 non-GEMM layers
// (fp16_entries.cpp) and the fp32 reference family (fp32_entries.cpp).
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <utility>
#include <vector>

#include "kernels/cuda/elementwise_fp16.h"
#include "runtime/kernel.h"

namespace cnnrt::cuda {

using Launch = std::function<void(const KernelArgs&, cudaStream_t)>;

class LaunchKernel final : public LayerKernel {
 public:
  LaunchKernel(TensorType type, Launch launch, bool in_place, std::vector<DeviceArray> buffers = {},
               std::function<size_t(int)> workspace = nullptr)
      : type_(type),
        launch_(std::move(launch)),
        in_place_(in_place),
        buffers_(std::move(buffers)),
        workspace_(std::move(workspace)) {}
  std::vector<TensorType> input_types(size_t /*index*/) const override { return {type_}; }
  TensorType output_type() const override { return type_; }
  KernelPlan prepare(const PrepareInfo& info) const override {
    KernelPlan plan;
    plan.in_place = in_place_;
    if (workspace_) plan.workspace_bytes = workspace_(info.batch);
    return plan;
  }
  void run(const KernelArgs& args) override {
    launch_(args, static_cast<cudaStream_t>(args.stream));
  }
  size_t weight_bytes() const override {
    size_t bytes = 0;
    for (const DeviceArray& buffer : buffers_) bytes += buffer.bytes();
    return bytes;
  }

 private:
  TensorType type_;
  Launch launch_;
  bool in_place_;                     // the launch is right with output == inputs[0]
  std::vector<DeviceArray> buffers_;  // device data the closure points into
  std::function<size_t(int)> workspace_;
};

}  // namespace cnnrt::cuda
