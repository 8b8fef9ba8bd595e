// im2col + cuBLASLt convolution baseline.
//
// Design: the NHWC padded layout makes im2col a gather of whole 16-byte channel vectors: row
// (n, oy, ox) of the column matrix is the kh×kw window's pixel vectors laid end to end, so one
// thread copies one vector and the zero padding channels come along for free.  The GEMM is the
// linear layer's LtGemm (y[p][oc] = cols[p][k] · W[oc][k]ᵀ + b, ReLU in the epilogue), writing
// NHWC directly because the output rows are pixels.  The column matrix is kh·kw times the input
// (AlexNet conv1 at batch 256 would be 1.5 GB), so it is built in chunks of whole samples capped
// at kChunkBytes and the GEMM runs per chunk.  A fused max-pool reads the full pre-pool tensor
// from the workspace (this baseline does not fuse it; that is the point of the comparison).
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/im2col_gemm.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/linear_fp16.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/pool_fp16.h"

namespace cnnrt::cuda {

namespace {

constexpr int kThreads = 256;
// Cap on one im2col chunk: large enough that the GEMM of one chunk fills the GPU (AlexNet conv1:
// ~14 samples of 18 MB), small enough to keep the baseline's workspace reasonable.
constexpr size_t kChunkBytes = size_t{256} << 20;
constexpr size_t kAlign = 256;

size_t align_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

__global__ void im2col_kernel(const uint4* __restrict__ x, uint4* __restrict__ cols, int64_t batch,
                              int groups8, int h, int w, int kh, int kw, int stride_h, int stride_w,
                              int pad_h, int pad_w, int dil_h, int dil_w, int oh, int ow) {
  pdl_wait();
  const int row_vectors = kh * kw * groups8;
  const int64_t total = batch * oh * ow * row_vectors;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / row_vectors;
    int col = static_cast<int>(i - row * row_vectors);
    const int group = col % groups8;
    col /= groups8;
    const int kx = col % kw, ky = col / kw;
    const int ox = static_cast<int>(row % ow);
    const int oy = static_cast<int>((row / ow) % oh);
    const int64_t n = row / (static_cast<int64_t>(ow) * oh);
    const int iy = oy * stride_h - pad_h + ky * dil_h;
    const int ix = ox * stride_w - pad_w + kx * dil_w;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (iy >= 0 && iy < h && ix >= 0 && ix < w)
      value = x[((n * h + iy) * w + ix) * groups8 + group];
    cols[i] = value;
  }
}

}  // namespace

void im2col_nhwc_fp16(const void* x, void* cols, int64_t batch, int c, int h, int w,
                      const ConvAttrs& conv, int oh, int ow, cudaStream_t stream) {
  const int groups8 = static_cast<int>(round_up8(c) / 8);
  const int64_t work = batch * oh * ow * conv.kernel_h * conv.kernel_w * groups8;
  if (work == 0) return;
  const int grid = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>((work + kThreads - 1) / kThreads, 132 * 16)));
  launch_kernel(im2col_kernel, grid, kThreads, 0, stream, static_cast<const uint4*>(x),
                static_cast<uint4*>(cols), batch, groups8, h, w, conv.kernel_h, conv.kernel_w,
                conv.stride_h, conv.stride_w, conv.pad_h, conv.pad_w, conv.dilation_h,
                conv.dilation_w, oh, ow);
}

struct Im2colGemmConv::Impl {
  ConvShape shape;
  int k_pad = 0;  // kh*kw*pad8(in_c)
  std::unique_ptr<GemmWeights> weights;
  std::unique_ptr<LtGemm> gemm;

  size_t cols_bytes_per_sample() const {
    return static_cast<size_t>(shape.conv_h) * shape.conv_w * k_pad * sizeof(__half);
  }
  int64_t samples_per_chunk() const {
    return std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / cols_bytes_per_sample()));
  }
  size_t pre_pool_bytes(int64_t batch) const {
    if (!shape.pool) return 0;
    return static_cast<size_t>(batch) * shape.conv_h * shape.conv_w * round_up8(shape.out_c) *
           sizeof(__half);
  }
};

bool Im2colGemmConv::supports(const ConvShape& shape) {
  return shape.conv.groups == 1 && shape.identity_or_relu() && conv_shape_problem(shape).empty();
}

Im2colGemmConv::Im2colGemmConv(const ConvShape& shape_in, const float* weight, const float* bias)
    : impl_(std::make_unique<Impl>()) {
  if (!supports(shape_in))
    throw Error("im2col_cublas_conv: needs groups 1 and an identity or ReLU activation");
  Impl& s = *impl_;
  s.shape = shape_in;
  s.shape.derive();
  const ConvShape& shape = s.shape;
  const int c = shape.in_c, c_pad = static_cast<int>(round_up8(c));
  const int kh = shape.conv.kernel_h, kw = shape.conv.kernel_w;
  s.k_pad = kh * kw * c_pad;
  HostGemmWeights host;
  host.rows_pad = static_cast<int>(round_up8(shape.out_c));
  host.cols_pad = s.k_pad;
  host.weight.assign(static_cast<size_t>(host.rows_pad) * host.cols_pad, 0.0f);
  host.bias.assign(host.rows_pad, 0.0f);
  for (int o = 0; o < shape.out_c; ++o) {
    if (bias != nullptr) host.bias[o] = bias[o];
    for (int ci = 0; ci < c; ++ci)
      for (int y = 0; y < kh; ++y)
        for (int x = 0; x < kw; ++x)
          host.weight[static_cast<size_t>(o) * s.k_pad + (y * kw + x) * c_pad + ci] =
              weight[((static_cast<size_t>(o) * c + ci) * kh + y) * kw + x];
  }
  s.weights = std::make_unique<GemmWeights>(host);
  s.gemm = std::make_unique<LtGemm>(*s.weights, shape.clamps());
}

Im2colGemmConv::~Im2colGemmConv() = default;

size_t Im2colGemmConv::workspace_bytes(int64_t batch) const {
  const Impl& s = *impl_;
  const int64_t chunk = std::min<int64_t>(std::max<int64_t>(batch, 1), s.samples_per_chunk());
  return align_up(s.pre_pool_bytes(batch)) + align_up(chunk * s.cols_bytes_per_sample()) +
         LtGemm::kWorkspaceBytes;
}

namespace {

// The GEMM plans of one batch: chunks of `chunk` samples, the last one `tail` samples.  Chunk
// pointers are 16-byte aligned (whole NHWC samples with channels padded to 8).
struct Im2colPlans {
  int64_t batch = 0;
  std::shared_ptr<const LtGemm::Plan> full, tail;
};

}  // namespace

std::shared_ptr<const void> Im2colGemmConv::plan(int64_t batch) const {
  const Impl& s = *impl_;
  auto plans = std::make_shared<Im2colPlans>();
  plans->batch = batch;
  const int64_t chunk = std::min<int64_t>(std::max<int64_t>(batch, 1), s.samples_per_chunk());
  const int64_t pixels = static_cast<int64_t>(s.shape.conv_h) * s.shape.conv_w;
  plans->full = s.gemm->plan(chunk * pixels, 16);
  const int64_t tail = batch % chunk;
  plans->tail = tail == 0 ? plans->full : s.gemm->plan(tail * pixels, 16);
  return plans;
}

void Im2colGemmConv::forward(const void* x, void* y, int64_t batch, void* workspace,
                             const void* plan, cudaStream_t stream) const {
  const Impl& s = *impl_;
  const ConvShape& p = s.shape;
  if (batch == 0) return;
  if (workspace == nullptr) throw Error("im2col_cublas_conv: no workspace");
  const auto* plans = static_cast<const Im2colPlans*>(plan);
  if (plans == nullptr || plans->batch != batch)
    throw Error("im2col_cublas_conv: run without the plan of its batch");
  char* ws = static_cast<char*>(workspace);
  void* conv_out = p.pool ? static_cast<void*>(ws) : y;
  ws += align_up(s.pre_pool_bytes(batch));
  void* cols = ws;
  const int64_t chunk = std::min<int64_t>(batch, s.samples_per_chunk());
  ws += align_up(chunk * s.cols_bytes_per_sample());
  void* lt_workspace = ws;

  const auto* x_bytes = static_cast<const char*>(x);
  auto* out_bytes = static_cast<char*>(conv_out);
  const size_t x_sample = static_cast<size_t>(p.in_h) * p.in_w * round_up8(p.in_c) * sizeof(__half);
  const int64_t pixels = static_cast<int64_t>(p.conv_h) * p.conv_w;
  const size_t out_sample = static_cast<size_t>(pixels) * round_up8(p.out_c) * sizeof(__half);
  for (int64_t done = 0; done < batch; done += chunk) {
    const int64_t n = std::min(chunk, batch - done);
    im2col_nhwc_fp16(x_bytes + done * x_sample, cols, n, p.in_c, p.in_h, p.in_w, p.conv, p.conv_h,
                     p.conv_w, stream);
    s.gemm->run(n == chunk ? *plans->full : *plans->tail, cols, out_bytes + done * out_sample,
                lt_workspace, stream);
  }
  if (p.pool)
    maxpool_fp16(conv_out, y, batch, p.out_c, p.conv_h, p.conv_w, *p.pool, p.out_h, p.out_w,
                 stream);
}

size_t Im2colGemmConv::weight_bytes() const { return impl_->weights->bytes(); }

}  // namespace cnnrt::cuda
