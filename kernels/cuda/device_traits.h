// The facts about a CUDA device that the build's decisions read: which conv kernels can run
// (compute capability, the sm_90a image), how they tile and when they fall back to split-K
// (SM count, shared memory per block and per SM).
//
// Obtained once per device, from the device itself (device_traits()), or from a named target
// when planning without one (`cnnrt plan --device cuda --target h100`): a PlanTargetScope puts
// a described device on the building thread, and while it is there the kernels' constructors
// read it instead of the GPU and touch no device (plan_only(): no allocation, no upload, no
// attribute set, no probe).  Such an engine can plan() but not run.
#pragma once

#include <cstddef>
#include <string>

namespace cnnrt::cuda {

struct DeviceTraits {
  std::string name;
  int cc_major = 0, cc_minor = 0;  // compute capability
  int sms = 0;                     // multiprocessors
  size_t smem_optin = 0;           // max dynamic shared memory one block may opt in to
  size_t smem_per_sm = 0;          // shared memory per multiprocessor
  // Described targets only: the driver would run this build's sm_90a image (the wgmma convs),
  // i.e. compute capability 9.0 and a build with that image.  A real device is asked by the
  // wgmma files' probe kernel instead (ConvFp16Wgmma::device_supported).
  bool wgmma_image = false;
  bool described = false;  // from a target, not a device: plan only
  // Kernels may be launched with programmatic stream serialisation (launch.h): compute
  // capability 9.0+, unless CNNRT_PDL=0 (for timing against it).  Never set for a described
  // target (nothing launches).
  bool programmatic_launch = false;

  int cc() const { return cc_major * 10 + cc_minor; }
};

// The value of CNNRT_PDL (nullptr: unset) read as whether programmatic dependent launch may be
// used (launch.h): unset or "1" yes, "0" no; anything else throws Error naming the variable.
bool programmatic_launch_allowed(const char* knob);

// The target named by `spec`: a preset (h100, h100-pcie, h200, a100, a100-40gb, l4, l40s) or
// `smXY:SMS` (compute capability X.Y, SMS multiprocessors, shared memory from the
// architecture's table).  Throws Error naming the spec and the presets.
DeviceTraits target_traits(const std::string& spec);
// "h100, h100-pcie, ..." for help and errors.
std::string target_names();

// The traits decisions read: the described target when a PlanTargetScope is active on this
// thread, else the current device's (queried once per device ordinal).
const DeviceTraits& device_traits();
// True while a described target is active: nothing may touch the GPU.
bool plan_only();

// Puts `traits` on this thread for its lifetime (the engine build of `cnnrt plan --target`).
class PlanTargetScope {
 public:
  explicit PlanTargetScope(const DeviceTraits& traits);
  ~PlanTargetScope();
  PlanTargetScope(const PlanTargetScope&) = delete;
  PlanTargetScope& operator=(const PlanTargetScope&) = delete;

 private:
  const DeviceTraits* previous_;
  DeviceTraits traits_;
};

}  // namespace cnnrt::cuda
