// conv_fp16_window: the shifted-window Hopper conv (AlexNet conv1's inner conv) — host side
// (shape rule, weight upload, tensor maps, launch, the staged pool).  The kernel and its design
// note are tma_window_kernel.cuh; the lab that measured it is bench/conv_tma_lab.cu ("win").
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/s2d_quantise.cuh"
#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_window.h"
#include "kernels/cuda/conv/tma_window_kernel.cuh"
#include "kernels/cuda/conv/wgmma.h"
#include "kernels/cuda/conv/wgmma_common.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pool_fp16.h"

namespace cnnrt::cuda {

namespace {

using tma_window::TmaWindowParams;
using tma_window::TmaWindowS8Params;
using tma_window::TmaWindowS8QParams;
using tma_window::WindowF16;
using tma_window::WindowGeometry;
using tma_window::WindowS8;
using tma_window::WindowS8Q;
using KernelFn = void (*)(CUtensorMap, CUtensorMap, TmaWindowParams);
using KernelS8Fn = void (*)(CUtensorMap, CUtensorMap, TmaWindowS8Params);

// The fp16 instance of c_steps k16 steps per tap (3: 33-48 stored channels, 4: 49-64); the int8
// one (two k32 steps: 64 bytes per tap).
KernelFn kernel_of(int c_steps) {
  return c_steps == 3 ? tma_window::conv_window_kernel<WindowF16, 3, 3, 3>
                      : tma_window::conv_window_kernel<WindowF16, 3, 3, 4>;
}
// The int8 instance on C consumer warpgroups (2, or 3: tma_window_kernel.cuh's design note):
// its kernel, threads and shared memory, indexed by C - 2 (ConvS8Window keeps C).
struct WindowS8Launch {
  KernelS8Fn fn;
  int threads;
  size_t smem;
};
template <int C>
constexpr WindowS8Launch s8_launch() {
  return {tma_window::conv_window_kernel<WindowS8, 3, 3, 2, C>, tma_detail::TmaRoles<C>::kThreads,
          tma_window::smem_bytes<WindowS8, C>(tma_window::kMaxTaps)};
}
constexpr WindowS8Launch kS8Launches[] = {s8_launch<2>(), s8_launch<3>()};
// The two-consumer images, then the three-consumer one (another entry register count).
std::vector<tma::KernelImage> kernel_images() {
  const size_t smem = tma_window::smem_bytes<WindowF16>(tma_window::kMaxTaps);
  return {{reinterpret_cast<const void*>(kernel_of(3)), "window_c3", smem},
          {reinterpret_cast<const void*>(kernel_of(4)), "window_c4", smem},
          {reinterpret_cast<const void*>(kS8Launches[0].fn), "window_s8", kS8Launches[0].smem}};
}
// The pooling instance (three consumers; the pre-pool tensor's map besides).
constexpr auto kPoolKernel = tma_window::conv_window_pool_kernel<3>;
constexpr size_t kPoolSmem = tma_window::smem_bytes<tma_window::WindowS8P, 3>(tma_window::kMaxTaps);
std::vector<tma::KernelImage> kernel_images_x3() {
  return {{reinterpret_cast<const void*>(kS8Launches[1].fn), "window_s8_x3", kS8Launches[1].smem},
          {reinterpret_cast<const void*>(kPoolKernel), "window_s8_x3_pool", kPoolSmem}};
}
// The quantising instance (two producer and two consumer warpgroups: 128 at entry, its own
// setmaxnreg split).
constexpr auto kQuantiseKernel = tma_window::conv_window_kernel<WindowS8Q, 3, 3, 2, 2>;
constexpr size_t kQuantiseSmem = tma_window::smem_bytes<WindowS8Q, 2>(tma_window::kMaxTaps);
std::vector<tma::KernelImage> kernel_images_quantise() {
  return {{reinterpret_cast<const void*>(kQuantiseKernel), "window_s8_quantise", kQuantiseSmem}};
}
// Every instance starts at exactly its roles' entry registers (setmaxnreg: 168 for two
// consumers, 128 for three); their shared memory opted in.  Once per process.
void prepare_images(const char* kernel) {
  static const std::string problem = [] {
    std::string two = tma::register_problem(kernel_images(), tma_detail::TmaRoles<2>::kEntryRegs);
    const std::string three =
        tma::register_problem(kernel_images_x3(), tma_detail::TmaRoles<3>::kEntryRegs);
    if (!three.empty()) two += (two.empty() ? "" : "; ") + three;
    const std::string quantise =
        tma::register_problem(kernel_images_quantise(), 65536 / tma_window::kQuantiseCtaThreads);
    if (!quantise.empty()) two += (two.empty() ? "" : "; ") + quantise;
    return two;
  }();
  if (!problem.empty()) throw Error(std::string(kernel) + ": " + problem);
  tma::opt_in_smem(kernel_images());
  tma::opt_in_smem(kernel_images_x3());
  tma::opt_in_smem(kernel_images_quantise());
}
long long virtual_pixels(int in_h, int in_w, int batch) {
  return (long long)std::max(batch, 1) * in_h * in_w;
}
// One unit per CTA while they last (a small batch's latency: batch 1 is 26 units), then the
// persistent grid's one CTA per SM, its consumers alternating units.
int ctas_of(long long units, int sms) { return int(std::min<long long>(sms, units)); }
// The geometry of a 3x3 window conv over in_h x in_w (conv out_h x out_w) at `batch`.
void fill_geometry(WindowGeometry& p, int out_c, int in_h, int in_w, int out_h, int out_w,
                   int c_steps, int batch) {
  p.out_c = out_c;
  p.in_h = in_h;
  p.in_w = in_w;
  p.out_h = out_h;
  p.out_w = out_w;
  p.kh = p.kw = 3;
  p.taps = 9;
  p.c_steps = c_steps;
  const long long pixels = virtual_pixels(in_h, in_w, batch);
  p.pixels = int(pixels);
  p.units = (pixels + tma_window::kWN - 1) / tma_window::kWN;
}
// The int8 instances' parameters for `conv` at `batch`, writing y.
void fill_s8_params(TmaWindowS8Params& p, const S8Conv& conv, bool small_sums, void* y, int batch) {
  fill_geometry(p, conv.out_c, conv.in_h, conv.in_w, conv.out_h, conv.out_w, 2, std::max(batch, 1));
  p.bias = conv.bias;
  p.multiplier = conv.multiplier;
  p.y = static_cast<int8_t*>(y);
  p.out_stride = conv.out_stride;
  p.lo = conv.lo;
  p.hi = conv.hi;
  p.small_sums = small_sums ? 1 : 0;
}
// The window's rows fit the slab, the virtual pixels an int at a batch of 4096 (design note).
bool window_extent_ok(int in_h, int in_w) {
  return 2 * in_w + 2 + tma_window::kWN <= tma_window::kSlabRows &&
         (long long)in_h * in_w * 4096 < INT_MAX - 512;
}

}  // namespace

bool ConvFp16Window::supports(const ConvShape& shape, int stored_in_c) {
  if (!conv_shape_problem(shape).empty()) return false;
  ConvShape s = shape;
  s.derive();
  const ConvAttrs& a = s.conv;
  if (a.groups != 1 || a.dilation_h != 1 || a.dilation_w != 1 || a.stride_h != 1 ||
      a.stride_w != 1 || a.kernel_h != 3 || a.kernel_w != 3 || a.pad_h != 0 || a.pad_w != 0 ||
      a.pad_bottom() != 0 || a.pad_right() != 0 || s.residual)
    return false;
  if (s.in_c != 64 || stored_in_c % 8 != 0 || stored_in_c <= 32 || stored_in_c > s.in_c)
    return false;
  if (s.out_c % 8 != 0 || s.out_c > 64 || a.out_channels != s.out_c) return false;
  return window_extent_ok(s.in_h, s.in_w);
}

bool ConvFp16Window::device_supported() { return ConvFp16Wgmma::device_supported(); }

ConvFp16Window::ConvFp16Window(const ConvShape& shape, const float* weight, const float* bias,
                               int stored_in_c)
    : shape_(shape), stored_in_c_(stored_in_c) {
  shape_.derive();
  if (!supports(shape_, stored_in_c))
    throw Error(
        "conv_fp16_window: unsupported shape (needs a stride-1 unpadded 3x3 conv, groups 1, "
        "33-64 stored input channels, out_c <= 64 and % 8 == 0, in_w <= 63, no residual)");
  if (!device_supported())
    throw Error("conv_fp16_window: needs a compute capability 9.0 device and the sm_90a build");
  if (weight == nullptr) throw Error("conv_fp16_window: no weight");
  c_steps_ = (stored_in_c + 15) / 16;
  const DeviceTraits& device = device_traits();
  sms_ = std::max(device.sms, 1);
  if (device.smem_optin < tma_window::smem_bytes<WindowF16>(tma_window::kMaxTaps))
    throw Error("conv_fp16_window: the device offers too little shared memory per block");
  // [64 rows][9 taps x 64 channels]: one tap per 128-byte box row (rows past out_c zero; the
  // weights of the channels past stored_in_c are zero, as the caller's rewrite made them).
  const int k = 9 * shape_.in_c;
  bytes_ = upload_wgmma_weights(shape_, weight, bias, k, 64, &w_, &bias_);
  if (plan_only()) return;
  prepare_images("conv_fp16_window");
  tma::encode_weight_map("conv_fp16_window", &w_map_, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, w_,
                         size_t(k), 64, size_t(k) * sizeof(__half), 64, 64, 128);
}

ConvFp16Window::~ConvFp16Window() {
  cudaFree(w_);  // destructors never throw; a failed free leaks at worst
  cudaFree(bias_);
}

size_t ConvFp16Window::workspace_bytes(int batch) const {
  if (!shape_.pool) return 0;
  return size_t(std::max(batch, 1)) * shape_.conv_h * shape_.conv_w * shape_.out_c * sizeof(__half);
}
const char* ConvFp16Window::name() const {
  return shape_.pool ? "window_3x3_n128+maxpool" : "window_3x3_n128";
}

ConvWindowInput ConvFp16Window::encode_input(const void* x, int batch) const {
  ConvWindowInput input;
  input.x = x;
  input.batch = batch;
  // [virtual pixels][stored_in_c]: boxes of 128 pixels x 64 channels, the channels past the
  // stored ones and the pixels past the tensor zero-filled (tma_window_kernel.cuh).
  tma::encode_weight_map(
      "conv_fp16_window", &input.map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, x, size_t(stored_in_c_),
      size_t(virtual_pixels(shape_.in_h, shape_.in_w, batch)),
      size_t(stored_in_c_) * sizeof(__half), 64, 128, 128, "cuTensorMapEncodeTiled (input slab)");
  return input;
}

void ConvFp16Window::forward(const ConvWindowInput& input, void* y, cudaStream_t stream,
                             void* workspace) const {
  const int batch = std::max(input.batch, 1);
  if (shape_.pool && workspace == nullptr)
    throw Error("conv_fp16_window: the staged pool needs its workspace");
  TmaWindowParams p;
  fill_geometry(p, shape_.out_c, shape_.in_h, shape_.in_w, shape_.conv_h, shape_.conv_w, c_steps_,
                batch);
  p.bias = bias_;
  p.y = static_cast<__half*>(shape_.pool ? workspace : y);
  p.act = epilogue_clamp_of(shape_);
  launch_kernel(kernel_of(c_steps_), ctas_of(p.units, sms_), tma_window::kThreads,
                tma_window::smem_bytes<WindowF16>(tma_window::kMaxTaps), stream, input.map, w_map_,
                p);
  if (shape_.pool)
    maxpool_fp16(workspace, y, batch, shape_.out_c, shape_.conv_h, shape_.conv_w, *shape_.pool,
                 shape_.out_h, shape_.out_w, stream);
}

size_t ConvFp16Window::weight_bytes() const { return bytes_; }

// ---- conv_int8_window ----------------------------------------------------------------------

bool ConvS8Window::supports(const S8Conv& c, int stored_stride) {
  if (stored_stride == 0) stored_stride = c.in_stride;
  return stored_stride % 16 == 0 && stored_stride >= c.in_c && stored_stride <= 64 &&
         c.groups == 1 && c.kh == 3 && c.kw == 3 && c.stride_h == 1 && c.stride_w == 1 &&
         c.pad_h == 0 && c.pad_w == 0 && c.dil_h == 1 && c.dil_w == 1 && c.in_stride == 64 &&
         c.in_c <= 64 && c.out_c <= 64 && c.out_stride % 16 == 0 && c.out_stride <= 64 &&
         c.out_stride >= c.out_c && !c.float_output && c.k_pad == 9 * 64 && c.out_h == c.in_h - 2 &&
         c.out_w == c.in_w - 2 && window_extent_ok(c.in_h, c.in_w);
}

bool ConvS8Window::device_supported() { return ConvFp16Wgmma::device_supported(); }

// The quantising form's source box (tma_window_quantise.cuh's S2dSource): from column -pad_w
// rounded down to a multiple of 4, x' column j at box column 4j + shift.
static tma_window::S2dSource source_box(const S8SpaceToDepth& s2d) {
  tma_window::S2dSource src;
  src.h = s2d.h;
  src.w = s2d.w;
  src.pad_h = s2d.pad_h;
  src.pad_w = s2d.pad_w;
  src.col0 = -4 * ((s2d.pad_w + 3) / 4);
  src.shift = -src.col0 - s2d.pad_w;
  src.cols = (4 * s2d.blocks_w + src.shift + 3) / 4 * 4;
  src.box_bytes = uint32_t(4 * 3 * src.cols * 4);
  src.scale = s2d.input_scale;
  src.reciprocal = s2d_quantise::filter_reciprocal(s2d.input_scale);
  return src;
}

bool ConvS8Window::quantise_serves(const S8Conv& c, const S8SpaceToDepth& s2d) {
  const int span = tma_window::kWN + 2 * c.in_w + 2;  // the slab rows a unit's MMAs read
  const int rows_per_unit = (span - 1 + c.in_w - 1) / c.in_w + 1;
  return s2d.s == 4 && s2d.c == 3 && s2d.blocks_h == c.in_h && s2d.blocks_w == c.in_w &&
         c.in_c == 48 && s2d.pad_w % 2 == 0 && source_box(s2d).cols <= tma_window::kMaxCols &&
         rows_per_unit <= tma_window::kRing - 2 && s2d.pad_h >= 0 && s2d.pad_w >= 0 &&
         s2d.pad_h < 4 && s2d.pad_w < 4 && s2d.w % 4 == 0 && s2d.h > 0 && s2d.input_scale > 0 &&
         std::isfinite(s2d.input_scale);
}

bool ConvS8Window::pool_serves(const S8Conv& c, const NhwcPool& pool) {
  return pool.kh == 3 && pool.kw == 3 && pool.stride_h == 2 && pool.stride_w == 2 &&
         pool.pad_h == 0 && pool.pad_w == 0 && pool.c == c.out_c && pool.h == c.out_h &&
         pool.w == c.out_w && c.out_h >= 3 && c.out_w >= 3 && pool.out_h == (c.out_h - 3) / 2 + 1 &&
         pool.out_w == (c.out_w - 3) / 2 + 1 && padded16(pool.c) == c.out_stride &&
         c.out_w <= tma_window::kPoolMaxCols;
}

ConvS8Window::ConvS8Window(const S8Conv& conv, bool small_sums, int consumers, int stored_stride,
                           const S8SpaceToDepth* quantise_source, const NhwcPool* pool)
    : conv_(conv),
      small_sums_(small_sums),
      consumers_(consumers),
      stored_stride_(stored_stride == 0 ? conv.in_stride : stored_stride) {
  if (quantise_source != nullptr && quantise_serves(conv, *quantise_source)) {
    quantises_ = true;
    source_ = source_box(*quantise_source);
  }
  if (pool != nullptr && pool_serves(conv, *pool)) {
    pools_ = true;
    pool_ = *pool;
  }
  if (consumers != 0 && consumers != 2 && consumers != 3)
    throw Error("conv_int8_window: " + std::to_string(consumers) +
                " consumer warpgroups (2 or 3, or 0: by batch)");
  if (!supports(conv, stored_stride_))
    throw Error(
        "conv_int8_window: unsupported conv (needs a stride-1 unpadded 3x3 conv over a 64-byte "
        "channel stride, stored at 16-64 bytes a pixel, out_c <= 64, int8 output, in_w <= 63)");
  if (!device_supported())
    throw Error("conv_int8_window: needs a compute capability 9.0 device and the sm_90a build");
  const DeviceTraits& device = device_traits();
  sms_ = std::max(device.sms, 1);
  if (plan_only()) return;  // a described target: nothing uploaded, no maps
  if (conv.weight == nullptr || conv.bias == nullptr || conv.multiplier == nullptr)
    throw Error("conv_int8_window: the conv's weight, bias and multipliers must be uploaded");
  prepare_images("conv_int8_window");
  // [out_c][9 taps x 64 bytes]: one tap per 64-byte box row (rows past out_c: zeros).
  tma::encode_weight_map("conv_int8_window", &w_map_, CU_TENSOR_MAP_DATA_TYPE_UINT8, conv.weight,
                         size_t(conv.k_pad), size_t(conv.out_c), size_t(conv.k_pad), 64, 64, 64);
}

ConvWindowInput ConvS8Window::encode_input(const void* x, int batch) const {
  ConvWindowInput input;
  input.x = x;
  input.batch = batch;
  // [virtual pixels][stored_stride bytes]: boxes of 128 pixels x 64 bytes, the bytes past the
  // stored ones the TMA's zero fill (as conv_fp16_window reads x' at 48 channels).
  tma::encode_weight_map(
      "conv_int8_window", &input.map, CU_TENSOR_MAP_DATA_TYPE_UINT8, x, size_t(stored_stride_),
      size_t(virtual_pixels(conv_.in_h, conv_.in_w, batch)), size_t(stored_stride_), 64, 128, 64,
      "cuTensorMapEncodeTiled (input slab)");
  return input;
}

ConvWindowInput ConvS8Window::encode_source(const void* x, int batch) const {
  if (!quantises_) throw Error("conv_int8_window: not the quantising form");
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0)
    throw Error("conv_int8_window: the fp32 input must be 16-byte aligned");
  ConvWindowInput input;
  input.x = x;
  input.batch = batch;
  // fp32 NCHW {w, h, 3, n}: boxes of one x' row's 4 input rows x 3 channels x source_.cols
  // columns from source_.col0 (the padding is the TMA's zero fill), unswizzled.
  const tma_window::S2dSource& s = source_;
  const cuuint64_t dims[4] = {cuuint64_t(s.w), cuuint64_t(s.h), 3, cuuint64_t(std::max(batch, 1))};
  const cuuint64_t strides[3] = {cuuint64_t(s.w) * 4, cuuint64_t(s.h) * s.w * 4,
                                 cuuint64_t(3) * s.h * s.w * 4};
  const cuuint32_t box[4] = {cuuint32_t(s.cols), 4, 3, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  tma::check_encode(
      "conv_int8_window",
      tma::encode_tiled()(&input.map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, const_cast<void*>(x),
                          dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                          CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      "cuTensorMapEncodeTiled (fp32 source)");
  return input;
}

void ConvS8Window::forward_quantised(const ConvWindowInput& source, void* y,
                                     cudaStream_t stream) const {
  if (!quantises_) throw Error("conv_int8_window: not the quantising form");
  TmaWindowS8QParams p;
  fill_s8_params(p, conv_, small_sums_, y, source.batch);
  p.src = source_;
  launch_kernel(kQuantiseKernel, ctas_of(p.units, sms_), tma_window::kQuantiseCtaThreads,
                kQuantiseSmem, stream, source.map, w_map_, p);
}

size_t ConvS8Window::pool_count_bytes(int batch) const {
  return pools_ ? size_t(std::max(batch, 1)) * pool_bands() * sizeof(int) : 0;
}

ConvWindowPoolInput ConvS8Window::encode_pooled(const void* x, void* pre_pool, int batch) const {
  if (!pools_) throw Error("conv_int8_window: not the pooling form");
  if (reinterpret_cast<uintptr_t>(pre_pool) % 16 != 0)
    throw Error("conv_int8_window: the pre-pool tensor must be 16-byte aligned");
  ConvWindowPoolInput input;
  const ConvWindowInput slab = encode_input(x, batch);
  input.map = slab.map;
  input.x = x;
  input.pre_pool = pre_pool;
  input.batch = batch;
  // [n * out_h rows][out_w columns][out_stride bytes]: boxes of a band's five conv rows, whole
  // rows, unswizzled (tma_window_pool.cuh); rows past the tensor are the TMA's zero fill.
  const int stride = conv_.out_stride;
  const cuuint64_t dims[3] = {cuuint64_t(stride), cuuint64_t(conv_.out_w),
                              cuuint64_t(std::max(batch, 1)) * conv_.out_h};
  const cuuint64_t strides[2] = {cuuint64_t(stride), cuuint64_t(conv_.out_w) * stride};
  const cuuint32_t box[3] = {cuuint32_t(stride), cuuint32_t(conv_.out_w),
                             cuuint32_t(tma_window::kPoolBandConvRows)};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  tma::check_encode("conv_int8_window",
                    tma::encode_tiled()(
                        &input.pre, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, pre_pool, dims, strides, box,
                        element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                    "cuTensorMapEncodeTiled (pre-pool bands)");
  return input;
}

void ConvS8Window::forward_pooled(const ConvWindowPoolInput& input, void* y, int* count,
                                  cudaStream_t stream) const {
  if (!pools_) throw Error("conv_int8_window: not the pooling form");
  tma_window::TmaWindowS8PParams p;
  fill_s8_params(p, conv_, small_sums_, input.pre_pool, input.batch);
  p.pool.y = static_cast<int8_t*>(y);
  p.pool.count = count;
  p.pool.pool_h = pool_.out_h;
  p.pool.pool_w = pool_.out_w;
  p.pool.bands = pool_bands();
  launch_kernel(kPoolKernel, ctas_of(p.units, sms_), tma_detail::TmaRoles<3>::kThreads, kPoolSmem,
                stream, input.map, w_map_, input.pre, p);
}

int ConvS8Window::consumers_at(int batch) const {
  if (consumers_ != 0) return consumers_;
  const long long units =
      (virtual_pixels(conv_.in_h, conv_.in_w, batch) + tma_window::kWN - 1) / tma_window::kWN;
  return units > sms_ ? 3 : 2;
}

void ConvS8Window::forward(const ConvWindowInput& input, void* y, cudaStream_t stream,
                           int consumers) const {
  if (consumers != 2 && consumers != 3)
    throw Error("conv_int8_window: " + std::to_string(consumers) + " consumer warpgroups");
  TmaWindowS8Params p;
  fill_s8_params(p, conv_, small_sums_, y, input.batch);
  const WindowS8Launch& launch = kS8Launches[consumers - 2];
  launch_kernel(launch.fn, ctas_of(p.units, sms_), launch.threads, launch.smem, stream, input.map,
                w_map_, p);
}

}  // namespace cnnrt::cuda
