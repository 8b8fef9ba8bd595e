// The node-level shape rules of the CUDA int8 conv entries (runtime/cuda/int8_entries.cpp): which
// nodes each entry serves, decided from the fused node alone (no device work, no weights).  Apart
// from the entries' kernel so that file stays one file's length.
#pragma once

#include "graph/ir.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/conv_shape.h"

namespace cnnrt::cuda::int8_rules {

// K of the int8 contract: products per output (docs/QUANTIZATION.md, "Overflow").
bool conv_fits_int32(const ConvShape& shape);
// The node-level part of wgmma_s8_serves (the rest holds for every int8 GEMM conv's S8Conv).
bool wgmma_shape_ok(const ConvShape& shape);
inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

// conv_int8_s2d: strided convs with few input channels; _tma / _wgmma: and its TMA / wgmma GEMM
// serves the rearranged conv on this device.
bool conv_s2d_supported(const Node& node);
bool conv_s2d_tma_supported(const Node& node);
bool conv_s2d_wgmma_supported(const Node& node);
// ... and conv_int8_window serves that TMA form (conv_int8_s2d_window3's rule).
bool conv_s2d_window_supported(const Node& node);
// ... and its pooling form serves the conv's fused max-pool (conv_int8_s2d_window3_pool's rule).
bool conv_s2d_window_pool_supported(const Node& node);
bool conv_igemm_supported(const Node& node);
// The node-level form of narrow_s8_serves.
bool conv_narrow_supported(const Node& node);
bool conv_wgmma_supported(const Node& node);
// The node-level form of tma_s8_serves (the S8Conv the entry would build, int8 output).
bool conv_tma_supported(const Node& node);
// conv_int8_tma itself: and not a small-K layer (conv_int8_narrow's).
bool conv_tma_default_supported(const Node& node);
// A pinned tile of conv_int8_tma: a conv with a max-pool only where the tile runs it fused
// (ConvS8Tma::tile_fuses_pool; conv_fp16_tma's pinned tiles' rule); conv_int8_tma_staged:
// convs with a max-pool only.
bool conv_tma_tile_supported(const Node& node, int tile);
bool conv_tma_staged_supported(const Node& node);
bool conv_depthwise_supported(const Node& node);
bool conv_direct_supported(const Node& node);

}  // namespace cnnrt::cuda::int8_rules
