// See paths.h.
#include "apps/common/paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <vector>

#include "cnnrt/error.h"

namespace cnnrt::apps {

std::string executable_dir() {
  std::vector<char> buffer(PATH_MAX + 1, '\0');
  const ssize_t length = ::readlink("/proc/self/exe", buffer.data(), PATH_MAX);
  if (length <= 0) return "";
  std::string path(buffer.data(), static_cast<size_t>(length));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string find_shipped_file(const std::string& relative) {
  std::vector<std::string> candidates;
  const std::string exe_dir = executable_dir();
  if (!exe_dir.empty()) candidates.push_back(exe_dir + "/../../" + relative);
  candidates.push_back(relative);
  for (const std::string& candidate : candidates) {
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode)) {
      // Show "/repo/models/alexnet.yaml" rather than "/repo/build/bin/../../models/...".
      std::vector<char> resolved(PATH_MAX + 1, '\0');
      if (::realpath(candidate.c_str(), resolved.data())) return resolved.data();
      return candidate;
    }
  }
  std::string tried;
  for (const std::string& candidate : candidates) tried += (tried.empty() ? "" : ", ") + candidate;
  throw Error(relative + " not found (looked in " + tried + "); pass --model");
}

}  // namespace cnnrt::apps
