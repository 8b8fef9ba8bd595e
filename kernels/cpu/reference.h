// CPU reference kernels: plain loops, obviously right, the oracle for every other kernel.
//
// Layout: NCHW fp32 (feature vectors are N×F).  Sums of products accumulate in double so the
// reference is more accurate than anything it judges.  No blocking, no SIMD, no threads:
// clarity over speed.  Every function takes the batch explicitly and per-sample shapes.
#pragma once

#include <cstdint>

#include "graph/ir.h"

namespace cnnrt::ref {

// x: [n, c, h, w]; weight: [oc, c/groups, kh, kw]; bias: [oc] or nullptr; y: [n, oc, oh, ow].
// Padding may be asymmetric (attrs.pad_bottom() / pad_right()); `same` is resolved from h, w.
void conv2d(const float* x, int n, int c, int h, int w, const float* weight, const float* bias,
            const ConvAttrs& attrs, float* y);

void relu(const float* x, int64_t count, float* y);  // x == y allowed
// y = min(max(x, lo), hi); every activation (relu, relu6, clip) is one.  x == y allowed.
void clamp(const float* x, int64_t count, float lo, float hi, float* y);

// PyTorch max_pool2d / avg_pool2d (ceil_mode, padding, count_include_pad).
void maxpool2d(const float* x, int n, int c, int h, int w, const PoolAttrs& attrs, float* y);
void avgpool2d(const float* x, int n, int c, int h, int w, const PoolAttrs& attrs, float* y);
// PyTorch adaptive_avg_pool2d: window [floor(i*h/oh), ceil((i+1)*h/oh)).
void adaptive_avgpool2d(const float* x, int n, int c, int h, int w, int oh, int ow, float* y);

// x: [n, in]; weight: [out, in] (PyTorch layout); bias: [out] or nullptr; y: [n, out].
void linear(const float* x, int n, int in_features, const float* weight, const float* bias,
            int out_features, float* y);

// Softmax over `features` for each of `outer` rows, each row strided by `inner` (NCHW softmax
// over C: outer = n, features = c, inner = h*w).  Numerically stable (max subtracted).
void softmax(const float* x, int64_t outer, int64_t features, int64_t inner, float* y);

// y = (x - mean) / sqrt(var + eps) * gamma + beta, per channel of NCHW.
void batchnorm(const float* x, int n, int c, int64_t spatial, const float* gamma, const float* beta,
               const float* mean, const float* var, float eps, float* y);

void add(const float* a, const float* b, int64_t count, float* y);

// Concatenates along channels: inputs[i] is [n, channels[i], spatial].
void concat_channels(const float* const* inputs, const int* channels, int num_inputs, int n,
                     int64_t spatial, float* y);

void lrn(const float* x, int n, int c, int64_t spatial, const LRNAttrs& attrs, float* y);

}  // namespace cnnrt::ref
