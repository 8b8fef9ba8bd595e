#include <algorithm>

#include "runtime/backends.h"
#include "runtime/kernel.h"

namespace cnnrt {

KernelRegistry& KernelRegistry::instance() {
  // Built on first use (thread-safe static init); explicit registration functions instead of
  // static registrars, so nothing depends on static-library link order.
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    for (const BackendInfo& backend : backend_table()) backend.register_kernels(*r);
    return r;
  }();
  return *registry;
}

void KernelRegistry::add(KernelEntry entry) {
  if (find(entry.name) != nullptr) throw Error("kernel registered twice: " + entry.name);
  if (!entry.residual && entry.supports) {
    entry.supports = [inner = std::move(entry.supports)](const Node& node) {
      return !node.fused_residual && inner(node);
    };
  }
  if (entry.sparse_2_4 && entry.supports) {
    entry.supports = [inner = std::move(entry.supports)](const Node& node) {
      return node.weight_2_4 && inner(node);
    };
  }
  entries_.push_back(std::move(entry));
}

std::vector<const KernelEntry*> KernelRegistry::candidates(const Node& node, Device device,
                                                           Precision precision) const {
  std::vector<const KernelEntry*> out;
  for (const KernelEntry& entry : entries_) {
    if (entry.op == node.op && entry.device == device && entry.precision == precision &&
        entry.supports(node))
      out.push_back(&entry);
  }
  // Default choice first: non-baselines before baselines, then by priority.
  std::stable_sort(out.begin(), out.end(), [](const KernelEntry* a, const KernelEntry* b) {
    if (a->baseline != b->baseline) return !a->baseline;
    return a->priority > b->priority;
  });
  return out;
}

void add_entries(KernelRegistry& registry, Device device, Precision precision, int priority,
                 const std::vector<EntryRow>& rows) {
  for (const EntryRow& row : rows) {
    KernelEntry entry;
    entry.name = row.name;
    entry.op = row.op;
    entry.device = device;
    entry.precision = precision;
    entry.priority = priority;
    entry.supports = row.supports;
    entry.create = row.create;
    entry.residual = row.residual;
    entry.sparse_2_4 = row.sparse_2_4;
    entry.baseline = row.baseline;
    registry.add(std::move(entry));
  }
}

const KernelEntry* KernelRegistry::find(const std::string& name) const {
  for (const KernelEntry& entry : entries_)
    if (entry.name == name) return &entry;
  return nullptr;
}

}  // namespace cnnrt
