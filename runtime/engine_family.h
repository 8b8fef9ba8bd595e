// Engines that differ only in their layer choices, built from one fused graph with shared
// kernels: what the automatic per-layer choice (runtime/auto_plan.h) builds by the dozen.
//
// Engine::build copies the model, runs the passes and packs every layer's weights; an automatic
// plan builds one engine per candidate and per verified assignment (~55 for AlexNet), each
// differing from the baseline in one or a few layers.  A family runs the passes once (the fused
// graph is shared, never copied) and creates each (layer, kernel) once (KernelCache): building
// a candidate engine then packs only the weights of the layer it changes.  The engines are
// ordinary: contexts, plans and profiles see nothing different.
//
// Every engine of a family has the family's device, calibration and plan target (only the layer
// choices and the default precision vary), and must ask for the same graph passes
// (pass_options: int8 possible or not) as the family was made with — checked.  Every kernel a
// family creates stays alive with it (AlexNet's candidates: ~0.5 GB of device memory during an
// automatic build).  Not thread-safe: one thread builds (contexts of the built engines follow
// the usual rules).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "cnnrt/cnnrt.h"
#include "runtime/engine_impl.h"

namespace cnnrt {

class EngineFamily {
 public:
  // Fuses `graph` once under `options` (its layer_choices are ignored; each build brings its
  // own).  Errors as Engine::build's (weights missing, stale plan fingerprint).
  EngineFamily(Graph graph, BuildOptions options);

  // The engine of `choices` at the family's default precision, or at `precision` when given
  // (an fp32 reference engine shares the fused graph too).
  std::shared_ptr<Engine> build(const std::map<std::string, LayerChoice>& choices,
                                Precision precision = Precision::Auto);

  const Graph& graph() const { return *fused_.graph; }
  int kernels_created() const { return cache_.created(); }
  int engines_built() const { return engines_; }

 private:
  BuildOptions options_;
  FusedGraph fused_;
  KernelCache cache_;
  int engines_ = 0;
};

}  // namespace cnnrt
