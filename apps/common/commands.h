// The `cnnrt` subcommands, one small file each (cmd_<name>.cpp).
//
// Each takes the arguments after the subcommand name, writes its answer to stdout (notes to
// stderr), throws cnnrt::Error / UsageError on bad input, and returns the exit code.  Output
// files are written via temp file + rename, so a failed command leaves nothing behind.
#pragma once

#include <string>
#include <vector>

namespace cnnrt::apps {

using Arguments = std::vector<std::string>;

int cmd_info(const Arguments& arguments);
int cmd_init_weights(const Arguments& arguments);
int cmd_plan(const Arguments& arguments);
int cmd_run(const Arguments& arguments);
int cmd_profile(const Arguments& arguments);
int cmd_bench(const Arguments& arguments);
int cmd_calibrate(const Arguments& arguments);
int cmd_accuracy(const Arguments& arguments);  // cmd_accuracy.cpp

struct Command {
  const char* name;
  const char* usage;  // "usage: cnnrt info MODEL"
  const char* summary;
  int (*run)(const Arguments&);
};

// The table `cnnrt` dispatches on (and prints as its help).
const std::vector<Command>& commands();
const Command* find_command(const std::string& name);

}  // namespace cnnrt::apps
