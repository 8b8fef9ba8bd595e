// The int8 requantisation recipe of docs/QUANTIZATION.md on a GPU, against the same float
// expressions on the host: the evidence behind "bit for bit" before any int8 kernel exists.
// Not built by CMake (the GPU int8 kernels' tests will compare against kernels/cpu/int8_ref
// itself); the host functions below repeat ref::requantize and ref::add_int8 expression for
// expression.  Also prints what the GPU's conversions give for NaN, ±inf and the saturation edges,
// and runs the kernels' own device function (kernels/cuda/conv/epilogue_s8.cuh's s8::requantize,
// the clamp-first spelling without a float -> int conversion) on the same values, with the bounds
// as ints and as floats.
//
//   nvcc -O2 -arch=sm_90 -I. -o /tmp/int8_recipe_check bench/int8_recipe_check.cu &&
//   /tmp/int8_recipe_check
//
// H100, CUDA 13.0: 0 mismatches in 3 × 2^24 requantisations and 2^24 adds (QUANTIZATION.md; the
// recipe's own expressions, before s8::requantize was checked here).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/cuda/conv/epilogue_s8.cuh"

// A failed CUDA call ends the check with its error (no device, an old driver): a mismatch count
// read from memory nothing wrote would mean nothing.
#define CHECK(call)                                                         \
  do {                                                                      \
    const cudaError_t status_ = (call);                                     \
    if (status_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(status_)); \
      std::exit(2);                                                         \
    }                                                                       \
  } while (0)

__global__ void gpu_requant(const int32_t* v, const float* m, int lo, int hi, int8_t* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int r = __float2int_rn(__fmul_rn(__int2float_rn(v[i]), m[i]));
  out[i] = static_cast<int8_t>(min(max(r, lo), hi));
}
// The library's requantisation as the kernels call it (float bounds: the TMA epilogues; int
// bounds: the others).
__global__ void gpu_requant_library(const int32_t* v, const float* m, int lo, int hi,
                                    bool float_bounds, int8_t* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = float_bounds
               ? cnnrt::cuda::s8::requantize(v[i], m[i], __int2float_rn(lo), __int2float_rn(hi))
               : cnnrt::cuda::s8::requantize(v[i], m[i], lo, hi);
}
__global__ void gpu_add(const int8_t* a, const int8_t* b, const float* ma, const float* mb,
                        int8_t* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = __fmaf_rn(__int2float_rn(b[i]), mb[i], __fmul_rn(__int2float_rn(a[i]), ma[i]));
  int r = __float2int_rn(s);
  out[i] = static_cast<int8_t>(min(max(r, -127), 127));
}
__global__ void gpu_nan(const float* x, int* as_int, int* as_s8sat, int n) {
  int i = threadIdx.x;
  if (i >= n) return;
  as_int[i] = __float2int_rn(x[i]);
  int r;
  asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(r) : "f"(x[i]));
  as_s8sat[i] = static_cast<int8_t>(r & 0xff);
}

int8_t cpu_requant(int32_t value, float multiplier, int lo, int hi) {
  const float as_float = static_cast<float>(value);
  const float scaled = as_float * multiplier;
  const float rounded = std::nearbyint(scaled);
  if (!(rounded > static_cast<float>(lo))) return static_cast<int8_t>(lo);
  if (rounded > static_cast<float>(hi)) return static_cast<int8_t>(hi);
  return static_cast<int8_t>(rounded);
}
int8_t cpu_add(int8_t a, float ma, int8_t b, float mb) {
  const float a_part = static_cast<float>(a) * ma;
  const float sum = std::fma(static_cast<float>(b), mb, a_part);
  const float rounded = std::nearbyint(sum);
  return static_cast<int8_t>(std::fmin(std::fmax(rounded, -127.0f), 127.0f));
}

int main() {
  const int n = 1 << 24;
  std::mt19937_64 rng(1);
  std::vector<int32_t> v(n);
  std::vector<float> m(n);
  std::uniform_real_distribution<double> log_m(-12, 2), log_v(0, 31);
  for (int i = 0; i < n; ++i) {
    const double magnitude = std::exp2(log_v(rng));
    v[i] = static_cast<int32_t>(std::min(magnitude, 2147483647.0)) * (rng() & 1 ? 1 : -1);
    m[i] = static_cast<float>(std::exp2(log_m(rng)));
    if (i % 7 == 0) {  // exact ties: v * M = k + 0.5
      m[i] = 0.5f;
      v[i] = static_cast<int32_t>(rng() % 512) - 256;
    }
  }
  int32_t* dv;
  float* dm;
  int8_t* dout;
  CHECK(cudaMalloc(&dv, n * 4));
  CHECK(cudaMalloc(&dm, n * 4));
  CHECK(cudaMalloc(&dout, n));
  CHECK(cudaMemcpy(dv, v.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dm, m.data(), n * 4, cudaMemcpyHostToDevice));
  std::vector<int8_t> got(n);
  long mismatches = 0;
  for (auto [lo, hi] : {std::pair<int, int>{-127, 127}, {0, 127}, {0, 60}}) {
    gpu_requant<<<(n + 255) / 256, 256>>>(dv, dm, lo, hi, dout, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(got.data(), dout, n, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) mismatches += got[i] != cpu_requant(v[i], m[i], lo, hi);
  }
  printf("requantize: %d x 3 bounds, mismatches %ld\n", n, mismatches);
  long library_mismatches = 0;
  for (auto [lo, hi] : {std::pair<int, int>{-127, 127}, {0, 127}, {0, 60}, {5, 100}})
    for (bool float_bounds : {false, true}) {
      gpu_requant_library<<<(n + 255) / 256, 256>>>(dv, dm, lo, hi, float_bounds, dout, n);
      CHECK(cudaGetLastError());
      CHECK(cudaMemcpy(got.data(), dout, n, cudaMemcpyDeviceToHost));
      for (int i = 0; i < n; ++i) library_mismatches += got[i] != cpu_requant(v[i], m[i], lo, hi);
    }
  printf("s8::requantize (kernels' device function): %d x 4 bounds x 2 forms, mismatches %ld\n", n,
         library_mismatches);

  std::vector<int8_t> a(n), b(n);
  std::vector<float> ma(n), mb(n);
  std::uniform_real_distribution<double> log_s(-3, 1);
  for (int i = 0; i < n; ++i) {
    a[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    b[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    ma[i] = static_cast<float>(std::exp2(log_s(rng)));
    mb[i] = static_cast<float>(std::exp2(log_s(rng)));
  }
  int8_t *da, *db;
  float *dma, *dmb;
  CHECK(cudaMalloc(&da, n));
  CHECK(cudaMalloc(&db, n));
  CHECK(cudaMalloc(&dma, n * 4));
  CHECK(cudaMalloc(&dmb, n * 4));
  CHECK(cudaMemcpy(da, a.data(), n, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), n, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dma, ma.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dmb, mb.data(), n * 4, cudaMemcpyHostToDevice));
  gpu_add<<<(n + 255) / 256, 256>>>(da, db, dma, dmb, dout, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(got.data(), dout, n, cudaMemcpyDeviceToHost));
  long add_mismatches = 0;
  for (int i = 0; i < n; ++i) add_mismatches += got[i] != cpu_add(a[i], ma[i], b[i], mb[i]);
  printf("add: %d, mismatches %ld\n", n, add_mismatches);

  const float specials[] = {NAN,    -NAN,    INFINITY, -INFINITY, 1e10f, -1e10f,
                            127.5f, -127.5f, -128.0f,  2.5f,      -0.0f};
  const int k = sizeof(specials) / sizeof(float);
  float* dx;
  int *di, *ds;
  CHECK(cudaMalloc(&dx, sizeof specials));
  CHECK(cudaMalloc(&di, k * 4));
  CHECK(cudaMalloc(&ds, k * 4));
  CHECK(cudaMemcpy(dx, specials, sizeof specials, cudaMemcpyHostToDevice));
  gpu_nan<<<1, 32>>>(dx, di, ds, k);
  CHECK(cudaGetLastError());
  int hi_[16], hs[16];
  CHECK(cudaMemcpy(hi_, di, k * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hs, ds, k * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < k; ++i)
    printf("x=%g  __float2int_rn=%d  cvt.rni.sat.s8.f32=%d\n", specials[i], hi_[i], hs[i]);
  printf("cuda: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
