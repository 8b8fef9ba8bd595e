// Registry entry of the warp-specialised Hopper wgmma convolution
// (kernels/cuda/conv_fp16_wgmma_ws.h).
//
// Same thin adapter as conv_wgmma_kernels.cpp: supports() rebuilds the ConvShape from the node
// (conv_shape_of refuses a node whose derived output disagrees with the graph), applies the
// kernel's shape rule — which refuses fused pools, those stay with conv_fp16_wgmma — then the
// cached device rule (compute capability 9.0 with the sm_90a image loaded).
// Priority 14: one below conv_fp16_wgmma (15), so it is a candidate in `cnnrt profile --compare`
// but not yet the default; the lead raises it once GPU measurements show it faster.
//
// Small batches: the layer keeps a ConvFp16 fallback and uses it while even the smallest tile
// (128x128, max_ctas) would leave SMs idle; above that the kernel's cost model picks the tile
// per batch.  The reported workspace is the fallback's at the largest batch that still takes it.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "kernels/cuda/conv_fp16_wgmma_ws.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {
namespace {

std::optional<ConvShape> wgmma_ws_shape_of(const Node& node) {
  std::optional<ConvShape> shape = conv_shape_of(node);
  if (!shape || !ConvFp16WgmmaWs::supports(*shape)) return std::nullopt;
  return shape;
}

class ConvFp16WgmmaWsKernel final : public LayerKernel {
 public:
  ConvFp16WgmmaWsKernel(const ConvShape& shape, const float* weight, const float* bias)
      : conv_(shape, weight, bias), fallback_(shape, weight, bias), sms_(sm_count()) {
    // Largest batch that still runs the fallback (max_ctas() grows with the batch).
    while (conv_.max_ctas(fallback_max_batch_ + 1) < sms_) ++fallback_max_batch_;
  }
  void run(const KernelArgs& args) override {
    const auto stream = static_cast<cudaStream_t>(args.stream);
    if (args.batch > fallback_max_batch_)
      conv_.forward(args.inputs.at(0), args.output, args.batch, stream);
    else
      fallback_.forward(args.inputs.at(0), args.output, args.batch, stream, args.workspace);
  }
  size_t workspace_bytes(int batch) const override {
    return fallback_.workspace_bytes(std::min(batch, fallback_max_batch_));
  }
  size_t weight_bytes() const override { return conv_.weight_bytes() + fallback_.weight_bytes(); }
  // Primary variant (tile chosen per batch), then the small-batch one.
  std::string variant() const override {
    return conv_.variant() + "|b<=" + std::to_string(fallback_max_batch_) + ":" +
           fallback_.variant();
  }

 private:
  static int sm_count() {
    int device = 0, sms = 0;
    CNNRT_CUDA_CHECK(cudaGetDevice(&device));
    CNNRT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }
  ConvFp16WgmmaWs conv_;
  ConvFp16 fallback_;
  int sms_ = 1;
  int fallback_max_batch_ = 0;
};

std::unique_ptr<LayerKernel> create_conv_fp16_wgmma_ws(const KernelBuildContext& context) {
  const Node& node = context.node;
  ErrorSite site = node_site(context);
  const std::optional<ConvShape> shape = wgmma_ws_shape_of(node);
  if (!shape)
    throw_error(site,
                "conv_fp16_wgmma_ws does not serve this conv (needs groups 1, dilation 1, "
                "in_c % 8 == 0, out_c % 64 == 0, no fused pool)");
  if (!ConvFp16WgmmaWs::device_supported())
    throw_error(site, "conv_fp16_wgmma_ws needs a compute capability 9.0 GPU and the sm_90a build");
  const Param* weight = node.find_param("weight");
  const size_t weight_elements =
      static_cast<size_t>(shape->out_c) * shape->in_c * shape->conv.kernel_h * shape->conv.kernel_w;
  if (weight == nullptr || weight->value.data.size() != weight_elements) {
    site.tensor = weight != nullptr ? weight->key : "weight";
    throw_error(site, "conv weight is not bound or has " +
                          std::to_string(weight ? weight->value.data.size() : 0) +
                          " values, expected " + std::to_string(weight_elements));
  }
  const Param* bias = node.find_param("bias");
  const bool has_bias = bias != nullptr && !bias->value.data.empty();
  if (has_bias && static_cast<int>(bias->value.data.size()) != shape->out_c) {
    site.tensor = bias->key;
    throw_error(site, "conv bias has " + std::to_string(bias->value.data.size()) +
                          " values, expected " + std::to_string(shape->out_c));
  }
  return std::make_unique<ConvFp16WgmmaWsKernel>(*shape, weight->value.data.data(),
                                                 has_bias ? bias->value.data.data() : nullptr);
}

}  // namespace

void register_wgmma_ws_conv_kernels(KernelRegistry& registry) {
  KernelEntry entry;
  entry.name = "conv_fp16_wgmma_ws";
  entry.op = OpKind::Conv;
  entry.device = Device::CUDA;
  entry.precision = Precision::FP16;
  // Below conv_fp16_wgmma (15) until measured on the GPU (see the design note above).
  entry.priority = 14;
  entry.supports = [](const Node& node) {
    return wgmma_ws_shape_of(node).has_value() && ConvFp16WgmmaWs::device_supported();
  };
  entry.create = create_conv_fp16_wgmma_ws;
  registry.add(std::move(entry));
}

}  // namespace cnnrt::cuda
