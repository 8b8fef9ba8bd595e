// The `cnnrt` subcommands, one small file each (cmd_<name>.cpp).
//
// A subcommand is one function: given its CLI::App it declares its flags (bound to variables
// it owns) and returns the function that runs the command once the line is parsed.  That
// function writes its answer to stdout (notes to stderr), throws cnnrt::Error on bad input
// (exit 1) or UsageError on a bad combination of flags (exit 2), and returns the exit code.
// Output files are written via temp file + rename, so a failed command leaves nothing behind.
// Adding a command: write cmd_<name>.cpp with its add_<name> function and add one row below.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cnnrt::apps {

using RunCommand = std::function<int()>;
using AddCommand = RunCommand (*)(CLI::App& command);

RunCommand add_info(CLI::App& command);
RunCommand add_init_weights(CLI::App& command);
RunCommand add_plan(CLI::App& command);
RunCommand add_run(CLI::App& command);
RunCommand add_profile(CLI::App& command);
RunCommand add_bench(CLI::App& command);
RunCommand add_calibrate(CLI::App& command);
RunCommand add_accuracy(CLI::App& command);  // cmd_accuracy.cpp
RunCommand add_build(CLI::App& command);     // cmd_build.cpp
RunCommand add_prune(CLI::App& command);     // cmd_prune.cpp

struct Command {
  const char* name;
  const char* summary;
  AddCommand add;
};

// The table `cnnrt` is built from (and prints as its help).
const std::vector<Command>& commands();

// The whole `cnnrt` program: parses argv, runs the chosen subcommand, returns the exit code
// (apps/common/cli.h).  main() is this; the tests call it with their own argv.
int cnnrt_main(int argc, char** argv);

}  // namespace cnnrt::apps
