// The CUDA backend: what Engine::build(graph, {device = CUDA}) plugs into the engine.
//
// It answers two questions for the builder — how to convert a tensor between two types, and how
// to make a context — and nothing else: kernels come from the registry, types from the kernels,
// memory from the planner, execution from CudaContext.
//
// Conversions it knows (kConversions below; everything else is an Error naming both types,
// raised at build), for [C, H, W] maps and for vectors ([F]: rows of F ↔ rows of pad8(F); a
// vector of another rank is rows of its last dimension):
//   fp32 NCHW (the host's layout: graph input, returned output) ↔ fp16 NHWC/8 (the tensor-core
//   kernels' layout) — the edges of every fp16 forward, vectorised kernels (layout.h);
//   fp32 NCHW ↔ fp32 NHWC/8 and fp32 NHWC/8 ↔ fp16 NHWC/8 — into and out of the fp32 reference
//   family (a `--precision fp32` engine, or one fp32 layer among fp16 ones), the generic
//   elementwise kernel (convert.h);
//   fp32 NCHW / fp16 NHWC/8 / fp32 NHWC/8 ↔ int8 NHWC/16 and int8 NHWC/16 ↔ int8 NHWC/16 of
//   another scale — into, out of and between the int8 kernels (quantise, dequantise, requantise
//   exactly as docs/QUANTIZATION.md writes them), the same generic kernel.
#include "runtime/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <limits>
#include <memory>
#include <string>

#include "kernels/cuda/convert.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/layout.h"
#include "runtime/cuda/cuda_context.h"

namespace cnnrt::cuda {
namespace {

int checked_int(int64_t value, const char* what) {
  if (value < 1 || value > std::numeric_limits<int>::max())
    throw Error(std::string("CUDA conversion: ") + what + " " + std::to_string(value) +
                " is out of range");
  return static_cast<int>(value);
}

// A [C, H, W] map, or rows × features for any other rank.
struct MapView {
  int channels = 1, height = 1, width = 1;
  int64_t rows = 1;  // samples per batch element for non-maps (product of leading dims)
};
MapView map_view(const Shape& shape) {
  MapView view;
  if (shape.size() == 3) {
    view.channels = checked_int(shape[0], "channels");
    view.height = checked_int(shape[1], "height");
    view.width = checked_int(shape[2], "width");
  } else if (!shape.empty()) {
    view.channels = checked_int(shape.back(), "features");
    for (size_t i = 0; i + 1 < shape.size(); ++i) view.rows *= shape[i];
  }
  return view;
}

// How a conversion step runs: the host-edge fp16 kernels (layout.h) or the generic one.
enum class ConversionKernel { Fp32NchwToFp16, Fp16ToFp32Nchw, Generic };

class CudaConversion final : public LayerKernel {
 public:
  CudaConversion(const Shape& shape, const TensorType& from, const TensorType& to,
                 ConversionKernel kernel)
      : shape_(shape), view_(map_view(shape)), from_(from), to_(to), kernel_(kernel) {}
  std::vector<TensorType> input_types(size_t) const override { return {from_}; }
  TensorType output_type() const override { return to_; }
  void run(const KernelArgs& args) override {
    const auto stream = static_cast<cudaStream_t>(args.stream);
    const int64_t n = args.batch * view_.rows;
    switch (kernel_) {
      case ConversionKernel::Fp32NchwToFp16:
        nchw_fp32_to_nhwc_fp16(static_cast<const float*>(args.inputs.at(0)), args.output, n,
                               view_.channels, view_.height, view_.width, stream);
        break;
      case ConversionKernel::Fp16ToFp32Nchw:
        nhwc_fp16_to_nchw_fp32(args.inputs.at(0), static_cast<float*>(args.output), n,
                               view_.channels, view_.height, view_.width, stream);
        break;
      case ConversionKernel::Generic:
        convert_tensor_cuda(args.inputs.at(0), from_, args.output, to_, shape_, args.batch, stream);
        break;
    }
  }

 private:
  Shape shape_;
  MapView view_;
  TensorType from_, to_;
  ConversionKernel kernel_;
};

struct ConversionRow {
  TensorType from, to;
  ConversionKernel kernel;
};

const ConversionRow kConversions[] = {
    {fp32_nchw(), fp16_nhwc8(), ConversionKernel::Fp32NchwToFp16},
    {fp16_nhwc8(), fp32_nchw(), ConversionKernel::Fp16ToFp32Nchw},
    {fp32_nchw(), fp32_nhwc8(), ConversionKernel::Generic},
    {fp32_nhwc8(), fp32_nchw(), ConversionKernel::Generic},
    {fp32_nhwc8(), fp16_nhwc8(), ConversionKernel::Generic},
    {fp16_nhwc8(), fp32_nhwc8(), ConversionKernel::Generic},
    // int8: the scale is the tensors' own (the match below ignores it).
    {fp32_nchw(), int8_nhwc16(1), ConversionKernel::Generic},
    {int8_nhwc16(1), fp32_nchw(), ConversionKernel::Generic},
    {fp16_nhwc8(), int8_nhwc16(1), ConversionKernel::Generic},
    {int8_nhwc16(1), fp16_nhwc8(), ConversionKernel::Generic},
    {fp32_nhwc8(), int8_nhwc16(1), ConversionKernel::Generic},
    {int8_nhwc16(1), fp32_nhwc8(), ConversionKernel::Generic},
    {int8_nhwc16(1), int8_nhwc16(1), ConversionKernel::Generic},
};

class CudaBackend final : public Backend {
 public:
  Device device() const override { return Device::CUDA; }

  std::unique_ptr<LayerKernel> make_conversion(const Shape& shape, const TensorType& from,
                                               const TensorType& to) const override {
    // Vectors are rows whatever the layout flag says (graph/tensor_type.h).
    auto is = [&](const TensorType& type, const TensorType& expected) {
      return type.dtype == expected.dtype && type.channel_align == expected.channel_align &&
             (shape.size() != 3 || type.layout == expected.layout);
    };
    for (const ConversionRow& row : kConversions)
      if (is(from, row.from) && is(to, row.to))
        return std::make_unique<CudaConversion>(shape, from, to, row.kernel);
    throw Error("the CUDA backend cannot convert a " + shape_to_string(shape) + " tensor from " +
                to_string(from) + " to " + to_string(to));
  }

  std::unique_ptr<ContextImpl> create_context(std::shared_ptr<const EngineImpl> engine, int batch,
                                              const ContextOptions& options) const override {
    return std::make_unique<CudaContext>(std::move(engine), batch, options);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
  if (plan_only()) return std::make_unique<CudaBackend>();  // a described target, no device
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw Error(std::string("no CUDA device (") + cudaGetErrorString(status) + ")");
  }
  if (count == 0) throw Error("no CUDA device");
  return std::make_unique<CudaBackend>();
}

}  // namespace cnnrt::cuda
