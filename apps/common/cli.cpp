// Argument parsing and the error boundary of every CLI; see cli.h.
#include "apps/common/cli.h"

#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <new>

namespace cnnrt::apps {

std::optional<int64_t> parse_integer(const std::string& text) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || end != text.c_str() + text.size()) return std::nullopt;
  // strtoll skips leading spaces; an argument " 5" is still not a number.
  if (text[0] == ' ' || text[0] == '\t') return std::nullopt;
  return static_cast<int64_t>(value);
}

Args::Args(std::string usage, std::vector<FlagSpec> specs)
    : usage_(std::move(usage)), specs_(std::move(specs)) {}

const FlagSpec* Args::find(const std::string& name) const {
  for (const FlagSpec& spec : specs_) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

void Args::fail(const std::string& message) const { throw UsageError(message, usage_); }

void Args::parse(int argc, char** argv, int first, size_t min_positional, size_t max_positional) {
  std::vector<std::string> arguments;
  for (int i = first; i < argc; ++i) arguments.emplace_back(argv[i]);
  parse(arguments, min_positional, max_positional);
}

void Args::parse(const std::vector<std::string>& arguments, size_t min_positional,
                 size_t max_positional) {
  bool only_positional = false;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const std::string& argument = arguments[i];
    const bool is_flag = !only_positional && argument.size() > 1 && argument[0] == '-' &&
                         !parse_integer(argument).has_value();  // "-3" is a value, not a flag
    if (!only_positional && argument == "--") {
      only_positional = true;
      continue;
    }
    if (!is_flag) {
      positional_.push_back(argument);
      continue;
    }
    std::string name = argument;
    std::optional<std::string> inline_value;
    const size_t equals = argument.find('=');
    if (equals != std::string::npos) {
      name = argument.substr(0, equals);
      inline_value = argument.substr(equals + 1);
    }
    const FlagSpec* spec = find(name);
    if (!spec) fail("unknown flag " + name);
    if (values_.count(name)) fail("flag " + name + " given twice");
    switch (spec->kind) {
      case FlagKind::Switch:
        if (inline_value) fail("flag " + name + " takes no value");
        values_[name] = "";
        break;
      case FlagKind::Value:
        if (inline_value) {
          values_[name] = *inline_value;
        } else {
          if (i + 1 >= arguments.size()) fail("flag " + name + " needs a value");
          values_[name] = arguments[++i];
        }
        break;
      case FlagKind::OptionalValue:
        if (inline_value) {
          values_[name] = *inline_value;
        } else if (i + 1 < arguments.size() && parse_integer(arguments[i + 1])) {
          values_[name] = arguments[++i];
        } else {
          values_[name] = "";
        }
        break;
    }
  }
  if (positional_.size() < min_positional) {
    fail(positional_.empty() ? "missing arguments" : "too few arguments");
  }
  if (positional_.size() > max_positional) {
    fail("unexpected argument '" + positional_[max_positional] + "'");
  }
}

std::string Args::get_string(const std::string& flag, const std::string& fallback) const {
  auto it = values_.find(flag);
  return it == values_.end() ? fallback : it->second;
}

int64_t Args::get_int(const std::string& flag, int64_t fallback, int64_t min, int64_t max) const {
  auto it = values_.find(flag);
  if (it == values_.end() || it->second.empty()) return fallback;
  const std::optional<int64_t> number = parse_integer(it->second);
  if (!number) fail(flag + " expects an integer, got '" + it->second + "'");
  if (*number < min || *number > max) {
    fail(flag + " must be between " + std::to_string(min) + " and " + std::to_string(max) +
         ", got " + std::to_string(*number));
  }
  return *number;
}

std::vector<int64_t> Args::get_int_list(const std::string& flag, const std::string& fallback,
                                        int64_t min, int64_t max) const {
  const std::string text = get_string(flag, fallback);
  std::vector<int64_t> numbers;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::optional<int64_t> number = parse_integer(item);
    if (!number) fail(flag + " expects comma-separated integers, got '" + text + "'");
    if (*number < min || *number > max) {
      fail(flag + " values must be between " + std::to_string(min) + " and " + std::to_string(max) +
           ", got " + std::to_string(*number));
    }
    numbers.push_back(*number);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return numbers;
}

std::string Args::require(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end() || it->second.empty()) fail("missing required flag " + flag);
  return it->second;
}

int run_main(const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& error) {
    std::cerr << "error: " << error.what() << "\n" << error.usage() << "\n";
  } catch (const Error& error) {
    std::cerr << "error: " << error.what() << "\n";
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of host memory\n";
  } catch (const std::exception& error) {
    std::cerr << "error: " << error.what() << "\n";
  } catch (...) {
    std::cerr << "error: unknown exception\n";
  }
  return 1;
}

}  // namespace cnnrt::apps
