// Temp file + rename; see atomic_file.h.
#include "apps/common/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "cnnrt/error.h"

namespace cnnrt::apps {

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write) {
  if (path.empty()) throw Error("output file name is empty");
  const std::string temp_path = path + ".tmp-" + std::to_string(static_cast<long>(getpid()));
  ErrorSite site;
  site.file = path;
  try {
    std::ofstream out(temp_path, std::ios::binary | std::ios::trunc);
    if (!out) throw_error(site, std::string("cannot create file: ") + std::strerror(errno));
    write(out);
    out.flush();
    if (!out) throw_error(site, std::string("write failed: ") + std::strerror(errno));
    out.close();
    if (out.fail()) throw_error(site, std::string("write failed: ") + std::strerror(errno));
    if (std::rename(temp_path.c_str(), path.c_str()) != 0) {
      throw_error(site,
                  std::string("cannot rename temporary file into place: ") + std::strerror(errno));
    }
  } catch (...) {
    std::remove(temp_path.c_str());
    throw;
  }
}

void write_text_file(const std::string& path, const std::string& text) {
  write_file_atomically(path, [&](std::ostream& out) { out << text; });
}

}  // namespace cnnrt::apps
