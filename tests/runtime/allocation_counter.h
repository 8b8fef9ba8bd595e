// Heap allocations made by this test binary so far (allocation_counter.cpp replaces the global
// operator new/delete), so a test can assert that a call makes none.
#pragma once

namespace cnnrt::test {

long heap_allocations();

}  // namespace cnnrt::test
