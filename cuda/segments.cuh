// The hub pass shared by SpMM and FusedMM: geometry of the fixed segments, the device helpers of
// the segment and combine kernels, and the stream-ordered workspace (sizing: SegmentPlan in
// policy.cuh).
//
// Segment s holds the nonzeros [s * seg, min(nnz, (s + 1) * seg)). A hub row is longer than
// thr >= seg, so it never lies inside one segment: the hub rows a segment meets are at most the
// row of its first entry (slot 0) and the row of its last entry (slot 1). Workspace slot
// 2 s + slot holds the partial result of that (segment, hub row) piece. A hub row starts in
// exactly one segment; the combine warp of that segment folds the row's slots in segment order.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common.cuh"
#include "policy.cuh"

namespace gnnsparse::cuda_detail {

// Segment s = [p0, p1); r0 and r1 are the rows of its first and of its last entry.
struct SegmentRows {
  int64_t p0, p1, r0, r1;
};
template <class I>
__device__ __forceinline__ SegmentRows segment_rows(const I* __restrict__ rowptr, int64_t M,
                                                    int64_t nnz, int64_t seg, int64_t s) {
  const int64_t p0 = s * seg, p1 = min(nnz, p0 + seg);
  return {p0, p1, row_of(rowptr, M, p0), row_of(rowptr, M, p1 - 1)};
}

// Calls piece(slot, r, kb, ke) for each hub row r (deg > thr) that segment sr meets, in slot
// order, with [kb, ke) the row's entries inside the segment.
template <class I, class F>
__device__ __forceinline__ void for_each_hub_piece(const I* __restrict__ rowptr,
                                                   const SegmentRows& sr, int64_t thr, F&& piece) {
  for (int slot = 0; slot < 2; ++slot) {
    const int64_t r = slot ? sr.r1 : sr.r0;
    if (slot == 1 && sr.r1 == sr.r0) break;
    const int64_t rk0 = rowptr[r], rk1 = rowptr[r + 1];
    if (rk1 - rk0 <= thr) continue;
    piece(slot, r, max(sr.p0, rk0), min(sr.p1, rk1));
  }
}

// Combine kernels, block b of NW warps: warp w looks at segment b * NW + w for a hub row that
// starts in it (at most one) and rows[w] gets that row or -1. Every thread of the block must call
// this; rows is complete for all of them on return.
template <int NW, class I>
__device__ __forceinline__ void hub_rows_starting_in_block(const I* __restrict__ rowptr, int64_t M,
                                                           int64_t nnz, int64_t seg, int64_t thr,
                                                           int64_t nsegments, int64_t (&rows)[NW]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    const int64_t s = int64_t(blockIdx.x) * NW + warp;
    int64_t r = -1;
    if (s < nsegments) {
      const int64_t p0 = s * seg, p1 = min(nnz, p0 + seg);
      const int64_t rr = row_of(rowptr, M, p1 - 1);
      const int64_t rk0 = rowptr[rr], rk1 = rowptr[rr + 1];
      if (rk0 >= p0 && rk1 - rk0 > thr) r = rr;
    }
    rows[warp] = r;
  }
  __syncthreads();
}

// The slot (0 or 1) that the hub row whose entries start at k0 has in segment s, one of its
// segments: 0 when the row holds the segment's first entry, else 1 (the row starts inside s and,
// being longer than a segment, holds its last). Its partial result is in workspace slot
// 2 s + hub_slot(s, seg, k0).
__device__ __forceinline__ int64_t hub_slot(int64_t s, int64_t seg, int64_t k0) {
  return (s * seg >= k0) ? 0 : 1;
}

// Sets *flag when some row is longer than thr (plain stores of the same value; the flag only
// lets the hub kernels return at once, it never touches results).
template <class I>
__global__ void hub_flag_kernel(const I* __restrict__ rowptr, int64_t M, int64_t thr,
                                int* __restrict__ flag) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < M;
       i += int64_t(gridDim.x) * blockDim.x)
    if (static_cast<int64_t>(rowptr[i + 1]) - static_cast<int64_t>(rowptr[i]) > thr) *flag = 1;
}

// Scratch of one hub pass, stream-ordered: cudaMallocAsync on the op's stream, a 16-byte header
// holding the hub flag, then the partial slots; cudaFreeAsync on the same stream after the last
// kernel that reads it, so no synchronization. If a launch throws in between, the destructor
// still frees it (unchecked: an exception is already on its way).
class HubWorkspace {
 public:
  HubWorkspace() = default;
  HubWorkspace(const HubWorkspace&) = delete;
  HubWorkspace& operator=(const HubWorkspace&) = delete;
  ~HubWorkspace() {
    if (raw_ != nullptr) (void)cudaFreeAsync(raw_, stream_);
  }

  // Allocates header + payload_bytes, clears the flag and launches the flag kernel over rows
  // [0, M) (M > 0) for rows longer than thr.
  template <class I>
  void begin(size_t payload_bytes, const I* rowptr, int64_t M, int64_t thr, cudaStream_t stream) {
    GS_CUDA_CHECK(cudaMallocAsync(&raw_, kHeader + payload_bytes, stream));
    stream_ = stream;
    GS_CUDA_CHECK(cudaMemsetAsync(flag(), 0, sizeof(int), stream));
    constexpr int B = SegmentTuning::kFlagThreads;
    const int64_t blocks = std::min<int64_t>((M + B - 1) / B, SegmentTuning::kFlagMaxBlocks);
    hub_flag_kernel<I><<<static_cast<unsigned>(blocks), B, 0, stream>>>(rowptr, M, thr, flag());
    GS_LAUNCH_CHECK("hub_flag_kernel");
  }
  int* flag() const { return static_cast<int*>(raw_); }
  // The payload from byte `offset` on, as P.
  template <class P> P* payload(size_t offset = 0) const {
    return reinterpret_cast<P*>(static_cast<char*>(raw_) + kHeader + offset);
  }
  // Releases the scratch after the kernels enqueued so far (nothing when begin was not called).
  void end() {
    if (raw_ == nullptr) return;
    void* p = raw_;
    raw_ = nullptr;
    GS_CUDA_CHECK(cudaFreeAsync(p, stream_));
  }

 private:
  static constexpr size_t kHeader = 16;
  void* raw_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace gnnsparse::cuda_detail
