// The CUDA backend's row of the backend table (runtime/backends.h): device presence and facts
// (device_info.h), its kernel registrations and its Backend.
#pragma once

#include <memory>

#include "runtime/cuda/device_info.h"
#include "runtime/engine_impl.h"

namespace cnnrt::cuda {

// Adds every CUDA registry entry (conv, linear, misc, baselines, ...).
void register_cuda_kernels(KernelRegistry& registry);
// Throws Error when no device is usable.
std::unique_ptr<Backend> make_cuda_backend();

}  // namespace cnnrt::cuda
