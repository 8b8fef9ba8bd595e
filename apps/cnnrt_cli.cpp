// `cnnrt`: the command-line front end (info · init-weights · plan · run · profile · bench ·
// calibrate).  Each subcommand lives in apps/common/cmd_<name>.cpp and the program in
// apps/common/commands.cpp, where the tests can run it too.
#include "apps/common/cli.h"
#include "apps/common/commands.h"
#include "runtime/build_trace.h"

int main(int argc, char** argv) {
  const int code = cnnrt::apps::cnnrt_main(argc, argv);
  cnnrt::BuildTrace("[cnnrt] ").mark("command returned");
  // Without the process's teardown: ~0.12-0.16 s after `cnnrt run --plan` on an H100 host
  // (docs/PERFORMANCE.md, run 33), a quarter of its wall time.
  return cnnrt::apps::end_process(code);
}
