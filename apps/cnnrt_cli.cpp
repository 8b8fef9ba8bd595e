// `cnnrt`: the command-line front end (info · init-weights · plan · run · profile · bench ·
// calibrate).  Each subcommand lives in apps/common/cmd_<name>.cpp and the program in
// apps/common/commands.cpp, where the tests can run it too.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "apps/common/commands.h"
#include "runtime/build_trace.h"

namespace {

// Whether a tool is attached that hooks the process's exit (Nsight Systems / Compute and
// compute-sanitizer inject through CUDA_INJECTION64_PATH, others through LD_PRELOAD): their
// reports are written by exit handlers, which a quick exit would skip.
bool tool_attached() {
  for (const char* name : {"CUDA_INJECTION64_PATH", "LD_PRELOAD"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const int code = cnnrt::apps::cnnrt_main(argc, argv);
  cnnrt::BuildTrace("[cnnrt] ").mark("command returned");
  // The command has written and closed everything it makes (files are written whole and renamed
  // into place before it returns).  What is left is the process's teardown — the CUDA
  // context's destruction and the libraries' exit handlers — ~0.1-0.15 s on an H100 host after
  // `cnnrt run --plan` or a warm `cnnrt build`, a quarter of their wall time: the operating
  // system reclaims all of it anyway, so the streams are flushed and the process ends here.
  if (tool_attached()) return code;
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}
