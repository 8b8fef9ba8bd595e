// Command-line conventions shared by `cnnrt` and `alexnet_infer`, on top of CLI11.
//
// Every program and subcommand gets the same surface:
//   -h/--help       each flag with its meaning and default; exit 0
//   --version       version, commit, CUDA runtime/driver and compiled architectures; exit 0
//   -q/--quiet      only errors and the requested result (no notes, no progress bar)
//   -v/--verbose    also say what is being done (model, weights, engine steps, timings)
// Exit codes (README, "Exit codes"): 0 success, 1 runtime error (bad model, file, device),
// 2 usage error (unknown flag, missing or malformed value, value out of range, conflicting
// flags).  Either error is one "error: ..." line on stderr; a usage error adds a second line
// pointing at the command's --help.
// File arguments: "-" is standard output (or input) where a command can stream the data and is
// refused with a usage error elsewhere, so no file named "-" is ever written or read.  Data on
// stdout replaces the text report there (one stream per command, so it stays parseable).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "cnnrt/error.h"

namespace cnnrt::apps {

constexpr int kExitSuccess = 0;
constexpr int kExitFailure = 1;  // runtime error
constexpr int kExitUsage = 2;    // bad command line

// A bad command line found after parsing (flags that exclude each other, a '-' where no
// stream is possible): exit code 2, like CLI11's own parse errors.
class UsageError : public Error {
 public:
  using Error::Error;
};

// --- verbosity ------------------------------------------------------------------------------
enum class Verbosity { Quiet, Normal, Verbose };
Verbosity verbosity();
void set_verbosity(Verbosity level);
// "note: ..." on stderr unless --quiet.
void note(const std::string& text);
// A line on stderr with --verbose only.
void detail(const std::string& text);

// --- building command lines -----------------------------------------------------------------
// A program (or a `cnnrt` subcommand) with the shared flags and help layout above.
std::unique_ptr<CLI::App> make_program(const std::string& name, const std::string& description);
CLI::App* add_subcommand(CLI::App& parent, const std::string& name, const std::string& description);

// Validators with messages that name the accepted values (CLI11 prefixes the flag name).
CLI::Validator int_range(int64_t min, int64_t max);
CLI::Validator one_of(std::vector<std::string> values);
// For file flags that read or write a real file only: refuses "-".
CLI::Validator no_stdin();
CLI::Validator no_stdout(const std::string& why);

// True for the "-" that means standard input or output.
inline bool is_std_stream(const std::string& path) { return path == "-"; }

// Where the human-readable report goes: stdout, or nowhere when stdout carries a data stream
// (an output given as "-"), so that stream stays machine-readable.
std::ostream& report_stream();
// Marks stdout as taken by a data stream (call once per "-" output); a second one is a
// UsageError naming both flags.
void claim_stdout(const std::string& flag);

// Writes `bytes` to `path` through graph/atomic_write.h, or to stdout for "-".
void write_output(const std::string& path, const std::string& bytes);
// Reads all of `path`, or stdin for "-".  Error names the file.
std::string read_input(const std::string& path);

// Parses argv with `program`, then runs `body` (the chosen command); every exception becomes
// one "error:" line and exit code 1 or 2 (see the top of this file).  --help and --version
// print to stdout and return 0.
int run_program(CLI::App& program, int argc, char** argv, const std::function<int()>& body);

// The same error boundary around any body (no parsing); used by run_program and tests.
int run_main(const std::function<int()>& body, const std::string& help_hint = "");

// The end of a CLI's main(): flushes the streams and ends the process with `code` at once,
// without its teardown (the CUDA context's destruction, the libraries' exit handlers: ~0.1 s
// after a command that used the GPU) — the command has written and closed its files by then.
// Returns `code` instead when a tool hooks the process's exit (CUDA_INJECTION64_PATH: Nsight
// Systems / Compute, compute-sanitizer; LD_PRELOAD), whose reports exit handlers write.
int end_process(int code);

}  // namespace cnnrt::apps
