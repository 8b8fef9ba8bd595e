// 64-bit content hashes for what keys a build's reuse: plan fingerprints (model_fingerprint,
// runtime/plan_file.cpp) and the timing cache's keys (text_hash, input_set_key:
// runtime/auto_plan_cache.cpp).
//
// Not cryptographic: they tell one model or input set from another (a changed weight, another
// image), not a forgery from the real thing.  Eight bytes per step (FNV-1a's multiply plus a
// shift, so high bits reach low ones), because a build hashes the whole model and the held-out
// set — AlexNet's 244 MB of weights, ~40 MB of inputs — and byte-wise FNV took ~0.1 s of each
// warm build.  Past kHashBlock bytes the blocks are hashed on the host's cores and their hashes
// hashed in order: the block size is fixed, so the value does not depend on the thread count.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "graph/host_parallel.h"

namespace cnnrt {

constexpr uint64_t kHashSeed = 0xCBF29CE484222325ull;  // FNV-1a's offset basis
constexpr size_t kHashBlock = size_t{4} << 20;         // bytes per parallel block

inline uint64_t hash_word(uint64_t hash, uint64_t word) {
  hash = (hash ^ word) * 0x100000001B3ull;
  return hash ^ (hash >> 29);
}

// Plain FNV-1a, byte by byte: short texts and numbers (a plan fingerprint's names and shapes).
inline uint64_t hash_fnv1a(const void* data, size_t size, uint64_t hash = kHashSeed) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ p[i]) * 0x100000001B3ull;
  return hash;
}

// Serial: whole 8-byte words, then the tail byte by byte.
inline uint64_t hash_bytes(const void* data, size_t size, uint64_t hash = kHashSeed) {
  const auto* base = static_cast<const unsigned char*>(data);
  const size_t words = size / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t word;
    std::memcpy(&word, base + 8 * i, 8);
    hash = hash_word(hash, word);
  }
  return hash_fnv1a(base + 8 * words, size - 8 * words, hash);
}

// hash_bytes up to kHashBlock bytes; above, the block count and each block's own hash.
inline uint64_t hash_bytes_blocked(const void* data, size_t size, uint64_t hash = kHashSeed) {
  if (size <= kHashBlock) return hash_bytes(data, size, hash);
  const auto* base = static_cast<const unsigned char*>(data);
  std::vector<uint64_t> blocks((size + kHashBlock - 1) / kHashBlock);
  parallel_for(blocks.size(), 1, [&](size_t begin, size_t end) {
    for (size_t b = begin; b < end; ++b) {
      const size_t first = b * kHashBlock;
      blocks[b] = hash_bytes(base + first, std::min(kHashBlock, size - first));
    }
  });
  hash = hash_word(hash, blocks.size());
  for (uint64_t block : blocks) hash = hash_word(hash, block);
  return hash;
}

// 16 lowercase hex digits: how fingerprints and cache keys print a hash.
inline std::string hash_hex(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace cnnrt
