// The backend table: the one place that knows which backends this build has.
//
// The generic runtime (engine, builder, registry) reaches a backend only through this table —
// availability, device facts, its kernel registrations and its Backend object — so adding a
// backend is one row in backends.cpp, and no generic file carries #ifdefs for it.
#pragma once

#include <memory>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "runtime/engine_impl.h"

namespace cnnrt {

struct BackendInfo {
  Device device;
  bool (*available)();                        // a usable device is present; never throws
  DeviceInfo (*info)();                       // name, SM count, peak rates; throws if unusable
  void (*register_kernels)(KernelRegistry&);  // adds this backend's registry entries
  std::unique_ptr<Backend> (*make)();         // throws Error when no device is usable
  // Puts a described device (BuildOptions::plan_target) on this thread for the returned
  // object's lifetime, so a build or plan decides for it without touching a device; nullptr
  // when the backend has no such targets.  Throws Error on an unknown target.
  std::shared_ptr<void> (*enter_plan_target)(const std::string& target);
  // Creates the device's context (warm_up_device runs it on a thread); nullptr: nothing to do.
  // Never throws.
  void (*warm_up)();
};

// Every backend compiled into this build, CPU first.
const std::vector<BackendInfo>& backend_table();
// The row for `device`, or nullptr when this build has no such backend.
const BackendInfo* find_backend(Device device);

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace cnnrt
