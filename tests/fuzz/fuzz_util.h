// Shared by the libFuzzer targets: a scratch file for readers that take a path.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace cnnrt::fuzz {

// One file per fuzzer process, rewritten for every input (tmpfs when there is one: the target
// does one write and one read per execution).
class ScratchFile {
 public:
  explicit ScratchFile(const char* stem) {
    const char* folder = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    path_ = std::string(folder) + "/cnnrt_fuzz_" + stem + "_" + std::to_string(::getpid());
  }
  ~ScratchFile() { ::unlink(path_.c_str()); }
  const std::string& write(const uint8_t* data, size_t size) {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) std::abort();  // the harness itself is broken, not the input
    size_t done = 0;
    while (done < size) {
      const ssize_t wrote = ::write(fd, data + done, size - done);
      if (wrote <= 0) std::abort();
      done += static_cast<size_t>(wrote);
    }
    ::close(fd);
    return path_;
  }

 private:
  std::string path_;
};

}  // namespace cnnrt::fuzz
