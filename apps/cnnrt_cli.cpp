// `cnnrt`: the command-line front end (info · init-weights · plan · run · profile · bench ·
// calibrate).  Each subcommand lives in apps/common/cmd_<name>.cpp and the program in
// apps/common/commands.cpp, where the tests can run it too.
#include "apps/common/commands.h"

int main(int argc, char** argv) { return cnnrt::apps::cnnrt_main(argc, argv); }
