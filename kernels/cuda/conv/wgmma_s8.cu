// Hopper wgmma implicit-GEMM int8 convolution (conv_s8.h: conv_s8_wgmma): the int8 instance of
// the fp16 wgmma kernel's mainloop.  sm_90a only.
//
// Why: the mma.sync s8 GEMM (igemm_s8.cu) ran AlexNet's convs at 12-17 % of the int8 peak
// (docs/PERFORMANCE.md, run 12); like fp16, Hopper reaches its int8 peak only through warpgroup
// MMA.  wgmma.mma_async m64nNk32 .s32.s8.s8 takes both operands K-major from shared memory —
// what the NHWC/16 activations and the [out_c][k_pad] packed weights already are.
//
// What is shared with the fp16 kernel (wgmma_kernel.cuh), not copied: the CTA shape (2
// warpgroups, BM = 128 rows, BN = 64 / 128 / 192), the 128-byte swizzled K-major shared layout
// and its descriptors, the row table, the incremental A gather and the B loader (both move
// 16-byte chunks: 16 int8 channels here, 8 halves there), and the whole cp.async -> wgmma
// pipeline (wg_mainloop).  A k-tile is one 128-byte row either way: 128 int8 K values, four
// k32 instructions of 32 bytes each — the fp16 kernel's four k16 steps, the same +32-byte
// descriptor step.  So per k-tile the int8 kernel moves the same bytes and issues the same
// number of wgmma as fp16 while covering twice the K: half the k-tiles of the fp16 conv.
//
// What is int8's own: the int32 accumulators and the epilogue (epilogue_s8.cuh, the integer
// reference's arithmetic, docs/QUANTIZATION.md): acc + bias_q -> __int2float_rn ->
// __fmul_rn(M[c]) -> __float2int_rn -> clamp [lo, hi]: int8 tiles staged in the drained ring
// and written as 16-byte rows; or (the graph output) dequantised fp32 written as float2 pairs
// straight from the registers.  A fused max-pool runs after the conv on the pre-pool tensor
// (maxpool_nhwc_s8, exact: max commutes with the monotonic requantisation), as for
// conv_s8_igemm: the fp16 kernel's in-kernel pool (pool_tiling.h) is not instanced for int8 yet.
//
// Shapes (wgmma_s8_serves): groups 1, dilation 1, out_c % 64 == 0 (so BN divides it and the
// output has no padding channels), K padded to a multiple of 128 (k_pad), NHWC/16 input.
// Exactness: integer accumulation is associative, so wgmma's internal order changes nothing;
// the one float step is the reference's.
#include <algorithm>
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/epilogue_s8.cuh"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/wgmma_kernel.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace wgmma_detail {

// The geometry the shared loaders read (field for field WgmmaConvParams' meaning, in int8
// elements: in_c = the channel stride pad16(C), w_k = k_pad) and the int8 epilogue's operands.
struct WgmmaS8Params {
  const int8_t* x = nullptr;
  const int8_t* w = nullptr;          // [out_c][w_k]
  const int32_t* bias = nullptr;      // bias_q, out_c
  const float* multiplier = nullptr;  // M[c] (int8 out) or D[c] (fp32 out)
  void* y = nullptr;                  // int8 NHWC/16 or fp32 NHWC/8; channel stride out_c
  int in_h = 0, in_w = 0, in_c = 0;
  int conv_h = 0, conv_w = 0;
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  int c_chunks = 0, k_chunks = 0, k_tiles = 0, w_k = 0;
  int out_c = 0;
  int lo = -127, hi = 127;
  float float_lo = 0, float_hi = 0;
  int m_total = 0;
};

// int8 out, stage 1: requantised accumulators (rows row0, row0 + 8 of the wgmma m64nN layout)
// into the int8 staging tile, BN + 16 bytes per row.
template <int BN>
__device__ __forceinline__ void s8_stage_acc(const int (&acc)[BN / 2], int8_t* s_c,
                                             const WgmmaS8Params& p, int n0, int row0, int lane) {
  constexpr int kCRow = BN + 16;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int col = j * 8 + (lane & 3) * 2;
    const int b0 = p.bias[n0 + col], b1 = p.bias[n0 + col + 1];
    const float m0 = p.multiplier[n0 + col], m1 = p.multiplier[n0 + col + 1];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const char2 v = make_char2(s8::requantize(acc[4 * j + 2 * h] + b0, m0, p.lo, p.hi),
                                 s8::requantize(acc[4 * j + 2 * h + 1] + b1, m1, p.lo, p.hi));
      *reinterpret_cast<char2*>(s_c + (row0 + 8 * h) * kCRow + col) = v;
    }
  }
}

// int8 out, stage 2: the staged rows to their output pixels, 16-byte chunks.
template <int BN>
__device__ __forceinline__ void s8_write_rows(const WgmmaS8Params& p, const int8_t* s_c, int m0,
                                              int n0, int tid) {
  constexpr int kChunks = BN / 16, kCRow = BN + 16;
  int8_t* y = static_cast<int8_t*>(p.y);
  for (int id = tid; id < kBM * kChunks; id += kThreads) {
    const int r = id / kChunks, c = id % kChunks;
    const int m = m0 + r;
    if (m >= p.m_total) continue;
    *reinterpret_cast<uint4*>(y + size_t(m) * p.out_c + n0 + c * 16) =
        *reinterpret_cast<const uint4*>(s_c + r * kCRow + c * 16);
  }
}

// fp32 out (the graph output): dequantised float2 pairs straight from the registers.
template <int BN>
__device__ __forceinline__ void s8_store_float(const int (&acc)[BN / 2], const WgmmaS8Params& p,
                                               int m0, int n0, int row0, int lane) {
  float* y = static_cast<float*>(p.y);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int c = n0 + j * 8 + (lane & 3) * 2;
    const int b0 = p.bias[c], b1 = p.bias[c + 1];
    const float d0 = p.multiplier[c], d1 = p.multiplier[c + 1];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + row0 + 8 * h;
      if (m >= p.m_total) continue;
      const float2 v =
          make_float2(s8::dequantize(acc[4 * j + 2 * h] + b0, d0, p.float_lo, p.float_hi),
                      s8::dequantize(acc[4 * j + 2 * h + 1] + b1, d1, p.float_lo, p.float_hi));
      *reinterpret_cast<float2*>(y + size_t(m) * p.out_c + c) = v;
    }
  }
}

template <int BN, bool FLOAT_OUT>
__global__ void __launch_bounds__(kThreads, 1) conv_wgmma_s8_kernel(const WgmmaS8Params p) {
  pdl_wait();
#ifdef CNNRT_WGMMA_DEVICE
  constexpr int kStage = (kBM + BN) * 128;
  static_assert(kBM * (BN + 16) <= kStages * kStage, "the int8 staging tile aliases the ring");

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_base = smem_u32(smem_raw);
  const uint32_t ring = (raw_base + 1023u) & ~1023u;  // swizzle atoms need 1024-byte alignment
  unsigned char* ring_ptr = smem_raw + (ring - raw_base);
  int4* s_rows = reinterpret_cast<int4*>(ring_ptr + kStages * kStage);  // {image|-1, ih0, iw0, 0}

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wg = warp >> 2;  // warpgroup: rows 64 * wg .. 64 * wg + 63
  WgTile t{};
  t.n0 = blockIdx.y * BN;
  t.m0 = blockIdx.x * kBM;
  WgLoader ld{};
  ld.c = tid & 7;
  ld.r0 = tid >> 3;
  ld.off = uint32_t(ld.r0) * 128 + (uint32_t(ld.c ^ (ld.r0 & 7)) << 4);

  wg_fill_rows<false>(p, s_rows, tid, 0, 1, t);
  __syncthreads();
  int acc[BN / 2];
  wg_mainloop<BN, kStages, MmaS8<BN>>(p, ld, ring, s_rows, p.w + size_t(t.n0) * p.w_k, wg, acc);
  __syncthreads();  // the ring is drained and no warpgroup reads it: it becomes the staging tile

  const int row0 = wg * 64 + (warp & 3) * 16 + (lane >> 2);  // accumulator rows row0, row0 + 8
  if constexpr (FLOAT_OUT) {
    s8_store_float<BN>(acc, p, t.m0, t.n0, row0, lane);
  } else {
    int8_t* s_c = reinterpret_cast<int8_t*>(ring_ptr);
    s8_stage_acc<BN>(acc, s_c, p, t.n0, row0, lane);
    __syncthreads();
    s8_write_rows<BN>(p, s_c, t.m0, t.n0, tid);
  }
#else
  __trap();  // not the sm_90a image: wgmma_s8_device_supported() keeps this from being launched
#endif
}

__global__ void wgmma_s8_probe_kernel(int* has_wgmma) {
#ifdef CNNRT_WGMMA_DEVICE
  *has_wgmma = 1;
#else
  *has_wgmma = 0;
#endif
}

}  // namespace wgmma_detail

namespace {

using wgmma_detail::WgmmaS8Params;

// The fp16 kernel's N-tile rule: 128 where it divides (conv3/conv4/conv5), 192 for out_c = 192
// (conv2: one N tile, the A gather done once per pixel), else 64.
int wgmma_s8_bn(const S8Conv& conv) {
  return conv.out_c % 128 == 0 ? 128 : conv.out_c % 192 == 0 ? 192 : 64;
}

template <int BN, bool FLOAT_OUT>
void launch(const WgmmaS8Params& p, cudaStream_t stream) {
  constexpr auto kernel = wgmma_detail::conv_wgmma_s8_kernel<BN, FLOAT_OUT>;
  const size_t smem = wgmma_detail::smem_bytes(BN, wgmma_detail::kStages);
  // The attribute is per kernel and process: set once (thread-safe static initialisation).
  static const cudaError_t configured =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  CNNRT_CUDA_CHECK(configured);
  const dim3 grid(static_cast<unsigned>((p.m_total + wgmma_detail::kBM - 1) / wgmma_detail::kBM),
                  static_cast<unsigned>(p.out_c / BN));
  launch_kernel(kernel, grid, wgmma_detail::kThreads, smem, stream, p);
}

template <bool FLOAT_OUT>
void launch(int bn, const WgmmaS8Params& p, cudaStream_t stream) {
  if (bn == 128)
    launch<128, FLOAT_OUT>(p, stream);
  else if (bn == 192)
    launch<192, FLOAT_OUT>(p, stream);
  else
    launch<64, FLOAT_OUT>(p, stream);
}

}  // namespace

bool wgmma_s8_serves(const S8Conv& conv) {
  return conv.groups == 1 && conv.dil_h == 1 && conv.dil_w == 1 && conv.in_stride % 16 == 0 &&
         conv.in_stride > 0 && conv.out_c > 0 && conv.out_c % 64 == 0 &&
         conv.out_stride == conv.out_c && conv.k_pad % 128 == 0 &&
         conv.k_total == conv.kh * conv.kw * conv.in_stride && conv.k_pad >= conv.k_total &&
         conv.kh > 0 && conv.kw > 0 && conv.stride_h > 0 && conv.stride_w > 0 && conv.out_h > 0 &&
         conv.out_w > 0 && conv.in_h > 0 && conv.in_w > 0;
}

bool wgmma_s8_device_supported() {
  if (plan_only()) return device_traits().wgmma_image;  // a described target: no probe
  static const bool supported = [] {
    int device = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
      cudaGetLastError();  // leave no sticky error behind for the caller
      return false;
    }
    if (prop.major != 9 || prop.minor != 0) return false;
    // Which image did the driver load for this file's fatbinary?  Only the sm_90a one has wgmma.
    int* flag = nullptr;
    int has_wgmma = 0;
    bool ok = cudaMalloc(&flag, sizeof(int)) == cudaSuccess;
    if (ok) {
      wgmma_detail::wgmma_s8_probe_kernel<<<1, 1>>>(flag);
      ok = cudaGetLastError() == cudaSuccess &&
           cudaMemcpy(&has_wgmma, flag, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
      cudaFree(flag);
    }
    cudaGetLastError();
    return ok && has_wgmma == 1;
  }();
  return supported;
}

long long wgmma_s8_ctas(const S8Conv& conv, int batch) {
  const long long m_total = (long long)batch * conv.out_h * conv.out_w;
  return (m_total + wgmma_detail::kBM - 1) / wgmma_detail::kBM * (conv.out_c / wgmma_s8_bn(conv));
}

std::string wgmma_s8_name(const S8Conv& conv) {
  return "wgmma_s8_128x" + std::to_string(wgmma_s8_bn(conv)) + "x128_s" +
         std::to_string(wgmma_detail::kStages);
}

void conv_s8_wgmma(const S8Conv& conv, const void* x, void* y, int batch, cudaStream_t stream) {
  if (!wgmma_s8_serves(conv)) throw Error("conv_s8_wgmma: invalid conv description");
  const long long m_total = (long long)batch * conv.out_h * conv.out_w;
  if (m_total <= 0) return;
  if (m_total > (1LL << 30))
    throw Error("conv_s8_wgmma: " + std::to_string(m_total) + " output pixels exceed int indexing");
  WgmmaS8Params p;
  p.x = static_cast<const int8_t*>(x);
  p.w = conv.weight;
  p.bias = conv.bias;
  p.multiplier = conv.multiplier;
  p.y = y;
  p.in_h = conv.in_h;
  p.in_w = conv.in_w;
  p.in_c = conv.in_stride;
  p.conv_h = conv.out_h;
  p.conv_w = conv.out_w;
  p.kh = conv.kh;
  p.kw = conv.kw;
  p.sh = conv.stride_h;
  p.sw = conv.stride_w;
  p.ph = conv.pad_h;
  p.pw = conv.pad_w;
  p.c_chunks = conv.in_stride / 16;
  p.k_chunks = conv.kh * conv.kw * p.c_chunks;
  p.w_k = conv.k_pad;
  p.k_tiles = conv.k_pad / 128;
  p.out_c = conv.out_c;
  p.lo = conv.lo;
  p.hi = conv.hi;
  p.float_lo = conv.float_lo;
  p.float_hi = conv.float_hi;
  p.m_total = static_cast<int>(m_total);
  if (conv.float_output)
    launch<true>(wgmma_s8_bn(conv), p, stream);
  else
    launch<false>(wgmma_s8_bn(conv), p, stream);
}

}  // namespace cnnrt::cuda
