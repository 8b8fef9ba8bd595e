// See bounded_read.h.
#include "graph/bounded_read.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cnnrt/error.h"

namespace cnnrt {

std::string read_bounded_text_file(const std::string& path, const std::string& what,
                                   uint64_t max_bytes) {
  const ErrorSite site{path, 0, 0, "", ""};
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(status)) throw_error(site, "is a directory, not a " + what);
  if (!std::filesystem::exists(status))
    throw_error(site, "cannot open " + what + " (no such file)");
  if (!std::filesystem::is_regular_file(status))
    throw_error(site, "cannot open " + what + " (not a regular file)");
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (!ec && bytes > max_bytes)
    throw_error(site, what + " of " + std::to_string(bytes) + " bytes is larger than " +
                          std::to_string(max_bytes) + " bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(site, "cannot open " + what + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) throw_error(site, "cannot read " + what + ": " + std::strerror(errno));
  // The file may have grown between the size check and the read.
  if (text.str().size() > max_bytes)
    throw_error(site, what + " grew past " + std::to_string(max_bytes) + " bytes while read");
  return text.str();
}

std::string json_shape_problem(const std::string& text, int max_depth, uint64_t max_values,
                               uint64_t base) {
  int depth = 0;
  uint64_t values = 1;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth)
        return "nests deeper than " + std::to_string(max_depth) + " levels (at byte " +
               std::to_string(base + i) + ")";
      ++values;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == ',') {
      if (++values > max_values)
        return "has more than " + std::to_string(max_values) + " JSON values (at byte " +
               std::to_string(base + i) + ")";
    }
  }
  return "";
}

int64_t pread_fully(int fd, char* destination, uint64_t bytes, uint64_t offset) {
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t got =
        ::pread(fd, destination + done, bytes - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) break;  // the end of the file
    done += static_cast<uint64_t>(got);
  }
  return static_cast<int64_t>(done);
}

}  // namespace cnnrt
