// conv_tma_lab: a Hopper conv mainloop at the hardware's pace (issue 9, step 1), standalone.
//
// Build (sm_90a only; no cnnrt library, only headers: the kernel is the library's
// kernels/cuda/conv/tma_kernel.cuh, conv_fp16_tma; the half2-store variants of the first runs are
// gone with the move, the 16-byte epilogue won by 1.15-1.4x):
//   nvcc -std=c++17 -O3 --expt-relaxed-constexpr -I. -Iinclude
//   -gencode=arch=compute_90a,code=sm_90a \
//        bench/conv_tma_lab.cu -o conv_tma_lab -lcublas            [-DLAB_DEBUG: mbarrier waits
//        trap after 2^30 polls]
// Run: conv_tma_lab [check] [bench] [cfg=NAME] [layer=convN] [batch=B]  (default: check, bench)
//
// DESIGN NOTE
// y[m][n] = relu(bias[n] + sum_k A[m][k] W[n][k]): M = N*OH*OW output pixels, N = out_c, K =
// kh*kw*in_c in (kh, kw, c) order; x NHWC fp16, w KRSC fp16 ([out_c][kh][kw][in_c] = a K-major
// [out_c][K] matrix as it is), fp32 accumulation, y NHWC fp16. Lab limits: in_c % 64 == 0,
// out_c % 8 == 0, dilation 1, one pad for all four sides.
//
// * Why TMA. The current kernel (wgmma_kernel.cuh) gathers A with one 16-byte cp.async per
//   (row, tap, 8-channel chunk) from all 256 threads; the warp-specialised copy of it whose one
//   producer warpgroup did that gather ran at 0.6x (PERFORMANCE.md run 10). Here ONE thread
//   issues a whole k-tile with 2-3 instructions: A through the im2col mode of
//   cp.async.bulk.tensor (per filter tap (r,s) and 64-channel block: 128 consecutive output
//   pixels' 64 input channels, the tap given as the im2col offsets {s, r}; stride = the tensor
//   map's traversal stride; padding = the map's pixel bounding box [-pad, extent-1+pad-(k-1)]
//   whose out-of-image taps the TMA fills with zeros; pixels past the last image are outside the
//   tensor, also zeros), B through a tiled 2-D map over [out_c][K] (rows past out_c: zeros).
//   Both land in the 128-byte-swizzled K-major layout wgmma's descriptors read (64 halves = one
//   128-byte row, the swizzle span), so the consumers only issue wgmma.
// * CTA = 3 warpgroups: WG0 producer (setmaxnreg 40, one thread issues TMA), WG1-2 consumers
//   (setmaxnreg 232), each owns BM/2 rows x BN (BM 128: one m64nBNk16 per k16 step; BM 256: two).
//   Ring of STAGES (BM+BN)x64 stages, full[s] (1 arrival + tx bytes) / empty[s] (one arrival per
//   consumer warpgroup per CTA of the cluster). The kernel's register count at entry must be
//   384 x 168 (launch bounds 384,1): 128x40 + 256x232 = 64512 <= 65536, or inc would hang
//   (checked at start-up).
// * Consumer per k-tile: wait full -> wgmma.fence -> 4 (or 8) wgmma -> commit -> wait_group 1 ->
//   release the PREVIOUS stage (its group has now retired). One group in flight, no CTA barrier.
// * Persistent grid (= resident CTAs, 1/SM) with a static scheduler: unit u = cluster id, += the
//   number of clusters; unit -> (m block pair, n block), n fastest so the CTAs running at once
//   share their A rows in L2 and the whole weight (<= 1.8 MB) stays in L2. The producer runs ahead
//   into the next tile while the consumers do the epilogue (bias + ReLU in fp32 straight from the
//   accumulator registers; rows >= M, cols >= out_c skipped). EPI 0: one half2 store per column
//   pair (a quad writes 16 B of a row); EPI 1 (suffix "v"): a 4x4 word transpose across the quad
//   (4 shuffles per 16 B) and one 16-byte store per lane, a quarter of the store instructions and
//   whole 32-byte sectors. EPI 1 won by 1.15-1.4x (the epilogue is not overlapped with MMAs).
// * Cluster of 2 along M (CL=2): the two CTAs need the same weight tile; each loads half of its
//   rows and multicasts it to both, halving the L2->SM traffic of B. The empty barriers then count
//   the consumers of both CTAs (remote arrives through mapa), the CTA pair walks the same units
//   (an odd last m block computes a tile of zeros and stores nothing), cluster barrier at the end.
//
// WHAT BOUNDS IT (H100 SXM, 132 SMs; measured ceilings: dense fp16 GEMM ~750 TFLOP/s, cuBLAS on
// these exact M x N x K 415-547). L2->SMEM bytes per FLOP = 1/BN + 1/BM (x 1/2 on B with CL=2):
// 128x128 0.0156, 128x192 0.0130, 128x256 / 256x128 0.0117, 128x256 CL2 0.0098, 256x192 0.0091.
// At 600 TFLOP/s 128x128 needs 9.4 TB/s, 128x256 7.0 TB/s, beyond what the L2 of an H100 is
// reported to deliver (~5.5-7 TB/s): the current kernel (128x128 tile, 300 TFLOP/s = 4.7 TB/s)
// may already be near that wall, which is why the large tiles and the multicast exist here.
// Wave quantisation at batch 256 with one tile per CTA-round: conv2 1458 tiles (128x192) / 132 =
// 11.05 -> 12 rounds (92%), conv3 676 (128x192) 5.12 -> 6 (85%) or 1014 (128x128) 7.7 -> 8 (96%),
// conv4/conv5 338 (128x256) 2.56 -> 3 (85%). Epilogue not overlapped with MMAs (both consumer
// warpgroups drain together): ~1-2 us per tile against 14 us (conv2, 25 k-tiles) to 40 us (conv4,
// 54 k-tiles) of mainloop, i.e. 4-10%.
// PREDICTION (before the first GPU run): mainloop 600-680 TFLOP/s on the best tile, times waves
// and epilogue: batch 256 conv2 ~480, conv3 ~500, conv4 ~500, conv5 ~470 TFLOP/s (0.24 / 0.115 /
// 0.155 / 0.11 ms); batch 64 10-20% lower (conv4: 85 tiles of 128x256 on 132 SMs, one part wave).
// Risks: the im2col box semantics (checked by the odd shapes, a 3x5 kernel pins the W/H order of
// the corners), L2 bandwidth (multicast variant), the register count (168 at entry).
// MEASURED (H100 SXM, docs/kernels/conv_fp16_tma.md has the full table): correct on all 10 shapes x
// 11 variants; best variant per layer, batch 256: conv2 658 (128x192s5v), conv3 634 (256x128s4v),
// conv4 673, conv5 649 TFLOP/s (128x256s4v), cuBLAS 453 / 663 / 570 / 532; batch 64: 621 / 520 /
// 494 / 448. Above the prediction: the first run with half2 stores gave 464 / 490 / 573 / 506, in
// line with it; the 16-byte epilogue was worth far more than the 4-10% the note had guessed.
// The 2-CTA multicast ran 2x SLOWER until the remote arrive lost its .release.cluster qualifier
// (a cluster-scope fence per k-tile); without it it is on par or 2-5% behind (L2 at 74% of its
// sector rate in ncu, not yet the wall).
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "conv_tma_lab.cuh"

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                           \
    }                                                                                         \
  } while (0)

// ------------------------------------------------------------------------------ host side
typedef CUresult (*EncodeIm2col)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const int*, const int*,
                                 cuuint32_t, cuuint32_t, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion,
                                 CUtensorMapFloatOOBfill);
typedef CUresult (*EncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static EncodeIm2col g_enc_im2col;
static EncodeTiled g_enc_tiled;

static void load_driver_entry_points() {
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeIm2col", (void**)&g_enc_im2col, 12000,
                                      cudaEnableDefault, &q));
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void**)&g_enc_tiled, 12000,
                                      cudaEnableDefault, &q));
  if (!g_enc_im2col || !g_enc_tiled) {
    std::fprintf(stderr, "no tensor-map entry points\n");
    std::exit(2);
  }
}

static Geom make_geom(int n, int h, int w, int c, int oc, int kh, int kw, int stride, int pad) {
  Geom g{};
  g.n = n;
  g.h = h;
  g.w = w;
  g.c = c;
  g.oc = oc;
  g.kh = kh;
  g.kw = kw;
  g.stride = stride;
  g.pad = pad;
  g.oh = (h + 2 * pad - kh) / stride + 1;
  g.ow = (w + 2 * pad - kw) / stride + 1;
  g.m = n * g.oh * g.ow;
  g.k = kh * kw * c;
  g.c_blocks = c / 64;
  g.k_tiles = kh * kw * g.c_blocks;
  return g;
}

static CUtensorMap map_x(const Geom& g, const __half* x) {
  CUtensorMap m;
  cuuint64_t dims[4] = {cuuint64_t(g.c), cuuint64_t(g.w), cuuint64_t(g.h), cuuint64_t(g.n)};
  cuuint64_t strides[3] = {cuuint64_t(g.c) * 2, cuuint64_t(g.w) * g.c * 2,
                           cuuint64_t(g.h) * g.w * g.c * 2};
  // Corner arrays in tensor-dimension order (W, H): the box of tap-(0,0) positions.
  int lower[2] = {-g.pad, -g.pad};
  int upper[2] = {g.pad - (g.kw - 1), g.pad - (g.kh - 1)};
  cuuint32_t estr[4] = {1, cuuint32_t(g.stride), cuuint32_t(g.stride), 1};
  CUresult r =
      g_enc_im2col(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, (void*)x, dims, strides, lower, upper,
                   64, 128, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeIm2col failed: %d\n", int(r));
    std::exit(2);
  }
  return m;
}
// A 2-D tiled map over `rows` rows of `inner` halves, boxes of 64 halves x box_rows rows, the
// 128-byte swizzle (the weight [out_c][K], or the window conv's [pixels][channels]).
static CUtensorMap map_2d(const __half* base, size_t inner, size_t rows, int box_rows,
                          const char* what) {
  CUtensorMap m;
  cuuint64_t dims[2] = {cuuint64_t(inner), cuuint64_t(rows)};
  cuuint64_t strides[1] = {cuuint64_t(inner) * 2};
  cuuint32_t box[2] = {64, cuuint32_t(box_rows)};
  cuuint32_t estr[2] = {1, 1};
  CUresult r = g_enc_tiled(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, (void*)base, dims, strides, box,
                           estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled (%s) failed: %d\n", what, int(r));
    std::exit(2);
  }
  return m;
}
static CUtensorMap map_w(const Geom& g, const __half* w, int box_rows) {
  return map_2d(w, size_t(g.k), size_t(g.oc), box_rows, "weight");
}

#include "conv_tma_lab_variants.cuh"

// ------------------------------------------------------------------------------ data, reference
struct Problem {
  Geom g;
  std::vector<float> x, w, b;  // fp16-rounded values as float
  __half *dx = nullptr, *dw = nullptr, *dy = nullptr;
  float* db = nullptr;
};

static void fill_half(std::vector<float>& host, size_t count, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-scale, scale);
  host.resize(count);
  for (auto& v : host) {
    float r = d(rng);
    if (std::fabs(r) < 1e-3f * scale) r = 0.5f * scale;  // non-zero data everywhere
    v = __half2float(__float2half(r));
  }
}
static __half* to_device_half(const std::vector<float>& v) {
  std::vector<__half> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = __float2half(v[i]);
  __half* d;
  CK(cudaMalloc(&d, h.size() * 2));
  CK(cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  return d;
}
static Problem make_problem(const Geom& g, uint32_t seed) {
  Problem p;
  p.g = g;
  std::mt19937 rng(seed);
  fill_half(p.x, size_t(g.n) * g.h * g.w * g.c, 1.f, rng);
  fill_half(p.w, size_t(g.oc) * g.k, 1.f / std::sqrt(float(g.k)), rng);
  fill_half(p.b, g.oc, 0.5f, rng);
  p.dx = to_device_half(p.x);
  p.dw = to_device_half(p.w);
  CK(cudaMalloc(&p.db, g.oc * 4));
  CK(cudaMemcpy(p.db, p.b.data(), g.oc * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&p.dy, size_t(g.m) * g.oc * 2));
  return p;
}
static void free_problem(Problem& p) {
  cudaFree(p.dx);
  cudaFree(p.dw);
  cudaFree(p.db);
  cudaFree(p.dy);
}
static float ref_at(const Problem& p, int m, int n) {  // fp32 on the fp16-rounded inputs
  const Geom& g = p.g;
  const int img = m / (g.oh * g.ow), rem = m % (g.oh * g.ow), oy = rem / g.ow, ox = rem % g.ow;
  float acc = 0.f;
  for (int r = 0; r < g.kh; ++r) {
    const int iy = oy * g.stride - g.pad + r;
    if (iy < 0 || iy >= g.h) continue;
    for (int s = 0; s < g.kw; ++s) {
      const int ix = ox * g.stride - g.pad + s;
      if (ix < 0 || ix >= g.w) continue;
      const float* xv = &p.x[((size_t(img) * g.h + iy) * g.w + ix) * g.c];
      const float* wv = &p.w[size_t(n) * g.k + (size_t(r) * g.kw + s) * g.c];
      for (int c = 0; c < g.c; ++c) acc += xv[c] * wv[c];
    }
  }
  return std::max(acc + p.b[n], 0.f);
}

// Compares the device output at `count` positions (all of them when count == 0).
static bool compare(const Problem& p, const std::vector<float>& ref, const std::vector<size_t>& at,
                    double* rel_out, double* maxabs_out) {
  std::vector<__half> y(size_t(p.g.m) * p.g.oc);
  CK(cudaMemcpy(y.data(), p.dy, y.size() * 2, cudaMemcpyDeviceToHost));
  double num = 0, den = 0, maxabs = 0;
  bool finite = true;
  for (size_t i = 0; i < at.size(); ++i) {
    const float v = __half2float(y[at[i]]);
    if (!std::isfinite(v)) finite = false;
    const double d = double(v) - ref[i];
    num += d * d;
    den += double(ref[i]) * ref[i];
    maxabs = std::max(maxabs, std::fabs(d));
  }
  *rel_out = std::sqrt(num / std::max(den, 1e-30));
  *maxabs_out = maxabs;
  double refmax = 0;
  for (float r : ref) refmax = std::max(refmax, double(std::fabs(r)));
  return finite && *rel_out <= 2e-3 && maxabs <= 1e-2 * std::max(1.0, refmax);
}

static std::vector<float> reference(const Problem& p, const std::vector<size_t>& at) {
  std::vector<float> ref(at.size());
  const unsigned nt = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> th;
  for (unsigned t = 0; t < nt; ++t)
    th.emplace_back([&, t] {
      for (size_t i = t; i < at.size(); i += nt)
        ref[i] = ref_at(p, int(at[i] / p.g.oc), int(at[i] % p.g.oc));
    });
  for (auto& x : th) x.join();
  return ref;
}

static void poison(const Problem& p) { CK(cudaMemset(p.dy, 0xFF, size_t(p.g.m) * p.g.oc * 2)); }

// ------------------------------------------------------------------------------ check
static int run_check(const std::vector<Variant>& vars, const char* only) {
  struct Case {
    int n, h, w, c, oc, kh, kw, stride, pad;
  };
  const Case cases[] = {
      {1, 13, 13, 64, 64, 3, 3, 1, 1},
      {3, 27, 27, 64, 192, 5, 5, 1, 2},
      {3, 7, 9, 128, 384, 3, 3, 2, 1},
      {1, 13, 13, 192, 384, 1, 1, 1, 0},
      {3, 9, 7, 64, 64, 5, 5, 2, 2},
      {2, 13, 13, 256, 256, 3, 3, 1, 1},
      {3, 11, 10, 64, 128, 3, 5, 1, 1},
      {2, 13, 13, 64, 128, 1, 1, 2, 0},
      {1, 27, 27, 128, 192, 3, 3, 2, 0},
      {5, 13, 13, 384, 256, 3, 3, 1, 1},
      // stride 1, no padding, <= 64 channels out: the window conv's shapes too
      {3, 9, 11, 64, 64, 3, 3, 1, 0},
      {2, 57, 57, 64, 64, 3, 3, 1, 0},
      {3, 13, 10, 64, 40, 3, 3, 1, 0},
      {1, 20, 61, 64, 64, 3, 3, 1, 0},
  };
  int failures = 0;
  uint32_t seed = 1;
  for (const Case& cs : cases) {
    Geom g = make_geom(cs.n, cs.h, cs.w, cs.c, cs.oc, cs.kh, cs.kw, cs.stride, cs.pad);
    Problem p = make_problem(g, seed++);
    std::vector<size_t> at(size_t(g.m) * g.oc);
    for (size_t i = 0; i < at.size(); ++i) at[i] = i;
    const std::vector<float> ref = reference(p, at);
    for (const Variant& v : vars) {
      if (only && std::strcmp(only, v.name) != 0) continue;
      if (v.serves && !v.serves(g)) continue;
      poison(p);
      v.run(v.prepare(v, g, p.dx, p.dw, p.db, p.dy), 0);
      cudaError_t e = cudaDeviceSynchronize();
      if (e != cudaSuccess) {
        std::printf("FAIL %-12s n%d %dx%d c%d oc%d k%dx%d s%d p%d: %s\n", v.name, cs.n, cs.h, cs.w,
                    cs.c, cs.oc, cs.kh, cs.kw, cs.stride, cs.pad, cudaGetErrorString(e));
        std::exit(3);  // the context is gone after a trap
      }
      double rel, maxabs;
      const bool ok = compare(p, ref, at, &rel, &maxabs);
      failures += !ok;
      std::printf("%s %-12s n%d %2dx%-2d c%-3d oc%-3d k%dx%d s%d p%d M=%-5d rel %.2e maxabs %.2e\n",
                  ok ? "PASS" : "FAIL", v.name, cs.n, cs.h, cs.w, cs.c, cs.oc, cs.kh, cs.kw,
                  cs.stride, cs.pad, g.m, rel, maxabs);
    }
    free_problem(p);
  }
  std::printf("check: %d failure(s)\n", failures);
  return failures;
}

// ------------------------------------------------------------------------------ bench
template <class F>
static float median_ms(F&& f, int warm = 5, int reps = 60) {
  for (int i = 0; i < warm; ++i) f();
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(ev[2 * i]));
    f();
    CK(cudaEventRecord(ev[2 * i + 1]));
  }
  CK(cudaDeviceSynchronize());
  std::vector<float> t(reps);
  for (int i = 0; i < reps; ++i) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(t.begin(), t.end());
  return t[reps / 2];
}

static const char* g_only_layer = nullptr;
static int g_only_batch = 0;

static int run_bench(const std::vector<Variant>& vars, const char* only) {
  struct Layer {
    const char* name;
    int c, oc, k, pad, hw;
  };
  const Layer layers[] = {{"conv2", 64, 192, 5, 2, 27},
                          {"conv3", 192, 384, 3, 1, 13},
                          {"conv4", 384, 256, 3, 1, 13},
                          {"conv5", 256, 256, 3, 1, 13},
                          // conv1's space-to-depth form at a 64-channel stride (57x57, 3x3)
                          {"conv1s2d", 64, 64, 3, 0, 57}};
  cublasHandle_t hb;
  if (cublasCreate(&hb) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasCreate failed\n");
    return 2;
  }
  int failures = 0;
  std::printf("\n%-6s %5s %-12s %9s %9s\n", "layer", "batch", "kernel", "ms", "TFLOP/s");
  for (int batch : {64, 256}) {
    if (g_only_batch && batch != g_only_batch) continue;
    for (const Layer& L : layers) {
      if (g_only_layer && std::strcmp(g_only_layer, L.name) != 0) continue;
      Geom g = make_geom(batch, L.hw, L.hw, L.c, L.oc, L.k, L.k, 1, L.pad);
      const double flop = 2.0 * g.m * g.oc * g.k;
      Problem p = make_problem(g, 1000 + batch + L.oc);
      std::mt19937 rng(7);
      std::vector<size_t> at(4096);
      for (auto& a : at) a = rng() % (size_t(g.m) * g.oc);
      for (int i = 0; i < 64; ++i) at[i] = size_t(g.m - 1 - i) * g.oc + (i % g.oc);  // the M tail
      const std::vector<float> ref = reference(p, at);
      float best = 1e30f;
      const char* best_name = "";
      for (const Variant& v : vars) {
        if (only && std::strcmp(only, v.name) != 0) continue;
        if (v.serves && !v.serves(g)) continue;
        poison(p);
        const Launch l = v.prepare(v, g, p.dx, p.dw, p.db, p.dy);
        v.run(l, 0);
        CK(cudaDeviceSynchronize());
        double rel, maxabs;
        const bool ok = compare(p, ref, at, &rel, &maxabs);
        failures += !ok;
        const float ms = median_ms([&] { v.run(l, 0); });
        CK(cudaGetLastError());
        if (ms < best) {
          best = ms;
          best_name = v.name;
        }
        std::printf("%-6s %5d %-12s %9.4f %9.1f %s (rel %.1e)\n", L.name, batch, v.name, ms,
                    flop / ms * 1e-9, ok ? "" : "WRONG", rel);
      }
      // cuBLAS: the same M x N x K as a plain GEMM, C[M][N] = A[M][K] W[N][K]^T (no im2col).
      __half *da, *dc;
      CK(cudaMalloc(&da, size_t(g.m) * g.k * 2));
      CK(cudaMalloc(&dc, size_t(g.m) * g.oc * 2));
      CK(cudaMemset(da, 0x3C, size_t(g.m) * g.k * 2));  // 0x3C3C ~ 1.06, non-zero
      const float alpha = 1.f, beta = 0.f;
      auto gemm = [&] {
        cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, g.oc, g.m, g.k, &alpha, p.dw, CUDA_R_16F, g.k,
                     da, CUDA_R_16F, g.k, &beta, dc, CUDA_R_16F, g.oc, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
      };
      const float ms_cublas = median_ms(gemm);
      CK(cudaGetLastError());
      std::printf("%-6s %5d %-12s %9.4f %9.1f\n", L.name, batch, "cublas_gemm", ms_cublas,
                  flop / ms_cublas * 1e-9);
      std::printf(
          "SUMMARY %-6s b%-4d M=%-6d N=%-4d K=%-5d best %-12s %.4f ms %.1f TFLOP/s | cublas %.4f "
          "ms %.1f TFLOP/s | %.2fx\n",
          L.name, batch, g.m, g.oc, g.k, best_name, best, flop / best * 1e-9, ms_cublas,
          flop / ms_cublas * 1e-9, ms_cublas / best);
      cudaFree(da);
      cudaFree(dc);
      free_problem(p);
    }
  }
  cublasDestroy(hb);
  return failures;
}

int main(int argc, char** argv) {
  bool check = false, bench = false;
  const char* only = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "check"))
      check = true;
    else if (!std::strcmp(argv[i], "bench"))
      bench = true;
    else if (!std::strncmp(argv[i], "cfg=", 4))
      only = argv[i] + 4;
    else if (!std::strncmp(argv[i], "layer=", 6))
      g_only_layer = argv[i] + 6;
    else if (!std::strncmp(argv[i], "batch=", 6))
      g_only_batch = std::atoi(argv[i] + 6);
    else {
      std::fprintf(stderr, "usage: %s [check] [bench] [cfg=NAME] [layer=convN] [batch=B]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!check && !bench) check = bench = true;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9) {
    std::fprintf(stderr, "needs an sm_90 device, found %s\n", prop.name);
    return 2;
  }
  std::printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  load_driver_entry_points();
  const std::vector<Variant> vars = all_variants(prop.multiProcessorCount);
  for (const Variant& v : vars) std::printf("variant %-12s resident CTAs %d\n", v.name, v.ctas);
  int failures = 0;
  if (check) failures += run_check(vars, only);
  if (bench) failures += run_bench(vars, only);
  std::printf("%s\n", failures ? "RESULT: FAIL" : "RESULT: PASS");
  return failures ? 1 : 0;
}
