// Shared by the GPU tests of the 2:4 sparse convs (test_mma_sparse.cpp, test_wgmma_sparse.cpp,
// test_tma_sparse.cpp, test_tma_sparse_s8.cpp): a case's conv shape, the fp16 convs' whole-batch
// reference on the
// pruned weights, and the check that a dense weight is refused naming the layer.  One copy, so
// the sparse kernels are held to one reference and one error contract.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/conv/conv_shape.h"

namespace cnnrt::cuda::sparse_test {

// The sparse tests' case shape before its epilogue: c x h x w -> oc through a k x k kernel at
// one stride and one padding on both axes (dilation 1, groups 1, identity activation).
inline ConvShape square_conv_shape(int c, int h, int w, int oc, int k, int stride, int pad) {
  ConvShape s;
  s.in_c = c;
  s.in_h = h;
  s.in_w = w;
  s.out_c = oc;
  s.conv.out_channels = oc;
  s.conv.kernel_h = s.conv.kernel_w = k;
  s.conv.stride_h = s.conv.stride_w = stride;
  s.conv.pad_h = s.conv.pad_w = pad;
  return s;
}

// conv -> bias -> (+ r) -> clamp -> pool over the whole batch, NCHW.  x: [batch][in_c][in_h]
// [in_w]; weight: [out_c][in_c][kh][kw]; bias may be null; r: NCHW pre-pool [batch][out_c]
// [conv_h][conv_w], empty without a residual.
inline std::vector<float> fused_conv_reference(const ConvShape& shape, int batch, const float* x,
                                               const float* weight, const float* bias,
                                               const std::vector<float>& r) {
  std::vector<float> conv(size_t(batch) * shape.out_c * shape.conv_h * shape.conv_w);
  ref::conv2d(x, batch, shape.in_c, shape.in_h, shape.in_w, weight, bias, shape.conv, conv.data());
  if (!r.empty()) ref::add(conv.data(), r.data(), int64_t(conv.size()), conv.data());
  if (shape.clamps())
    for (float& v : conv) v = std::min(std::max(v, shape.activation.lo), shape.activation.hi);
  if (!shape.pool) return conv;
  std::vector<float> pooled(size_t(batch) * shape.out_c * shape.out_h * shape.out_w, 0.f);
  ref::maxpool2d(conv.data(), batch, shape.out_c, shape.conv_h, shape.conv_w, *shape.pool,
                 pooled.data());
  return pooled;
}

// build() constructs a kernel named "conv7" from a dense weight: it must throw an Error that
// names the layer, the rule and the first offending output channel.
template <class Build>
void expect_rejects_dense_weight(Build build) {
  try {
    build();
    FAIL() << "a dense weight was accepted as 2:4";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("conv7"), std::string::npos) << what;
    EXPECT_NE(what.find("not 2:4"), std::string::npos) << what;
    EXPECT_NE(what.find("output channel 0"), std::string::npos) << what;
  }
}

}  // namespace cnnrt::cuda::sparse_test
