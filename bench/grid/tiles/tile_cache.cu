// TileCache build: CSR -> column-chunk-major bitmask + 128-column segment offsets.
//
// Pass 1 (one warp per row): the row's columns are read 32 at a time; lanes holding columns of
// the same 32-column word (contiguous, the row being sorted) OR their bits by a segmented
// shuffle scan, and the last lane of each run writes the word (OR-ing into what an earlier batch
// of the same row wrote: batches are sequential in the warp). A column out of range or not
// strictly increasing sets the ineligibility flag. Pass 2 (one thread per row): prefix counts of
// the words at every 128-column segment. Plain stores only: the result is bitwise deterministic.
#include <mutex>
#include <vector>

#include "tile_host.cuh"
#include "tiled.hpp"

namespace gnnsparse::tiles {

DeviceInfo device_info() {
  static std::mutex mu;
  static std::vector<DeviceInfo> cache;
  int dev = 0;
  GS_TILE_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(cache.size()) <= dev) cache.resize(dev + 1);
  DeviceInfo& d = cache[dev];
  if (d.sms == 0) {
    GS_TILE_CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev));
    GS_TILE_CHECK(cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, dev));
    GS_TILE_CHECK(cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  }
  return d;
}

template <class I>
__global__ void build_mask_kernel(const I* __restrict__ rowptr, const I* __restrict__ col,
                                  int64_t M, int64_t K, int64_t Mp, uint32_t* __restrict__ mask,
                                  int* __restrict__ bad) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (row >= M) return;
  const int64_t b = static_cast<int64_t>(rowptr[row]), e = static_cast<int64_t>(rowptr[row + 1]);
  int64_t prev_last = -1;  // last column of the previous batch
  bool ok = true;
  for (int64_t k0 = b; k0 < e; k0 += 32) {
    const int64_t k = k0 + lane;
    const bool in = k < e;
    const int64_t c = in ? static_cast<int64_t>(col[k]) : INT64_MAX;
    int64_t before = __shfl_up_sync(0xffffffffu, c, 1);
    if (lane == 0) before = prev_last;
    if (in && (c < 0 || c >= K || c <= before)) ok = false;
    const int64_t w = (in && c >= 0 && c < K) ? (c >> 5) : -1 - lane;  // unique for invalid lanes
    uint32_t v = (in && c >= 0 && c < K) ? (1u << (c & 31)) : 0u;
    // segmented inclusive OR over runs of equal w (runs are contiguous for sorted rows)
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const uint32_t vu = __shfl_up_sync(0xffffffffu, v, d);
      const int64_t wu = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d && wu == w) v |= vu;
    }
    const int64_t wn = __shfl_down_sync(0xffffffffu, w, 1);
    const bool tail = (lane == 31) || (wn != w);
    if (in && w >= 0 && tail) {
      uint32_t* p = mask + w * Mp + row;
      *p |= v;
    }
    prev_last = __shfl_sync(0xffffffffu, c, 31);
    __syncwarp();
  }
  if (__any_sync(0xffffffffu, !ok) && lane == 0) *bad = 1;
}

__global__ void build_segoff_kernel(const uint32_t* __restrict__ mask, int64_t M, int64_t Mp,
                                    int64_t KW, int64_t KS, uint32_t* __restrict__ segoff) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= Mp) return;
  uint32_t run = 0;
  for (int64_t s = 0; s < KS; ++s) {
    segoff[s * Mp + row] = run;
    for (int64_t w = s * 4; w < s * 4 + 4 && w < KW; ++w) run += __popc(mask[w * Mp + row]);
  }
}

}  // namespace gnnsparse::tiles

namespace gnnsparse::cuda {

namespace {
int64_t padded_rows(int64_t M) { return (M + kTileRowPad - 1) / kTileRowPad * kTileRowPad; }
int64_t words(int64_t K) { return (K + kTileChunk - 1) / kTileChunk; }
int64_t segments(int64_t K) { return (K + kTileSegment - 1) / kTileSegment; }
}  // namespace

std::size_t tile_cache_bytes(std::int64_t M, std::int64_t K) {
  const int64_t Mp = padded_rows(M);
  return static_cast<std::size_t>(4 * Mp * (words(K) + segments(K)) + 16);
}

bool tile_cache_build(const CsrView& A, void* storage, TileCache* out, cudaStream_t stream) {
  using namespace gnnsparse::tiles;
  TileCache c;
  c.M = A.M;
  c.K = A.K;
  c.nnz = A.nnz;
  c.Mp = padded_rows(A.M);
  c.KW = words(A.K);
  c.KS = segments(A.K);
  auto* base = static_cast<uint32_t*>(storage);
  uint32_t* mask = base;
  uint32_t* segoff = mask + c.Mp * c.KW;
  int* bad = reinterpret_cast<int*>(segoff + c.Mp * c.KS);
  GS_TILE_CHECK(cudaMemsetAsync(mask, 0, sizeof(uint32_t) * c.Mp * c.KW, stream));
  GS_TILE_CHECK(cudaMemsetAsync(bad, 0, sizeof(int), stream));
  if (A.M > 0 && A.K > 0) {
    const int threads = 256;
    const int64_t blocks = (A.M * 32 + threads - 1) / threads;
    if (A.itype == IType::i32)
      build_mask_kernel<int32_t><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
          static_cast<const int32_t*>(A.rowptr), static_cast<const int32_t*>(A.col), A.M, A.K,
          c.Mp, mask, bad);
    else
      build_mask_kernel<int64_t><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
          static_cast<const int64_t*>(A.rowptr), static_cast<const int64_t*>(A.col), A.M, A.K,
          c.Mp, mask, bad);
    GS_TILE_CHECK(cudaGetLastError());
    build_segoff_kernel<<<static_cast<unsigned>((c.Mp + 255) / 256), 256, 0, stream>>>(
        mask, A.M, c.Mp, c.KW, c.KS, segoff);
    GS_TILE_CHECK(cudaGetLastError());
  }
  int h_bad = 0;
  GS_TILE_CHECK(cudaMemcpyAsync(&h_bad, bad, sizeof(int), cudaMemcpyDeviceToHost, stream));
  GS_TILE_CHECK(cudaStreamSynchronize(stream));
  c.mask = mask;
  c.segoff = segoff;
  // Offsets are 32-bit relative to rowptr[i]: a row holds at most K < 2^32 entries.
  c.eligible = h_bad == 0 && A.K < (int64_t(1) << 32);
  *out = c;
  return c.eligible;
}

}  // namespace gnnsparse::cuda
