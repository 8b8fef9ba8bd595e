// The mma.sp sparse conv's weight layout (kernels/cuda/conv/mma_sparse_kernel.cuh has the design
// note): its tile constants and the host packing of a 2:4 weight into the kernel's two arrays.
// Host and device compile the constants; the packing is host code (mma_sparse_pack.cpp), apart
// from the kernel so a CPU test (tests/cuda/conv/test_mma_sparse_pack.cpp) can hold it against
// the PTX ISA's fragment rules without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/conv/conv_shape.h"

namespace cnnrt::cuda::mma_sp_detail {

constexpr int kBC = 128;                          // output channels per CTA (M)
constexpr int kBN = 128;                          // output pixels per CTA (N)
constexpr int kKTile = 64;                        // dense K per k-tile
constexpr int kMetaStage = kBC / 16 * 8 * 2 * 2;  // metadata words per (channel tile, k-tile)

// K of the kernel: kh * kw * pad8(in_c) in (kh, kw, channel) order, in k-tiles of 64.
inline int k_tiles_of(const ConvShape& s) {
  const long long k = (long long)s.conv.kernel_h * s.conv.kernel_w * padded_channels(s.in_c);
  return int((k + kKTile - 1) / kKTile);
}
inline int channel_tiles_of(const ConvShape& s) { return (s.out_c + kBC - 1) / kBC; }

// values: [channel_tiles * 128][k_tiles * 32] kept weights (fp32 here, uploaded as fp16), rows
// past out_c and groups past K zero; meta: [channel tiles][k-tiles][kMetaStage] words in the
// order the threads read them (design note).
struct MmaSpWeights {
  std::vector<float> values;
  std::vector<uint32_t> meta;
};

// Checks that `weight` [out_c, in_c, kh, kw] is 2:4 along in_c at every tap (throws cnnrt::Error
// naming `layer`, the output channel, the tap and the channels when not) and packs it.
MmaSpWeights pack_mma_sp_weights(const ConvShape& shape, const float* weight,
                                 const std::string& layer);

}  // namespace cnnrt::cuda::mma_sp_detail
