// The warpgroup roles of tma_mainloop.cuh's TMA conv mainloop: how many threads an instance
// launches with, how setmaxnreg splits the register file between the producer warpgroup and the
// consumers, and the register count every kernel image must start at (the host checks it with
// tma::register_problem: an inc that cannot be satisfied would hang).  Host and device code.
#pragma once

namespace cnnrt::cuda::tma_detail {

// The warpgroup roles of an instance with C consumer warpgroups: its threads (the producer
// warpgroup + C), setmaxnreg's split and the registers every image must start at (what the host
// checks).  C = 2 (every family): 128 x 40 + 256 x 232 = 64512 from 168 at entry.  C = 3 (int8's
// 192-row tiles, each consumer one m64 block): launch bounds (512, 1) start it at 128; the
// producer's 32 leave (65536 - 128 x 32) / 384 = 160 per consumer thread (96 accumulators of
// m64n192 and the epilogue's working set; the producer spilled at 24 on the paired rows).
template <int C>
struct TmaRoles;
template <>
struct TmaRoles<2> {
  static constexpr int kThreads = 384, kProducerRegs = 40, kConsumerRegs = 232, kEntryRegs = 168;
};
template <>
struct TmaRoles<3> {
  static constexpr int kThreads = 512, kProducerRegs = 32, kConsumerRegs = 160, kEntryRegs = 128;
};
template <int C>
constexpr bool roles_fit() {
  using R = TmaRoles<C>;
  return R::kThreads == 128 * (C + 1) && R::kEntryRegs * R::kThreads <= 65536 &&
         128 * R::kProducerRegs + 128 * C * R::kConsumerRegs <= R::kEntryRegs * R::kThreads &&
         R::kConsumerRegs % 8 == 0 && R::kProducerRegs % 8 == 0;
}
static_assert(roles_fit<2>() && roles_fit<3>(), "setmaxnreg's split fits the register file");
// The consumer warpgroups of a dense tile of BM rows: two of BM / 2 rows where BM is a multiple
// of 128, three of 64 rows for BM = 192 (tma_s8.cu's 192x192).
constexpr int consumers_for_rows(int bm) { return bm % 128 == 0 ? 2 : 3; }
// The threads such a tile launches with: 384, or 512 for three consumers.
constexpr int threads_for_rows(int bm) {
  return consumers_for_rows(bm) == 2 ? TmaRoles<2>::kThreads : TmaRoles<3>::kThreads;
}
// The pixels of one im2col box of such a tile's A (the input map the host encodes for it): boxes
// of 128 pixels, or one box of all BM rows where BM is not a multiple of 128 (192).
constexpr int im2col_box_pixels(int bm) { return bm % 128 == 0 ? 128 : bm; }
// The two-consumer constants every family but int8's 192-row tiles uses.
constexpr int kThreads = TmaRoles<2>::kThreads;
constexpr int kProducerRegs = TmaRoles<2>::kProducerRegs,
              kConsumerRegs = TmaRoles<2>::kConsumerRegs, kEntryRegs = TmaRoles<2>::kEntryRegs;

}  // namespace cnnrt::cuda::tma_detail
