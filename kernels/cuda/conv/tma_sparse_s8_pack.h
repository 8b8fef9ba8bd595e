// conv_int8_sparse24_tma's host packing (tma_sparse_s8.cu's design note): the project's 2:4
// compressed form laid out in the kernel's K, and the metadata in the order the consumer threads
// read it.  Host only, separate from the .cu so that a CPU test checks it
// (tests/cuda/conv/test_tma_sparse_s8.cpp: decoded under the per-thread layout of
// tma_sparse_s8_kernel.cuh's design note, it gives back the dense weight).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/sparse24.h"

namespace cnnrt::cuda::tma_sparse_s8_detail {

// The nibble {0, 1} (first kept index 0, second 1): valid, for groups that hold only zeros.
constexpr uint32_t kZeroGroupNibble = 0x4;

// Per row, per tap, in_stride / 4 groups of two kept int8 (the groups past ceil(in_c / 4), the
// NHWC/16 padding channels, hold zeros and kZeroGroupNibble); `nibbles` the matching
// [row][tap * in_stride / 4 + group].
struct KernelOrder {
  std::vector<int8_t> values;    // [out_c][taps * in_stride / 2]
  std::vector<uint8_t> nibbles;  // [out_c][taps * in_stride / 4]
};
// `c`: sparse24::compress of the int8 weight's exact float image ([out_c][in_c][taps]).
KernelOrder kernel_order(const sparse24::Compressed& c, int out_c, int taps, int in_stride);

// Word [kt][block][thread = warp * 32 + 4g + t][kk] (kk < kb / 64) = bits 0-15 the nibbles of
// row block * 64 + 16 warp + g, k-tile groups 16 kk + 4 t .. +3 (group j at bits 4j), bits 16-31
// row + 8; rows past out_c hold kZeroGroupNibble.  groups_per_row = taps * in_stride / 4.
std::vector<uint32_t> pack_metadata(const KernelOrder& k, int out_c, int groups_per_row, int kb,
                                    int k_tiles, int blocks);

}  // namespace cnnrt::cuda::tma_sparse_s8_detail
