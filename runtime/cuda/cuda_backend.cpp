// The CUDA backend: what Engine::build(graph, {device = CUDA}) plugs into the engine.
//
// It answers two questions for the builder and the planner — how big an activation is in the
// GPU layout, and how to make a context — and nothing else: kernels come from the registry,
// memory from the planner, execution from CudaContext.  The layout is the one fixed in
// runtime/cuda/cuda_registry.h (NHWC fp16, channels padded to 8; vectors [N][pad8(F)]).
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/device_info.h"
#include "runtime/engine_impl.h"

namespace cnnrt {
namespace {

constexpr size_t kTensorAlignment = 256;  // the planner's alignment; keeps vector accesses legal

int64_t pad8(int64_t value) { return (value + 7) / 8 * 8; }

class CudaBackend final : public Backend {
 public:
  Device device() const override { return Device::CUDA; }

  // fp16, per sample: [C, H, W] → H·W·pad8(C); [F] → pad8(F); other ranks pad the last
  // dimension and keep the rest (a scalar counts as [1]).  Rounded up to the arena alignment.
  size_t tensor_bytes(const Shape& shape, int batch) const override {
    int64_t per_sample = 0;
    if (shape.size() == 3) {
      per_sample = shape[1] * shape[2] * pad8(shape[0]);
    } else if (shape.empty()) {
      per_sample = pad8(1);
    } else {
      per_sample = pad8(shape.back());
      for (size_t i = 0; i + 1 < shape.size(); ++i) per_sample *= shape[i];
    }
    const size_t bytes = static_cast<size_t>(batch) * static_cast<size_t>(per_sample) * 2;
    return (bytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  }

  std::unique_ptr<ContextImpl> create_context(const EngineImpl& engine, int batch) const override {
    return std::make_unique<cuda::CudaContext>(engine, batch);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw Error(std::string("no CUDA device (") + cudaGetErrorString(status) + ")");
  }
  if (count == 0) throw Error("no CUDA device");
  return std::make_unique<CudaBackend>();
}

}  // namespace cnnrt
