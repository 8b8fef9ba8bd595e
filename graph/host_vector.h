// HostVector: a std::vector whose resize() leaves new elements uninitialised, for large host
// buffers that are filled completely right after (weights read from a file, packed layouts).
#pragma once

#include <memory>
#include <utility>
#include <vector>

namespace cnnrt {

// An allocator whose resize() leaves new elements uninitialised (default-initialised), for host
// buffers that a parallel_for fills completely.  Why: std::vector's value-initialisation writes
// every byte on the calling thread, and that first touch is where the kernel maps the pages —
// ~0.8 ms per MB, i.e. ~125 ms for fc6's 151 MB fp32 pack on one core, more than the pack
// itself (measured on the build machine).  Touched first inside the parallel fill, the pages are
// mapped on all the host's cores.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // no value-initialisation
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// A host vector whose resize() does not zero: every element must be written before it is read.
template <typename T>
using HostVector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace cnnrt
