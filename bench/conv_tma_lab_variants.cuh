// conv_tma_lab's variants: each launchable configuration (a tile of the library's TMA conv, the
// mainloop's dense weights-as-A instance, the window conv) with its preparation (tensor maps,
// grid) and launch.  Included by conv_tma_lab.cu after its map encoders (map_x, map_w, map_2d)
// and CK; one translation unit, so the lab still builds with one nvcc command.
#pragma once

// One launchable configuration (tile, stages, cluster) and its launch for one problem, prepared
// once (tensor maps, grid) so that timing loops only launch.
struct Launch {
  CUtensorMap tx, tw;
  Geom g;
  int grid;
  const float* bias;
  __half* y;
};
struct Variant {
  const char* name;
  int bm, bn, cl;
  Launch (*prepare)(const Variant&, Geom, const __half*, const __half*, const float*, __half*);
  void (*run)(const Launch&, cudaStream_t);
  int ctas;                               // resident CTAs of the persistent grid (set up once)
  bool (*serves)(const Geom&) = nullptr;  // null: every lab shape
};

template <int BM, int BN, int STAGES, int CL>
static Launch prepare_variant(const Variant& v, Geom g, const __half* x, const __half* w,
                              const float* bias, __half* y) {
  g.m_tiles = (g.m + BM - 1) / BM;
  g.n_tiles = (g.oc + BN - 1) / BN;
  g.units = (g.m_tiles + CL - 1) / CL * g.n_tiles;
  return Launch{map_x(g, x), map_w(g, w, BN / CL), g, std::min(v.ctas / CL, g.units) * CL, bias, y};
}

// A launch configuration of `grid` CTAs of the TMA convs' 384 threads, in clusters of `cl` along
// x (attr: the caller's storage for the cluster attribute).
static cudaLaunchConfig_t cluster_config(int grid, size_t smem, int cl, cudaStream_t st,
                                         cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(cnnrt::cuda::tma_detail::kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cl;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}
// Opts kernel image `kern` into `smem` bytes and checks its 168 registers at entry (setmaxnreg's
// budget; an inc that cannot be met would hang): exits otherwise.
static void prepare_image(const void* kern, size_t smem, const char* name) {
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, kern));
  if (fa.numRegs != 168) {
    std::fprintf(stderr, "%s: %d registers at entry, setmaxnreg needs 168\n", name, fa.numRegs);
    std::exit(2);
  }
}

// The mainloop's geometry (both parameter structs name it alike), bias, y, units and ReLU.
template <class P>
static void fill_params(const Launch& l, P& p) {
  p.bias = l.bias;
  p.y = l.y;
  p.m = l.g.m;
  p.out_c = l.g.oc;
  p.conv_h = l.g.oh;
  p.conv_w = l.g.ow;
  p.sh = p.sw = l.g.stride;
  p.pad_top = p.pad_left = l.g.pad;
  p.kw = l.g.kw;
  p.c_blocks = l.g.c_blocks;
  p.k_tiles = l.g.k_tiles;
  p.units = l.g.units;
  p.act = cnnrt::cuda::EpilogueClamp{1, 0.f, INFINITY};  // ReLU
}

template <int BM, int BN, int STAGES, int CL>
static void run_variant(const Launch& l, cudaStream_t st) {
  cudaLaunchAttribute attr[1];
  const cudaLaunchConfig_t cfg = cluster_config(
      l.grid, cnnrt::cuda::tma_detail::TmaTile<BM, BN, STAGES, CL>::kSmem, CL, st, attr);
  cnnrt::cuda::tma_detail::TmaConvParams p;
  fill_params(l, p);
  p.n_tiles = l.g.n_tiles;
  CK(cudaLaunchKernelEx(&cfg, cnnrt::cuda::tma_detail::conv_tma_kernel<BM, BN, STAGES, CL, false>,
                        l.tx, l.tw, p));
}

template <int BM, int BN, int STAGES, int CL>
static Variant make_variant(const char* name, int sms) {
  auto kern = cnnrt::cuda::tma_detail::conv_tma_kernel<BM, BN, STAGES, CL, false>;
  const size_t smem = cnnrt::cuda::tma_detail::TmaTile<BM, BN, STAGES, CL>::kSmem;
  prepare_image(reinterpret_cast<const void*>(kern), smem, name);
  int ctas = sms;
  if (CL > 1) {
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = cluster_config(sms / CL * CL, smem, CL, 0, attr);
    int clusters = 0;
    CK(cudaOccupancyMaxActiveClusters(&clusters, kern, &cfg));
    ctas = clusters > 0 ? clusters * CL : sms / CL * CL;
  }
  return Variant{
      name, BM, BN, CL, prepare_variant<BM, BN, STAGES, CL>, run_variant<BM, BN, STAGES, CL>, ctas};
}

// The dense weights-as-A instance (kernels/cuda/conv/tma_wa_kernel.cuh: M = out_c in tiles of
// BM, N = pixels in blocks of BN, the consumer warpgroups splitting N), suffix "wa".
template <int BM, int BN, int STAGES>
static Launch prepare_wa(const Variant& v, Geom g, const __half* x, const __half* w,
                         const float* bias, __half* y) {
  g.m_tiles = (g.oc + BM - 1) / BM;
  g.n_tiles = (g.m + BN - 1) / BN;
  g.units = g.m_tiles * g.n_tiles;
  return Launch{map_x(g, x), map_w(g, w, BM), g, std::min(v.ctas, g.units), bias, y};
}
template <int BM, int BN, int STAGES>
static void run_wa(const Launch& l, cudaStream_t st) {
  cnnrt::cuda::tma_detail::TmaWaParams p;
  fill_params(l, p);
  p.m_tiles = l.g.m_tiles;
  cnnrt::cuda::tma_detail::conv_tma_wa_kernel<BM, BN, STAGES, false>
      <<<l.grid, cnnrt::cuda::tma_detail::kThreads,
         cnnrt::cuda::tma_detail::wa_smem_bytes<BM, BN, STAGES, false>(), st>>>(l.tx, l.tw, p);
}
template <int BM, int BN, int STAGES>
static Variant make_wa_variant(const char* name, int sms) {
  auto kern = cnnrt::cuda::tma_detail::conv_tma_wa_kernel<BM, BN, STAGES, false>;
  const size_t smem = cnnrt::cuda::tma_detail::wa_smem_bytes<BM, BN, STAGES, false>();
  prepare_image(reinterpret_cast<const void*>(kern), smem, name);
  return Variant{name, BM, BN, 1, prepare_wa<BM, BN, STAGES>, run_wa<BM, BN, STAGES>, sms};
}

// The shifted-window conv (kernels/cuda/conv/tma_window_kernel.cuh): stride 1, no padding, 3x3,
// 64 channels in, out_c <= 64, a slab of two 128-pixel boxes; "win".  (Run 41b also timed "winb",
// the descriptor's base-offset field set to the row phase: wrong, since removed.)
static bool window_serves(const Geom& g) {
  return g.stride == 1 && g.pad == 0 && g.c == 64 && g.oc <= 64 && g.kh == 3 && g.kw == 3 &&
         (g.kh - 1) * g.w + g.kw - 1 + 128 <= 256;
}
static CUtensorMap map_rows(const Geom& g, const __half* x) {
  return map_2d(x, size_t(g.c), size_t(g.n) * g.h * g.w, 128, "rows");
}
static Launch prepare_window(const Variant& v, Geom g, const __half* x, const __half* w,
                             const float* bias, __half* y) {
  using namespace cnnrt::cuda::tma_window;
  const long long virt = (long long)g.n * g.h * g.w;
  g.units = int((virt + kWN - 1) / kWN);
  return Launch{map_rows(g, x), map_w(g, w, 64), g, std::min(v.ctas, g.units), bias, y};
}
static void run_window(const Launch& l, cudaStream_t st) {
  using namespace cnnrt::cuda::tma_window;
  TmaWindowParams p;
  p.bias = l.bias;
  p.y = l.y;
  p.out_c = l.g.oc;
  p.in_h = l.g.h;
  p.in_w = l.g.w;
  p.out_h = l.g.oh;
  p.out_w = l.g.ow;
  p.kh = l.g.kh;
  p.kw = l.g.kw;
  p.taps = l.g.kh * l.g.kw;
  p.c_steps = (l.g.c + 15) / 16;
  p.pixels = l.g.n * l.g.h * l.g.w;
  p.units = l.g.units;
  p.act = cnnrt::cuda::EpilogueClamp{1, 0.f, INFINITY};  // ReLU
  conv_window_kernel<WindowF16, 3, 3, 4>
      <<<l.grid, kThreads, smem_bytes<WindowF16>(p.taps), st>>>(l.tx, l.tw, p);
}
static Variant make_window_variant(const char* name, int sms) {
  using namespace cnnrt::cuda::tma_window;
  auto kern = conv_window_kernel<WindowF16, 3, 3, 4>;
  prepare_image(reinterpret_cast<const void*>(kern), smem_bytes<WindowF16>(kMaxTaps), name);
  return Variant{name, 64, kWN, 1, prepare_window, run_window, sms, window_serves};
}

static std::vector<Variant> all_variants(int sms) {
  return {
      make_variant<128, 128, 7, 1>("128x128s7v", sms),
      make_variant<128, 192, 5, 1>("128x192s5v", sms),
      make_variant<128, 256, 4, 1>("128x256s4v", sms),
      make_variant<256, 128, 4, 1>("256x128s4v", sms),
      make_variant<128, 192, 5, 2>("128x192s5c2v", sms),
      make_variant<128, 256, 4, 2>("128x256s4c2v", sms),
      make_variant<256, 128, 4, 2>("256x128s4c2v", sms),
      make_variant<256, 64, 5, 1>("256x64s5v", sms),
      make_variant<256, 64, 5, 2>("256x64s5c2v", sms),
      make_variant<384, 64, 4, 1>("384x64s4v", sms),
      make_variant<512, 64, 3, 1>("512x64s3v", sms),
      make_wa_variant<64, 256, 5>("64x256s5wa", sms),
      make_wa_variant<64, 384, 3>("64x384s3wa", sms),
      make_wa_variant<64, 512, 3>("64x512s3wa", sms),
      make_window_variant("win", sms),
  };
}
