// Static activation-memory planner (see memory_planner.h for the contract).
//
// Two phases, both deterministic so a plan printed today is the plan run tomorrow:
//  1. Alias merging.  Requests are visited in (first_step, request order); a tensor joins its
//     may_alias target's buffer only when that is provably safe: same byte size, the target is
//     read for the last time at the step that writes this tensor, and no other member of the
//     target's buffer is still live at that step (so two in-place writers never share storage).
//     Anything else is simply not merged — an in-place request is a hint, not a demand.
//  2. Placement.  Buffers are sorted largest first (ties: earlier first step, then request
//     order) and each goes to the lowest aligned offset that does not intersect any already
//     placed buffer whose lifetime overlaps its own.  Largest-first keeps the big early
//     activations of a CNN at the bottom and lets the small late ones fill the gaps.
// lower_bound_bytes is the most bytes live at any one step (a merged buffer counted once): no
// placement can beat it, so tests and `cnnrt plan` report arena / lower bound.
#include "runtime/memory_planner.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cnnrt/error.h"

namespace cnnrt {

namespace {

size_t align_up(size_t value, size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

[[noreturn]] void request_error(const std::string& tensor, const std::string& message) {
  ErrorSite site;
  site.tensor = tensor;
  throw_error(site, "memory plan: " + message);
}

// One storage block: a tensor plus every tensor merged into it.
struct Buffer {
  size_t bytes = 0;
  int first_step = 0, last_step = 0;
  std::vector<size_t> members;  // request indices, in merge order (the owner first)
  size_t offset = 0;
};

bool lifetimes_overlap(const Buffer& a, const Buffer& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

std::map<std::string, size_t> validate(const std::vector<PlanRequest>& requests, size_t alignment) {
  if (alignment == 0) request_error("", "alignment must be positive");
  std::map<std::string, size_t> index_of;
  for (size_t i = 0; i < requests.size(); ++i) {
    const PlanRequest& r = requests[i];
    if (r.name.empty()) request_error("", "request " + std::to_string(i) + " has no name");
    if (!index_of.emplace(r.name, i).second) request_error(r.name, "requested twice");
    if (r.first_step < 0 || r.first_step > r.last_step)
      request_error(r.name, "bad lifetime [" + std::to_string(r.first_step) + ", " +
                                std::to_string(r.last_step) + "]");
  }
  for (const PlanRequest& r : requests) {
    if (r.may_alias.empty()) continue;
    if (r.may_alias == r.name) request_error(r.name, "may not alias itself");
    if (index_of.count(r.may_alias) == 0)
      request_error(r.name, "may_alias names unknown tensor '" + r.may_alias + "'");
  }
  return index_of;
}

// Phase 1: returns the buffers and, per request, the index of its buffer.
std::vector<Buffer> merge_aliases(const std::vector<PlanRequest>& requests,
                                  const std::map<std::string, size_t>& index_of,
                                  std::vector<size_t>& buffer_of) {
  std::vector<size_t> order(requests.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].first_step < requests[b].first_step;
  });

  const size_t unassigned = requests.size() + 1;
  std::vector<Buffer> buffers;
  buffer_of.assign(requests.size(), unassigned);
  for (size_t i : order) {
    const PlanRequest& r = requests[i];
    if (!r.may_alias.empty()) {
      const size_t target = index_of.at(r.may_alias);
      const PlanRequest& t = requests[target];
      bool legal = buffer_of[target] != unassigned && t.bytes == r.bytes &&
                   t.last_step == r.first_step && t.first_step <= r.first_step;
      if (legal) {
        for (size_t member : buffers[buffer_of[target]].members)
          if (member != target && requests[member].last_step >= r.first_step) legal = false;
      }
      if (legal) {
        Buffer& buffer = buffers[buffer_of[target]];
        buffer.members.push_back(i);
        buffer.last_step = std::max(buffer.last_step, r.last_step);
        buffer_of[i] = buffer_of[target];
        continue;
      }
    }
    Buffer buffer;
    buffer.bytes = r.bytes;
    buffer.first_step = r.first_step;
    buffer.last_step = r.last_step;
    buffer.members.push_back(i);
    buffer_of[i] = buffers.size();
    buffers.push_back(buffer);
  }
  return buffers;
}

// Phase 2: largest first, lowest aligned offset clear of every lifetime-overlapping buffer.
size_t place(std::vector<Buffer>& buffers, size_t alignment) {
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].first_step < buffers[b].first_step;
  });

  size_t arena_bytes = 0;
  std::vector<size_t> placed;
  for (size_t index : order) {
    Buffer& buffer = buffers[index];
    std::vector<const Buffer*> conflicts;
    for (size_t other : placed)
      if (lifetimes_overlap(buffer, buffers[other]) && buffers[other].bytes > 0)
        conflicts.push_back(&buffers[other]);
    std::sort(conflicts.begin(), conflicts.end(),
              [](const Buffer* a, const Buffer* b) { return a->offset < b->offset; });
    size_t candidate = 0;
    for (const Buffer* conflict : conflicts) {
      if (candidate + buffer.bytes <= conflict->offset) break;  // fits in the gap below it
      candidate = std::max(candidate, align_up(conflict->offset + conflict->bytes, alignment));
    }
    buffer.offset = candidate;
    arena_bytes = std::max(arena_bytes, candidate + buffer.bytes);
    placed.push_back(index);
  }
  return arena_bytes;
}

// The live set only grows at a buffer's first step, so the maximum is reached at one of them.
size_t lower_bound(const std::vector<Buffer>& buffers) {
  size_t best = 0;
  for (const Buffer& at : buffers) {
    size_t live = 0;
    for (const Buffer& b : buffers)
      if (b.first_step <= at.first_step && at.first_step <= b.last_step) live += b.bytes;
    best = std::max(best, live);
  }
  return best;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<PlanRequest>& requests, size_t alignment) {
  const std::map<std::string, size_t> index_of = validate(requests, alignment);
  std::vector<size_t> buffer_of;
  std::vector<Buffer> buffers = merge_aliases(requests, index_of, buffer_of);

  MemoryPlan plan;
  plan.alignment = alignment;
  plan.arena_bytes = place(buffers, alignment);
  plan.lower_bound_bytes = lower_bound(buffers);
  for (size_t i = 0; i < requests.size(); ++i) {
    const PlanRequest& r = requests[i];
    const Buffer& buffer = buffers[buffer_of[i]];
    PlannedTensor t;
    t.name = r.name;
    t.bytes = r.bytes;
    t.offset = buffer.offset;
    t.first_step = r.first_step;
    t.last_step = r.last_step;
    // Each merged tensor names the one it was merged into (its may_alias target).
    if (buffer.members.front() != i) t.aliases = r.may_alias;
    plan.naive_bytes += r.bytes;
    plan.tensors.push_back(std::move(t));
  }
  return plan;
}

const PlannedTensor* MemoryPlan::find(const std::string& name) const {
  for (const PlannedTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::string MemoryPlan::to_table() const {
  size_t name_width = 6;
  for (const PlannedTensor& t : tensors) name_width = std::max(name_width, t.name.size());
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line), "%-*s %14s %14s %12s  %s\n", static_cast<int>(name_width),
                "tensor", "bytes", "offset", "steps", "aliases");
  out += line;
  for (const PlannedTensor& t : tensors) {
    const std::string steps =
        "[" + std::to_string(t.first_step) + "," + std::to_string(t.last_step) + "]";
    std::snprintf(line, sizeof(line), "%-*s %14zu %14zu %12s  %s\n", static_cast<int>(name_width),
                  t.name.c_str(), t.bytes, t.offset, steps.c_str(),
                  t.aliases.empty() ? "-" : t.aliases.c_str());
    out += line;
  }
  const double ratio = lower_bound_bytes > 0 ? static_cast<double>(arena_bytes) /
                                                   static_cast<double>(lower_bound_bytes)
                                             : 1.0;
  std::snprintf(line, sizeof(line),
                "arena_bytes %zu  naive_bytes %zu  lower_bound_bytes %zu  arena/lower_bound %.3f"
                "  (alignment %zu)\n",
                arena_bytes, naive_bytes, lower_bound_bytes, ratio, alignment);
  out += line;
  return out;
}

std::string MemoryPlan::to_json() const {
  nlohmann::json tensors_json = nlohmann::json::array();
  for (const PlannedTensor& t : tensors)
    tensors_json.push_back({{"name", t.name},
                            {"bytes", t.bytes},
                            {"offset", t.offset},
                            {"first_step", t.first_step},
                            {"last_step", t.last_step},
                            {"aliases", t.aliases}});
  nlohmann::json plan = {{"arena_bytes", arena_bytes},
                         {"naive_bytes", naive_bytes},
                         {"lower_bound_bytes", lower_bound_bytes},
                         {"alignment", alignment},
                         {"tensors", tensors_json}};
  return plan.dump(2);
}

}  // namespace cnnrt
