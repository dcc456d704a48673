// The hub pass: one template shared by SpMM, quantized SpMM, FusedMM (and, without the combine,
// SDDMM). Sizing lives in policy.cuh (SegmentPlan).
//
// Segment s holds the nonzeros [s * seg, min(nnz, (s + 1) * seg)). A hub row is longer than
// thr >= seg, so it never lies inside one segment: the hub rows a segment meets are at most the
// row of its first entry (slot 0) and the row of its last entry (slot 1). Workspace slot
// 2 s + slot holds the partial state of that (segment, hub row) piece. A hub row starts in
// exactly one segment; the combine block of that segment folds the row's slots in a fixed order.
//
// The pass, in stream order (run_hub_pass):
//   1. hub_flag_kernel (only when the longest row is unknown): *flag = some row is a hub;
//   2. segment_map_kernel: rows[2 s], rows[2 s + 1] = the rows of segment s's first and last
//      entry, found once here (one thread per segment, both binary searches interleaved), so no
//      segment or combine kernel searches rowptr;
//   3. the op's segment kernel: for each hub piece (hub_pieces) it reduces the piece into its
//      slot -- the op's own schedule (a warp per segment, its edges split over lane sets);
//   4. the combine (launch_hub_combine): for every hub row, the threads that fold it -- a warp or,
//      for a long row, the block (hub_combine_rows_kernel, by rows), or a block per row
//      (hub_combine_kernel, by segments) -- fold thread (part, column) a contiguous range of the
//      row's slots in segment order, then the parts in order through shared memory, and
//      Cmb::write stores the result. Cmb is the op's state: its Part (the state of one slot
//      column), kLoads (slots a thread loads before folding them), identity, load, fold (the merge
//      rule: the left argument holds the earlier edges), write (the epilogue) and prefers_rows
//      (which combine GNNSPARSE_CUDA_HUB_COMBINE=auto runs for it: the one measured faster).
// Fixed segments and fixed fold orders: bitwise reproducible. No atomics.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "common.cuh"
#include "policy.cuh"

namespace gnnsparse::cuda_detail {

// What every hub kernel reads: the plan's geometry and the map (device memory of the workspace).
struct HubGeometry {
  int64_t M = 0, nnz = 0, seg = 0, thr = 0, nsegments = 0;
  const int64_t* rows = nullptr;  // 2 per segment: rows of its first and its last entry
  const int* flag = nullptr;      // 0: no hub row (every hub kernel returns at once)
  int seg_shift = 0;              // seg == 1 << seg_shift (plan_segments: a power of two)
  // The segment holding entry k (< nsegments <= SegmentTuning::kMaxSegments: 32 bits).
  __device__ __forceinline__ unsigned segment_of(int64_t k) const { return static_cast<unsigned>(k >> seg_shift); }
};

// Calls piece(slot, r, kb, ke) for each hub row r (deg > thr) that segment s meets, in slot
// order, with [kb, ke) the row's entries inside the segment.
template <class I, class F>
__device__ __forceinline__ void hub_pieces(const I* __restrict__ rowptr, const HubGeometry& g,
                                           int64_t s, F&& piece) {
  const int64_t p0 = s * g.seg, p1 = min(g.nnz, p0 + g.seg);
  const int64_t r0 = g.rows[2 * s], r1 = g.rows[2 * s + 1];
  for (int slot = 0; slot < 2; ++slot) {
    const int64_t r = slot ? r1 : r0;
    if (slot == 1 && r1 == r0) break;
    const int64_t rk0 = static_cast<int64_t>(rowptr[r]), rk1 = static_cast<int64_t>(rowptr[r + 1]);
    if (rk1 - rk0 <= g.thr) continue;
    piece(slot, r, max(p0, rk0), min(p1, rk1));
  }
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

// Clears *flag when *skip holds true (SpmmArgs::skip): every hub kernel then returns at once.
template <int = 0>
__global__ void hub_skip_kernel(const bool* __restrict__ skip, int* __restrict__ flag) {
  if (*skip) *flag = 0;
}

// rows[2 s] and rows[2 s + 1]: the rows holding segment s's first and last entry (largest r with
// rowptr[r] <= p). The two binary searches advance together, so their loads overlap.
template <class I>
__global__ void __launch_bounds__(SegmentTuning::kMapThreads)
segment_map_kernel(const I* __restrict__ rowptr, HubGeometry g, int64_t* __restrict__ rows) {
  if (*g.flag == 0) return;
  const int64_t s = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= g.nsegments) return;
  const int64_t pa = s * g.seg, pb = min(g.nnz, pa + g.seg) - 1;
  int64_t alo = 0, ahi = g.M, blo = 0, bhi = g.M;  // rowptr[lo] <= p; answer in [lo, hi)
  while (ahi - alo > 1 || bhi - blo > 1) {
    const int64_t am = (alo + ahi) >> 1, bm = (blo + bhi) >> 1;
    const bool amove = ahi - alo > 1, bmove = bhi - blo > 1;
    const int64_t av = amove ? static_cast<int64_t>(__ldg(rowptr + am)) : 0;
    const int64_t bv = bmove ? static_cast<int64_t>(__ldg(rowptr + bm)) : 0;
    if (amove) { if (av <= pa) alo = am; else ahi = am; }
    if (bmove) { if (bv <= pb) blo = bm; else bhi = bm; }
  }
  rows[2 * s] = alo;
  rows[2 * s + 1] = blo;
}

// Folds the slots of hub row r (entries [k0, k1)) with NTH threads, t this thread's index among
// them: thread (part, column) folds a contiguous range of the row's segments, Cmb::kLoads slots
// loaded before they are folded in order, then the parts are folded in order through sh (NTH
// Parts), and Cmb::write stores the result. sync() orders sh among the NTH threads.
// Segment counts in 32 bits: n <= nsegments <= 2^22 (SegmentTuning::kMaxSegments) and P <= NTH <=
// 512, so n * P < 2^32 (64-bit divisions here cost ~70 instructions each and made the combine
// kernels spill at their 64-register cap).
template <class Cmb, int NTH, class Sync>
__device__ __forceinline__ void hub_fold_row(const typename Cmb::Params& p, const HubGeometry& g, int64_t r,
                                             int64_t k0, int64_t k1, int t, typename Cmb::Part* sh, Sync sync) {
  using Part = typename Cmb::Part;
  constexpr int L = Cmb::kLoads;
  static_assert(int64_t(NTH) * SegmentTuning::kMaxSegments <= (int64_t(1) << 32), "segment counts overflow 32 bits");
  const int64_t W = Cmb::width(p);
  const unsigned CT = W < NTH ? static_cast<unsigned>(W) : unsigned(NTH), P = NTH / CT;
  const unsigned c0 = g.segment_of(k0), n = g.segment_of(k1 - 1) - c0 + 1;  // the row's segments c0 .. c0 + n - 1
  // the row's slot in each of its segments s (its partial state is in slot 2 s + slot): 1 in its
  // first segment when it starts inside it (it holds that segment's last entry), else 0 (it holds
  // the segment's first entry)
  const int64_t first_slot = (k0 & (g.seg - 1)) != 0 ? 1 : 0;
  const unsigned ut = static_cast<unsigned>(t), part = ut / CT;
  for (int64_t cb = 0; cb < W; cb += CT) {
    const int64_t cc = cb + ut % CT;
    Part acc = Cmb::identity();
    if (part < P && cc < W) {
      const unsigned q0 = n * part / P, q1 = n * (part + 1) / P;
      for (unsigned q = q0; q < q1; q += L) {
        Part v[L];
#pragma unroll
        for (int l = 0; l < L; ++l) {
          const unsigned sg = c0 + q + l;
          if (q + l < q1) v[l] = Cmb::load(p, 2 * static_cast<int64_t>(sg) + (q + l == 0 ? first_slot : 0), cc);
        }
#pragma unroll
        for (int l = 0; l < L; ++l)
          if (q + l < q1) Cmb::fold(acc, v[l]);
      }
    }
    sh[t] = acc;
    sync();
    if (ut < CT && cc < W) {
      for (unsigned q = 1; q < P; ++q)
        if (n >= P || n * q / P < n * (q + 1) / P) Cmb::fold(acc, sh[q * CT + ut]);
      Cmb::write(p, r, cc, acc, k1 - k0, static_cast<int64_t>(c0));
    }
    sync();
  }
}

// The hub row that starts in segment s, or -1 (with its entries [k0, k1) when there is one).
template <class I>
__device__ __forceinline__ int64_t hub_row_starting(const I* __restrict__ rowptr, const HubGeometry& g, int64_t s,
                                                    int64_t& k0, int64_t& k1) {
  const int64_t rr = g.rows[2 * s + 1];  // the row of the segment's last entry
  k0 = static_cast<int64_t>(rowptr[rr]);
  k1 = static_cast<int64_t>(rowptr[rr + 1]);
  return (k0 >= s * g.seg && k1 - k0 > g.thr) ? rr : -1;
}

// Combine, by rows (where Cmb::prefers_rows, or forced; widths up to kCombineWarpElems / 2):
// block b looks at segments NT b .. NT b + NT - 1, one thread each, for a hub row that starts
// there. A row of at most kCombineWarpElems slot elements (its segments x the width) is folded by
// the warp that found it (its rows in lane order); longer rows by the whole block afterwards, in
// (warp, lane) order. One wave of blocks for a graph of up to ~NT x SMs segments, where the
// segment-per-warp kernel below ran ~10 waves of mostly idle blocks (H200, power-law 1M / 10M:
// 79-94 us for a few MB of slots). The parts a row's slots are split into are 32 / min(W, 32) for
// a warp and NT / min(W, NT) for a block (the other kernel's 512 / min(W, 512)), so float sums of
// a row folded by a warp may differ from the other kernel's in the last bits; every row always
// takes the same path, so repeats stay bitwise.
template <class Cmb, class I>
__global__ void __launch_bounds__(SegmentTuning::kCombineRowThreads, 1)
hub_combine_rows_kernel(const I* __restrict__ rowptr, HubGeometry g, typename Cmb::Params p) {
  using Part = typename Cmb::Part;
  constexpr int NT = SegmentTuning::kCombineRowThreads, NW = NT / 32;
  if (*g.flag == 0) return;
  __shared__ Part sh[NT];
  __shared__ unsigned wide_rows[NW];
  const int tid = threadIdx.x, lane = tid % 32, w = tid / 32;
  const int64_t s = int64_t(blockIdx.x) * NT + tid;
  int64_t k0 = 0, k1 = 0;
  const int64_t r = s < g.nsegments ? hub_row_starting(rowptr, g, s, k0, k1) : -1;
  const int64_t n = r >= 0 ? int64_t(g.segment_of(k1 - 1)) - g.segment_of(k0) + 1 : 0;
  const bool wide = n * Cmb::width(p) > SegmentTuning::kCombineWarpElems;
  unsigned mine = __ballot_sync(0xffffffffu, r >= 0 && !wide);
  const unsigned theirs = __ballot_sync(0xffffffffu, r >= 0 && wide);
  if (lane == 0) wide_rows[w] = theirs;
  while (mine) {
    const int l = __ffs(mine) - 1;
    mine &= mine - 1;
    const int64_t rl = __shfl_sync(0xffffffffu, static_cast<long long>(r), l);
    const int64_t a = __shfl_sync(0xffffffffu, static_cast<long long>(k0), l);
    const int64_t b = __shfl_sync(0xffffffffu, static_cast<long long>(k1), l);
    hub_fold_row<Cmb, 32>(p, g, rl, a, b, lane, sh + w * 32, [] { __syncwarp(); });
  }
  __syncthreads();
  for (int ww = 0; ww < NW; ++ww) {
    for (unsigned m = wide_rows[ww]; m != 0; m &= m - 1) {
      int64_t a = 0, b = 0;
      const int64_t rw = hub_row_starting(rowptr, g, int64_t(blockIdx.x) * NT + ww * 32 + __ffs(m) - 1, a, b);
      hub_fold_row<Cmb, NT>(p, g, rw, a, b, tid, sh, [] { __syncthreads(); });
    }
  }
}

// Combine, by segments (the default for every combine but SpMM sums at narrow widths, see
// launch_hub_combine): block b looks at segments NW b .. NW b + NW - 1 (one warp each) for a hub
// row that starts in it, and folds each such row with the whole block.
template <class Cmb, class I>
__global__ void __launch_bounds__(SegmentTuning::kCombineThreads, SegmentTuning::kCombineMinBlocks)
hub_combine_kernel(const I* __restrict__ rowptr, HubGeometry g, typename Cmb::Params p) {
  using Part = typename Cmb::Part;
  constexpr int NT = SegmentTuning::kCombineThreads, NW = NT / 32;
  if (*g.flag == 0) return;
  __shared__ int64_t rows[NW];
  __shared__ Part sh[NT];
  const int tid = threadIdx.x;
  if (tid % 32 == 0) {
    const int64_t s = int64_t(blockIdx.x) * NW + tid / 32;
    int64_t k0 = 0, k1 = 0;
    rows[tid / 32] = s < g.nsegments ? hub_row_starting(rowptr, g, s, k0, k1) : -1;
  }
  __syncthreads();
  for (int w = 0; w < NW; ++w) {
    const int64_t r = rows[w];
    if (r < 0) continue;
    hub_fold_row<Cmb, NT>(p, g, r, static_cast<int64_t>(rowptr[r]), static_cast<int64_t>(rowptr[r + 1]), tid, sh,
                          [] { __syncthreads(); });
  }
}

// Scratch of one hub pass, stream-ordered: cudaMallocAsync on the op's stream, a 16-byte header
// holding the hub flag, the segment map (2 int64 per segment), then the op's slots;
// cudaFreeAsync on the same stream after the last kernel that reads it, so no synchronization.
// If a launch throws in between, the destructor still frees it (unchecked: an exception is
// already on its way).
class HubWorkspace {
 public:
  HubWorkspace() = default;
  HubWorkspace(const HubWorkspace&) = delete;
  HubWorkspace& operator=(const HubWorkspace&) = delete;
  ~HubWorkspace() {
    // unchecked, but not left behind as the runtime's last error for the next op's launch check
    if (raw_ != nullptr && cudaFreeAsync(raw_, stream_) != cudaSuccess) (void)cudaGetLastError();
  }

  // Allocates header + map + payload_bytes and launches the flag (when max_deg < 0: unknown) and
  // map kernels over rows [0, M) (M > 0). geometry() is valid afterwards. skip (a device flag, or
  // nullptr): when it holds true the hub flag is cleared, so the whole pass writes nothing.
  template <class I>
  void begin(const SegmentPlan& plan, size_t payload_bytes, const I* rowptr, int64_t M, int64_t nnz,
             int64_t max_deg, cudaStream_t stream, const bool* skip = nullptr) {
    map_bytes_ = static_cast<size_t>(plan.nsegments) * 2 * sizeof(int64_t);
    GS_CUDA_CHECK(cudaMallocAsync(&raw_, kHeader + map_bytes_ + payload_bytes, stream));
    stream_ = stream;
    if (plan.seg <= 0 || (plan.seg & (plan.seg - 1)) != 0 || plan.nsegments > SegmentTuning::kMaxSegments)
      throw std::logic_error("gnnsparse cuda: hub segments must be a power of two long and at most 2^22");
    int shift = 0;
    while ((int64_t(1) << shift) < plan.seg) ++shift;
    g_ = HubGeometry{M, nnz, plan.seg, plan.thr, plan.nsegments,
                     reinterpret_cast<const int64_t*>(static_cast<char*>(raw_) + kHeader),
                     static_cast<const int*>(raw_), shift};
    int* flag = static_cast<int*>(raw_);
    // a known longest row above the threshold: the flag is set without looking (any non-zero byte)
    GS_CUDA_CHECK(cudaMemsetAsync(flag, max_deg < 0 ? 0 : 1, sizeof(int), stream));
    if (max_deg < 0) {
      constexpr int B = SegmentTuning::kFlagThreads;
      const int64_t blocks = std::min<int64_t>((M + B - 1) / B, SegmentTuning::kFlagMaxBlocks);
      hub_flag_kernel<I><<<static_cast<unsigned>(blocks), B, 0, stream>>>(rowptr, M, plan.thr, flag);
      GS_LAUNCH_CHECK("hub_flag_kernel");
    }
    if (skip != nullptr) {
      hub_skip_kernel<><<<1, 1, 0, stream>>>(skip, flag);
      GS_LAUNCH_CHECK("hub_skip_kernel");
    }
    segment_map_kernel<I><<<static_cast<unsigned>(plan.map_blocks()), SegmentTuning::kMapThreads, 0, stream>>>(
        rowptr, g_, const_cast<int64_t*>(g_.rows));
    GS_LAUNCH_CHECK("segment_map_kernel");
  }
  const HubGeometry& geometry() const { return g_; }
  // The payload from byte `offset` on, as P.
  template <class P> P* payload(size_t offset = 0) const {
    return reinterpret_cast<P*>(static_cast<char*>(raw_) + kHeader + map_bytes_ + offset);
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
  size_t map_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  HubGeometry g_;
};

// The hub pass on a second stream, concurrent with the op's row kernel on the caller's stream.
// They write disjoint rows (the row kernels leave hub rows to the pass) and share only inputs, and
// neither fills the GPU alone on a skewed graph (H200, power-law SpMM C = 32: segment kernel 19 %,
// row kernel 23 % achieved occupancy). Stream-ordered: the side stream waits (event) for what the
// caller's stream holds when the pass starts, and the caller's stream waits for the side stream
// before the op returns, so the op is still one unit of work on the caller's stream, with no host
// synchronization; CUDA graph capture records it as a fork and a join. One non-blocking side
// stream per device, made on first use and kept for the process. Concurrent only for a known hub
// (max_deg > thr: a graph that has one), so the op's other calls pay no extra host work, and
// unless GNNSPARSE_CUDA_HUB_STREAM=0 (one stream, for comparison). Results do not depend on it.
// The side stream has the greatest priority unless GNNSPARSE_CUDA_HUB_PRIORITY=normal.
class HubStream {
 public:
  HubStream(cudaStream_t main, bool concurrent) : main_(main), side_(main) {
    if (!concurrent || !enabled()) return;
    side_ = side_stream(high_priority());
    GS_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    GS_CUDA_CHECK(cudaEventRecord(fork_, main_));
    GS_CUDA_CHECK(cudaStreamWaitEvent(side_, fork_, 0));
  }
  HubStream(const HubStream&) = delete;
  HubStream& operator=(const HubStream&) = delete;
  ~HubStream() { (void)finish(); }  // an exception on its way: still order the streams (unchecked)
  // Where the hub pass runs: the side stream, or the caller's.
  cudaStream_t stream() const { return side_; }
  // The caller's stream waits for the hub pass (also done by the destructor; call it to see errors).
  void join() { GS_CUDA_CHECK(finish()); }

 private:
  // The caller's stream waits (event) for what the side stream holds; the fork event is released.
  cudaError_t finish() {
    if (fork_ == nullptr) return cudaSuccess;
    cudaEvent_t join = nullptr;
    cudaError_t r = cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
    if (r == cudaSuccess) {
      r = cudaEventRecord(join, side_);
      if (r == cudaSuccess) r = cudaStreamWaitEvent(main_, join, 0);
      (void)cudaEventDestroy(join);
    }
    (void)cudaEventDestroy(fork_);
    fork_ = nullptr;
    if (r != cudaSuccess) (void)cudaGetLastError();  // returned, not left for the next launch check
    return r;
  }
  static bool enabled() {
    const char* e = std::getenv("GNNSPARSE_CUDA_HUB_STREAM");
    if (e == nullptr || *e == '\0' || std::strcmp(e, "1") == 0) return true;
    if (std::strcmp(e, "0") == 0) return false;
    throw std::invalid_argument(std::string("gnnsparse cuda: GNNSPARSE_CUDA_HUB_STREAM must be 0 or 1, got '") + e +
                                "'");
  }
  // GNNSPARSE_CUDA_HUB_PRIORITY: "high" (unset or "": the default) gives the side stream the
  // device's greatest priority, so the hub pass's blocks -- the segment kernel and then the
  // combine, which waits for it and used to start only when the row kernel's queued blocks had
  // drained -- are scheduled ahead of the row kernel's waiting blocks; "normal" the default
  // priority (for the bench). Priorities order block scheduling only: results do not depend on it.
  static bool high_priority() {
    const char* e = std::getenv("GNNSPARSE_CUDA_HUB_PRIORITY");
    if (e == nullptr || *e == '\0' || std::strcmp(e, "high") == 0) return true;
    if (std::strcmp(e, "normal") == 0) return false;
    throw std::invalid_argument(std::string("gnnsparse cuda: GNNSPARSE_CUDA_HUB_PRIORITY must be high or normal, got '") +
                                e + "'");
  }
  static cudaStream_t side_stream(bool high) {
    static std::mutex mu;
    static std::unordered_map<int, cudaStream_t> streams;  // key: 2 device + high
    int dev = 0;
    GS_CUDA_CHECK(cudaGetDevice(&dev));
    std::lock_guard<std::mutex> lock(mu);
    auto it = streams.find(2 * dev + (high ? 1 : 0));
    if (it != streams.end()) return it->second;
    int least = 0, greatest = 0;
    GS_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaStream_t s = nullptr;
    GS_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, high ? greatest : least));
    streams.emplace(2 * dev + (high ? 1 : 0), s);
    return s;
  }
  cudaStream_t main_, side_;
  cudaEvent_t fork_ = nullptr;
};

// GNNSPARSE_CUDA_HUB_COMBINE: "auto" (unset or "": the default) runs the combine each Cmb measured
// faster (Cmb::prefers_rows); "rows" and "segments" force one, for the bench and the tests. Read at
// every launch.
enum class HubCombine { automatic, rows, segments };
inline HubCombine hub_combine_knob() {
  const char* e = std::getenv("GNNSPARSE_CUDA_HUB_COMBINE");
  if (e == nullptr || *e == '\0' || std::strcmp(e, "auto") == 0) return HubCombine::automatic;
  if (std::strcmp(e, "rows") == 0) return HubCombine::rows;
  if (std::strcmp(e, "segments") == 0) return HubCombine::segments;
  throw std::invalid_argument(
      std::string("gnnsparse cuda: GNNSPARSE_CUDA_HUB_COMBINE must be auto, rows or segments, got '") + e + "'");
}

// Launches the combine of a hub pass whose segment kernel has run. Under auto, by rows only where
// Cmb::prefers_rows: on an H100 (2026-12-07, power-law 1M rows / 10M entries, bench/hubs.py) the
// combine by rows was faster only for SpMM sums at 16 columns (368.7 vs 414.4 us), the same at 32
// and 128, and 8-14 % slower for max / min with arg at every width (its block-folded largest rows
// run on a fraction of the SMs, after the warp-folded ones). Either combine is bitwise
// reproducible; for float sums the two may differ in the last bits (hub_combine_rows_kernel).
template <class Cmb, class I>
void launch_hub_combine(const SegmentPlan& plan, const I* rowptr, const HubWorkspace& ws,
                        const typename Cmb::Params& p, cudaStream_t stream) {
  const HubCombine how = hub_combine_knob();
  const bool by_rows = how == HubCombine::rows || (how == HubCombine::automatic && Cmb::prefers_rows(p));
  // Rows of a width above kCombineWarpElems / 2 would all be folded by blocks (every hub row
  // spans at least two segments), one after another: those keep the combine by segments.
  if (by_rows && 2 * Cmb::width(p) <= SegmentTuning::kCombineWarpElems) {
    hub_combine_rows_kernel<Cmb, I><<<static_cast<unsigned>(plan.combine_row_blocks()),
                                      SegmentTuning::kCombineRowThreads, 0, stream>>>(rowptr, ws.geometry(), p);
    GS_LAUNCH_CHECK("hub_combine_rows_kernel");
    return;
  }
  hub_combine_kernel<Cmb, I><<<static_cast<unsigned>(plan.combine_blocks()), SegmentTuning::kCombineThreads, 0,
                               stream>>>(rowptr, ws.geometry(), p);
  GS_LAUNCH_CHECK("hub_combine_kernel");
}

}  // namespace gnnsparse::cuda_detail
