// Writing output files so that nothing half-written is ever left behind.
//
// The content goes to "<path>.tmp-<pid>" in the same directory (so the final rename stays on
// one file system and is atomic), is flushed and checked, then renamed over `path`.  Any failure
// — a throwing writer, a full disk, a failed rename — removes the temporary file and throws
// cnnrt::Error naming `path`.
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace cnnrt::apps {

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write);

// Convenience for text (JSON, tables).
void write_text_file(const std::string& path, const std::string& text);

}  // namespace cnnrt::apps
