// The harness's CUDA device (harness.h): compiled only in CUDA builds.  Everything — poisoning,
// copies, the kernels, the timing events — goes on the legacy default stream, so each step is
// ordered after the previous one without further synchronisation (weight uploads made by a
// kernel's factory with cudaMemcpy from pageable memory may still be in flight when it returns:
// a non-blocking stream would not wait for them).  synchronize() waits for the whole device and
// reports asynchronous errors; timings are CUDA events around each run, one synchronisation at
// the end so launch latency on the host is not counted.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "harness.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/cuda/device_info.h"

namespace cnnrt::harness {
namespace {

class CudaHarnessDevice final : public HarnessDevice {
 public:
  Device device() const override { return Device::CUDA; }
  bool available() const override { return cuda::cuda_device_present(); }
  Buffer alloc_poisoned(size_t bytes) const override {
    void* pointer = nullptr;
    const size_t size = std::max<size_t>(bytes, 1);
    CNNRT_CUDA_CHECK(cudaMalloc(&pointer, size));
    CNNRT_CUDA_CHECK(cudaMemset(pointer, 0xFF, size));
    return Buffer(this, pointer, bytes);
  }
  void free(void* pointer) const override { cudaFree(pointer); }
  void upload(void* device_pointer, const void* host, size_t bytes) const override {
    CNNRT_CUDA_CHECK(cudaMemcpy(device_pointer, host, bytes, cudaMemcpyHostToDevice));
  }
  void download(void* host, const void* device_pointer, size_t bytes) const override {
    CNNRT_CUDA_CHECK(cudaMemcpy(host, device_pointer, bytes, cudaMemcpyDeviceToHost));
  }
  void* stream() const override { return nullptr; }  // the legacy default stream
  void synchronize() const override {
    CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
    CNNRT_CUDA_CHECK(cudaGetLastError());
  }
  double median_ms(const std::function<void()>& launch, int reps) const override {
    const cudaStream_t s = nullptr;
    std::vector<cudaEvent_t> events(2 * static_cast<size_t>(reps));
    for (cudaEvent_t& event : events) CNNRT_CUDA_CHECK(cudaEventCreate(&event));
    launch();  // warm-up: lazy setup (cuBLASLt heuristics, module loading)
    for (int i = 0; i < reps; ++i) {
      CNNRT_CUDA_CHECK(cudaEventRecord(events[2 * i], s));
      launch();
      CNNRT_CUDA_CHECK(cudaEventRecord(events[2 * i + 1], s));
    }
    synchronize();
    std::vector<double> times;
    for (int i = 0; i < reps; ++i) {
      float ms = 0;
      CNNRT_CUDA_CHECK(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]));
      times.push_back(ms);
    }
    for (cudaEvent_t event : events) cudaEventDestroy(event);
    std::sort(times.begin(), times.end());
    return times.empty() ? 0.0 : times[times.size() / 2];
  }
  bool hwc_vectors() const override { return true; }
};

}  // namespace

const HarnessDevice& cuda_harness_device() {
  static const CudaHarnessDevice device;
  return device;
}

}  // namespace cnnrt::harness
