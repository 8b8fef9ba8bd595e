// Command-line plumbing shared by alexnet_infer and the cnnrt subcommands.
//
// A deliberately small parser: each command declares its flags in a table (switch, flag with a
// value, flag with an optional numeric value such as --random-weights [SEED]); anything not in
// the table is an error naming it, numbers are validated where they are read, and positional
// arguments are counted.  Errors are UsageError (a cnnrt::Error), which run_main prints as one
// "error: ..." line followed by the command's usage line.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cnnrt/error.h"

namespace cnnrt::apps {

// A bad command line (as opposed to a bad model or file): run_main adds the usage line.
class UsageError : public Error {
 public:
  UsageError(const std::string& message, std::string usage)
      : Error(message), usage_(std::move(usage)) {}
  const std::string& usage() const { return usage_; }

 private:
  std::string usage_;
};

enum class FlagKind {
  Switch,         // --profile
  Value,          // --batch 16, --batch=16
  OptionalValue,  // --random-weights [SEED]: takes the next argument only if it is an integer
};

struct FlagSpec {
  std::string name;  // with dashes: "--batch", "-o"
  FlagKind kind = FlagKind::Value;
};

class Args {
 public:
  Args(std::string usage, std::vector<FlagSpec> specs);

  // Parses argv[first..argc); throws UsageError for unknown flags, missing values, repeated
  // flags and a positional count outside [min_positional, max_positional].
  void parse(int argc, char** argv, int first, size_t min_positional, size_t max_positional);
  void parse(const std::vector<std::string>& arguments, size_t min_positional,
             size_t max_positional);

  const std::vector<std::string>& positional() const { return positional_; }
  bool has(const std::string& flag) const { return values_.count(flag) != 0; }
  std::string get_string(const std::string& flag, const std::string& fallback) const;
  // Integer in [min, max]; UsageError naming the flag otherwise.
  int64_t get_int(const std::string& flag, int64_t fallback, int64_t min, int64_t max) const;
  // Comma-separated integers in [min, max], e.g. --batch 1,16,64.
  std::vector<int64_t> get_int_list(const std::string& flag, const std::string& fallback,
                                    int64_t min, int64_t max) const;
  // A flag that must be present.
  std::string require(const std::string& flag) const;

  [[noreturn]] void fail(const std::string& message) const;

 private:
  const FlagSpec* find(const std::string& name) const;

  std::string usage_;
  std::vector<FlagSpec> specs_;
  std::vector<std::string> positional_;
  std::map<std::string, std::string> values_;
};

// Parses a whole string as a base-10 integer; nullopt when it is not one or overflows.
std::optional<int64_t> parse_integer(const std::string& text);

// Runs body(), turning every exception into one "error: <what>" line on stderr (plus the usage
// line for UsageError) and exit code 1.  Nothing escapes: no abort, no uncaught exception.
int run_main(const std::function<int()>& body);

}  // namespace cnnrt::apps
