// conv_lab's shared pieces (conv_lab.cpp: the igemm, cuDNN and --wgmma tables and main;
// conv_lab_tma.cpp: the --tma and --sparse tables): the layers, their shapes, the input pairs and
// the row format.  The header comment of conv_lab.cpp says what each table times.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/event_timing.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/conv_shape.h"
#include "kernels/cuda/cuda_check.h"

namespace conv_lab {

using cnnrt::PoolAttrs;
using cnnrt::cuda::ConvShape;

struct Layer {
  const char* name;
  int c, h, w, oc, k, stride, pad;
  bool pool;  // max-pool 3/2 after the ReLU
};

// torchvision AlexNet; every conv is followed by ReLU.
inline const Layer kLayers[] = {
    {"conv1+relu+pool", 3, 224, 224, 64, 11, 4, 2, true},
    {"conv2+relu+pool", 64, 27, 27, 192, 5, 1, 2, true},
    {"conv3+relu", 192, 13, 13, 384, 3, 1, 1, false},
    {"conv4+relu", 384, 13, 13, 256, 3, 1, 1, false},
    {"conv5+relu+pool", 256, 13, 13, 256, 3, 1, 1, true},
};

// Channel-pruned AlexNet (`cnnrt prune --channels 0.5`, compacted at build): its in_c % 64 == 32
// convs, the --tma table's rows for conv_fp16_tma's 64-byte k-tile rows.
inline const Layer kPrunedLayers[] = {
    {"pruned conv2+p", 32, 27, 27, 96, 5, 1, 2, true},
    {"pruned conv3", 96, 13, 13, 192, 3, 1, 1, false},
};

inline ConvShape make_shape(const Layer& l) {
  ConvShape s;
  s.in_c = l.c;
  s.in_h = l.h;
  s.in_w = l.w;
  s.out_c = l.oc;
  s.conv.out_channels = l.oc;
  s.conv.kernel_h = s.conv.kernel_w = l.k;
  s.conv.stride_h = s.conv.stride_w = l.stride;
  s.conv.pad_h = s.conv.pad_w = l.pad;
  s.activation = cnnrt::cuda::kReluActivation;
  if (l.pool) {
    PoolAttrs p;
    p.kernel_h = p.kernel_w = 3;
    p.stride_h = p.stride_w = 2;
    s.pool = p;
  }
  s.derive();
  return s;
}

using cnnrt::bench::median_event_ms;

// A layer's random weight [oc][c][k][k] (uniform in +-1/sqrt(fan-in)) and bias (+-0.1).
inline void random_weights(const Layer& l, std::mt19937& rng, std::vector<float>* w,
                           std::vector<float>* b) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  const int fan_in = l.c * l.k * l.k;
  w->resize(size_t(l.oc) * fan_in);
  b->resize(l.oc);
  for (float& v : *w) v = dist(rng) / std::sqrt(float(fan_in));
  for (float& v : *b) v = dist(rng) * 0.1f;
}

// Two device buffers of `count` random fp16 values in an NHWC layout of `stride` channels, the
// ones at or past `real` zero (padding channels); the labs alternate them so that successive
// launches do not read an input the previous one left in L2.
struct InputPair {
  void* x[2] = {nullptr, nullptr};
  InputPair(size_t count, int stride, int real, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<__half> host(count);
    for (void*& p : x) {
      for (size_t i = 0; i < count; ++i)
        host[i] = __float2half(int(i % stride) < real ? dist(rng) : 0.f);
      CNNRT_CUDA_CHECK(cudaMalloc(&p, count * 2));
      CNNRT_CUDA_CHECK(cudaMemcpy(p, host.data(), count * 2, cudaMemcpyHostToDevice));
    }
  }
  ~InputPair() {
    for (void* p : x) cudaFree(p);
  }
  InputPair(const InputPair&) = delete;
  InputPair& operator=(const InputPair&) = delete;
};

// mark: "*" = plan(batch, false)'s pick (fused only), "w" = plan(batch)'s pick, "*w" both.
// model_us: the variant's cost-model time (<= 0: the variant has none).
inline void print_row(const char* layer, int batch, const std::string& variant, double ms,
                      double flops, const char* mark, double model_us = 0) {
  char model[64] = "";
  if (model_us > 0)
    std::snprintf(model, sizeof(model), "  model %8.1f us (%.2fx measured)", model_us,
                  model_us / (ms * 1e3));
  std::printf("%-16s %5d  %-58s %9.4f ms %8.1f TFLOP/s%s %s\n", layer, batch, variant.c_str(), ms,
              flops / (ms * 1e-3) / 1e12, model, mark);
  std::fflush(stdout);
}

// A device copy of `bytes` host bytes (freed by the caller).
inline void* to_device(const void* host, size_t bytes) {
  void* p = nullptr;
  CNNRT_CUDA_CHECK(cudaMalloc(&p, bytes));
  CNNRT_CUDA_CHECK(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
  return p;
}
// Frees an int8 layer's device weight, bias and multipliers (the int8 tables' uploads).
inline void free_device_layer(const cnnrt::cuda::S8Conv& conv) {
  for (const void* p : {static_cast<const void*>(conv.weight), static_cast<const void*>(conv.bias),
                        static_cast<const void*>(conv.multiplier)})
    CNNRT_CUDA_CHECK(cudaFree(const_cast<void*>(p)));
}

// The --tma and --sparse tables (conv_lab_tma.cpp).
void run_tma_lab(int iters, cudaStream_t stream);
void run_sparse_lab(int iters, cudaStream_t stream);
void run_sparse_s8_lab(int iters, cudaStream_t stream);  // conv_lab_s8.cpp
void run_s8_lab(int iters, cudaStream_t stream);         // conv_lab_s8.cpp
void run_linear_s8_lab(int iters, cudaStream_t stream);  // conv_lab_linear_s8.cpp

}  // namespace conv_lab
