#include "cnnrt/error.h"

namespace cnnrt {

std::string ErrorSite::format() const {
  std::string out;
  if (!file.empty()) {
    out += file;
    if (line > 0) {
      out += ":" + std::to_string(line);
      if (column > 0) out += ":" + std::to_string(column);
    }
    out += ": ";
  }
  if (!layer.empty()) out += "layer '" + layer + "': ";
  if (!tensor.empty()) out += "tensor '" + tensor + "': ";
  return out;
}

void throw_error(const ErrorSite& site, const std::string& message) {
  throw Error(site.format() + message);
}

}  // namespace cnnrt
