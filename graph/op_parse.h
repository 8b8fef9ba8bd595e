// Internal to graph/: the YAML side of the op table (ops.cpp), used by model_loader.cpp.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "graph/ir.h"
#include "graph/ops.h"
#include "graph/yaml_read.h"

namespace cnnrt {

// Parses the op-specific attributes of a YAML layer map.  The caller has already rejected keys
// the op does not accept; this checks presence of required keys, types and ranges.
// "conv, relu, ..." for messages about unknown ops.
std::string valid_op_names();

Attrs parse_op_attrs(const OpInfo& info, const YAML::Node& layer, const YamlContext& context);

}  // namespace cnnrt
