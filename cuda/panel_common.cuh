// Pieces shared by the dense-ish SpMM kernels (panel.cu: CUDA-core row panels; panel_tc.cu:
// tensor-core row panels): the split-K workspace and the combine that adds the slices' partial
// sums in slice order, a group-wide search for a slice's first entry, and the knob parser.
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>

#include "common.cuh"

namespace gnnsparse::cuda_detail {
namespace {  // device code and per-instance flags: one copy per translation unit

// First p in [lo, hi) with col[p] >= key (hi if none), for sorted col[lo, hi): each step the G
// lanes of the group probe G evenly spaced entries and one ballot narrows the range to one of the
// G + 1 gaps. lo, hi and key must be the same in every lane of the group.
template <int G, class I>
__device__ __forceinline__ int64_t group_lower_bound(const I* __restrict__ col, int64_t lo, int64_t hi, int key,
                                                     int li, unsigned gmask) {
  while (hi > lo) {
    const int64_t n = hi - lo;
    const int64_t p = lo + n * (li + 1) / (G + 1);  // < hi
    const bool below = static_cast<int64_t>(__ldg(col + p)) < key;
    const int cnt = __popc(__ballot_sync(gmask, below) & gmask);  // probes below key: a prefix
    const int64_t nlo = cnt > 0 ? lo + n * cnt / (G + 1) + 1 : lo;
    const int64_t nhi = cnt < G ? lo + n * (cnt + 1) / (G + 1) : hi;
    lo = nlo;
    hi = nhi;
  }
  return lo;
}

// Y = the slices' partial sums added in slice order (mean divided, empty rows 0).
template <class I>
__global__ void panel_combine_kernel(const I* __restrict__ rowptr, const float* __restrict__ part,
                                     float* __restrict__ Y, int64_t M, int64_t C, int split, int mean,
                                     const bool* __restrict__ skip) {
  if (skip != nullptr && *skip) return;  // SpmmArgs::skip: the call writes nothing
  const int64_t MC = M * C;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < MC; e += int64_t(gridDim.x) * blockDim.x) {
    float s = part[e];
    for (int q = 1; q < split; ++q) s += part[q * MC + e];
    const int64_t row = e / C;
    const int64_t deg = static_cast<int64_t>(__ldg(rowptr + row + 1)) - static_cast<int64_t>(__ldg(rowptr + row));
    Y[e] = deg == 0 ? 0.f : (mean ? s / static_cast<float>(deg) : s);
  }
}

}  // namespace

constexpr int kCombineThreads = 256;
constexpr int64_t kCombineMaxBlocks = 4096;

// The split path's partial sums: stream-ordered scratch from a pool of our own per device that
// keeps freed memory for the next call. (The default pool hands memory back to the system at each
// synchronization, and mapping it again per call is host time inside the op.) The pool holds at
// most the largest workspace in use at once: with the policy's split, S M C <= (264 + panels x
// column blocks) BM BN < 528 x 8192 floats = 17 MB (more only when GNNSPARSE_CUDA_PANEL_SPLIT
// forces a split).
cudaMemPool_t split_pool();

class SplitWorkspace {
 public:
  SplitWorkspace(size_t bytes, cudaStream_t stream) : stream_(stream) {
    GS_CUDA_CHECK(cudaMallocFromPoolAsync(&raw_, bytes, split_pool(), stream));
  }
  SplitWorkspace(const SplitWorkspace&) = delete;
  SplitWorkspace& operator=(const SplitWorkspace&) = delete;
  ~SplitWorkspace() {  // unchecked, and not left as the runtime's last error for the next op
    if (cudaFreeAsync(raw_, stream_) != cudaSuccess) (void)cudaGetLastError();
  }
  float* get() const { return static_cast<float*>(raw_); }

 private:
  void* raw_ = nullptr;
  cudaStream_t stream_;
};

// A tuning override for the bench and the tests: unset / "" -> 0, else one of `allowed`.
int env_choice(const char* name, std::initializer_list<int> allowed);

}  // namespace gnnsparse::cuda_detail
