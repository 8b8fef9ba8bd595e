// Typed reads of YAML values that fail with cnnrt::Error pointing at the value's file:line:col.
//
// yaml-cpp's own conversions throw YAML::BadConversion without saying which model file or
// layer was being read; every scalar the loader and the op parsers take goes through these
// helpers instead, so a wrong type or a non-positive size always names the key, the layer and
// the line.  Internal to graph/.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <utility>

#include "cnnrt/error.h"

namespace cnnrt {

// Where a YAML value sits: the file and (optionally) the layer being read.
struct YamlContext {
  std::string file;
  std::string layer;

  // ErrorSite for `node` (yaml-cpp marks are 0-based; ErrorSite is 1-based).
  ErrorSite site(const YAML::Node& node) const;
  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const;
};

// A YAML value as short text for messages ("3", "[1, 2]", "{...}").
std::string yaml_preview(const YAML::Node& node);

// `key` names the value in messages.
int read_int(const YAML::Node& value, const YamlContext& context, const std::string& key);
int read_positive_int(const YAML::Node& value, const YamlContext& context, const std::string& key);
double read_number(const YAML::Node& value, const YamlContext& context, const std::string& key);
bool read_bool(const YAML::Node& value, const YamlContext& context, const std::string& key);
std::string read_string(const YAML::Node& value, const YamlContext& context,
                        const std::string& key);
// An int or an [h, w] pair; each entry >= min_value.
std::pair<int, int> read_int_pair(const YAML::Node& value, const YamlContext& context,
                                  const std::string& key, int min_value);

// Structural checks yaml-cpp does not make, run once on the text and once on the loaded tree:
// nesting at most kMaxYamlDepth levels (a model needs about 5; yaml-cpp's own guard only trips
// near 500 and then reports "bad file" at the end of the input), no key twice in one map
// (yaml-cpp silently keeps the first: `out_channels: 4 ... out_channels: 8` would build 4), and
// at most kMaxYamlNodes nodes visited (aliases can make a small file a huge tree).
constexpr int kMaxYamlDepth = 64;
constexpr long kMaxYamlNodes = 1000000;
// Flow nesting ([ and { outside quotes and comments), with the line and column of the first
// bracket past the limit.
void check_yaml_text_nesting(const std::string& text, const std::string& source_name);
void check_yaml_tree(const YAML::Node& root, const YamlContext& context);

// YAML::Load behind both checks, for every YAML file cnnrt reads (models, plan files): the text
// nesting first, yaml-cpp's own guards and syntax errors as "source:line:col: ...", then the
// tree.  `what` names the kind of file in syntax errors ("YAML syntax error" for models).
YAML::Node load_yaml_checked(const std::string& text, const std::string& source_name,
                             const std::string& what = "YAML syntax error");

}  // namespace cnnrt
