// conv_lab's --linear-s8 table: every batch tile of the int8 TMA linear (linear_int8_tma,
// kernels/cuda/linear_s8_tma.cu) on AlexNet fc6, fc7 and fc8 at batch 64, 128 and 256, each with
// its K split, its cost-model time and the model's pick marked "*", and each output checked to the
// byte against the pick's.  The time is the layer's: the GEMM and its finishing pass, with the L2
// flushed before every launch (in the network the weights come from DRAM: the convolutions before
// them leave none of their lines in L2).  Random int8 weights and inputs, random multipliers.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/conv_lab.h"
#include "bench/event_timing.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/linear_s8_tma.h"

namespace conv_lab {
namespace {

struct LinearLayer {
  const char* name;
  int in, out;
  bool float_output;  // fc8 is the graph output: fp32 rows
};
constexpr LinearLayer kLinears[] = {
    {"fc6+relu", 9216, 4096, false}, {"fc7+relu", 4096, 4096, false}, {"fc8", 4096, 1000, true}};

// The layer as the int8 linear entries describe it (linear_s8_tma_serves), its weight, bias and
// multipliers random on the device.
cnnrt::cuda::S8Conv upload_linear(const LinearLayer& l, std::mt19937& rng) {
  cnnrt::cuda::S8Conv c;
  c.in_c = l.in;
  c.in_h = c.in_w = c.out_h = c.out_w = 1;
  c.in_stride = cnnrt::cuda::padded16(l.in);
  c.out_c = l.out;
  c.out_stride = l.float_output ? (l.out + 7) / 8 * 8 : cnnrt::cuda::padded16(l.out);
  c.k_total = c.in_stride;
  c.k_pad = (c.k_total + 63) / 64 * 64;
  c.float_output = l.float_output;
  c.lo = 0;  // ReLU
  c.float_lo = -1e30f;
  c.float_hi = 1e30f;
  std::uniform_int_distribution<int> w(-127, 127), b(-4000, 4000);
  std::uniform_real_distribution<float> m(2e-4f, 6e-4f);  // ~ sqrt(K) * 127 sums onto int8
  std::vector<int8_t> rows(size_t(l.out) * c.k_pad, 0);
  for (int o = 0; o < l.out; ++o)
    for (int k = 0; k < l.in; ++k) rows[size_t(o) * c.k_pad + k] = int8_t(w(rng));
  std::vector<int32_t> bias(l.out);
  std::vector<float> mult(l.out);
  for (int o = 0; o < l.out; ++o) {
    bias[o] = b(rng);
    mult[o] = m(rng);
  }
  c.weight = static_cast<const int8_t*>(to_device(rows.data(), rows.size()));
  c.bias = static_cast<const int32_t*>(to_device(bias.data(), bias.size() * sizeof(int32_t)));
  c.multiplier = static_cast<const float*>(to_device(mult.data(), mult.size() * sizeof(float)));
  return c;
}

}  // namespace

void run_linear_s8_lab(int iters, cudaStream_t stream) {
  using cnnrt::cuda::LinearS8Tma;
  using cnnrt::cuda::LinearS8TmaPlan;
  if (!LinearS8Tma::device_supported()) {
    std::printf("--linear-s8: needs sm_90a (wgmma)\n");
    return;
  }
  std::mt19937 rng(4242);
  const size_t flush_bytes = size_t(256) << 20;  // past the L2 of any Hopper part
  void* flush = nullptr;
  CNNRT_CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
  const auto flush_l2 = [&] { CNNRT_CUDA_CHECK(cudaMemsetAsync(flush, 1, flush_bytes, stream)); };
  for (const LinearLayer& l : kLinears) {
    const cnnrt::cuda::S8Conv conv = upload_linear(l, rng);
    const LinearS8Tma kernel(conv);
    for (const int batch : {64, 128, 256}) {
      const size_t in_bytes = size_t(batch) * conv.in_stride;
      const size_t out_bytes =
          size_t(batch) * conv.out_stride * (conv.float_output ? sizeof(float) : 1);
      std::vector<int8_t> x_host(in_bytes, 0);
      std::uniform_int_distribution<int> v(0, 127);  // post-ReLU activations
      for (size_t i = 0; i < in_bytes; ++i)
        x_host[i] = int(i % conv.in_stride) < l.in ? int8_t(v(rng)) : int8_t(0);
      void* x = to_device(x_host.data(), in_bytes);
      void* y = nullptr;
      CNNRT_CUDA_CHECK(cudaMalloc(&y, out_bytes));
      const LinearS8TmaPlan pick = kernel.plan(batch);
      std::vector<uint8_t> expected(out_bytes), got(out_bytes);
      std::vector<LinearS8TmaPlan> plans = {pick};
      for (int t = 0; t < LinearS8Tma::tile_count(); ++t)
        if (t != pick.tile) plans.push_back(kernel.plan(batch, t));
      const double flops = 2.0 * batch * double(l.in) * l.out;
      for (const LinearS8TmaPlan& p : plans) {
        void* ws = nullptr;
        CNNRT_CUDA_CHECK(cudaMalloc(&ws, p.workspace_bytes));
        const cnnrt::cuda::LinearS8TmaInput in = kernel.encode_input(x, batch, p.tile);
        CNNRT_CUDA_CHECK(cudaMemsetAsync(y, 0x5a, out_bytes, stream));
        kernel.forward(p, in, y, ws, stream);
        CNNRT_CUDA_CHECK(cudaMemcpyAsync((&p == &plans[0] ? expected : got).data(), y, out_bytes,
                                         cudaMemcpyDeviceToHost, stream));
        CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream));
        const bool same = &p == &plans[0] || got == expected;
        const double ms = median_event_ms([&](int) { kernel.forward(p, in, y, ws, stream); }, iters,
                                          stream, flush_l2);
        print_row(l.name, batch,
                  "linear_int8_tma " + p.name + (same ? " (= pick's bytes)" : " (BYTES DIFFER)"),
                  ms, flops, p.tile == pick.tile ? "*" : "", p.estimated_us);
        CNNRT_CUDA_CHECK(cudaFree(ws));
      }
      CNNRT_CUDA_CHECK(cudaFree(y));
      CNNRT_CUDA_CHECK(cudaFree(x));
    }
    free_device_layer(conv);
  }
  CNNRT_CUDA_CHECK(cudaFree(flush));
}

}  // namespace conv_lab
