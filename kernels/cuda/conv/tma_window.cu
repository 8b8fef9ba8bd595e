// conv_fp16_window: the shifted-window Hopper conv (AlexNet conv1's inner conv) — host side
// (shape rule, weight upload, tensor maps, launch, the staged pool).  The kernel and its design
// note are tma_window_kernel.cuh; the lab that measured it is bench/conv_tma_lab.cu ("win").
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_window.h"
#include "kernels/cuda/conv/tma_window_kernel.cuh"
#include "kernels/cuda/conv/wgmma.h"
#include "kernels/cuda/conv/wgmma_common.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/pool_fp16.h"

namespace cnnrt::cuda {

namespace {

using tma_window::TmaWindowParams;
using KernelFn = void (*)(CUtensorMap, CUtensorMap, TmaWindowParams);

// The instance of c_steps k16 steps per tap (3: 33-48 stored channels, 4: 49-64).
KernelFn kernel_of(int c_steps) {
  return c_steps == 3 ? tma_window::conv_window_kernel<3, 3, 3, false>
                      : tma_window::conv_window_kernel<3, 3, 4, false>;
}
std::vector<tma::KernelImage> kernel_images() {
  const size_t smem = tma_window::smem_bytes(tma_window::kMaxTaps);
  return {{reinterpret_cast<const void*>(kernel_of(3)), "window_c3", smem},
          {reinterpret_cast<const void*>(kernel_of(4)), "window_c4", smem}};
}
void check_register_counts() {
  static const std::string problem = tma::register_problem(kernel_images(), tma_detail::kEntryRegs);
  if (!problem.empty()) throw Error("conv_fp16_window: " + problem);
}
long long virtual_pixels(const ConvShape& s, int batch) {
  return (long long)std::max(batch, 1) * s.in_h * s.in_w;
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
  // The window of 128 virtual pixels and its 3x3 halo within the 256-pixel slab.
  if (2 * s.in_w + 2 + tma_window::kWN > tma_window::kSlabRows) return false;
  // Virtual pixels (and the slab rows past them) stay within int at a batch of 4096.
  return (long long)s.in_h * s.in_w * 4096 < INT_MAX - 512;
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
  if (device.smem_optin < tma_window::smem_bytes(tma_window::kMaxTaps))
    throw Error("conv_fp16_window: the device offers too little shared memory per block");
  // [64 rows][9 taps x 64 channels]: one tap per 128-byte box row (rows past out_c zero; the
  // weights of the channels past stored_in_c are zero, as the caller's rewrite made them).
  const int k = 9 * shape_.in_c;
  bytes_ = upload_wgmma_weights(shape_, weight, bias, k, 64, &w_, &bias_);
  if (plan_only()) return;
  check_register_counts();
  tma::opt_in_smem(kernel_images());
  tma::encode_weight_map("conv_fp16_window", &w_map_, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, w_,
                         size_t(k), 64, size_t(k) * sizeof(__half), 64, 64, 128);
}

ConvFp16Window::~ConvFp16Window() {
  cudaFree(w_);  // destructors never throw; a failed free leaks at worst
  cudaFree(bias_);
}

long long ConvFp16Window::units(int batch) const {
  return (virtual_pixels(shape_, batch) + tma_window::kWN - 1) / tma_window::kWN;
}
// One unit per CTA while they last (a small batch's latency: batch 1 is 26 units), then the
// persistent grid's one CTA per SM, its consumers alternating units.
int ConvFp16Window::ctas(int batch) const { return int(std::min<long long>(sms_, units(batch))); }
size_t ConvFp16Window::workspace_bytes(int batch) const {
  if (!shape_.pool) return 0;
  return size_t(std::max(batch, 1)) * shape_.conv_h * shape_.conv_w * shape_.out_c * sizeof(__half);
}
const char* ConvFp16Window::name() const {
  return shape_.pool ? "window_3x3_n128+maxpool" : "window_3x3_n128";
}

ConvFp16WindowInput ConvFp16Window::encode_input(const void* x, int batch) const {
  ConvFp16WindowInput input;
  input.x = x;
  input.batch = batch;
  // [virtual pixels][stored_in_c]: boxes of 128 pixels x 64 channels, the channels past the
  // stored ones and the pixels past the tensor zero-filled (tma_window_kernel.cuh).
  tma::encode_weight_map("conv_fp16_window", &input.map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, x,
                         size_t(stored_in_c_), size_t(virtual_pixels(shape_, batch)),
                         size_t(stored_in_c_) * sizeof(__half), 64, 128, 128,
                         "cuTensorMapEncodeTiled (input slab)");
  return input;
}

void ConvFp16Window::forward(const ConvFp16WindowInput& input, void* y, cudaStream_t stream,
                             void* workspace) const {
  const int batch = std::max(input.batch, 1);
  if (shape_.pool && workspace == nullptr)
    throw Error("conv_fp16_window: the staged pool needs its workspace");
  TmaWindowParams p;
  p.bias = bias_;
  p.y = static_cast<__half*>(shape_.pool ? workspace : y);
  p.out_c = shape_.out_c;
  p.in_h = shape_.in_h;
  p.in_w = shape_.in_w;
  p.out_h = shape_.conv_h;
  p.out_w = shape_.conv_w;
  p.kh = p.kw = 3;
  p.taps = 9;
  p.c_steps = c_steps_;
  p.pixels = int(virtual_pixels(shape_, batch));
  p.units = units(batch);
  p.act = epilogue_clamp_of(shape_);
  kernel_of(c_steps_)<<<ctas(batch), tma_window::kThreads,
                        tma_window::smem_bytes(tma_window::kMaxTaps), stream>>>(input.map, w_map_,
                                                                                p);
  CNNRT_CUDA_CHECK_LAUNCH();
  if (shape_.pool)
    maxpool_fp16(workspace, y, batch, shape_.out_c, shape_.conv_h, shape_.conv_w, *shape_.pool,
                 shape_.out_h, shape_.out_w, stream);
}

size_t ConvFp16Window::weight_bytes() const { return bytes_; }

}  // namespace cnnrt::cuda
