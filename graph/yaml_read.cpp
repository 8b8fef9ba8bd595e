// See yaml_read.h.  Scalars are converted by yaml-cpp (which rejects "3.5" as an int, out-of-range
// numbers and non-numeric text); its exceptions are turned into cnnrt::Error here.
#include "graph/yaml_read.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>

#include "yaml-cpp/depthguard.h"

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

namespace {

// Byte offset of the first byte that breaks UTF-8 (overlong forms, surrogates and code points
// past U+10FFFF included), or npos.
size_t invalid_utf8_at(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    int length = 0;
    uint32_t code = 0;
    if (byte < 0x80) {
      ++i;
      continue;
    } else if ((byte & 0xE0) == 0xC0) {
      length = 2, code = byte & 0x1F;
    } else if ((byte & 0xF0) == 0xE0) {
      length = 3, code = byte & 0x0F;
    } else if ((byte & 0xF8) == 0xF0) {
      length = 4, code = byte & 0x07;
    } else {
      return i;
    }
    if (i + length > text.size()) return i;
    for (int k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return i;
      code = (code << 6) | (next & 0x3F);
    }
    static const uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return i;
    i += length;
  }
  return std::string::npos;
}

}  // namespace

std::string read_string(const YAML::Node& value, const YamlContext& context,
                        const std::string& key) {
  if (!value.IsScalar() || value.Scalar().empty())
    context.fail(value, "'" + key + "' must be a non-empty string, got " + yaml_preview(value));
  // YAML is UTF-8, but yaml-cpp passes other bytes through; names written back out (plans,
  // reports, JSON) would then change, so they are refused here.
  const size_t bad = invalid_utf8_at(value.Scalar());
  if (bad != std::string::npos)
    context.fail(value, "'" + key + "' is not valid UTF-8 (byte " + std::to_string(bad) + ")");
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

void check_yaml_text_nesting(const std::string& text, const std::string& source_name) {
  int depth = 0, line = 1, column = 0;
  char quote = 0;  // ' or " while inside a quoted scalar
  bool comment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
      comment = false;
      continue;
    }
    if (comment) continue;
    if (quote != 0) {
      if (quote == '"' && c == '\\') {
        ++i;
        ++column;
      } else if (c == quote) {
        quote = 0;  // '' inside single quotes closes and reopens: same depth either way
      }
      continue;
    }
    if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t')) {
      comment = true;
    } else if ((c == '"' || c == '\'') &&
               (i == 0 || std::strchr(" \t\r\n[{,:-?", text[i - 1]) != nullptr)) {
      // A quote opens a quoted scalar only where a scalar can start; inside a plain scalar
      // (`8"`, `it's`) it is an ordinary character.  (Erring towards "quoted" only skips
      // brackets, and yaml-cpp's own depth guard and check_yaml_tree still bound the tree.)
      quote = c;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxYamlDepth)
        throw_error(ErrorSite{source_name, line, column, "", ""},
                    "YAML nests deeper than " + std::to_string(kMaxYamlDepth) + " levels");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

namespace {

void check_node(const YAML::Node& node, const YamlContext& context, int depth, long& visited) {
  if (++visited > kMaxYamlNodes)
    context.fail(node, "more than " + std::to_string(kMaxYamlNodes) +
                           " YAML nodes (aliases expanding?); a model needs far fewer");
  if (depth > kMaxYamlDepth)
    context.fail(node, "YAML nests deeper than " + std::to_string(kMaxYamlDepth) + " levels");
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) check_node(item, context, depth + 1, visited);
  } else if (node.IsMap()) {
    std::map<std::string, YAML::Mark> seen;
    for (const auto& entry : node) {
      if (entry.first.IsScalar()) {
        const auto [first, inserted] = seen.emplace(entry.first.Scalar(), entry.first.Mark());
        if (!inserted)
          context.fail(entry.first, "duplicate key '" + entry.first.Scalar() + "' (first at line " +
                                        std::to_string(first->second.line + 1) + ", column " +
                                        std::to_string(first->second.column + 1) + ")");
      }
      check_node(entry.first, context, depth + 1, visited);
      check_node(entry.second, context, depth + 1, visited);
    }
  }
}

}  // namespace

void check_yaml_tree(const YAML::Node& root, const YamlContext& context) {
  long visited = 0;
  check_node(root, context, 0, visited);
}

YAML::Node load_yaml_checked(const std::string& text, const std::string& source_name,
                             const std::string& what) {
  check_yaml_text_nesting(text, source_name);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // Block nesting (indentation, "- - -") past yaml-cpp's guard; its message says "bad file".
    ErrorSite site{source_name, e.mark.line >= 0 ? e.mark.line + 1 : 0, 0, "", ""};
    throw_error(site, "YAML nests deeper than " + std::to_string(kMaxYamlDepth) + " levels");
  } catch (const YAML::Exception& e) {
    ErrorSite site{source_name, e.mark.line >= 0 ? e.mark.line + 1 : 0,
                   e.mark.column >= 0 ? e.mark.column + 1 : 0, "", ""};
    throw_error(site, what + ": " + e.msg);
  }
  check_yaml_tree(root, YamlContext{source_name, ""});
  return root;
}

}  // namespace cnnrt
