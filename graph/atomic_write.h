// Writing output files so that a reader only ever sees the old file or the complete new one.
//
// Every file cnnrt writes (weights, .npy, JSON reports, traces) goes through here:
//   1. a unique temporary ".<name>.tmp-XXXXXX" is created next to the target with mkstemp
//      (O_CREAT | O_EXCL, mode 0600): it never opens an existing file or follows a symlink
//      planted at a guessable name, and two writers never share one;
//   2. the content is written through that descriptor, flushed and fsync'ed, then given the
//      permissions a plain create would (0666 & ~umask);
//   3. it is renamed over the target, atomic on one file system — with two writers the last
//      rename wins and the file is always one writer's complete output, never a mix; a symlink
//      at the target is replaced, not written through.
// On any failure (a throwing writer, a full disk, a failed rename) the temporary is removed and
// cnnrt::Error names the target.  While a temporary exists it is listed in a small registry;
// SIGINT/SIGTERM handlers (installed on first use, only where the signal still has its default
// action) remove the listed files and then re-raise the signal, so Ctrl-C leaves nothing behind.
// Applications with their own handlers call remove_temporary_files() from them.
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace cnnrt {

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write);

// Convenience for text (JSON, tables).
void write_text_file(const std::string& path, const std::string& text);

// Fails early, before a long computation, when `path` could not be written: its folder is
// missing or not writable (checked by creating and removing a temporary there), or `path` is a
// folder.  Error names the path and the reason.
void check_output_path(const std::string& path);

// Unlinks every temporary file currently being written.  Async-signal-safe.
void remove_temporary_files() noexcept;

}  // namespace cnnrt
