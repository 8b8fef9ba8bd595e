// runtime/engine_family.h: one fused graph, one kernel cache, many engines.
#include "runtime/engine_family.h"

namespace cnnrt {
namespace {

BuildOptions without_choices(BuildOptions options) {
  options.layer_choices.clear();
  return options;
}

}  // namespace

EngineFamily::EngineFamily(Graph graph, BuildOptions options)
    : options_(without_choices(std::move(options))),
      fused_(fuse_graph(std::move(graph), options_)) {}

std::shared_ptr<Engine> EngineFamily::build(const std::map<std::string, LayerChoice>& choices,
                                            Precision precision) {
  BuildOptions options = options_;
  options.layer_choices = choices;
  if (precision != Precision::Auto) options.precision = precision;
  if (pass_options(options).fuse_residual != pass_options(options_).fuse_residual)
    throw Error(
        "internal: an engine family fused its graph for one set of passes and was asked for an "
        "engine that needs another (int8 choices in a family made without a calibration)");
  ++engines_;
  return std::make_shared<Engine>(build_engine(fused_, options, &cache_));
}

}  // namespace cnnrt
