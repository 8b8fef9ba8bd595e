// CUDA device facts for the public cnnrt::cuda_available() / cnnrt::device_info(Device::CUDA).
//
// runtime/engine.cpp owns the public functions (and the CPU / no-CUDA fallbacks); in a CUDA
// build it dispatches here, so everything that touches the CUDA runtime stays in runtime/cuda/.
#pragma once

#include "cnnrt/cnnrt.h"

namespace cnnrt::cuda {

// True when the CUDA runtime reports at least one usable device.  Never throws: any CUDA error
// (no driver, no device, driver too old) reads as "not present".
bool cuda_device_present();

// Name, SM count and peak rates of the current CUDA device, computed from its attributes.
// Throws Error when no device is usable.
DeviceInfo cuda_device_info();

// Creates the current device's primary context (the first CUDA call that needs one does; this
// one on warm_up_device's thread).  Never throws; errors are cleared and left to later calls.
void cuda_warm_up();

}  // namespace cnnrt::cuda
