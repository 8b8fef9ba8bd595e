// CUDA fp32 reference kernels: every op of the op table in fp32 on the CUDA backend layout
// (fp32 NHWC/8, graph/tensor_type.h fp32_nhwc8: NHWC with channels padded to 8, vectors as rows
// padded to 8 — the fp16 tensor-core layout element for element, in fp32).
//
// What they are for: a correctness reference on the GPU (`--precision fp32` on CUDA runs every
// layer here, to be compared with the CPU oracle and with the fp16 engine) and the precision
// escape hatch (`precision: fp32` on one layer of an fp16 engine, when fp16 is not accurate
// enough for it).  They are NOT fast and must not become so: one thread per output element,
// indices spelled out as in kernels/cpu/, sums of products accumulated in double in the CPU
// reference's order, the epilogue applied in the same order (conv + bias → clamp → max-pool).
// A faster fp32 kernel belongs in a family of its own, tested against this one.
//
// Every kernel writes zeros into its output's padding lanes (channels past C), whatever the
// epilogue (a clip with lo > 0 must not leak into the padding).  Inputs' padding lanes are never
// read.  Everything only enqueues on `stream`: no allocation, no synchronisation, so the kernels
// can be captured in the context's CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "graph/ir.h"

namespace cnnrt::cuda {

// `rows` rows of `stride` floats, of which the first `channels` are real: a [C, H, W] map is
// batch·H·W rows of pad8(C), a vector [F] batch rows of pad8(F).
struct Fp32Rows {
  int64_t rows = 0;
  int channels = 0;
  int stride = 0;
  int64_t elements() const { return rows * stride; }
};
// Throws Error for shapes the CUDA layout does not define (ranks other than 1 and 3).
Fp32Rows fp32_rows(const Shape& shape, int64_t batch);

// A batch of [C, H, W] maps.
struct Fp32Map {
  int64_t batch = 0;
  int channels = 0, height = 0, width = 0;
};

// The fused activation as a clamp [lo, hi] (graph/ir.h activation_bounds); NaN passes through,
// as in torch.clamp and the CPU reference.
struct Fp32Clamp {
  float lo, hi;
};

struct Fp32ConvGeometry {
  Fp32Map input;
  int out_channels = 0, out_height = 0, out_width = 0;  // the conv's output, before any pool
  ConvAttrs attrs;  // top/left padding used; bottom/right padding only shows in out_height/width
};

// y = clamp(conv(x, weight) + bias + residual): weight OIHW fp32 ([oc][c/groups][kh][kw],
// PyTorch's layout), bias [oc] or nullptr, residual (a fused residual, y's shape and layout) or
// nullptr; groups, stride, dilation, any padding.
void conv2d_fp32(const float* x, float* y, const Fp32ConvGeometry& geometry, const float* weight,
                 const float* bias, const float* residual, Fp32Clamp clamp, cudaStream_t stream);

// PyTorch max_pool2d / avg_pool2d (padding, ceil_mode, count_include_pad); out_h/out_w from the
// graph's shape rule.
void maxpool_fp32(const float* x, float* y, const Fp32Map& input, const PoolAttrs& attrs, int out_h,
                  int out_w, cudaStream_t stream);
void avgpool_fp32(const float* x, float* y, const Fp32Map& input, const PoolAttrs& attrs, int out_h,
                  int out_w, cudaStream_t stream);
// Window [floor(i*in/out), ceil((i+1)*in/out)) per axis.
void adaptive_avgpool_fp32(const float* x, float* y, const Fp32Map& input, int out_h, int out_w,
                           cudaStream_t stream);

// y[n][o] = clamp(bias[o] + sum_i x[n][i] * weight[o][i]) for i < in_features: weight packed
// [out_stride][in_stride] (kernels/cuda/linear_pack.h), bias [out_stride].
void linear_fp32(const float* x, float* y, int64_t batch, int in_features, int in_stride,
                 const float* weight, const float* bias, int out_features, int out_stride,
                 Fp32Clamp clamp, cudaStream_t stream);

// y = clamp(x) (relu is [0, inf)); x == y allowed.
void clamp_fp32(const float* x, float* y, const Fp32Rows& rows, Fp32Clamp clamp,
                cudaStream_t stream);
// y = clamp(a + b); y may alias a or b.
void add_fp32(const float* a, const float* b, float* y, const Fp32Rows& rows, Fp32Clamp clamp,
              cudaStream_t stream);
// y = clamp((x - mean) / sqrt(var + eps) * gamma + beta) per channel (device arrays of
// `channels` floats); x == y allowed.
void batchnorm_fp32(const float* x, float* y, const Fp32Rows& rows, const float* gamma,
                    const float* beta, const float* mean, const float* var, float eps,
                    Fp32Clamp clamp, cudaStream_t stream);
// Softmax over the channels of each row (max subtracted); x == y allowed.
void softmax_fp32(const float* x, float* y, const Fp32Rows& rows, cudaStream_t stream);
// torch.nn.LocalResponseNorm over the channels of each row.  x and y must not alias.
void lrn_fp32(const float* x, float* y, const Fp32Rows& rows, const LRNAttrs& attrs,
              cudaStream_t stream);
// Channel concatenation of inputs[i] ([rows][pad8(channels[i])]) into y ([rows][pad8(sum)]).
// y must not alias an input.
void concat_fp32(const std::vector<const float*>& inputs, const std::vector<int>& channels,
                 float* y, int64_t rows, cudaStream_t stream);
// Flatten of NHWC/8 maps into [batch][pad8(C*H*W)] vectors in (h, w, c) order, dropping the
// channel padding, zeros in the tail.  x and y must not alias.
void flatten_fp32(const float* x, float* y, const Fp32Map& input, cudaStream_t stream);
// Device-to-device copy of `count` floats; nothing when x == y (in place: a view).
void copy_fp32(const float* x, float* y, int64_t count, cudaStream_t stream);

}  // namespace cnnrt::cuda
