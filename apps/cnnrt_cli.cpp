// `cnnrt`: the command-line front end (info · init-weights · plan · run · profile · bench).
// Each subcommand lives in apps/common/cmd_<name>.cpp; this file only dispatches, and
// run_main is the one place where errors become "error: ..." and exit code 1.
#include <iostream>
#include <string>

#include "apps/common/cli.h"
#include "apps/common/commands.h"

namespace {

void print_help(std::ostream& out) {
  out << "usage: cnnrt COMMAND MODEL [options]\n\ncommands:\n";
  for (const cnnrt::apps::Command& command : cnnrt::apps::commands()) {
    out << "  " << command.name << std::string(14 - std::string(command.name).size(), ' ')
        << command.summary << "\n";
  }
  out << "\n";
  for (const cnnrt::apps::Command& command : cnnrt::apps::commands()) {
    out << command.usage << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  return cnnrt::apps::run_main([&]() -> int {
    using cnnrt::apps::UsageError;
    if (argc < 2)
      throw UsageError("missing command", "usage: cnnrt COMMAND MODEL [options] (see cnnrt help)");
    const std::string name = argv[1];
    if (name == "help" || name == "--help" || name == "-h") {
      print_help(std::cout);
      return 0;
    }
    const cnnrt::apps::Command* command = cnnrt::apps::find_command(name);
    if (!command) {
      throw UsageError("unknown command '" + name + "'",
                       "usage: cnnrt COMMAND MODEL [options] (see cnnrt help)");
    }
    const cnnrt::apps::Arguments arguments(argv + 2, argv + argc);
    return command->run(arguments);
  });
}
