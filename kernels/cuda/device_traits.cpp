// DeviceTraits from a device or a named target (see the header).
//
// Preset figures: multiprocessor counts from NVIDIA's product datasheets (H100 SXM5 132,
// H100 PCIe 114, H200 132, A100 108, L4 58, L40S 142); shared memory from the CUDA C++
// Programming Guide's compute-capability table (per SM / max opt-in per block: 8.0 164 / 163 KB,
// 8.6 and 8.9 100 / 99 KB, 9.0 228 / 227 KB, 7.5 64 / 64 KB, 7.0 96 / 96 KB).
#include "kernels/cuda/device_traits.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <regex>

#include "cnnrt/error.h"
#include "kernels/cuda/cuda_check.h"

namespace cnnrt::cuda {
namespace {

struct SharedMemory {
  int per_sm_kb = 0, optin_kb = 0;
};

// Zero when the architecture is not in the table (the spec is then refused).
SharedMemory shared_memory_of(int cc) {
  switch (cc) {
    case 70:
      return {96, 96};
    case 75:
      return {64, 64};
    case 80:
      return {164, 163};
    case 86:
    case 87:
    case 89:
      return {100, 99};
    case 90:
      return {228, 227};
    default:
      return {};
  }
}

// The wgmma files get the sm_90a image only when the build targets 90 (CMakeLists.txt).
constexpr bool kBuildHasSm90a =
#ifdef CNNRT_SM90A_IMAGE
    true;
#else
    false;
#endif

DeviceTraits described(const std::string& name, int cc, int sms) {
  const SharedMemory smem = shared_memory_of(cc);
  DeviceTraits t;
  t.name = name;
  t.cc_major = cc / 10;
  t.cc_minor = cc % 10;
  t.sms = sms;
  t.smem_optin = size_t(smem.optin_kb) * 1024;
  t.smem_per_sm = size_t(smem.per_sm_kb) * 1024;
  t.wgmma_image = cc == 90 && kBuildHasSm90a;
  t.described = true;
  return t;
}

struct Preset {
  const char* key;
  const char* name;
  int cc, sms;
};
constexpr Preset kPresets[] = {
    {"h100", "NVIDIA H100 SXM (target)", 90, 132},
    {"h100-pcie", "NVIDIA H100 PCIe (target)", 90, 114},
    {"h200", "NVIDIA H200 (target)", 90, 132},
    {"a100", "NVIDIA A100 (target)", 80, 108},
    {"l4", "NVIDIA L4 (target)", 89, 58},
    {"l40s", "NVIDIA L40S (target)", 89, 142},
};

DeviceTraits query_device(int device) {
  cudaDeviceProp prop{};
  CNNRT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceTraits t;
  t.name = prop.name;
  t.cc_major = prop.major;
  t.cc_minor = prop.minor;
  int value = 0;
  CNNRT_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device));
  t.sms = value;
  CNNRT_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  t.smem_optin = size_t(value);
  CNNRT_CUDA_CHECK(
      cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  t.smem_per_sm = size_t(value);
  t.programmatic_launch = t.cc() >= 90 && programmatic_launch_allowed(std::getenv("CNNRT_PDL"));
  return t;
}

thread_local const DeviceTraits* active_target = nullptr;

}  // namespace

bool programmatic_launch_allowed(const char* knob) {
  if (knob == nullptr) return true;
  const std::string value(knob);
  if (value != "0" && value != "1")
    throw Error("CNNRT_PDL must be 0 (off) or 1 (on), got '" + value + "'");
  return value == "1";
}

std::string target_names() {
  std::string names;
  for (const Preset& p : kPresets) names += (names.empty() ? "" : ", ") + std::string(p.key);
  return names + ", or smXY:SMS (e.g. sm90:132)";
}

DeviceTraits target_traits(const std::string& spec) {
  for (const Preset& p : kPresets)
    if (spec == p.key) return described(p.name, p.cc, p.sms);
  static const std::regex custom("sm([0-9]{2,3}):([0-9]{1,4})");
  std::smatch match;
  if (std::regex_match(spec, match, custom)) {
    const int cc = std::stoi(match[1]), sms = std::stoi(match[2]);
    if (shared_memory_of(cc).optin_kb == 0)
      throw Error("target '" + spec + "': compute capability " + match[1].str() +
                  " is not one cnnrt knows (70, 75, 80, 86, 87, 89, 90)");
    if (sms < 1 || sms > 1024) throw Error("target '" + spec + "': the SM count must be 1 to 1024");
    return described("sm_" + match[1].str() + " with " + match[2].str() + " SMs (target)", cc, sms);
  }
  throw Error("unknown target '" + spec + "' (known: " + target_names() + ")");
}

const DeviceTraits& device_traits() {
  if (active_target != nullptr) return *active_target;
  static std::mutex mutex;
  static std::map<int, DeviceTraits> cache;  // node-based: references stay valid
  int device = 0;
  CNNRT_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(device);
  if (it == cache.end()) it = cache.emplace(device, query_device(device)).first;
  return it->second;
}

bool plan_only() { return active_target != nullptr; }

PlanTargetScope::PlanTargetScope(const DeviceTraits& traits)
    : previous_(active_target), traits_(traits) {
  active_target = &traits_;
}

PlanTargetScope::~PlanTargetScope() { active_target = previous_; }

}  // namespace cnnrt::cuda
