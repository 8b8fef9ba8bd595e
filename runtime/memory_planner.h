// Static activation-memory planner, device-agnostic (tested on the CPU).
//
// Input: every tensor the engine materialises with its size and lifetime in execution steps
// [first_step = producer step, last_step = last consumer step].  Output: one arena size and an
// offset per tensor such that no two tensors that are live at the same step overlap.
//
// Algorithm: tensors that may alias their input (in-place elementwise ops, flatten views) are
// first merged with it into one buffer when legal — the input's last use is this step, same
// size, and neither is pinned.  Buffers are then placed greedily, largest first, each at the
// lowest offset that does not overlap any already-placed buffer whose lifetime intersects its
// own (first fit from offset 0).  The plan is plain data: printable as a table or JSON and checked
// by tests against lower_bound_bytes = max over steps of the bytes live at that step.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace cnnrt {

struct PlanRequest {
  std::string name;
  size_t bytes = 0;
  int first_step = 0;  // step that writes it (the graph input: 0, written before step 0 runs)
  int last_step = 0;   // last step that reads it (graph output: the last step)
  // Name of an input tensor this one may share storage with (in-place / view), or "".
  std::string may_alias;
};

struct PlannedTensor {
  std::string name;
  size_t bytes = 0;
  size_t offset = 0;
  int first_step = 0, last_step = 0;
  std::string aliases;  // non-empty when it shares storage with that tensor
};

struct MemoryPlan {
  std::vector<PlannedTensor> tensors;  // in request order
  size_t arena_bytes = 0;
  size_t naive_bytes = 0;        // sum of all tensor sizes (no reuse at all)
  size_t lower_bound_bytes = 0;  // most bytes live at any single step (aliases counted once)
  size_t alignment = 256;

  const PlannedTensor* find(const std::string& name) const;
  std::string to_table() const;
  std::string to_json() const;
};

// Throws Error on inconsistent requests (first_step > last_step, unknown may_alias, duplicate
// names).  Every offset is a multiple of `alignment`.
MemoryPlan plan_memory(const std::vector<PlanRequest>& requests, size_t alignment = 256);

}  // namespace cnnrt
