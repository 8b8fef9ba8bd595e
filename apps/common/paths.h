// Finding the files an app ships with (models/alexnet.yaml) without being told where.
#pragma once

#include <string>

namespace cnnrt::apps {

// Directory of the running executable (/proc/self/exe), or "" when it cannot be found.
std::string executable_dir();

// The first of <exe dir>/../../<relative> (build/bin/ → repo root) and ./<relative> that
// exists; Error listing both places otherwise.
std::string find_shipped_file(const std::string& relative);

}  // namespace cnnrt::apps
