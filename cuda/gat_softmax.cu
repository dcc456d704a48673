// GAT's edge softmax in pieces (contract: gnnsparse/gat_softmax.hpp), for the quantized GAT
// attention's backward without a whole (nnz, H) alpha: the per-row stats (m, inv) from the
// per-node logits, alpha in transpose order, and the softmax / leaky_relu gradient written over
// dP in place. Every alpha is formed again where it is used (one exp per entry and pass) instead
// of being stored.
//
// Geometry (STATS, GRAD), rows of fewer than kGatLongRow entries: a group of G lanes per row with
// all its heads. A lane is an (entry slot, head) pair, lane = slot * HP + h with HP = H rounded up
// to a power of two (at most 32; more heads are taken 32 at a time), so the group walks G / HP
// consecutive entries per step, U steps' loads in flight. All heads together rather than a warp
// per (row, head): an entry's column is loaded once for its H heads instead of H times, its fs row
// (H adjacent floats) is one gathered segment, and the row's t (deg x H, contiguous) is read and
// written in whole consecutive runs, where a warp per (row, head) would read it at stride H, H
// times over. The price: lanes of heads >= H idle (H = 3: a quarter). G (HP .. 32) is picked from
// the average row so that a row's entries take about one round of U loads: each row is a chain of
// dependent loads (rowptr, col, the fs gather), so the kernel is bound by rows in flight -- 32 / G
// rows per warp, at least kRowMinBlocks blocks per SM (H100, 2026-12-07, 121M entries, H = 4:
// 64 / 48 / 32 warps per SM gave STATS 2.5 / 3.2 / 3.7 ms; only 48 stays free of spills; on a
// graph of 4.6 entries a row, G = 8 instead of a warp per row: STATS 4.2 -> 2.8 ms). Each lane
// folds its entries in ascending order; the lanes of a head are merged by an xor tree over the
// slots (fixed, so bitwise reproducible).
// Long rows (>= kGatLongRow entries) are cut into segments of kGatSegment entries, a block each,
// launched before the rows kernel: each writes its per-head partial state into a stream-ordered
// scratch (its warps merged through shared memory in warp order), folded in segment order by a
// combine launch (STATS) or by each segment's block before it writes its entries (GRAD). So a hub
// of millions of entries spreads over the GPU (a 2M-entry row added 0.1 ms to STATS, where one
// block per row would take it alone for milliseconds). The segments of the long-row list are
// counted on the device by CUB's scan (no host synchronization; a single block did it in 0.41 ms
// for a padded list of 119k entries, twice per training step: H100, 2026-12-07, ncu).
// GRAD reads a row twice (the sum r, then the writes: the second pass mostly hits L1 / L2) and
// overwrites t in place: each element is read and written by the one lane that owns it.
//
// Geometry (WEIGHTS_T): no reduction, so a map over the transposed entries: each warp takes a
// fixed run of consecutive entries (kRunSteps steps of 32 / HP), each lane finds its transposed
// row by one binary search and then walks t_rowptr forward. Hub columns cost nothing extra and
// need no list; the stores are consecutive. Its cost is the random gathers of row i's fd, m and
// inv: gat_softmax_stats' m and inv are the halves of one (M, 2, H) buffer (ld_m = ld_inv = 2H),
// so a row's pair is one segment (with the t_col loads issued ahead of the row walk: 9.4 -> 6.5 ms
// for 121M entries, H = 4, H100; 2.5 ms at H = 1, where the tables fit in L2). Still 5.6 ms at
// H = 4 (ncu, 2026-12-07: 2.15 TB/s, two 32-byte sectors gathered per entry), so the LSE form:
// the caller packs (fd, lse) per row, lse = m + log(sum), and alpha = exp(l - lse) -- one sector
// per entry at H = 4.
#include <cmath>

#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "common.cuh"
#include "dispatch.cuh"
#include "gnnsparse/cuda_quant.hpp"

namespace gnnsparse::cuda_detail {

struct GatSoftmaxTuning {
  static constexpr int kThreads = 512;    // a block: 16 warps of rows, or one long-row segment
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kUnroll = 4;       // steps whose loads a lane has in flight together
  static constexpr int kRowMinBlocks = 3; // rows kernel: 48 warps per SM (latency-bound: rows in flight)
  static constexpr int kRunSteps = 64;    // WEIGHTS_T: steps of 32 / HP entries per warp run (one binary search)
  static constexpr int kCombineThreads = 128;
};

template <class I>
struct GatParams {
  const I* __restrict__ rowptr;     // A's (WEIGHTS_T: t_rowptr)
  const I* __restrict__ col;        // A's (WEIGHTS_T: t_col)
  const I* __restrict__ long_rows;  // STATS / GRAD: n_long rows (or -1 / short rows: skipped)
  const int64_t* __restrict__ seg_first;  // long-row entry q owns segments [seg_first[q], seg_first[q + 1])
  const float* __restrict__ fd;
  const float* __restrict__ fs;
  float* m;    // STATS: written; the others: read (through __ldg). Rows ld_m floats apart
  float* inv;  // likewise, rows ld_inv apart
  float* E;    // WEIGHTS_T: aT; GRAD: t, read then overwritten (plain loads: no read-only path)
  float* ws;   // long-row segments' partial states: seg x H (m, then s) floats, or seg x H sums
  int64_t M;   // rows of the structure walked (WEIGHTS_T: the transpose's)
  int64_t nnz, H, n_long, nseg, ld_m, ld_inv;
  int64_t ld_fd;  // WEIGHTS_T: fd's row stride (the others read fd at stride H)
  float slope;
  int lh;      // log2(HP)
};

// leaky_relu with the product rounded on its own (never fused into what follows).
__device__ __forceinline__ float gat_leaky(float e, float slope) { return e > 0.f ? e : __fmul_rn(slope, e); }

__device__ __forceinline__ float gat_alpha(float fdv, float fsv, float mv, float iv, float slope) {
  return __fmul_rn(expf(__fsub_rn(gat_leaky(__fadd_rn(fdv, fsv), slope), mv)), iv);
}

// One logit l into a lane's running (max m, sum s) of its entries: one exp per entry, exp(-|l - m|)
// either rescales the sum (a new max) or is the entry's term. From m = -inf, s = 0.
__device__ __forceinline__ void gat_online_step(float& m, float& s, float l) {
  const bool gt = l > m;
  const float d = expf(gt ? __fsub_rn(m, l) : __fsub_rn(l, m));
  s = gt ? __fmaf_rn(s, d, 1.0f) : __fadd_rn(s, d);
  m = gt ? l : m;
}

// (m, s) := the merge with (om, os). Symmetric in its two states (max and + commute, each side's
// rescaled term is rounded alone), so both lanes of an xor exchange hold the same bits; a side at
// the max (also two empty states, m = -inf) is not rescaled (no exp(-inf + inf)).
__device__ __forceinline__ void gat_online_merge(float& m, float& s, float om, float os) {
  const float mn = fmaxf(m, om);
  const float a = m == mn ? s : __fmul_rn(s, expf(__fsub_rn(m, mn)));
  const float b = om == mn ? os : __fmul_rn(os, expf(__fsub_rn(om, mn)));
  s = __fadd_rn(a, b);
  m = mn;
}

// A team on entries [kb, ke) of row i: a group of G lanes of a warp (a short row; G a power of
// two, HP <= G <= 32, shuffles within the group: `mask`) or the whole block (BLOCK: a long row's
// segment, G = kThreads, the warps merged through shared memory sa / sb). Thread `tid` of the team
// is slot tid >> lh of head tid & (HP - 1) (within the head chunk).
template <class I, bool BLOCK>
struct GatRow {
  static constexpr int U = GatSoftmaxTuning::kUnroll;
  using Smem = float (*)[32];

  // The lanes of one head across the slots of the group / warp (xor offsets >= HP keep the head).
  __device__ __forceinline__ static void lanes_merge(float& m, float& s, int G, int HP, unsigned mask) {
    for (int o = min(G, 32) >> 1; o >= HP; o >>= 1)
      gat_online_merge(m, s, __shfl_xor_sync(mask, m, o), __shfl_xor_sync(mask, s, o));
  }
  __device__ __forceinline__ static float lanes_sum(float r, int G, int HP, unsigned mask) {
    for (int o = min(G, 32) >> 1; o >= HP; o >>= 1) r = __fadd_rn(r, __shfl_xor_sync(mask, r, o));
    return r;
  }

  // The team's state of head (tid & (HP - 1)) in every thread of the team.
  __device__ __forceinline__ static void team_merge(float& m, float& s, int tid, int G, int HP, unsigned mask,
                                                    Smem sa, Smem sb) {
    lanes_merge(m, s, G, HP, mask);
    if constexpr (BLOCK) {
      const int warp = tid >> 5, lane = tid & 31;
      if (lane < HP) { sa[warp][lane] = m; sb[warp][lane] = s; }  // slot 0 of the warp
      __syncthreads();
      const int h = tid & (HP - 1);
      m = sa[0][h];
      s = sb[0][h];
      for (int w = 1; w < GatSoftmaxTuning::kWarps; ++w) gat_online_merge(m, s, sa[w][h], sb[w][h]);  // in order
      __syncthreads();  // before the next head chunk writes sa / sb again
    }
  }
  __device__ __forceinline__ static float team_sum(float r, int tid, int G, int HP, unsigned mask, Smem sa) {
    r = lanes_sum(r, G, HP, mask);
    if constexpr (BLOCK) {
      const int warp = tid >> 5, lane = tid & 31;
      if (lane < HP) sa[warp][lane] = r;
      __syncthreads();
      const int h = tid & (HP - 1);
      r = sa[0][h];
      for (int w = 1; w < GatSoftmaxTuning::kWarps; ++w) r = __fadd_rn(r, sa[w][h]);
      __syncthreads();
    }
    return r;
  }

  // fs values of this lane's next U entries k + u S (< ke), the U column loads issued first.
  __device__ __forceinline__ static void gather(const GatParams<I>& p, int64_t k, int64_t ke, int64_t S, int64_t h,
                                                float (&f)[U]) {
    I c[U];
#pragma unroll
    for (int u = 0; u < U; ++u) c[u] = k + u * S < ke ? __ldg(p.col + k + u * S) : I(0);
#pragma unroll
    for (int u = 0; u < U; ++u) f[u] = k + u * S < ke ? __ldg(p.fs + static_cast<int64_t>(c[u]) * p.H + h) : 0.f;
  }
  __device__ __forceinline__ static void load_t(const GatParams<I>& p, int64_t k, int64_t ke, int64_t S, int64_t h,
                                                float (&t)[U]) {
#pragma unroll
    for (int u = 0; u < U; ++u) t[u] = k + u * S < ke ? p.E[(k + u * S) * p.H + h] : 0.f;
  }

  // STATS: the (max, sum) of head h (act: h < H) over [kb, ke), merged over the team.
  __device__ __forceinline__ static void stats(const GatParams<I>& p, int64_t i, int64_t kb, int64_t ke, int tid,
                                               int G, unsigned mask, int64_t h, bool act, float& m, float& s,
                                               Smem sa, Smem sb) {
    const int64_t S = G >> p.lh;
    m = -INFINITY;
    s = 0.f;
    if (act) {
      const float fdv = __ldg(p.fd + i * p.H + h);
      for (int64_t k = kb + (tid >> p.lh); k < ke; k += S * U) {
        float f[U];
        gather(p, k, ke, S, h, f);
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (k + u * S < ke) gat_online_step(m, s, gat_leaky(__fadd_rn(fdv, f[u]), p.slope));
      }
    }
    team_merge(m, s, tid, G, 1 << p.lh, mask, sa, sb);
  }

  // GRAD, first pass: r = sum of alpha t over [kb, ke) for head h, summed over the team.
  __device__ __forceinline__ static float grad_sum(const GatParams<I>& p, int64_t kb, int64_t ke, int tid, int G,
                                                   unsigned mask, int64_t h, bool act, float fdv, float mv, float iv,
                                                   Smem sa) {
    const int64_t S = G >> p.lh;
    float r = 0.f;
    if (act) {
      for (int64_t k = kb + (tid >> p.lh); k < ke; k += S * U) {
        float f[U], t[U];
        gather(p, k, ke, S, h, f);
        load_t(p, k, ke, S, h, t);
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (k + u * S < ke) r = __fadd_rn(r, __fmul_rn(gat_alpha(fdv, f[u], mv, iv, p.slope), t[u]));
      }
    }
    return team_sum(r, tid, G, 1 << p.lh, mask, sa);
  }

  // GRAD, second pass: t <- (alpha t - alpha r) (1 or slope) over [kb, ke) for head h (< H).
  __device__ __forceinline__ static void grad_write(const GatParams<I>& p, int64_t kb, int64_t ke, int tid, int G,
                                                    int64_t h, float fdv, float mv, float iv, float r) {
    const int64_t S = G >> p.lh;
    for (int64_t k = kb + (tid >> p.lh); k < ke; k += S * U) {
      float f[U], t[U];
      gather(p, k, ke, S, h, f);
      load_t(p, k, ke, S, h, t);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (k + u * S < ke) {
          const float e = __fadd_rn(fdv, f[u]);
          const float a = __fmul_rn(expf(__fsub_rn(gat_leaky(e, p.slope), mv)), iv);
          const float d = __fsub_rn(__fmul_rn(a, t[u]), __fmul_rn(a, r));
          p.E[(k + u * S) * p.H + h] = e > 0.f ? d : __fmul_rn(d, p.slope);
        }
      }
    }
  }
};

// The long-row segment block b belongs to: (row, [kb, ke) of its entries, first segment of the
// row, segments of the row); false for a block past the last segment.
template <class I>
__device__ __forceinline__ bool gat_segment(const GatParams<I>& p, int64_t b, int64_t& i, int64_t& kb, int64_t& ke,
                                            int64_t& s0, int64_t& s1) {
  if (b >= __ldg(p.seg_first + p.n_long)) return false;
  int64_t lo = 0, hi = p.n_long;  // largest q with seg_first[q] <= b (entries without segments: empty ranges)
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) >> 1;
    if (__ldg(p.seg_first + mid) <= b) lo = mid; else hi = mid;
  }
  s0 = __ldg(p.seg_first + lo);
  s1 = __ldg(p.seg_first + lo + 1);
  i = static_cast<int64_t>(__ldg(p.long_rows + lo));
  const int64_t rb = static_cast<int64_t>(__ldg(p.rowptr + i)), re = static_cast<int64_t>(__ldg(p.rowptr + i + 1));
  kb = rb + (b - s0) * kGatSegment;
  ke = min(re, kb + kGatSegment);
  return true;
}

// Segments of the long-row list: seg_first[q] = segments of entries 0 .. q - 1, an entry of a row
// of deg >= kGatLongRow entries owning ceil(deg / kGatSegment) (padding, short rows: none). Counted
// per entry and summed by CUB's device-wide exclusive scan (integers: the same result every run).
template <class I>
struct GatSegmentCount {
  const I* rowptr;
  const I* long_rows;
  int64_t M, n_long;
  __device__ __forceinline__ int64_t operator()(int64_t q) const {
    if (q >= n_long) return 0;  // seg_first[n_long]: the total
    const int64_t i = static_cast<int64_t>(__ldg(long_rows + q));
    if (i < 0 || i >= M) return 0;
    const int64_t deg = static_cast<int64_t>(__ldg(rowptr + i + 1)) - static_cast<int64_t>(__ldg(rowptr + i));
    return deg >= kGatLongRow ? (deg + kGatSegment - 1) / kGatSegment : 0;
  }
};

template <class I>
auto gat_segment_counts(const I* rowptr, int64_t M, const I* long_rows, int64_t n_long) {
  return thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0),
                                         GatSegmentCount<I>{rowptr, long_rows, M, n_long});
}

// Bytes of CUB's scratch for the scan of n_long + 1 counts.
template <class I>
size_t gat_scan_bytes(int64_t n_long) {
  size_t bytes = 0;
  GS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, gat_segment_counts<I>(nullptr, 0, nullptr, n_long),
                                              static_cast<int64_t*>(nullptr), n_long + 1));
  return bytes;
}

// The long rows' segments (blocks [0, nseg)): STATS their per-head (max, sum), GRAD their per-head
// sum of alpha t, into ws.
template <class I, bool GRAD>
__global__ void __launch_bounds__(GatSoftmaxTuning::kThreads) gat_segments_pass_kernel(GatParams<I> p) {
  constexpr int B = GatSoftmaxTuning::kThreads;
  __shared__ float sa[GatSoftmaxTuning::kWarps][32], sb[GatSoftmaxTuning::kWarps][32];
  const int tid = threadIdx.x;
  const int HP = 1 << p.lh, hl = tid & (HP - 1);
  int64_t i, kb, ke, s0, s1;
  const int64_t b = blockIdx.x;
  if (!gat_segment(p, b, i, kb, ke, s0, s1)) return;  // the whole block
  for (int64_t h0 = 0; h0 < p.H; h0 += HP) {  // one chunk unless H > 32
    const int64_t h = h0 + hl;
    const bool act = h < p.H;
    if constexpr (GRAD) {
      const float fdv = act ? __ldg(p.fd + i * p.H + h) : 0.f;
      const float mv = act ? __ldg(p.m + i * p.ld_m + h) : 0.f, iv = act ? __ldg(p.inv + i * p.ld_inv + h) : 0.f;
      const float r = GatRow<I, true>::grad_sum(p, kb, ke, tid, B, 0xffffffffu, h, act, fdv, mv, iv, sa);
      if (act && tid < HP) p.ws[b * p.H + h] = r;
    } else {
      float m, s;
      GatRow<I, true>::stats(p, i, kb, ke, tid, B, 0xffffffffu, h, act, m, s, sa, sb);
      if (act && tid < HP) {
        p.ws[b * p.H + h] = m;
        p.ws[(p.nseg + b) * p.H + h] = s;
      }
    }
  }
}

// STATS or GRAD on the rows of fewer than kGatLongRow entries: a group of G lanes per row, 32 / G
// rows per warp (G from the average row: a row's entries in about one round of loads).
template <class I, bool GRAD>
__global__ void __launch_bounds__(GatSoftmaxTuning::kThreads, GatSoftmaxTuning::kRowMinBlocks)
gat_rows_kernel(GatParams<I> p, int G) {
  const int lane = threadIdx.x & 31, sub = lane & (G - 1);
  const int64_t i = ((static_cast<int64_t>(blockIdx.x) * GatSoftmaxTuning::kThreads + threadIdx.x) >> 5) * (32 / G) +
                    lane / G;
  if (i >= p.M) return;  // the whole group
  const int64_t kb = static_cast<int64_t>(__ldg(p.rowptr + i)), ke = static_cast<int64_t>(__ldg(p.rowptr + i + 1));
  if (ke - kb >= kGatLongRow) return;  // segments take it
  if (GRAD && kb == ke) return;         // nothing to write
  const unsigned mask = group_mask(G);
  const int HP = 1 << p.lh, hl = sub & (HP - 1);
  for (int64_t h0 = 0; h0 < p.H; h0 += HP) {
    const int64_t h = h0 + hl;
    const bool act = h < p.H;
    if constexpr (GRAD) {
      const float fdv = act ? __ldg(p.fd + i * p.H + h) : 0.f;
      const float mv = act ? __ldg(p.m + i * p.ld_m + h) : 0.f, iv = act ? __ldg(p.inv + i * p.ld_inv + h) : 0.f;
      const float r = GatRow<I, false>::grad_sum(p, kb, ke, sub, G, mask, h, act, fdv, mv, iv, nullptr);
      if (act) GatRow<I, false>::grad_write(p, kb, ke, sub, G, h, fdv, mv, iv, r);
    } else {
      float m, s;
      GatRow<I, false>::stats(p, i, kb, ke, sub, G, mask, h, act, m, s, nullptr, nullptr);
      if (act && sub < HP) {  // slot 0
        const bool empty = kb == ke;  // m = 0, inv = 0: never -inf or NaN
        p.m[i * p.ld_m + h] = empty ? 0.f : m;
        p.inv[i * p.ld_inv + h] = empty ? 0.f : __frcp_rn(s);
      }
    }
  }
}

// STATS of the long rows: a thread per (list entry, head) folds the entry's segment states in
// segment order (entries without segments: nothing).
template <class I>
__global__ void __launch_bounds__(GatSoftmaxTuning::kCombineThreads) gat_stats_combine_kernel(GatParams<I> p) {
  const int64_t x = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= p.n_long * p.H) return;
  const int64_t q = x / p.H, h = x % p.H;
  const int64_t s0 = __ldg(p.seg_first + q), s1 = min(__ldg(p.seg_first + q + 1), p.nseg);
  if (s0 >= s1) return;
  const int64_t i = static_cast<int64_t>(__ldg(p.long_rows + q));
  float m = -INFINITY, s = 0.f;
  for (int64_t b = s0; b < s1; ++b) gat_online_merge(m, s, p.ws[b * p.H + h], p.ws[(p.nseg + b) * p.H + h]);
  p.m[i * p.ld_m + h] = m;
  p.inv[i * p.ld_inv + h] = __frcp_rn(s);
}

// GRAD's second launch on the long rows: a block per segment sums its row's segment sums in
// segment order (every block of a row the same bits), then writes its segment's entries.
template <class I>
__global__ void __launch_bounds__(GatSoftmaxTuning::kThreads) gat_grad_segments_kernel(GatParams<I> p) {
  constexpr int B = GatSoftmaxTuning::kThreads;
  int64_t i, kb, ke, s0, s1;
  if (!gat_segment(p, blockIdx.x, i, kb, ke, s0, s1)) return;
  s1 = min(s1, p.nseg);
  const int HP = 1 << p.lh;
  for (int64_t h = threadIdx.x & (HP - 1); h < p.H; h += HP) {
    float r = 0.f;
    for (int64_t b = s0; b < s1; ++b) r = __fadd_rn(r, p.ws[b * p.H + h]);
    const float fdv = __ldg(p.fd + i * p.H + h);
    const float mv = __ldg(p.m + i * p.ld_m + h), iv = __ldg(p.inv + i * p.ld_inv + h);
    GatRow<I, true>::grad_write(p, kb, ke, threadIdx.x, B, h, fdv, mv, iv, r);
  }
}

// WEIGHTS_T: p.rowptr / p.col are the transpose's (p.M transposed rows = fs's rows), fd / m / inv
// are gathered by t_col. No collectives: a lane past the end leaves alone.
// LSE: m holds each row's log-sum-exp (m + log sum) and alpha = exp(l - lse): no inv to gather,
// and with fd beside it (ld_fd = ld_m = 2H) a row's two values are one gathered segment.
template <class I, bool LSE>
__global__ void __launch_bounds__(GatSoftmaxTuning::kThreads) gat_weights_t_kernel(GatParams<I> p) {
  constexpr int U = GatSoftmaxTuning::kUnroll / 2;
  const int lane = threadIdx.x & 31;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * GatSoftmaxTuning::kThreads + threadIdx.x) >> 5;
  const int HP = 1 << p.lh, hl = lane & (HP - 1);
  const int64_t S = 32 >> p.lh, slot = lane >> p.lh;
  const int64_t j0 = warp * S * GatSoftmaxTuning::kRunSteps;
  const int64_t j1 = min(p.nnz, j0 + S * GatSoftmaxTuning::kRunSteps);
  const int64_t jf = j0 + slot;
  if (jf >= j1) return;
  const int64_t r0 = row_of(p.rowptr, p.M, jf);
  for (int64_t h = hl; h < p.H; h += HP) {  // one chunk unless H > 32
    int64_t r = r0, rend = static_cast<int64_t>(__ldg(p.rowptr + r0 + 1));
    for (int64_t j = jf; j < j1; j += S * U) {
      I i[U];
#pragma unroll
      for (int u = 0; u < U; ++u) i[u] = j + u * S < j1 ? __ldg(p.col + j + u * S) : I(0);
      int64_t c[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {  // the transposed row: walk forward (L1 hits after the first)
        const int64_t jj = j + u * S;
        if (jj < j1)
          while (jj >= rend) rend = static_cast<int64_t>(__ldg(p.rowptr + (++r) + 1));
        c[u] = r;
      }
      float fdv[U], fsv[U], mv[U], iv[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (j + u * S < j1) {
          const int64_t ii = static_cast<int64_t>(i[u]);
          fdv[u] = __ldg(p.fd + ii * p.ld_fd + h);
          mv[u] = __ldg(p.m + ii * p.ld_m + h);
          iv[u] = LSE ? 1.f : __ldg(p.inv + ii * p.ld_inv + h);
          fsv[u] = __ldg(p.fs + c[u] * p.H + h);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (j + u * S < j1)
          p.E[(j + u * S) * p.H + h] = LSE ? expf(__fsub_rn(gat_leaky(__fadd_rn(fdv[u], fsv[u]), p.slope), mv[u]))
                                           : gat_alpha(fdv[u], fsv[u], mv[u], iv[u], p.slope);
    }
  }
}

// log2 of HP: H rounded up to a power of two, at most 32.
inline int gat_head_log(int64_t H) {
  int lh = 0;
  while (lh < 5 && (int64_t(1) << lh) < H) ++lh;
  return lh;
}

template <class I>
GatParams<I> gat_params(const GatSoftmaxArgs& a) {
  GatParams<I> p{};
  p.rowptr = static_cast<const I*>(a.A.rowptr);
  p.col = static_cast<const I*>(a.A.col);
  p.long_rows = static_cast<const I*>(a.long_rows);
  p.fd = a.fd;
  p.fs = a.fs;
  p.m = a.m;
  p.inv = a.inv;
  p.E = a.E;
  p.M = a.A.M;
  p.nnz = a.A.nnz;
  p.H = a.H;
  p.n_long = a.n_long;
  p.ld_m = a.ld_m < 0 ? a.H : a.ld_m;
  p.ld_inv = a.ld_inv < 0 ? a.H : a.ld_inv;
  p.ld_fd = a.ld_fd < 0 ? a.H : a.ld_fd;
  p.slope = static_cast<float>(a.slope);
  p.lh = gat_head_log(a.H);
  return p;
}

// Sizes and pointers; false when there is nothing to launch.
inline bool gat_has_work(const GatSoftmaxArgs& a, const char* op, bool rows) {
  const CsrView& A = a.A;
  if (A.M < 0 || A.K < 0 || A.nnz < 0 || a.H < 0 || a.n_long < 0)
    throw std::invalid_argument(std::string("gnnsparse cuda ") + op + ": negative size");
  if ((a.ld_m >= 0 && a.ld_m < a.H) || (a.ld_inv >= 0 && a.ld_inv < a.H) || (a.ld_fd >= 0 && a.ld_fd < a.H))
    throw std::invalid_argument(std::string("gnnsparse cuda ") + op + ": fd / m / inv row stride below H");
  if (a.H == 0 || (rows ? A.M == 0 : A.nnz == 0)) return false;
  if (rows && (a.inv == nullptr || a.ld_fd >= 0))  // the LSE form is WEIGHTS_T's alone
    throw std::invalid_argument(std::string("gnnsparse cuda ") + op + ": needs inv, and fd at row stride H");
  const bool entries = A.nnz > 0;
  if (A.rowptr == nullptr || a.fd == nullptr || a.m == nullptr ||
      (entries && (A.col == nullptr || a.fs == nullptr)) || (a.n_long > 0 && a.long_rows == nullptr))
    throw std::invalid_argument(std::string("gnnsparse cuda ") + op + ": null pointer");
  return true;
}

// The long rows' scratch: seg_first (n_long + 1 int64), then the segments' floats; cudaMallocAsync
// on the stream, cudaFreeAsync after the last kernel that reads it (stream-ordered: no sync). If a
// launch throws in between, the destructor still frees it (unchecked: an exception is on its way).
class GatWorkspace {
 public:
  GatWorkspace(const GatWorkspace&) = delete;
  GatWorkspace& operator=(const GatWorkspace&) = delete;
  GatWorkspace(int64_t n_long, int64_t floats, cudaStream_t stream) : stream_(stream) {
    head_ = static_cast<size_t>(n_long + 1) * sizeof(int64_t);
    head_ = (head_ + 255) / 256 * 256;
    GS_CUDA_CHECK(cudaMallocAsync(&raw_, head_ + static_cast<size_t>(floats) * sizeof(float), stream));
  }
  ~GatWorkspace() {
    if (raw_ != nullptr && cudaFreeAsync(raw_, stream_) != cudaSuccess) (void)cudaGetLastError();
  }
  int64_t* seg_first() const { return static_cast<int64_t*>(raw_); }
  float* floats() const { return reinterpret_cast<float*>(static_cast<char*>(raw_) + head_); }
  void end() {
    void* p = raw_;
    raw_ = nullptr;
    GS_CUDA_CHECK(cudaFreeAsync(p, stream_));
  }

 private:
  void* raw_ = nullptr;
  size_t head_ = 0;
  cudaStream_t stream_;
};

// Lanes per short row: H's power of two HP times the entries that U rounds of loads cover at the
// average row length, at least HP, at most 32 (a warp).
inline int gat_group(const GatSoftmaxArgs& a, int lh) {
  const double avg = a.A.M > 0 ? double(a.A.nnz) / double(a.A.M) : 0.0;
  int G = 1 << lh;
  while (G < 32 && double(G >> lh) * GatSoftmaxTuning::kUnroll < avg) G <<= 1;
  return G;
}

// STATS and GRAD: the rows kernel; with long rows first the segment scan and the segments' pass,
// after it the combine (STATS) or the segments' writes (GRAD).
template <class I, bool GRAD>
void run_gat_rows(const GatSoftmaxArgs& a, cudaStream_t stream) {
  constexpr int B = GatSoftmaxTuning::kThreads;
  const char* op = GRAD ? "gat_softmax_grad" : "gat_softmax_stats";
  GatParams<I> p = gat_params<I>(a);
  const int G = gat_group(a, p.lh);
  const int64_t rows_per_block = int64_t(GatSoftmaxTuning::kWarps) * (32 / G);
  const int64_t row_blocks = (a.A.M + rows_per_block - 1) / rows_per_block;
  check_grid(op, {row_blocks}, 1);
  if (a.n_long == 0) {
    gat_rows_kernel<I, GRAD><<<static_cast<unsigned>(row_blocks), B, 0, stream>>>(p, G);
    GS_LAUNCH_CHECK(GRAD ? "gat_rows_kernel<grad>" : "gat_rows_kernel<stats>");
    return;
  }
  // every listed long row holds >= kGatLongRow entries, so at most this many segments in all (a
  // bound for the grids and the scratch; blocks past the real count leave)
  p.nseg = std::min(a.n_long, a.A.nnz / kGatLongRow) + a.A.nnz / kGatSegment + 1;
  check_grid(op, {p.nseg, p.n_long * p.H / GatSoftmaxTuning::kCombineThreads + 1}, 1);
  size_t scan_bytes = gat_scan_bytes<I>(a.n_long);
  const int64_t scan_floats = static_cast<int64_t>((scan_bytes + 255) / 256 * 256 / sizeof(float));
  GatWorkspace ws(a.n_long, p.nseg * a.H * (GRAD ? 1 : 2) + scan_floats, stream);
  p.seg_first = ws.seg_first();
  p.ws = ws.floats() + scan_floats;
  GS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(ws.floats(), scan_bytes,
                                              gat_segment_counts<I>(p.rowptr, p.M, p.long_rows, p.n_long),
                                              ws.seg_first(), a.n_long + 1, stream));
  gat_segments_pass_kernel<I, GRAD><<<static_cast<unsigned>(p.nseg), B, 0, stream>>>(p);
  GS_LAUNCH_CHECK("gat_segments_pass_kernel");
  gat_rows_kernel<I, GRAD><<<static_cast<unsigned>(row_blocks), B, 0, stream>>>(p, G);
  GS_LAUNCH_CHECK(GRAD ? "gat_rows_kernel<grad>" : "gat_rows_kernel<stats>");
  if constexpr (GRAD) {
    gat_grad_segments_kernel<I><<<static_cast<unsigned>(p.nseg), B, 0, stream>>>(p);
    GS_LAUNCH_CHECK("gat_grad_segments_kernel");
  } else {
    constexpr int C = GatSoftmaxTuning::kCombineThreads;
    gat_stats_combine_kernel<I><<<static_cast<unsigned>((p.n_long * p.H + C - 1) / C), C, 0, stream>>>(p);
    GS_LAUNCH_CHECK("gat_stats_combine_kernel");
  }
  ws.end();
}

template <class I>
void run_gat_weights_t(const GatSoftmaxArgs& a, cudaStream_t stream) {
  const int64_t run = (int64_t(32) >> gat_head_log(a.H)) * GatSoftmaxTuning::kRunSteps;
  const int64_t warps = (a.A.nnz + run - 1) / run;
  const int64_t blocks = (warps + GatSoftmaxTuning::kWarps - 1) / GatSoftmaxTuning::kWarps;
  check_grid("gat_softmax_weights_t", {blocks}, 1);
  if (a.inv == nullptr)
    gat_weights_t_kernel<I, true><<<dim3(static_cast<unsigned>(blocks)), GatSoftmaxTuning::kThreads, 0, stream>>>(
        gat_params<I>(a));
  else
    gat_weights_t_kernel<I, false><<<dim3(static_cast<unsigned>(blocks)), GatSoftmaxTuning::kThreads, 0, stream>>>(
        gat_params<I>(a));
  GS_LAUNCH_CHECK("gat_weights_t_kernel");
}

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

void gat_softmax_stats(const GatSoftmaxArgs& a, cudaStream_t stream) {
  using namespace cuda_detail;
  if (!gat_has_work(a, "gat_softmax_stats", true)) return;
  dispatch_itype(a.A.itype, [&](auto it) { run_gat_rows<typename decltype(it)::type, false>(a, stream); });
}

void gat_softmax_weights_t(const GatSoftmaxArgs& a, cudaStream_t stream) {
  using namespace cuda_detail;
  if (!gat_has_work(a, "gat_softmax_weights_t", false)) return;
  if (a.E == nullptr) throw std::invalid_argument("gnnsparse cuda gat_softmax_weights_t: null pointer");
  dispatch_itype(a.A.itype, [&](auto it) { run_gat_weights_t<typename decltype(it)::type>(a, stream); });
}

void gat_softmax_grad(const GatSoftmaxArgs& a, cudaStream_t stream) {
  using namespace cuda_detail;
  if (!gat_has_work(a, "gat_softmax_grad", false)) return;  // no entries: t is empty
  if (a.E == nullptr) throw std::invalid_argument("gnnsparse cuda gat_softmax_grad: null pointer");
  dispatch_itype(a.A.itype, [&](auto it) { run_gat_rows<typename decltype(it)::type, true>(a, stream); });
}

}  // namespace gnnsparse::cuda
