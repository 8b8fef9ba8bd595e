// Atomic, exclusive output files (graph/atomic_write.h): a planted symlink is never written
// through, two writers never mix, nothing is left behind on error or on SIGTERM/SIGINT, and
// an unwritable destination fails before any work (issue 14).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "graph/atomic_write.h"
#include "graph/safetensors.h"
#include "graph_test_util.h"

namespace cnnrt {
namespace {

namespace fs = std::filesystem;
using test::error_of;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> leftovers(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.path().filename().string().find(".tmp") != std::string::npos)
      names.push_back(entry.path().filename().string());
  return names;
}

std::map<std::string, HostTensor> filled_tensors(size_t count, float value) {
  std::map<std::string, HostTensor> tensors;
  tensors["w"] = HostTensor{{static_cast<int64_t>(count)}, HostVector<float>(count, value)};
  return tensors;
}

TEST(AtomicWrite, WritesContentWithUmaskPermissions) {
  test::ScratchDir dir;
  const fs::path target = dir.path / "out.txt";
  write_text_file(target.string(), "hello\n");
  EXPECT_EQ(read_file(target), "hello\n");
  const mode_t mask = ::umask(022);
  ::umask(mask);
  EXPECT_EQ(fs::status(target).permissions(), static_cast<fs::perms>(0666 & ~mask));
  write_text_file(target.string(), "again\n");  // replaces
  EXPECT_EQ(read_file(target), "again\n");
  EXPECT_TRUE(leftovers(dir.path).empty());
}

// The old safetensors writer opened "<out>.tmp" with O_TRUNC: a symlink planted there made it
// overwrite any file the user could write.
TEST(AtomicWrite, PlantedSymlinkAtTheOldTemporaryNameIsNotFollowed) {
  test::ScratchDir dir;
  const fs::path victim = dir.path / "victim.txt";
  { std::ofstream(victim) << "precious"; }
  const fs::path target = dir.path / "w.safetensors";
  fs::create_symlink(victim, dir.path / "w.safetensors.tmp");
  write_safetensors(target.string(), filled_tensors(16, 1.0f));
  EXPECT_EQ(read_file(victim), "precious");
  EXPECT_TRUE(fs::is_symlink(dir.path / "w.safetensors.tmp"));
  EXPECT_EQ(read_safetensors(target.string()).at("w").data, HostVector<float>(16, 1.0f));
}

TEST(AtomicWrite, SymlinkAtTheTargetIsReplacedNotWrittenThrough) {
  test::ScratchDir dir;
  const fs::path victim = dir.path / "victim.txt";
  { std::ofstream(victim) << "precious"; }
  const fs::path target = dir.path / "out.json";
  fs::create_symlink(victim, target);
  write_text_file(target.string(), "{}\n");
  EXPECT_EQ(read_file(victim), "precious");
  EXPECT_FALSE(fs::is_symlink(target));
  EXPECT_EQ(read_file(target), "{}\n");
}

// Two writers of different files to one output: every result is exactly one of them.  With
// the shared "<out>.tmp" the header of one could end up with the size of the other.
TEST(AtomicWrite, ConcurrentWritersNeverProduceAMixedFile) {
  test::ScratchDir dir;
  const std::string target = (dir.path / "w.safetensors").string();
  const auto small = filled_tensors(1000, 1.0f), large = filled_tensors(300000, 2.0f);
  for (int round = 0; round < 10; ++round) {
    std::thread a([&] { write_safetensors(target, small); });
    std::thread b([&] { write_safetensors(target, large); });
    a.join();
    b.join();
    const auto read = read_safetensors(target);
    const HostVector<float>& values = read.at("w").data;
    EXPECT_TRUE(values == small.at("w").data || values == large.at("w").data) << round;
  }
  EXPECT_TRUE(leftovers(dir.path).empty());
}

// The same, made deterministic: writer A is half done when writer B writes and renames a whole
// file; then A finishes.  With a shared temporary name (the old "<out>.tmp", or
// "<out>.tmp-<pid>" for two threads) B truncated A's file and A then wrote into the renamed
// target: half B, half A.  Now the target is A's complete file (the last rename wins).
TEST(AtomicWrite, InterleavedWritersEachProduceACompleteFile) {
  test::ScratchDir dir;
  const std::string target = (dir.path / "out.bin").string();
  std::promise<void> a_half_written, b_finished;
  std::thread a([&] {
    write_file_atomically(target, [&](std::ostream& out) {
      out << std::string(100000, 'a') << std::flush;
      a_half_written.set_value();
      b_finished.get_future().wait();
      out << std::string(100000, 'a');
    });
  });
  a_half_written.get_future().wait();
  write_file_atomically(target, [](std::ostream& out) { out << std::string(150000, 'b'); });
  EXPECT_EQ(read_file(target), std::string(150000, 'b'));
  b_finished.set_value();
  a.join();
  EXPECT_EQ(read_file(target), std::string(200000, 'a'));
  EXPECT_TRUE(leftovers(dir.path).empty());
}

TEST(AtomicWrite, FailedWriterLeavesNoFile) {
  test::ScratchDir dir;
  const fs::path target = dir.path / "out.bin";
  EXPECT_THROW(write_file_atomically(target.string(),
                                     [](std::ostream& out) {
                                       out << "partial";
                                       throw Error("writer failed");
                                     }),
               Error);
  EXPECT_FALSE(fs::exists(target));
  EXPECT_TRUE(leftovers(dir.path).empty());
}

TEST(AtomicWrite, UnwritableDestinationsFailUpFrontNamingThePath) {
  test::ScratchDir dir;
  const std::string missing = (dir.path / "no_such_dir" / "r.json").string();
  EXPECT_CONTAINS(error_of([&] { check_output_path(missing); }), missing + ": cannot create");
  EXPECT_CONTAINS(error_of([&] { write_text_file(missing, "x"); }), missing);
  EXPECT_CONTAINS(error_of([&] { check_output_path(dir.path.string()); }), "is a directory");
  EXPECT_CONTAINS(error_of([&] { write_text_file(dir.path.string(), "x"); }), "is a directory");
  check_output_path((dir.path / "fine.json").string());
  EXPECT_TRUE(fs::is_empty(dir.path));
}

// A writer killed by a signal mid-write (Ctrl-C on `cnnrt init-weights`) leaves no temporary
// behind, and still dies of that signal.
TEST(AtomicWrite, SignalDuringWriteRemovesTheTemporary) {
  for (int signal_number : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(signal_number);
    test::ScratchDir dir;
    const fs::path target = dir.path / "big.safetensors";
    const fs::path started = dir.path / "started";
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      write_file_atomically(target.string(), [&](std::ostream& out) {
        out << std::string(1 << 20, 'x') << std::flush;
        std::ofstream(started) << "1";
        for (;;) ::pause();
      });
      ::_exit(0);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!fs::exists(started) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(fs::exists(started));
    EXPECT_EQ(leftovers(dir.path).size(), 1u);  // the temporary exists while writing
    ::kill(child, signal_number);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal_number) << status;
    EXPECT_TRUE(leftovers(dir.path).empty());
    EXPECT_FALSE(fs::exists(target));
  }
}

}  // namespace
}  // namespace cnnrt
