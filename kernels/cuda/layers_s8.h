// The int8 CUDA layers without weights (docs/QUANTIZATION.md's table): standalone max-pool,
// average pool and adaptive average pool, the standalone ReLU (a requantisation with integer
// bounds), and the NHWC flatten.  Layout int8 NHWC/16 (graph/tensor_type.h: int8_nhwc16);
// every kernel writes zeros into its output's padding lanes.
//
// Design: one thread per output element, channels fastest (coalesced rows) — these layers move
// a few bytes per element and are memory bound; the window rules (padding, ceil_mode, PyTorch's
// divisors, adaptive bins) and the arithmetic are ref::*_int8's, so the results are bit for bit
// the reference's.  A window's multiplier depends only on its divisor n (M_n = fp32(s_x / (s_y·n)),
// computed in double on the host like the reference), so the host uploads one table indexed
// by n and the device does the one RNE multiply of epilogue_s8.cuh.  Only enqueues on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cnnrt::cuda {

struct S8Pool {
  enum class Kind { Max, Avg, Adaptive };
  Kind kind = Kind::Max;
  int c = 0, h = 0, w = 0, out_h = 0, out_w = 0;
  int kh = 1, kw = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;  // Max, Avg
  bool count_include_pad = true;                                         // Avg
  // Device table: Max uses [0] = fp32(s_x / s_y); Avg and Adaptive [n] = fp32(s_x / (s_y·n)).
  const float* multipliers = nullptr;
};
void pool_s8(const S8Pool& pool, const void* x, void* y, int batch, cudaStream_t stream);

// y = clamp(RNE(fp32(x) × multiplier), lo, hi) over `count` bytes (padding lanes stay 0 when
// lo <= 0 <= hi, as for ReLU's [0, hi]); x == y allowed.
void requantize_s8(const void* x, void* y, int64_t count, float multiplier, int lo, int hi,
                   cudaStream_t stream);

// Elementwise add of two int8 NHWC/16 tensors of `rows` rows of `c` channels (row stride
// pad16(c)), ref::add_int8's arithmetic: q = clamp(RNE(fma(b, M_b, a·M_a)), -127, 127), then the
// fused activation's integer clamp [lo, hi]; padding lanes written 0.  y may alias a or b.
void add_s8(const void* a, float multiplier_a, const void* b, float multiplier_b, void* y,
            int64_t rows, int c, int lo, int hi, cudaStream_t stream);

// Flatten of [C, H, W] NHWC/16 into [pad16(C·H·W)] vectors in (h, w, c) order (the CUDA
// backend's rule), dropping the channel padding and zero-filling the tail.  x, y must not alias.
void flatten_nhwc_s8(const void* x, void* y, int64_t batch, int c, int h, int w,
                     cudaStream_t stream);

}  // namespace cnnrt::cuda
