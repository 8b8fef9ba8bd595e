// Temporary file + fsync + rename, with a signal-safe registry of live temporaries; see
// atomic_write.h.
#include "graph/atomic_write.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <streambuf>
#include <vector>

#include "cnnrt/error.h"

namespace cnnrt {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  ErrorSite site;
  site.file = path;
  throw_error(site, message);
}

std::string errno_text() { return std::strerror(errno); }

// --- registry of live temporaries -------------------------------------------------------------
// Fixed slots so the signal handler touches no heap and takes no lock.  A slot is free (0),
// being filled (1, the handler skips it) or live (2).  More concurrent writes than
// slots still work; the extra ones are only not cleaned up by a signal.
constexpr int kSlots = 64;
struct Slot {
  std::atomic<int> state{0};
  char path[PATH_MAX];
};
Slot g_slots[kSlots];
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");

struct sigaction g_previous[2];
const int kSignals[2] = {SIGINT, SIGTERM};

void on_signal(int signal_number) {
  remove_temporary_files();
  // Back to what was there before (the default: terminate) and deliver the signal again once
  // this handler returns, so the process ends exactly as it would have without us.
  for (int i = 0; i < 2; ++i)
    if (kSignals[i] == signal_number) sigaction(signal_number, &g_previous[i], nullptr);
  raise(signal_number);
}

void install_signal_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < 2; ++i) {
      struct sigaction current {};
      if (sigaction(kSignals[i], nullptr, &current) != 0) continue;
      // An application handler or an ignored signal (nohup) is left alone.
      if (current.sa_handler != SIG_DFL || (current.sa_flags & SA_SIGINFO)) continue;
      g_previous[i] = current;
      struct sigaction action {};
      action.sa_handler = on_signal;
      sigemptyset(&action.sa_mask);
      sigaction(kSignals[i], &action, nullptr);
    }
  });
}

int register_temporary(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].state.store(2, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void unregister_temporary(int slot) {
  if (slot < 0) return;
  g_slots[slot].state.store(0, std::memory_order_release);
}

// --- writing through a descriptor -------------------------------------------------------------

// A minimal output streambuf over a file descriptor: the writer callbacks take std::ostream,
// and reopening the temporary by name would give an attacker a window to swap it.
class FdStreamBuf final : public std::streambuf {
 public:
  explicit FdStreamBuf(int fd) : fd_(fd), buffer_(1 << 16) {
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (sync() != 0) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override {
    const char* data = pbase();
    size_t left = static_cast<size_t>(pptr() - pbase());
    while (left > 0) {
      const ssize_t wrote = ::write(fd_, data, left);
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote <= 0) {
        error_ = wrote < 0 ? errno : EIO;
        return -1;
      }
      data += wrote;
      left -= static_cast<size_t>(wrote);
    }
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    return 0;
  }

 private:
  int fd_;
  std::vector<char> buffer_;
  int error_ = 0;
};

// The process umask without changing it (umask(2) would, for every thread, for a moment).
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Umask:", 0) == 0)
      return static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
  return 022;
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Creates the unique temporary next to `path` and lists it in the registry; returns its
// descriptor and fills `temp_path` and `slot`.  SIGINT/SIGTERM are blocked in this thread from
// before the file exists until it is listed, so a single-threaded program (the CLIs) has no
// moment where a signal could leave an unlisted temporary behind.
int create_temporary(const std::string& path, std::string& temp_path, int& slot) {
  install_signal_handlers();
  const size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string folder = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string pattern = folder + "." + base + ".tmp-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  sigset_t blocked, previous;
  sigemptyset(&blocked);
  for (int signal_number : kSignals) sigaddset(&blocked, signal_number);
  pthread_sigmask(SIG_BLOCK, &blocked, &previous);
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  const int saved_errno = errno;
  if (fd >= 0) slot = register_temporary(name.data());
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (fd < 0)
    fail(path, "cannot create a file in " + folder_of(path) + ": " + std::strerror(saved_errno));
  temp_path = name.data();
  return fd;
}

void check_not_a_folder(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
    fail(path, "is a directory (give a file name)");
}

}  // namespace

void remove_temporary_files() noexcept {
  for (Slot& slot : g_slots)
    if (slot.state.load(std::memory_order_acquire) == 2) ::unlink(slot.path);
}

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write) {
  if (path.empty()) throw Error("output file name is empty");
  check_not_a_folder(path);
  std::string temp_path;
  int slot = -1;
  const int fd = create_temporary(path, temp_path, slot);
  bool closed = false;
  try {
    FdStreamBuf buffer(fd);
    std::ostream out(&buffer);
    write(out);
    out.flush();
    if (!out || buffer.error() != 0)
      fail(path, std::string("write failed: ") +
                     std::strerror(buffer.error() != 0 ? buffer.error() : EIO));
    // Data on disk before the name points at it: a crash right after the rename must not
    // leave an empty file under the final name.
    if (::fsync(fd) != 0 && errno != EINVAL) fail(path, "cannot flush to disk: " + errno_text());
    if (::fchmod(fd, 0666 & ~current_umask()) != 0)
      fail(path, "cannot set permissions: " + errno_text());
    closed = true;
    if (::close(fd) != 0) fail(path, "write failed: " + errno_text());
    if (::rename(temp_path.c_str(), path.c_str()) != 0)
      fail(path, "cannot move the finished file into place: " + errno_text());
  } catch (...) {
    if (!closed) ::close(fd);
    ::unlink(temp_path.c_str());
    unregister_temporary(slot);
    throw;
  }
  unregister_temporary(slot);
}

void write_text_file(const std::string& path, const std::string& text) {
  write_file_atomically(path, [&](std::ostream& out) { out << text; });
}

void check_output_path(const std::string& path) {
  if (path.empty()) throw Error("output file name is empty");
  check_not_a_folder(path);
  std::string temp_path;
  int slot = -1;
  const int fd = create_temporary(path, temp_path, slot);
  ::close(fd);
  ::unlink(temp_path.c_str());
  unregister_temporary(slot);
}

}  // namespace cnnrt
