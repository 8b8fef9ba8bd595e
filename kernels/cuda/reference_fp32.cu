// CUDA fp32 reference kernels (design note in reference_fp32.h): one thread per output element,
// grid-stride loops with 64-bit indices, the channel index fastest so neighbouring threads write
// neighbouring floats.  Each kernel body is the CPU reference's innermost computation
// (kernels/cpu/*.cpp) transcribed with NHWC/8 indexing: same window rules, same double
// accumulation in the same order, same rounding points — so the two agree to fp32 rounding and
// a disagreement is an indexing bug, not arithmetic.
#include <cmath>
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/reference_fp32.h"

namespace cnnrt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;  // grid-stride beyond this

int blocks_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

int stride8(int channels) { return (channels + 7) / 8 * 8; }

#define CNNRT_GRID_STRIDE_LOOP(index, total)                                        \
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; \
       index < (total); index += static_cast<int64_t>(gridDim.x) * blockDim.x)

// NaN passes through: `v < lo` and `v > hi` are both false for NaN.
__device__ __forceinline__ float clamp_value(float v, float lo, float hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// --- conv --------------------------------------------------------------------------------------

struct ConvArgs {
  int64_t batch;
  int c, h, w, c_stride;
  int oc, oh, ow, oc_stride;
  int kh, kw, sh, sw, ph, pw, dh, dw;
  int in_per_group, out_per_group;
};

__global__ void conv_kernel(const float* __restrict__ x, float* __restrict__ y, ConvArgs g,
                            const float* __restrict__ weight, const float* __restrict__ bias,
                            const float* __restrict__ residual, float lo, float hi) {
  pdl_wait();
  const int64_t total = g.batch * g.oh * g.ow * g.oc_stride;
  CNNRT_GRID_STRIDE_LOOP(index, total) {
    const int o = static_cast<int>(index % g.oc_stride);
    int64_t rest = index / g.oc_stride;
    const int ox = static_cast<int>(rest % g.ow);
    rest /= g.ow;
    const int oy = static_cast<int>(rest % g.oh);
    const int64_t n = rest / g.oh;
    if (o >= g.oc) {
      y[index] = 0.0f;
      continue;
    }
    const int group = o / g.out_per_group;
    double sum = bias != nullptr ? bias[o] : 0.0;
    for (int ci = 0; ci < g.in_per_group; ++ci) {
      const int channel = group * g.in_per_group + ci;
      for (int ky = 0; ky < g.kh; ++ky) {
        const int iy = oy * g.sh - g.ph + ky * g.dh;
        if (iy < 0 || iy >= g.h) continue;  // zero padding
        for (int kx = 0; kx < g.kw; ++kx) {
          const int ix = ox * g.sw - g.pw + kx * g.dw;
          if (ix < 0 || ix >= g.w) continue;
          const double xv = x[((n * g.h + iy) * g.w + ix) * g.c_stride + channel];
          const double wv =
              weight[((static_cast<int64_t>(o) * g.in_per_group + ci) * g.kh + ky) * g.kw + kx];
          sum += xv * wv;
        }
      }
    }
    if (residual != nullptr) sum += residual[index];
    y[index] = clamp_value(static_cast<float>(sum), lo, hi);
  }
}

// --- pools -------------------------------------------------------------------------------------

struct PoolArgs {
  int64_t batch;
  int c, h, w, c_stride, oh, ow;
  int kh, kw, sh, sw, ph, pw;
  bool count_include_pad;
};

// Decomposes an output index (channel fastest); false for a padding lane (written as 0).
__device__ __forceinline__ bool pool_output(const PoolArgs& g, int64_t index, int64_t& n, int& oy,
                                            int& ox, int& c) {
  c = static_cast<int>(index % g.c_stride);
  int64_t rest = index / g.c_stride;
  ox = static_cast<int>(rest % g.ow);
  rest /= g.ow;
  oy = static_cast<int>(rest % g.oh);
  n = rest / g.oh;
  return c < g.c;
}

__device__ __forceinline__ float pixel(const float* x, const PoolArgs& g, int64_t n, int iy, int ix,
                                       int c) {
  return x[((n * g.h + iy) * g.w + ix) * g.c_stride + c];
}

// Padding counts as -inf; NaN wins (as PyTorch and ref::maxpool2d).
__global__ void maxpool_kernel(const float* __restrict__ x, float* __restrict__ y, PoolArgs g) {
  pdl_wait();
  const int64_t total = g.batch * g.oh * g.ow * g.c_stride;
  CNNRT_GRID_STRIDE_LOOP(index, total) {
    int64_t n;
    int oy, ox, c;
    if (!pool_output(g, index, n, oy, ox, c)) {
      y[index] = 0.0f;
      continue;
    }
    float best = -INFINITY;
    for (int ky = 0; ky < g.kh && !isnan(best); ++ky) {
      const int iy = oy * g.sh - g.ph + ky;
      if (iy < 0 || iy >= g.h) continue;
      for (int kx = 0; kx < g.kw; ++kx) {
        const int ix = ox * g.sw - g.pw + kx;
        if (ix < 0 || ix >= g.w) continue;
        const float v = pixel(x, g, n, iy, ix, c);
        if (v > best || isnan(v)) best = v;
        if (isnan(best)) break;
      }
    }
    y[index] = best;
  }
}

// The window clipped to the padded input's bottom/right edge (a ceil_mode window may hang past
// it), then to the input; the divisor counts the first (count_include_pad) or the second.
__global__ void avgpool_kernel(const float* __restrict__ x, float* __restrict__ y, PoolArgs g) {
  pdl_wait();
  const int64_t total = g.batch * g.oh * g.ow * g.c_stride;
  CNNRT_GRID_STRIDE_LOOP(index, total) {
    int64_t n;
    int oy, ox, c;
    if (!pool_output(g, index, n, oy, ox, c)) {
      y[index] = 0.0f;
      continue;
    }
    const int y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
    const int y1_padded = min(y0 + g.kh, g.h + g.ph), x1_padded = min(x0 + g.kw, g.w + g.pw);
    const int padded_count = (y1_padded - y0) * (x1_padded - x0);
    const int ya = max(y0, 0), yb = min(y1_padded, g.h);
    const int xa = max(x0, 0), xb = min(x1_padded, g.w);
    double sum = 0.0;
    for (int iy = ya; iy < yb; ++iy)
      for (int ix = xa; ix < xb; ++ix) sum += pixel(x, g, n, iy, ix, c);
    const int divisor = g.count_include_pad ? padded_count : (yb - ya) * (xb - xa);
    y[index] = static_cast<float>(sum / divisor);
  }
}

__global__ void adaptive_avgpool_kernel(const float* __restrict__ x, float* __restrict__ y,
                                        PoolArgs g) {
  pdl_wait();
  const int64_t total = g.batch * g.oh * g.ow * g.c_stride;
  CNNRT_GRID_STRIDE_LOOP(index, total) {
    int64_t n;
    int oy, ox, c;
    if (!pool_output(g, index, n, oy, ox, c)) {
      y[index] = 0.0f;
      continue;
    }
    const int ya = static_cast<int>((static_cast<int64_t>(oy) * g.h) / g.oh);
    const int yb = static_cast<int>((static_cast<int64_t>(oy + 1) * g.h + g.oh - 1) / g.oh);
    const int xa = static_cast<int>((static_cast<int64_t>(ox) * g.w) / g.ow);
    const int xb = static_cast<int>((static_cast<int64_t>(ox + 1) * g.w + g.ow - 1) / g.ow);
    double sum = 0.0;
    for (int iy = ya; iy < yb; ++iy)
      for (int ix = xa; ix < xb; ++ix) sum += pixel(x, g, n, iy, ix, c);
    y[index] = static_cast<float>(sum / ((yb - ya) * (xb - xa)));
  }
}

// --- linear ------------------------------------------------------------------------------------

__global__ void linear_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t batch,
                              int in_features, int in_stride, const float* __restrict__ weight,
                              const float* __restrict__ bias, int out_features, int out_stride,
                              float lo, float hi) {
  pdl_wait();
  CNNRT_GRID_STRIDE_LOOP(index, batch * out_stride) {
    const int o = static_cast<int>(index % out_stride);
    const int64_t n = index / out_stride;
    if (o >= out_features) {
      y[index] = 0.0f;
      continue;
    }
    double sum = bias[o];
    const float* row = weight + static_cast<int64_t>(o) * in_stride;
    const float* input = x + n * in_stride;
    for (int i = 0; i < in_features; ++i)
      sum += static_cast<double>(input[i]) * static_cast<double>(row[i]);
    y[index] = clamp_value(static_cast<float>(sum), lo, hi);
  }
}

// --- row-wise ops (elementwise, per channel, over the channels of a row) -----------------------

__global__ void clamp_kernel(const float* x, float* y, int64_t total, int channels, int stride,
                             float lo, float hi) {
  pdl_wait();
  CNNRT_GRID_STRIDE_LOOP(index, total) {
    const int c = static_cast<int>(index % stride);
    y[index] = c < channels ? clamp_value(x[index], lo, hi) : 0.0f;
  }
}

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t total, int channels,
                           int stride, float lo, float hi) {
  pdl_wait();
  CNNRT_GRID_STRIDE_LOOP(index, total) {
    const int c = static_cast<int>(index % stride);
    y[index] = c < channels ? clamp_value(a[index] + b[index], lo, hi) : 0.0f;
  }
}

__global__ void batchnorm_kernel(const float* x, float* y, int64_t total, int channels, int stride,
                                 const float* __restrict__ gamma, const float* __restrict__ beta,
                                 const float* __restrict__ mean, const float* __restrict__ var,
                                 float eps, float lo, float hi) {
  pdl_wait();
  CNNRT_GRID_STRIDE_LOOP(index, total) {
    const int c = static_cast<int>(index % stride);
    if (c >= channels) {
      y[index] = 0.0f;
      continue;
    }
    const double scale = static_cast<double>(gamma[c]) /
                         sqrt(static_cast<double>(var[c]) + static_cast<double>(eps));
    const double value =
        (static_cast<double>(x[index]) - static_cast<double>(mean[c])) * scale + beta[c];
    y[index] = clamp_value(static_cast<float>(value), lo, hi);
  }
}

// One thread per row: it reads its row completely before writing it, so x == y is safe.
__global__ void softmax_kernel(const float* x, float* y, int64_t rows, int channels, int stride) {
  pdl_wait();
  CNNRT_GRID_STRIDE_LOOP(row, rows) {
    const float* in = x + row * stride;
    float* out = y + row * stride;
    float row_max = in[0];
    for (int c = 1; c < channels; ++c) row_max = fmaxf(row_max, in[c]);
    double denominator = 0.0;
    for (int c = 0; c < channels; ++c) denominator += exp(static_cast<double>(in[c]) - row_max);
    for (int c = 0; c < channels; ++c)
      out[c] = static_cast<float>(exp(static_cast<double>(in[c]) - row_max) / denominator);
    for (int c = channels; c < stride; ++c) out[c] = 0.0f;
  }
}

// alpha_over_size is alpha / size rounded to float, as the CPU reference computes it.
__global__ void lrn_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t total,
                           int channels, int stride, int before, int after, float k,
                           float alpha_over_size, float beta) {
  pdl_wait();
  CNNRT_GRID_STRIDE_LOOP(index, total) {
    const int c = static_cast<int>(index % stride);
    if (c >= channels) {
      y[index] = 0.0f;
      continue;
    }
    const float* row = x + (index - c);
    double square_sum = 0.0;
    for (int cc = max(0, c - before); cc <= min(channels - 1, c + after); ++cc) {
      const double v = row[cc];
      square_sum += v * v;
    }
    const double divisor =
        pow(static_cast<double>(k) + alpha_over_size * square_sum, static_cast<double>(beta));
    y[index] = static_cast<float>(static_cast<double>(x[index]) / divisor);
  }
}

// Copies input i's real channels into its slice of each output row.
__global__ void concat_slice_kernel(const float* __restrict__ x, float* __restrict__ y,
                                    int64_t rows, int channels, int in_stride, int out_offset,
                                    int out_stride) {
  pdl_wait();
  CNNRT_GRID_STRIDE_LOOP(index, rows * channels) {
    const int c = static_cast<int>(index % channels);
    const int64_t row = index / channels;
    y[row * out_stride + out_offset + c] = x[row * in_stride + c];
  }
}

// Zeros lanes [first, stride) of every row.
__global__ void zero_tail_kernel(float* y, int64_t rows, int first, int stride) {
  pdl_wait();
  const int width = stride - first;
  CNNRT_GRID_STRIDE_LOOP(index, rows * width) {
    const int64_t row = index / width;
    y[row * stride + first + static_cast<int>(index % width)] = 0.0f;
  }
}

__global__ void flatten_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t batch,
                               int channels, int64_t pixels, int c_stride, int64_t out_stride) {
  pdl_wait();
  CNNRT_GRID_STRIDE_LOOP(index, batch * out_stride) {
    const int64_t n = index / out_stride;
    const int64_t feature = index - n * out_stride;
    float value = 0.0f;
    if (feature < pixels * channels) {
      const int64_t pixel = feature / channels;
      value = x[(n * pixels + pixel) * c_stride + (feature - pixel * channels)];
    }
    y[index] = value;
  }
}

// --- host side ---------------------------------------------------------------------------------

void check_map(const char* what, const Fp32Map& map) {
  if (map.batch < 1 || map.channels < 1 || map.height < 1 || map.width < 1)
    throw Error(std::string(what) + ": bad map " + std::to_string(map.batch) + "x" +
                std::to_string(map.channels) + "x" + std::to_string(map.height) + "x" +
                std::to_string(map.width));
}

void check_rows(const char* what, const Fp32Rows& rows) {
  if (rows.rows < 1 || rows.channels < 1 || rows.stride != stride8(rows.channels))
    throw Error(std::string(what) + ": bad rows " + std::to_string(rows.rows) + "x" +
                std::to_string(rows.channels) + " (stride " + std::to_string(rows.stride) + ")");
}

PoolArgs pool_args(const Fp32Map& in, int out_h, int out_w) {
  PoolArgs g{};
  g.batch = in.batch;
  g.c = in.channels;
  g.h = in.height;
  g.w = in.width;
  g.c_stride = stride8(in.channels);
  g.oh = out_h;
  g.ow = out_w;
  return g;
}

PoolArgs pool_args(const Fp32Map& in, const PoolAttrs& a, int out_h, int out_w) {
  if (a.kernel_h < 1 || a.kernel_w < 1 || a.stride_h < 1 || a.stride_w < 1 || a.pad_h < 0 ||
      a.pad_w < 0 || out_h < 1 || out_w < 1)
    throw Error("fp32 pool: invalid attributes");
  PoolArgs g = pool_args(in, out_h, out_w);
  g.kh = a.kernel_h;
  g.kw = a.kernel_w;
  g.sh = a.stride_h;
  g.sw = a.stride_w;
  g.ph = a.pad_h;
  g.pw = a.pad_w;
  g.count_include_pad = a.count_include_pad;
  return g;
}

}  // namespace

Fp32Rows fp32_rows(const Shape& shape, int64_t batch) {
  Fp32Rows rows;
  if (shape.size() == 3) {
    rows.rows = batch * shape[1] * shape[2];
  } else if (shape.size() == 1) {
    rows.rows = batch;
  } else {
    throw Error("CUDA layout defines [C, H, W] and [F] tensors only, got " +
                shape_to_string(shape));
  }
  rows.channels = static_cast<int>(shape[0]);
  rows.stride = stride8(rows.channels);
  return rows;
}

void conv2d_fp32(const float* x, float* y, const Fp32ConvGeometry& geometry, const float* weight,
                 const float* bias, const float* residual, Fp32Clamp clamp, cudaStream_t stream) {
  check_map("conv2d_fp32", geometry.input);
  const ConvAttrs& a = geometry.attrs;
  if (a.groups < 1 || geometry.input.channels % a.groups != 0 ||
      geometry.out_channels % a.groups != 0 || a.kernel_h < 1 || a.kernel_w < 1 || a.stride_h < 1 ||
      a.stride_w < 1 || a.dilation_h < 1 || a.dilation_w < 1 || geometry.out_height < 1 ||
      geometry.out_width < 1)
    throw Error("conv2d_fp32: invalid attributes");
  ConvArgs g{};
  g.batch = geometry.input.batch;
  g.c = geometry.input.channels;
  g.h = geometry.input.height;
  g.w = geometry.input.width;
  g.c_stride = stride8(g.c);
  g.oc = geometry.out_channels;
  g.oh = geometry.out_height;
  g.ow = geometry.out_width;
  g.oc_stride = stride8(g.oc);
  g.kh = a.kernel_h;
  g.kw = a.kernel_w;
  g.sh = a.stride_h;
  g.sw = a.stride_w;
  g.ph = a.pad_h;
  g.pw = a.pad_w;
  g.dh = a.dilation_h;
  g.dw = a.dilation_w;
  g.in_per_group = g.c / a.groups;
  g.out_per_group = g.oc / a.groups;
  const int64_t total = g.batch * g.oh * g.ow * g.oc_stride;
  launch_kernel(conv_kernel, blocks_for(total), kThreads, 0, stream, x, y, g, weight, bias,
                residual, clamp.lo, clamp.hi);
}

void maxpool_fp32(const float* x, float* y, const Fp32Map& input, const PoolAttrs& attrs, int out_h,
                  int out_w, cudaStream_t stream) {
  check_map("maxpool_fp32", input);
  const PoolArgs g = pool_args(input, attrs, out_h, out_w);
  launch_kernel(maxpool_kernel, blocks_for(g.batch * g.oh * g.ow * g.c_stride), kThreads, 0, stream,
                x, y, g);
}

void avgpool_fp32(const float* x, float* y, const Fp32Map& input, const PoolAttrs& attrs, int out_h,
                  int out_w, cudaStream_t stream) {
  check_map("avgpool_fp32", input);
  const PoolArgs g = pool_args(input, attrs, out_h, out_w);
  launch_kernel(avgpool_kernel, blocks_for(g.batch * g.oh * g.ow * g.c_stride), kThreads, 0, stream,
                x, y, g);
}

void adaptive_avgpool_fp32(const float* x, float* y, const Fp32Map& input, int out_h, int out_w,
                           cudaStream_t stream) {
  check_map("adaptive_avgpool_fp32", input);
  if (out_h < 1 || out_w < 1) throw Error("adaptive_avgpool_fp32: output size must be positive");
  const PoolArgs g = pool_args(input, out_h, out_w);
  launch_kernel(adaptive_avgpool_kernel, blocks_for(g.batch * g.oh * g.ow * g.c_stride), kThreads,
                0, stream, x, y, g);
}

void linear_fp32(const float* x, float* y, int64_t batch, int in_features, int in_stride,
                 const float* weight, const float* bias, int out_features, int out_stride,
                 Fp32Clamp clamp, cudaStream_t stream) {
  if (batch < 1 || in_features < 1 || out_features < 1 || in_stride != stride8(in_features) ||
      out_stride != stride8(out_features) || weight == nullptr || bias == nullptr)
    throw Error("linear_fp32: bad sizes or missing packed weights");
  launch_kernel(linear_kernel, blocks_for(batch * out_stride), kThreads, 0, stream, x, y, batch,
                in_features, in_stride, weight, bias, out_features, out_stride, clamp.lo, clamp.hi);
}

void clamp_fp32(const float* x, float* y, const Fp32Rows& rows, Fp32Clamp clamp,
                cudaStream_t stream) {
  check_rows("clamp_fp32", rows);
  launch_kernel(clamp_kernel, blocks_for(rows.elements()), kThreads, 0, stream, x, y,
                rows.elements(), rows.channels, rows.stride, clamp.lo, clamp.hi);
}

void add_fp32(const float* a, const float* b, float* y, const Fp32Rows& rows, Fp32Clamp clamp,
              cudaStream_t stream) {
  check_rows("add_fp32", rows);
  launch_kernel(add_kernel, blocks_for(rows.elements()), kThreads, 0, stream, a, b, y,
                rows.elements(), rows.channels, rows.stride, clamp.lo, clamp.hi);
}

void batchnorm_fp32(const float* x, float* y, const Fp32Rows& rows, const float* gamma,
                    const float* beta, const float* mean, const float* var, float eps,
                    Fp32Clamp clamp, cudaStream_t stream) {
  check_rows("batchnorm_fp32", rows);
  launch_kernel(batchnorm_kernel, blocks_for(rows.elements()), kThreads, 0, stream, x, y,
                rows.elements(), rows.channels, rows.stride, gamma, beta, mean, var, eps, clamp.lo,
                clamp.hi);
}

void softmax_fp32(const float* x, float* y, const Fp32Rows& rows, cudaStream_t stream) {
  check_rows("softmax_fp32", rows);
  launch_kernel(softmax_kernel, blocks_for(rows.rows), kThreads, 0, stream, x, y, rows.rows,
                rows.channels, rows.stride);
}

void lrn_fp32(const float* x, float* y, const Fp32Rows& rows, const LRNAttrs& attrs,
              cudaStream_t stream) {
  check_rows("lrn_fp32", rows);
  if (attrs.size < 1) throw Error("lrn_fp32: size must be positive");
  if (x == y) throw Error("lrn_fp32: x and y must not alias");
  const float alpha_over_size = attrs.alpha / attrs.size;  // float, as ref::lrn computes it
  launch_kernel(lrn_kernel, blocks_for(rows.elements()), kThreads, 0, stream, x, y, rows.elements(),
                rows.channels, rows.stride, attrs.size / 2, (attrs.size - 1) / 2, attrs.k,
                alpha_over_size, attrs.beta);
}

void concat_fp32(const std::vector<const float*>& inputs, const std::vector<int>& channels,
                 float* y, int64_t rows, cudaStream_t stream) {
  if (inputs.empty() || inputs.size() != channels.size() || rows < 1)
    throw Error("concat_fp32: one channel count per input needed");
  int total = 0;
  for (int c : channels) {
    if (c < 1) throw Error("concat_fp32: empty input");
    total += c;
  }
  const int out_stride = stride8(total);
  int offset = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == y) throw Error("concat_fp32: the output must not alias an input");
    launch_kernel(concat_slice_kernel, blocks_for(rows * channels[i]), kThreads, 0, stream,
                  inputs[i], y, rows, channels[i], stride8(channels[i]), offset, out_stride);
    offset += channels[i];
  }
  if (out_stride > total) {
    launch_kernel(zero_tail_kernel, blocks_for(rows * (out_stride - total)), kThreads, 0, stream, y,
                  rows, total, out_stride);
  }
}

void flatten_fp32(const float* x, float* y, const Fp32Map& input, cudaStream_t stream) {
  check_map("flatten_fp32", input);
  if (x == y) throw Error("flatten_fp32: compacting cannot run in place");
  const int64_t pixels = static_cast<int64_t>(input.height) * input.width;
  const int64_t out_stride = (pixels * input.channels + 7) / 8 * 8;
  launch_kernel(flatten_kernel, blocks_for(input.batch * out_stride), kThreads, 0, stream, x, y,
                input.batch, input.channels, pixels, stride8(input.channels), out_stride);
}

void copy_fp32(const float* x, float* y, int64_t count, cudaStream_t stream) {
  if (x == y || count <= 0) return;
  CNNRT_CUDA_CHECK(cudaMemcpyAsync(y, x, static_cast<size_t>(count) * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream));
}

}  // namespace cnnrt::cuda
