// fp16 depthwise convolution — design note.
//
// A depthwise conv does k*k multiply-adds per output element and reads each input element k*k
// times, so it is a memory-bound stencil (EfficientNet-Lite0's depthwise layers move ~32 bytes
// per output vector of 8 channels and do 72-200 FMAs on them): the goal is to read each input
// byte and write each output byte once from DRAM and keep the instruction count low enough that
// the FMA pipe never becomes the limit.  Tensor cores do not help (no reduction over channels).
//
// Work split: one thread per (image, output row, TILE consecutive output columns, 8-channel
// chunk).  The chunk is the fastest index, so a warp's 16-byte loads and stores cover
// neighbouring pixels' contiguous channel vectors (NHWC, channel stride pad8(C)); next comes the
// row within a band of `band` output rows (stride 1: 7 where it divides the height: 112, 56, 28,
// 14, 7; stride 2: 1), then the column tile, the band, the image.  Banding keeps the rows that
// vertically neighbouring outputs share inside one block, so they come from its SM's L1 instead of
// being fetched again from L2 by blocks on other SMs (measured before banding, H100,
// EfficientNet-Lite0 batch 64: 3x3 stride-1 layers at ~1.0 TB/s and 5x5 ones at ~0.55 TB/s, i.e.
// L2-bound on the 3-5x re-read of every input row).  Along a row the TILE outputs share input
// columns: a thread loads the (TILE-1)*S + K input vectors of each kernel row once, converts each
// to fp32 once and feeds every output tap that reads it, which cuts the loads per output from K*K
// to about K*(1 + (K-1)/TILE) (3x3 stride 1, TILE 4: 9 → 4.5). The k rows of neighbouring output
// rows and the columns of neighbouring tiles are read again by other threads of the same or nearby
// blocks and are served by L1/L2, so DRAM sees each input roughly once.  Accumulation is fp32
// (fmaf), as every fp16 kernel of the project.
//
// Weights are fp32, L1-resident (every thread of a chunk reads the same ones), laid out
// [tap][half][pad8(C)/8][4]: a chunk's 8 weights of one tap are two float4s `chunks` apart, so
// each of the two 16-byte loads of a warp covers 32 consecutive float4s (512 contiguous bytes,
// 4 L1 wavefronts).  The plain [tap][pad8(C)] layout put a lane's two float4s side by side, so
// each load of a warp strode 32 bytes over 1 KB (8 wavefronts): per kernel row of the 5x5 tile-4
// kernel that was 80 wavefronts of weights against 32 of input and 40 cycles of FMAs per warp,
// which made the L1, not the FMA pipe, the limit of the instruction-bound 5x5 layers
// (docs/PERFORMANCE.md, run 14).  Bias stays [pad8(C)] (read once per thread).
//
// Templates: K (3, 5) x stride S (1, 2) with dilation 1, square — what MobileNet and EfficientNet
// use — are fully unrolled, TILE 4 (2 for 5x5 stride 2, whose 11-column span would cost too many
// registers).  Every other shape (any kernel size, stride, dilation) takes the generic kernel,
// one output vector per thread with runtime loops: correct everywhere, not tuned.
//
// Epilogue (the conv family's order, ConvShape): + bias, + the fused residual (read as one
// 16-byte vector at the output's own offset), clamp (identity / ReLU / ReLU6 / Clip), round to
// fp16 once; channels >= C are written as +0 (a Clip with min > 0 would otherwise make them
// non-zero).  Padding (asymmetric included) is the skipped taps of rows / columns outside the
// input, i.e. zeros.
#include <cuda_fp16.h>

#include <algorithm>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/depthwise.h"
#include "kernels/cuda/conv/epilogue_params.h"
#include "kernels/cuda/cuda_check.h"

namespace cnnrt::cuda {
namespace {

constexpr int kThreads = 256;

struct DwParams {
  int channels, chunks;  // C and pad8(C) / 8
  int in_h, in_w, out_h, out_w;
  int kh, kw, sh, sw, dh, dw, pad_top, pad_left;
  int tiles_x;  // ceil(out_w / tile)
  int band;     // output rows per band (see the design note)
  int bands;    // ceil(out_h / band)
  int total;    // threads: batch * bands * band * tiles_x * chunks (< 2^31, checked by the host)
  EpilogueClamp clamp;
};

// Where a thread works: chunk fastest (coalesced), then the row within its band, the column
// tile, the band, the image (32-bit arithmetic: the host keeps the thread count below 2^31).
// oy may be past the last row when band does not divide out_h: such a thread does nothing.
struct DwWork {
  int n, oy, ox0, chunk;
};

__device__ __forceinline__ DwWork work_of(int i, const DwParams& p, int tile) {
  DwWork w;
  w.chunk = i % p.chunks;
  i /= p.chunks;
  const int row = i % p.band;
  i /= p.band;
  w.ox0 = (i % p.tiles_x) * tile;
  i /= p.tiles_x;
  w.oy = (i % p.bands) * p.band + row;
  w.n = i / p.bands;
  return w;
}

__device__ __forceinline__ void load8(const uint4* p, float (&f)[8]) {
  const uint4 raw = __ldg(p);
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float2 t = __half22float2(h[q]);
    f[2 * q] = t.x;
    f[2 * q + 1] = t.y;
  }
}

__device__ __forceinline__ void unpack8(const float4& a, const float4& b, float (&f)[8]) {
  f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w;
  f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}

// The 8 weights of chunk `chunk` at tap `tap` ([tap][half][chunks][4], see the design note).
__device__ __forceinline__ void load_weights8(const float4* w, int tap, int chunks, int chunk,
                                              float (&f)[8]) {
  const float4* p = w + static_cast<long long>(tap) * 2 * chunks + chunk;
  unpack8(__ldg(p), __ldg(p + chunks), f);
}

// The 8 bias values of chunk `chunk` ([pad8(C)]).
__device__ __forceinline__ void load_bias8(const float4* bias, int chunk, float (&f)[8]) {
  unpack8(__ldg(bias + 2 * chunk), __ldg(bias + 2 * chunk + 1), f);
}

// acc + bias (+ residual) → clamp → fp16, padding lanes zero, stored at y[offset].
__device__ __forceinline__ void store_out(uint4* y, const uint4* residual, long long offset,
                                          const float (&acc)[8], const float (&bias)[8],
                                          const DwParams& p, int chunk) {
  float r[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (residual != nullptr) load8(residual + offset, r);
  uint4 out;
  __half2* h = reinterpret_cast<__half2*>(&out);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    float v[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int c = 2 * q + e;
      float a = acc[c] + bias[c] + r[c];
      if (p.clamp.on) a = fminf(fmaxf(a, p.clamp.lo), p.clamp.hi);
      v[e] = chunk * 8 + c < p.channels ? a : 0.0f;
    }
    h[q] = __floats2half2_rn(v[0], v[1]);
  }
  y[offset] = out;
}

// K x K, stride S, dilation 1; TILE output columns per thread (see the design note).
template <int K, int S, int TILE>
__global__ void __launch_bounds__(kThreads)
    depthwise_tiled_kernel(const uint4* __restrict__ x, const float4* __restrict__ w,
                           const float4* __restrict__ bias, const uint4* __restrict__ residual,
                           uint4* __restrict__ y, DwParams p) {
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= p.total) return;
  const DwWork t = work_of(i, p, TILE);
  if (t.oy >= p.out_h) return;
  constexpr int kSpan = (TILE - 1) * S + K;
  float acc[TILE][8];
#pragma unroll
  for (int o = 0; o < TILE; ++o)
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[o][c] = 0.0f;
  const int ix0 = t.ox0 * S - p.pad_left;
  const uint4* image = x + static_cast<long long>(t.n) * p.in_h * p.in_w * p.chunks + t.chunk;
#pragma unroll
  for (int ky = 0; ky < K; ++ky) {
    const int iy = t.oy * S - p.pad_top + ky;
    if (iy < 0 || iy >= p.in_h) continue;
    float wk[K][8];
#pragma unroll
    for (int kx = 0; kx < K; ++kx) load_weights8(w, ky * K + kx, p.chunks, t.chunk, wk[kx]);
    const uint4* row = image + static_cast<long long>(iy) * p.in_w * p.chunks;
#pragma unroll
    for (int j = 0; j < kSpan; ++j) {
      const int ix = ix0 + j;
      if (ix < 0 || ix >= p.in_w) continue;
      float v[8];
      load8(row + static_cast<long long>(ix) * p.chunks, v);
#pragma unroll
      for (int o = 0; o < TILE; ++o) {
        const int kx = j - o * S;
        if (kx < 0 || kx >= K) continue;
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[o][c] = fmaf(v[c], wk[kx][c], acc[o][c]);
      }
    }
  }
  float b[8];
  load_bias8(bias, t.chunk, b);
  const long long pixel0 = (static_cast<long long>(t.n) * p.out_h + t.oy) * p.out_w + t.ox0;
#pragma unroll
  for (int o = 0; o < TILE; ++o)
    if (t.ox0 + o < p.out_w)
      store_out(y, residual, (pixel0 + o) * p.chunks + t.chunk, acc[o], b, p, t.chunk);
}

// Any kernel size, stride and dilation: one output vector per thread.
__global__ void __launch_bounds__(kThreads)
    depthwise_generic_kernel(const uint4* __restrict__ x, const float4* __restrict__ w,
                             const float4* __restrict__ bias, const uint4* __restrict__ residual,
                             uint4* __restrict__ y, DwParams p) {
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= p.total) return;
  const DwWork t = work_of(i, p, 1);
  if (t.oy >= p.out_h) return;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const uint4* image = x + static_cast<long long>(t.n) * p.in_h * p.in_w * p.chunks + t.chunk;
  for (int ky = 0; ky < p.kh; ++ky) {
    const int iy = t.oy * p.sh - p.pad_top + ky * p.dh;
    if (iy < 0 || iy >= p.in_h) continue;
    for (int kx = 0; kx < p.kw; ++kx) {
      const int ix = t.ox0 * p.sw - p.pad_left + kx * p.dw;
      if (ix < 0 || ix >= p.in_w) continue;
      float v[8], wv[8];
      load8(image + (static_cast<long long>(iy) * p.in_w + ix) * p.chunks, v);
      load_weights8(w, ky * p.kw + kx, p.chunks, t.chunk, wv);
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[c] = fmaf(v[c], wv[c], acc[c]);
    }
  }
  float b[8];
  load_bias8(bias, t.chunk, b);
  const long long pixel = (static_cast<long long>(t.n) * p.out_h + t.oy) * p.out_w + t.ox0;
  store_out(y, residual, pixel * p.chunks + t.chunk, acc, b, p, t.chunk);
}

bool is_depthwise(const ConvShape& s) {
  return s.conv.groups == s.in_c && s.out_c == s.in_c && !s.pool;
}

// Output columns per thread of the unrolled kernels; 0: the generic kernel.
int tile_of(const ConvShape& s) {
  const ConvAttrs& a = s.conv;
  if (a.kernel_h != a.kernel_w || a.stride_h != a.stride_w || a.dilation_h != 1 ||
      a.dilation_w != 1)
    return 0;
  const int k = a.kernel_h, st = a.stride_h;
  if ((k != 3 && k != 5) || (st != 1 && st != 2)) return 0;
  return k == 5 && st == 2 ? 2 : 4;
}

template <int K, int S, int TILE>
void launch_tiled(const void* x, const float4* w, const float4* b, const void* r, void* y,
                  const DwParams& p, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((p.total + kThreads - 1) / kThreads);
  depthwise_tiled_kernel<K, S, TILE><<<blocks, kThreads, 0, stream>>>(
      static_cast<const uint4*>(x), w, b, static_cast<const uint4*>(r), static_cast<uint4*>(y), p);
}

}  // namespace

bool DepthwiseConvFp16::supports(const ConvShape& shape) {
  return is_depthwise(shape) && conv_shape_problem(shape).empty();
}

DepthwiseConvFp16::DepthwiseConvFp16(const ConvShape& shape, const float* weight, const float* bias)
    : shape_(shape) {
  if (!supports(shape))
    throw Error("depthwise_fp16: not a depthwise conv (groups == in == out channels, no pool)");
  shape_.derive();
  tile_ = tile_of(shape_);
  const int c = shape_.in_c, stride = padded_channels(c);
  const int taps = shape_.conv.kernel_h * shape_.conv.kernel_w;
  // [tap][half][chunk][4] (the design note says why); channel = chunk * 8 + half * 4 + e.
  const size_t chunks = static_cast<size_t>(stride / 8);
  std::vector<float> packed(static_cast<size_t>(taps) * stride, 0.0f);
  for (int ch = 0; ch < c; ++ch)
    for (int tap = 0; tap < taps; ++tap) {
      const size_t chunk = ch / 8, half = (ch % 8) / 4, e = ch % 4;
      packed[((tap * 2 + half) * chunks + chunk) * 4 + e] =
          weight[static_cast<size_t>(ch) * taps + tap];
    }
  std::vector<float> bias_padded(stride, 0.0f);
  if (bias != nullptr) std::copy(bias, bias + c, bias_padded.begin());
  weights_ = upload_fp32(packed);
  bias_ = upload_fp32(bias_padded);
}

std::string DepthwiseConvFp16::variant_name() const {
  if (tile_ == 0) return "dw generic";
  return "dw " + std::to_string(shape_.conv.kernel_h) + "x" + std::to_string(shape_.conv.kernel_w) +
         " s" + std::to_string(shape_.conv.stride_h) + " tile " + std::to_string(tile_);
}

void DepthwiseConvFp16::forward(const void* x, const void* residual, void* y, int batch,
                                cudaStream_t stream) const {
  if (batch <= 0) return;
  if (shape_.residual && residual == nullptr)
    throw Error("depthwise_fp16: the fused residual is missing");
  const ConvAttrs& a = shape_.conv;
  DwParams p;
  p.channels = shape_.in_c;
  p.chunks = padded_channels(shape_.in_c) / 8;
  p.in_h = shape_.in_h, p.in_w = shape_.in_w, p.out_h = shape_.out_h, p.out_w = shape_.out_w;
  p.kh = a.kernel_h, p.kw = a.kernel_w, p.sh = a.stride_h, p.sw = a.stride_w;
  p.dh = a.dilation_h, p.dw = a.dilation_w, p.pad_top = a.pad_h, p.pad_left = a.pad_w;
  const int tile = tile_ == 0 ? 1 : tile_;
  p.tiles_x = (p.out_w + tile - 1) / tile;
  // Stride 1 only: at stride 2 neighbouring output rows share fewer input rows, and the
  // stride-2 layers timed the same banded or not (docs/PERFORMANCE.md, run 14).
  p.band = a.stride_h == 1 ? std::min(p.out_h, p.out_h % 7 == 0 ? 7 : 8) : 1;
  p.bands = (p.out_h + p.band - 1) / p.band;
  const long long total = static_cast<long long>(batch) * p.bands * p.band * p.tiles_x * p.chunks;
  if (total >= (1LL << 31) - kThreads)
    throw Error("depthwise_fp16: batch " + std::to_string(batch) + " too large (" +
                std::to_string(total) + " threads)");
  p.total = static_cast<int>(total);
  p.clamp = epilogue_clamp_of(shape_);
  const auto* w = static_cast<const float4*>(weights_.get());
  const auto* b = static_cast<const float4*>(bias_.get());
  const void* r = shape_.residual ? residual : nullptr;
  const int key = tile_ == 0 ? 0 : a.kernel_h * 10 + a.stride_h;
  switch (key) {
    case 31:
      launch_tiled<3, 1, 4>(x, w, b, r, y, p, stream);
      break;
    case 32:
      launch_tiled<3, 2, 4>(x, w, b, r, y, p, stream);
      break;
    case 51:
      launch_tiled<5, 1, 4>(x, w, b, r, y, p, stream);
      break;
    case 52:
      launch_tiled<5, 2, 2>(x, w, b, r, y, p, stream);
      break;
    default: {
      const unsigned blocks = static_cast<unsigned>((p.total + kThreads - 1) / kThreads);
      depthwise_generic_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint4*>(x), w, b,
                                                                static_cast<const uint4*>(r),
                                                                static_cast<uint4*>(y), p);
    }
  }
  CNNRT_CUDA_CHECK_LAUNCH();
}

}  // namespace cnnrt::cuda
