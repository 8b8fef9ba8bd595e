// Reading the small files cnnrt is handed (models, plan files, calibration files, timing caches)
// with the limits a hostile or mistaken path needs before any parser sees the bytes.
//
// A wrong path can name a directory, a device (/dev/zero), a disk image or a file another
// process is writing; a hostile JSON text can nest deeply or hold millions of tiny values, and
// nlohmann's parser spends memory and time in proportion to both.  These checks run first, so
// every reader fails with one clear message naming the file instead of exhausting memory.
#pragma once

#include <cstdint>
#include <string>

namespace cnnrt {

// The whole of `path`, a regular file of at most `max_bytes`.  `what` names the kind of file in
// errors ("model file" -> "cannot open model file (no such file)", "is a directory, not a model
// file", "model file of N bytes is larger than M bytes").  Errors are cnnrt::Error naming `path`.
std::string read_bounded_text_file(const std::string& path, const std::string& what,
                                   uint64_t max_bytes);

// One pass over a JSON text before it is parsed: "" when it nests at most `max_depth` levels
// and holds at most `max_values` values (counted by commas and brackets outside strings), else
// what is wrong and at which byte, as a predicate for the caller's subject ("nests deeper than
// 64 levels (at byte 76)", "has more than N JSON values (at byte B)"); `base` is added to the
// byte (e.g. the 8-byte safetensors prefix).
// pread until `bytes` bytes at `offset` are in `destination` (retrying interrupted and short
// reads): the count read, less than `bytes` where the file ends first, or -1 on a read error
// (errno set).  Thread-safe on one descriptor: the parallel readers of weights and .npy files.
int64_t pread_fully(int fd, char* destination, uint64_t bytes, uint64_t offset);

std::string json_shape_problem(const std::string& text, int max_depth, uint64_t max_values,
                               uint64_t base = 0);

}  // namespace cnnrt
