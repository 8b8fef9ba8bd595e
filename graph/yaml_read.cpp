// See yaml_read.h.  Scalars are converted by yaml-cpp (which rejects "3.5" as an int, out-of-range
// numbers and non-numeric text); its exceptions are turned into cnnrt::Error here.
#include "graph/yaml_read.h"

#include <cmath>

namespace cnnrt {

ErrorSite YamlContext::site(const YAML::Node& node) const {
  ErrorSite out;
  out.file = file;
  out.layer = layer;
  if (node.IsDefined()) {
    const YAML::Mark mark = node.Mark();
    if (mark.line >= 0) out.line = mark.line + 1;
    if (mark.column >= 0) out.column = mark.column + 1;
  }
  return out;
}

void YamlContext::fail(const YAML::Node& node, const std::string& message) const {
  throw_error(site(node), message);
}

std::string yaml_preview(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "null";
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsSequence()) return "a list";
  return "a map";
}

namespace {

template <typename T>
T convert_scalar(const YAML::Node& value, const YamlContext& context, const std::string& key,
                 const char* expected) {
  if (!value.IsScalar())
    context.fail(value, "'" + key + "' must be " + expected + ", got " + yaml_preview(value));
  try {
    return value.as<T>();
  } catch (const YAML::Exception&) {
    context.fail(value, "'" + key + "' must be " + expected + ", got " + yaml_preview(value));
  }
}

}  // namespace

int read_int(const YAML::Node& value, const YamlContext& context, const std::string& key) {
  return convert_scalar<int>(value, context, key, "an integer");
}

int read_positive_int(const YAML::Node& value, const YamlContext& context, const std::string& key) {
  const int result = read_int(value, context, key);
  if (result <= 0)
    context.fail(value, "'" + key + "' must be positive, got " + std::to_string(result));
  return result;
}

double read_number(const YAML::Node& value, const YamlContext& context, const std::string& key) {
  const double result = convert_scalar<double>(value, context, key, "a number");
  if (!std::isfinite(result)) context.fail(value, "'" + key + "' must be a finite number");
  return result;
}

bool read_bool(const YAML::Node& value, const YamlContext& context, const std::string& key) {
  return convert_scalar<bool>(value, context, key, "true or false");
}

std::string read_string(const YAML::Node& value, const YamlContext& context,
                        const std::string& key) {
  if (!value.IsScalar() || value.Scalar().empty())
    context.fail(value, "'" + key + "' must be a non-empty string, got " + yaml_preview(value));
  return value.Scalar();
}

std::pair<int, int> read_int_pair(const YAML::Node& value, const YamlContext& context,
                                  const std::string& key, int min_value) {
  std::pair<int, int> result;
  if (value.IsSequence()) {
    if (value.size() != 2)
      context.fail(value, "'" + key + "' must be an integer or [h, w], got a list of " +
                              std::to_string(value.size()));
    result = {read_int(value[0], context, key), read_int(value[1], context, key)};
  } else if (value.IsScalar()) {
    const int both = read_int(value, context, key);
    result = {both, both};
  } else {
    context.fail(value, "'" + key + "' must be an integer or [h, w], got " + yaml_preview(value));
  }
  if (result.first < min_value || result.second < min_value)
    context.fail(value, "'" + key + "' must be " +
                            (min_value > 0 ? std::string("positive") : "non-negative") + ", got " +
                            yaml_preview(value));
  return result;
}

}  // namespace cnnrt
