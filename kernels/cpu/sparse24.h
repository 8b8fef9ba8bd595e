// 2:4 structured sparsity: the compressed weight format and the CPU fp32 kernels that compute
// from it (docs/SPARSITY.md is the contract the future sparse tensor-core kernels follow).
//
// Which axis is grouped.  Sparse tensor cores (mma.sp, wgmma.sp) accept only operand A as 2:4
// sparse, grouped along the reduction axis K.  A sparse conv therefore puts the weights in A
// (M = output channels) and K runs in the order of the NHWC implicit GEMM: (kh, kw, c), c
// fastest.  In the stored PyTorch weight [O, C, KH, KW] a group is 4 consecutive input
// channels at one output channel and one kernel tap; C is padded with zeros to a multiple of 4
// (the NHWC/8 activations are already padded to 8, so no group straddles two taps).  A linear
// weight [O, IN] is grouped along IN: 4 consecutive input features (taps = 1).
//
// The compressed form, per output channel (row): taps × C4/2 kept values (C4 = C rounded up to
// 4), two per group in increasing index order, and one 4-bit metadata nibble per group holding
// the two 2-bit indices (low bits: the first kept element).  The four nibbles whose two indices
// are equal (0b0000, 0b0101, 0b1010, 0b1111) are invalid on the hardware and rejected here; a
// group with fewer than two non-zeros keeps a zero at an index it does not use, so the nibble
// stays valid.  Four nibbles are packed per uint16 (group g at bits 4·(g % 4)), row-major: the
// 16 bits of metadata one mma.sp k16 step of one row needs (its per-thread interleaving is a
// repack of these words, done by the GPU kernel's own prepack).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/passes_sparsity.h"  // WeightShape: the grouping rule

namespace cnnrt::sparse24 {

using cnnrt::sparsity::WeightShape;

struct Compressed {
  WeightShape shape;
  std::vector<float> values;   // rows × groups_per_row × 2, in K order (tap, group, kept)
  std::vector<uint16_t> meta;  // rows × meta_words_per_row(), 4 nibbles per word
  int meta_words_per_row() const { return (shape.groups_per_row() + 3) / 4; }
};

// Throws cnnrt::Error naming `layer` when the weight is not 2:4.
Compressed compress(const float* weight, const WeightShape& shape, const std::string& layer);

// The dense weight [rows][channels][taps] back; throws on an invalid nibble or a size mismatch.
std::vector<float> decompress(const Compressed& compressed);

// y = conv(x, W) + bias computed from the compressed weight only (groups == 1): x [n, c, h, w],
// y [n, oc, oh, ow], NCHW fp32, accumulated in double like the dense reference.
void conv2d(const float* x, int n, int h, int w, const Compressed& weight, const float* bias,
            const ConvAttrs& attrs, float* y);

// y[n, rows] = x[n, channels] · Wᵀ + bias from the compressed weight.
void linear(const float* x, int n, const Compressed& weight, const float* bias, float* y);

}  // namespace cnnrt::sparse24
