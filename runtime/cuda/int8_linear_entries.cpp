// Registry entries of the CUDA int8 linear kernels (kernels/cuda/linear_s8.h, linear_s8_lt.h),
// precision int8:
//   linear_int8       GEMV at batch <= 8; above 32 on Hopper (sm_90a) the TMA GEMM split over
//                     K (linear_s8_tma.h); else cuBLASLt's int8 GEMM (int32 out, our
//                     epilogue) where it has a kernel for the shape, else the tensor-core GEMM;
//                     linear_int8_tma (Hopper only), linear_int8_gemm, linear_int8_gemv,
//                     linear_int8_cublaslt and
//                     linear_int8_stream (linear_s8_stream.h: weights as the MMA's M,
//                     streamed once, split over K with exact int32 sums; a comparison entry
//                     only) force one path (profiles, tests; the cuBLASLt one falls back to
//                     the GEMM where cuBLASLt has no kernel, and its plan says so)
// The weights are prepared once per layer within a family with the CPU reference's own function
// (int8_layer_prep.h), as the int8 convs' are (int8_entries.cpp).  A linear that writes the graph
// output dequantises in its epilogue (fp32 out; declared fp32 NCHW where out_features % 8 == 0,
// the same bytes, so no conversion step follows).  K (in features) above ref::kMaxInt8Reduction
// is refused.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "graph/host_parallel.h"
#include "graph/host_vector.h"
#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/linear_s8.h"
#include "kernels/cuda/linear_s8_lt.h"
#include "kernels/cuda/linear_s8_stream.h"
#include "kernels/cuda/linear_s8_tma.h"
#include "runtime/cuda/int8_layer_prep.h"

namespace cnnrt::cuda {
namespace {

enum class LinearPath { Auto, Gemm, Gemv, Cublaslt, Stream, Tma };

// A linear layer's int8 weights on the device, with the S8Conv that describes them: the same
// for every int8 linear entry (they differ in the kernel they launch), so prepared once per
// layer within a family (prepared_once).
struct Int8LinearWeights {
  S8Conv linear;
  Int8Device device;
};

std::shared_ptr<const Int8LinearWeights> prepare_int8_linear(const KernelBuildContext& context) {
  const Node& node = context.node;
  // The checks every CUDA linear makes, and the (h, w, c) column order of an NHWC flatten.
  const LinearWeightRefs refs = linear_weight_refs_of(context, "linear_int8");
  const int out = refs.out_features, in = refs.in_features;
  // Quantised in the graph's own column order, straight from its weights (per-channel scales do
  // not depend on the order of a row), then the int8 rows permuted into the kernel's layout:
  // the same integers as quantising permuted fp32 rows, without packing those first (151 MB
  // for fc6, most of this layer's build time).
  auto prepared = std::make_shared<Int8LinearWeights>();
  S8Conv& linear = prepared->linear;
  ref::Int8Layer layer = prepare_layer(context, refs.weight, refs.bias, out, in,
                                       activation_bounds(node), prepared->device);
  linear.in_c = in;
  linear.in_h = linear.in_w = 1;
  linear.in_stride = padded16(in);
  linear.out_c = out;
  linear.out_h = linear.out_w = 1;
  linear.k_total = linear.in_stride;
  linear.k_pad = round_up(linear.k_total, 64);
  const Shape& source = refs.flattened_source;
  const bool permute = source.size() == 3;
  if (permute && shape_elements(source) != in)
    throw_error(node_site(context), "linear_int8: in_features " + std::to_string(in) +
                                        " does not match the flattened shape " +
                                        shape_to_string(source));
  HostVector<int8_t> packed;
  if (!permute && linear.k_pad == in) {
    packed = std::move(layer.weight);  // already the kernel's row layout
  } else {
    const int64_t channels = permute ? source[0] : 0;
    const int64_t hw = permute ? source[1] * source[2] : 0;
    const size_t k_pad = static_cast<size_t>(linear.k_pad);
    packed.resize(static_cast<size_t>(out) * k_pad);  // every byte written below
    parallel_for(static_cast<size_t>(out), 16, [&](size_t begin, size_t end) {
      for (size_t o = begin; o < end; ++o) {
        const int8_t* src = layer.weight.data() + o * static_cast<size_t>(in);
        int8_t* dst = packed.data() + o * k_pad;
        for (int64_t j = 0; j < in; ++j) dst[j] = src[linear_source_column(j, channels, hw)];
        std::fill(dst + in, dst + k_pad, int8_t{0});
      }
    });
  }
  upload_layer(layer, packed.data(), packed.size(), prepared->device, linear);
  return prepared;
}

class LinearInt8Kernel final : public LayerKernel {
 public:
  LinearInt8Kernel(const KernelBuildContext& context, LinearPath path)
      : path_(path),
        weights_(prepared_once<Int8LinearWeights>(context, "linear_int8 weights",
                                                  [&] { return prepare_int8_linear(context); })),
        linear_(weights_->linear),
        device_(weights_->device) {
    if (path_ == LinearPath::Cublaslt) lt();
    // The TMA GEMM where it serves this layer on this device (the Tma path's factory is only
    // offered there: linear_tma_supported).
    if ((path_ == LinearPath::Auto || path_ == LinearPath::Tma) &&
        LinearS8Tma::device_supported() && linear_s8_tma_serves(linear_))
      tma_ = std::make_unique<LinearS8Tma>(linear_);
    // The streaming GEMM reads its own tiled copy of the weight, packed once here on the device
    // (none for a described target: nothing runs there).
    if (path_ == LinearPath::Stream && !plan_only()) {
      packed_ = DeviceArray(linear_s8_stream_packed_bytes(linear_));
      linear_s8_stream_pack(linear_, packed_.get(), nullptr);
      CNNRT_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    }
  }
  std::vector<TensorType> input_types(size_t) const override {
    return {int8_nhwc16(device_.input_scale)};
  }
  // As the graph output whose fp32 NHWC/8 rows have no padding lanes (out_stride == out_features:
  // a multiple of 8; H = W = 1), the rows the epilogues write are the fp32 NCHW tensor byte for
  // byte: declared so, the builder adds no conversion step after the network's last layer (the
  // fp16 linear writes fp32 itself for the same reason).
  TensorType output_type() const override {
    if (linear_.float_output && linear_.out_stride == linear_.out_c) return fp32_nchw();
    return output_type_of(device_);
  }
  // GEMV at small batches; else cuBLASLt's int8 GEMM where it has a kernel for the shape, else
  // the tensor-core GEMM, split over K when its tiles alone would leave SMs idle (the variant is
  // then the split count).
  KernelPlan prepare(const PrepareInfo& info) const override {
    const bool gemv =
        path_ == LinearPath::Gemv || (path_ == LinearPath::Auto && info.batch <= kGemvS8MaxBatch);
    KernelPlan plan;
    if (path_ == LinearPath::Stream) {
      const int splits = linear_s8_stream_splits(linear_, info.batch, sms_);
      plan.variant = kCublaslt - splits;
      plan.variant_name = "stream_s8 split-k " + std::to_string(splits);
      plan.workspace_bytes = linear_s8_stream_workspace_bytes(linear_, info.batch);
      return plan;
    }
    if (gemv) {
      plan.variant = kGemv;
      plan.variant_name = "gemv_s8";
      plan.streamed_weights = linear_.weight;
      plan.streamed_weight_bytes = device_.weight.bytes();
      return plan;
    }
    if (tma_ &&
        (path_ == LinearPath::Tma || (path_ == LinearPath::Auto && info.batch >= kTmaMinBatch))) {
      auto state = std::make_shared<TmaState>();
      state->plan = tma_->plan(info.batch);
      plan.variant = kTma;
      plan.variant_name = state->plan.name;
      plan.workspace_bytes = state->plan.workspace_bytes;
      // One 64-row batch tile reads the weight once: the context may prefetch a share of it
      // into L2 while the convolutions run (its bulk loads are evict-first already: run 45g).
      // Not at the 128- and 256-row tiles: at batch 256 every budget was slower than none
      // (docs/PERFORMANCE.md run 48c), so timing them would only lengthen context creation.
      if (state->plan.n_tiles == 1 && state->plan.bn <= 64) {
        plan.streamed_weights = linear_.weight;
        plan.streamed_weight_bytes = device_.weight.bytes();
      }
      plan.state = std::move(state);
      return plan;
    }
    if (path_ == LinearPath::Auto || path_ == LinearPath::Cublaslt) {
      std::shared_ptr<const LtGemmS8::Plan> lt_plan = lt().plan(info.batch);
      if (lt_plan) {
        plan.variant = kCublaslt;
        plan.variant_name = "cublaslt_s8";
        plan.workspace_bytes = lt().workspace_bytes(info.batch);
        plan.state = std::move(lt_plan);
        return plan;
      }
    }
    plan.variant = igemm_s8_splits(linear_, info.batch, sms_);
    plan.variant_name = "igemm_s8";
    if (plan.variant > 1) {
      plan.variant_name += " split-k " + std::to_string(plan.variant);
      plan.workspace_bytes = igemm_s8_split_bytes(linear_, info.batch, plan.variant);
    }
    return plan;
  }
  void run(const KernelArgs& args) override {
    const auto stream = static_cast<cudaStream_t>(args.stream);
    // A forced GEMV at a batch above its limit runs in slices of kGemvS8MaxBatch samples.
    if (args.variant == kTma) {
      const auto* state = static_cast<const TmaState*>(args.state);
      if (state == nullptr || !tma_)
        throw Error("linear_int8_tma: run() without its prepared state");
      const LinearS8TmaInput input = state->maps.find_or_encode(
          args.inputs.at(0), args.batch, [this, tile = state->plan.tile](const void* x, int b) {
            return tma_->encode_input(x, b, tile);
          });
      tma_->forward(state->plan, input, args.output, args.workspace, stream);
    } else if (args.variant < kCublaslt) {
      linear_s8_stream(linear_, packed_.get(), args.inputs.at(0), args.output, args.batch,
                       kCublaslt - args.variant, args.workspace, stream);
    } else if (args.variant == kCublaslt) {
      if (args.state == nullptr) throw Error("linear_int8: cuBLASLt run without a prepared plan");
      lt_->run(*static_cast<const LtGemmS8::Plan*>(args.state), args.inputs.at(0), args.output,
               args.workspace, args.batch, stream);
    } else if (args.variant == kGemv) {
      const size_t in_bytes = linear_.in_stride;
      const size_t out_bytes = linear_.out_stride * (linear_.float_output ? sizeof(float) : 1);
      for (int first = 0; first < args.batch; first += kGemvS8MaxBatch)
        gemv_s8(linear_, static_cast<const int8_t*>(args.inputs.at(0)) + first * in_bytes,
                static_cast<char*>(args.output) + first * out_bytes,
                std::min(kGemvS8MaxBatch, args.batch - first), stream, args.stream_evict_first);
    } else {
      const S8SplitK split{args.variant, static_cast<int*>(args.workspace)};
      conv_s8_igemm(linear_, args.inputs.at(0), args.output, args.batch, stream, &split);
    }
  }
  size_t weight_bytes() const override {
    return device_.weight.bytes() + device_.bias.bytes() + device_.multiplier.bytes() +
           packed_.bytes();
  }

 private:
  // Variants: the GEMV, cuBLASLt, below it the streaming GEMM with s K slices (kCublaslt - s:
  // -2, -3, ..), the TMA GEMM (kTma), else the tensor-core GEMM's split-K count (1 .. 16).
  static constexpr int kGemv = 0, kCublaslt = -1, kTma = 1 << 12;
  // linear_int8 takes the TMA GEMM from this batch on: AlexNet int8 at 256 1.2-2.4 % faster than
  // on cuBLASLt (run 42); since its weight stream is evict-first in L2 (the partial sums stay
  // there for the finish), at 64 1.5 % faster too (0.2124 against 0.2157 ms; fc6 26.1 against
  // 28.2 us), while at 16 the two were within 2 % before that change (docs/PERFORMANCE.md runs
  // 42, 45g): the 64-row batch tile and up.
  static constexpr int kTmaMinBatch = 33;
  // The TMA path's prepared state: its plan at the batch and the context's input maps.
  struct TmaState {
    LinearS8TmaPlan plan;
    tma::InputMaps<LinearS8TmaInput> maps;
  };
  std::unique_ptr<LinearS8Tma> tma_;  // Auto / Tma paths on a device where it serves
  LinearPath path_;
  std::shared_ptr<const Int8LinearWeights> weights_;  // shared with the layer's other entries
  const S8Conv& linear_;                              // weights_->linear
  const Int8Device& device_;                          // weights_->device
  DeviceArray packed_;  // the Stream path's tiled weight (linear_s8_stream_pack)
  // cuBLASLt's GEMM (Auto and Cublaslt paths), made by the first prepare() of a batch that may
  // use it (the forced path: at creation): an engine only ever run at GEMV batches never loads
  // cuBLASLt (kernels/cuda/cublaslt_loader.cpp: ~0.1 s of a process's start).
  const LtGemmS8& lt() const {
    std::call_once(lt_once_, [this] { lt_ = std::make_unique<LtGemmS8>(linear_); });
    return *lt_;
  }
  mutable std::once_flag lt_once_;
  mutable std::unique_ptr<LtGemmS8> lt_;
  int sms_ = current_sm_count();
};

bool linear_supported(const Node& node) {
  return linear_shape_supported(node) && node.input_shapes[0][0] <= ref::kMaxInt8Reduction;
}
// linear_int8_tma: a Hopper device with the sm_90a image (every linear shape the int8 entries
// take is a 1x1 GEMM it serves).
bool linear_tma_supported(const Node& node) {
  return linear_supported(node) && LinearS8Tma::device_supported();
}

EntryRow linear_row(const char* name, LinearPath path) {
  return {name, OpKind::Linear, path == LinearPath::Tma ? linear_tma_supported : linear_supported,
          [path](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
            return std::make_unique<LinearInt8Kernel>(context, path);
          }};
}

}  // namespace

void register_int8_linear_kernels(KernelRegistry& registry) {
  add_entries(registry, Device::CUDA, Precision::INT8, 10,
              {linear_row("linear_int8", LinearPath::Auto)});
  // The streaming GEMM is a comparison entry (profile --compare, the harness; never a default nor
  // the automatic plan's choice): in the graph it ran AlexNet's classifier slower than cuBLASLt
  // at batch 64 and 256 (docs/PERFORMANCE.md runs 40f-i).
  EntryRow stream = linear_row("linear_int8_stream", LinearPath::Stream);
  stream.baseline = true;
  add_entries(registry, Device::CUDA, Precision::INT8, 5,
              {linear_row("linear_int8_tma", LinearPath::Tma),
               linear_row("linear_int8_gemm", LinearPath::Gemm), stream,
               linear_row("linear_int8_cublaslt", LinearPath::Cublaslt),
               linear_row("linear_int8_gemv", LinearPath::Gemv)});
}

}  // namespace cnnrt::cuda
