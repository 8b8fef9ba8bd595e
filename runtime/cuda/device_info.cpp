// CUDA device facts: presence check and peak rates from the device's own attributes.
//
// Peaks are computed, not looked up by product name, so a part at a different clock (PCIe vs
// SXM, a power-capped board) gets its own ceiling:
//   fp16 tensor = SMs × SM clock × dense fp16 FLOP/clock/SM (fp32 accumulation)
//   fp32        = SMs × SM clock × 2 × fp32 lanes/SM
//   DRAM        = 2 (double data rate) × memory clock × bus width / 8
// The per-SM rates come from NVIDIA's whitepapers (dense, no 2:4 sparsity):
//   sm_70/72/75 (V100, T4)          1024 fp16 FLOP/clk/SM,  64 fp32 lanes
//   sm_80       (A100)              2048,                    64
//   sm_86/87/89 (A10/A40, L4/L40S)  1024,                   128
//   sm_90       (H100/H200)         4096,                   128
//   sm_100      (B200)              8192,                   128
//   sm_120      (RTX PRO Blackwell) 1024,                   128
// GeForce parts of sm_86/89/120 run fp16 with fp32 accumulation at half that rate; the table
// keeps the data-centre figure, so a share of peak on a GeForce board reads low, never above 1.
// An unknown architecture reports 0 (unknown) rather than a guess.
#include "runtime/cuda/device_info.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace cnnrt::cuda {
namespace {

struct SmRates {
  int fp16_flops_per_clock = 0;
  int fp32_lanes = 0;
};

SmRates sm_rates(int major, int minor) {
  if (major == 7) return {1024, 64};
  if (major == 8 && minor == 0) return {2048, 64};
  if (major == 8) return {1024, 128};
  if (major == 9) return {4096, 128};
  if (major == 10) return {8192, 128};
  if (major == 12) return {1024, 128};
  return {};
}

int device_attribute(cudaDeviceAttr attribute, int device) {
  int value = 0;
  CNNRT_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
  return value;
}

}  // namespace

bool cuda_device_present() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // reset the last-error slot so later checked calls start clean
    return false;
  }
  return count > 0;
}

void cuda_warm_up() {
  if (cudaFree(nullptr) != cudaSuccess) cudaGetLastError();
}

DeviceInfo cuda_device_info() {
  if (!cuda_device_present()) throw Error("no CUDA device");
  int device = 0;
  CNNRT_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  CNNRT_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));

  const double sms = device_attribute(cudaDevAttrMultiProcessorCount, device);
  const double sm_clock_hz = 1e3 * device_attribute(cudaDevAttrClockRate, device);
  const double memory_clock_hz = 1e3 * device_attribute(cudaDevAttrMemoryClockRate, device);
  const double bus_bits = device_attribute(cudaDevAttrGlobalMemoryBusWidth, device);
  const SmRates rates = sm_rates(properties.major, properties.minor);

  DeviceInfo info;
  info.name = properties.name;
  info.multiprocessors = static_cast<int>(sms);
  info.peak_fp16_tflops = sms * sm_clock_hz * rates.fp16_flops_per_clock / 1e12;
  info.peak_fp32_tflops = sms * sm_clock_hz * 2.0 * rates.fp32_lanes / 1e12;
  info.peak_bandwidth_gbs = 2.0 * memory_clock_hz * bus_bits / 8.0 / 1e9;
  return info;
}

}  // namespace cnnrt::cuda
