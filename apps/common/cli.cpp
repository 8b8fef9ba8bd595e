// The command-line conventions of every CLI; see cli.h.
#include "apps/common/cli.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <new>
#include <sstream>

#include "apps/common/version.h"
#include "graph/atomic_write.h"

namespace cnnrt::apps {
namespace {

Verbosity g_verbosity = Verbosity::Normal;
std::string g_stdout_owner;  // the flag whose "-" took stdout, if any

// Help layout: "--flag TYPE   meaning (default: X)".  CLI11's own layout prints validator
// names ("INT:INT in [50 - 1000000]=100"); here a flag shows its value's name, and the
// description ends with the default CLI11 captured from the bound variable, so the text
// cannot drift from the code.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* option, bool positional) const override {
    std::string name = CLI::Formatter::make_option_name(option, positional);
    // Flags with an optional value are declared "--random-weights{0}": show
    // "--random-weights[=SEED]".
    const size_t brace = name.find('{');
    if (brace == std::string::npos) return name;
    return name.substr(0, brace) + "[=" + option->get_type_name() + "]";
  }
  std::string make_option_opts(const CLI::Option* option) const override {
    // A switch, or a switch with an optional =VALUE (shown by make_option_name).
    if (option->get_expected_max() == 0 || option->get_type_name().empty()) return "";
    return " " + option->get_type_name();
  }
  std::string make_option_desc(const CLI::Option* option) const override {
    std::string text = option->get_description();
    if (option->get_required()) text += " (required)";
    const std::string fallback = option->get_default_str();
    if (!fallback.empty() && option->get_type_size() != 0) text += " (default: " + fallback + ")";
    return text;
  }
};

void add_shared_flags(CLI::App& app) {
  app.formatter(std::make_shared<HelpFormatter>());
  app.get_formatter()->column_width(34);
  app.set_help_flag("-h,--help", "print this help and exit");
  app.set_version_flag("--version", version_text, "print version, commit and CUDA details, exit");
  CLI::Option* quiet = app.add_flag_callback(
      "-q,--quiet", [] { set_verbosity(Verbosity::Quiet); },
      "only errors and the requested result: no notes, no progress bar");
  CLI::Option* verbose = app.add_flag_callback(
      "-v,--verbose", [] { set_verbosity(Verbosity::Verbose); },
      "also report each stage (model, weights, engine steps, timings) on stderr");
  quiet->excludes(verbose);
  app.footer(
      "Exit codes: 0 success, 1 runtime error (model, file, device), 2 usage error.\n"
      "A file argument of '-' is standard output/input where the flag says so; elsewhere it is "
      "refused.");
}

// The flags whose value is optional and numeric (`--random-weights [SEED]`).  CLI11 would let
// such a flag swallow the next positional (`alexnet_infer --random-weights img.png`), so they
// are declared as switches that take `=VALUE`, and a following integer is joined here.
const char* const kOptionalNumberFlags[] = {"--random-weights"};

bool is_integer(const std::string& text) {
  if (text.empty()) return false;
  size_t start = text[0] == '-' ? 1 : 0;
  if (start == text.size()) return false;
  for (size_t i = start; i < text.size(); ++i)
    if (text[i] < '0' || text[i] > '9') return false;
  return true;
}

std::vector<std::string> join_optional_values(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    bool joined = false;
    for (const char* flag : kOptionalNumberFlags)
      if (argument == flag && i + 1 < argc && is_integer(argv[i + 1])) {
        out.push_back(argument + "=" + argv[++i]);
        joined = true;
      }
    if (!joined) out.push_back(argument);
  }
  return out;
}

// "cnnrt bench" for the deepest command that was recognised before an error.
std::string command_path(const CLI::App& program) {
  std::string path = program.get_name();
  const CLI::App* app = &program;
  while (true) {
    const auto chosen = app->get_subcommands();
    if (chosen.empty()) break;
    app = chosen.back();
    path += " " + app->get_name();
  }
  return path;
}

// CLI11 reports an unknown subcommand as "A subcommand is required"; name it instead.
void check_command_name(const CLI::App& program, const std::vector<std::string>& arguments) {
  const std::vector<const CLI::App*> commands =
      program.get_subcommands([](const CLI::App*) { return true; });
  if (commands.empty()) return;
  std::string name;  // the first argument that is not a flag (global flags take no values)
  bool asks_help = false;
  for (const std::string& argument : arguments) {
    asks_help = asks_help || argument == "-h" || argument == "--help" || argument == "--version";
    if (!argument.empty() && argument[0] != '-') {
      name = argument;
      break;
    }
  }
  if (name.empty() && asks_help) return;
  std::string names;
  for (const CLI::App* command : commands) {
    if (!name.empty() && command->check_name(name)) return;
    names += (names.empty() ? "" : ", ") + command->get_name();
  }
  throw CLI::ParseError((name.empty() ? "missing command" : "unknown command '" + name + "'") +
                            " (commands: " + names + ")",
                        CLI::ExitCodes::ExtrasError);
}

const CLI::App& deepest_command(const CLI::App& program) {
  const CLI::App* app = &program;
  while (!app->get_subcommands().empty()) app = app->get_subcommands().back();
  return *app;
}

}  // namespace

Verbosity verbosity() { return g_verbosity; }
void set_verbosity(Verbosity level) { g_verbosity = level; }

void note(const std::string& text) {
  if (g_verbosity != Verbosity::Quiet) std::cerr << "note: " << text << "\n";
}
void detail(const std::string& text) {
  if (g_verbosity == Verbosity::Verbose) std::cerr << text << "\n";
}

std::unique_ptr<CLI::App> make_program(const std::string& name, const std::string& description) {
  auto app = std::make_unique<CLI::App>(description, name);
  add_shared_flags(*app);
  return app;
}

CLI::App* add_subcommand(CLI::App& parent, const std::string& name,
                         const std::string& description) {
  CLI::App* command = parent.add_subcommand(name, description);
  add_shared_flags(*command);
  return command;
}

CLI::Validator int_range(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long value = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || !is_integer(text) || errno == ERANGE || *end != '\0')
          return "expects an integer, got '" + text + "'";
        if (value < min || value > max)
          return "must be from " + std::to_string(min) + " to " + std::to_string(max) + ", got " +
                 text;
        return "";
      },
      "");
}

CLI::Validator one_of(std::vector<std::string> values) {
  return CLI::Validator(
      [values](std::string& text) -> std::string {
        std::string list;
        for (const std::string& value : values) {
          if (value == text) return "";
          list += (list.empty() ? "" : ", ") + value;
        }
        return "'" + text + "' is not one of " + list;
      },
      "");
}

CLI::Validator no_stdin() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return is_std_stream(text) ? "cannot read standard input ('-'): give a file name" : "";
      },
      "");
}

CLI::Validator no_stdout(const std::string& why) {
  return CLI::Validator(
      [why](std::string& text) -> std::string {
        return is_std_stream(text) ? "cannot write to standard output ('-'): " + why : "";
      },
      "");
}

std::ostream& report_stream() {
  static std::ostream discard(nullptr);  // writes go nowhere (and only set its badbit)
  return g_stdout_owner.empty() ? std::cout : discard;
}

void claim_stdout(const std::string& flag) {
  if (!g_stdout_owner.empty())
    throw UsageError(g_stdout_owner + " and " + flag +
                     " both write to standard output ('-'); send one of them to a file");
  g_stdout_owner = flag;
}

void write_output(const std::string& path, const std::string& bytes) {
  if (!is_std_stream(path)) {
    write_text_file(path, bytes);
    return;
  }
  std::cout.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::cout.flush();
  if (!std::cout) throw Error("cannot write to standard output");
}

std::string read_input(const std::string& path) {
  if (!is_std_stream(path)) {
    std::ifstream file(path, std::ios::binary);
    if (!file) throw Error(path + ": cannot open: " + std::strerror(errno));
    return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  std::string bytes((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (std::cin.bad()) throw Error("cannot read standard input");
  return bytes;
}

int run_main(const std::function<int()>& body, const std::string& help_hint) {
  try {
    return body();
  } catch (const UsageError& error) {
    std::cerr << "error: " << error.what() << "\n" << help_hint;
    return kExitUsage;
  } catch (const Error& error) {
    std::cerr << "error: " << error.what() << "\n";
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of host memory\n";
  } catch (const std::exception& error) {
    std::cerr << "error: " << error.what() << "\n";
  } catch (...) {
    std::cerr << "error: unknown exception\n";
  }
  return kExitFailure;
}

int end_process(int code) {
  for (const char* name : {"CUDA_INJECTION64_PATH", "LD_PRELOAD"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return code;
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

int run_program(CLI::App& program, int argc, char** argv, const std::function<int()>& body) {
  g_stdout_owner.clear();
  set_verbosity(Verbosity::Normal);
  std::vector<std::string> arguments = join_optional_values(argc, argv);
  try {
    check_command_name(program, arguments);
    std::reverse(arguments.begin(), arguments.end());  // CLI11 takes them last-first
    program.parse(arguments);
  } catch (const CLI::CallForHelp&) {
    const CLI::App& command = deepest_command(program);
    const std::string path = command_path(program);
    // CLI11 names a subcommand alone ("bench"); show how to call it ("cnnrt bench").
    const size_t last_space = path.rfind(' ');
    std::cout << command.help(last_space == std::string::npos ? "" : path.substr(0, last_space));
    return kExitSuccess;
  } catch (const CLI::CallForVersion& version) {
    std::cout << version.what() << "\n";
    return kExitSuccess;
  } catch (const CLI::ParseError& error) {
    std::cerr << "error: " << error.what() << "\n"
              << "run '" << command_path(program) << " --help' for usage\n";
    return kExitUsage;
  }
  return run_main(body, "run '" + command_path(program) + " --help' for usage\n");
}

}  // namespace cnnrt::apps
