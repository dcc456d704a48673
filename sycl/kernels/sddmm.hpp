// Portable SYCL SDDMM (semantics: include/gnnsparse/ops.hpp). Two kernels:
//   sddmm_csr     add: one work-item per row, its entries' values for every head (no search);
//                 dot on devices without sub-groups of at least 2: one work-item per (edge k,
//                 head h), the edge's row from a binary search in rowptr;
//   sddmm_dot_sg  dot: a sub-group per run of (edge, head) pairs, lanes over features, one
//                 transpose-reduce per SG pairs. NF = 0: any H and F; NF > 0: F = NF * SG, the
//                 pairs walked one at a time with the X slice in registers (ONE_HEAD: kept
//                 across a row's edges).
#pragma once
#include <sycl/group_algorithm.hpp>

#include "common.hpp"

namespace gnnsparse {

// The dot product runs in a fixed order (V independent partial sums, combined in lane order).
template <typename T, typename I, SddmmOp OP>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void sddmm_csr(const I *rowptr, const I *col, const T *X, const T *Y, T *E, long M, long nnz, long H, long F) {
  const long gid = long(global_id());
  if constexpr (OP == SddmmOp::add) {  // the launch covers the rows (sycl/policy.hpp sddmm_launch)
    if (gid >= M) return;
    const T *x = X + gid * H;
    for (long k = long(rowptr[gid]), ke = long(rowptr[gid + 1]); k < ke; ++k) {
      const T *y = Y + long(col[k]) * H;
      for (long h = 0; h < H; ++h) E[k * H + h] = x[h] + y[h];
    }
  } else {
    if (gid >= nnz * H) return;
    const long k = gid / H, h = gid % H;
    const long i = row_of_edge(rowptr, M, k), j = long(col[k]);
    const T *x = X + (i * H + h) * F, *y = Y + (j * H + h) * F;
    constexpr int V = 4;
    T part[V] = {};
    long f = 0;
    for (; f + V <= F; f += V)
#pragma unroll
      for (int v = 0; v < V; ++v) part[v] += x[f + v] * y[f + v];
    for (; f < F; ++f) part[0] += x[f] * y[f];
    E[gid] = (part[0] + part[1]) + (part[2] + part[3]);
  }
}

// dot: a sub-group per run of consecutive (edge, head) pairs (`chunk`, a multiple of SG), in
// batches of SG pairs. Written for the OpenCL CPU device, which runs a sub-group as one SIMD
// instruction stream (lane = vector element), and fine for GPUs too:
//  - per batch, lane l takes pair p0 + l: its edge and head, its row (walked from the batch's first
//    row; a binary search once per sub-group), the offsets of its X and Y rows;
//  - per pair s of the batch, the offsets are broadcast from lane s (so the loads below are
//    contiguous vector loads, not gathers) and the lanes split the feature axis: lane l takes
//    f = l, l + SG, ..., giving one partial sum per lane;
//  - the SG partial vectors of the batch are summed across lanes by a transpose-reduce: log2(SG)
//    butterfly levels, SG - 1 lane permutes per level pair in all, instead of a group reduction per
//    pair; then lane l holds pair p0 + l's dot product and the batch is one contiguous store.
// Every pair sums in one fixed order (per lane in f order, then the fixed butterfly tree), whatever
// the chunk or the launch: bitwise reproducible for a given sub-group size. Hub rows spread over many
// sub-groups. No atomics.

// One butterfly level of the transpose-reduce: vectors s and s + D are folded into vector s, whose
// lanes with bit D set then hold pair s + D's sums and the others pair s's, each over lanes l, l ^ D.
template <typename T, int SG, int D>
inline void transpose_reduce(const sycl::sub_group &sg, long lane, T (&part)[SG]) {
  if constexpr (D >= 1) {
    const bool hi = (lane & D) != 0;
#pragma unroll
    for (int s = 0; s < D; ++s) {
      // both partners add the same two values (a + b == b + a exactly): the result is one value
      const T a = part[s] + sycl::permute_group_by_xor(sg, part[s], D);
      const T b = part[s + D] + sycl::permute_group_by_xor(sg, part[s + D], D);
      part[s] = hi ? b : a;  // a select of computed values (a select of two loads from part[]
                             // would become a gather from the private array)
    }
    transpose_reduce<T, SG, D / 2>(sg, lane, part);
  }
}

// The batches of pairs [p_begin, p_end). NF > 0: F == NF * SG, known at compile time; NF == 0:
// any F (a loop over the full chunks of SG features, TAIL: a partial last chunk).
template <typename T, typename I, int SG, int NF, bool TAIL>
inline void sddmm_dot_batches(const sycl::sub_group &sg, long lane, const I *rowptr, const I *col, const T *X,
                              const T *Y, T *E, long M, long H, long F, long p_begin, long p_end) {
  long i0 = row_of_edge(rowptr, M, H == 1 ? p_begin : p_begin / H);  // row of the batch's first pair
  const long nfull = NF > 0 ? NF : F / SG;
  for (long p0 = p_begin; p0 < p_end; p0 += SG) {
    const long p = p0 + lane < p_end ? p0 + lane : p_end - 1;  // lanes past the end repeat the last pair
    long k = p, h = 0;
    if (H != 1) {  // edge and head of pair p, from the batch's first pair without a per-lane division
      k = p0 / H;
      h = p0 - k * H + (p - p0);
      while (h >= H) { h -= H; ++k; }
    }
    long i = i0;
    while (long(rowptr[i + 1]) <= k) ++i;  // skips empty rows
    const long xoff = (i * H + h) * F, yoff = (long(col[k]) * H + h) * F;
    i0 = sycl::group_broadcast(sg, i, SG - 1);
    T part[SG];
#pragma unroll
    for (int s = 0; s < SG; ++s) {
      const T *x = X + sycl::group_broadcast(sg, xoff, s) + lane;
      const T *y = Y + sycl::group_broadcast(sg, yoff, s) + lane;
      T acc = T(0);
      if constexpr (NF > 0) {
#pragma unroll
        for (int c = 0; c < NF; ++c) acc += x[c * SG] * y[c * SG];
      } else {
        for (long c = 0; c < nfull; ++c) acc += x[c * SG] * y[c * SG];
      }
      if constexpr (TAIL)
        if (nfull * SG + lane < F) acc += x[nfull * SG] * y[nfull * SG];
      part[s] = acc;
    }
    transpose_reduce<T, SG, SG / 2>(sg, lane, part);
    if (p0 + lane < p_end) E[p0 + lane] = part[0];
  }
}

// F = NF * SG (NF > 0): the pairs of a run taken one at a time, so the pair's edge k, head h, row i
// and both row offsets are uniform across the sub-group (scalar loads and arithmetic on the CPU
// device, no broadcasts), and the X slice of (i, h) (NF vectors) stays in registers while it
// serves: with one head (ONE_HEAD) until the run crosses into the next row, so X is read once per
// row instead of once per edge; with several heads it changes every pair and is reloaded (from L1:
// the row's heads are contiguous). Per pair: a load of col[k], NF contiguous vector loads of Y and
// NF multiply-adds; per SG pairs one transpose-reduce and one vector store, as in
// sddmm_dot_batches. FULL: a whole batch [p0, p0 + SG) inside the run (no clamping); else the
// run's last, partial batch, whose lanes past p_end repeat the last pair and are not stored. Each
// pair sums in the same order as in sddmm_dot_batches (per lane in f order, then the fixed
// butterfly tree), so both schedules give the same bits.
template <typename T, typename I, int SG, int NF, bool ONE_HEAD>
struct DotRun {
  static constexpr long F = NF * SG;
  long i, row_end;    // the current row and rowptr[i + 1]
  long k = 0, h = 0;  // the pair's edge and head (several heads: carried from pair to pair)
  T x[NF];

  template <bool FULL>
  void batch(const sycl::sub_group &sg, long lane, const I *rowptr, const I *col, const T *X, const T *Y, T *E,
             long H, long p0, long p_end) {
    const long HH = ONE_HEAD ? 1 : H;  // compile-time constants where there is one head
    T part[SG];
#pragma unroll
    for (int s = 0; s < SG; ++s) {
      const long hh = ONE_HEAD ? 0 : h;
      if constexpr (ONE_HEAD) k = FULL ? p0 + s : (p0 + s < p_end ? p0 + s : p_end - 1);
      bool fresh = !ONE_HEAD;  // several heads: a new (i, h) every pair
      if (k >= row_end) {      // uniform: the run enters the next non-empty row
        do {
          ++i;
          row_end = long(rowptr[i + 1]);
        } while (k >= row_end);
        fresh = true;
      }
      if (fresh) {
#pragma unroll
        for (int c = 0; c < NF; ++c) x[c] = X[(i * HH + hh) * F + c * SG + lane];
      }
      const T *y = Y + (long(col[k]) * HH + hh) * F + lane;
      T acc = T(0);
#pragma unroll
      for (int c = 0; c < NF; ++c) acc += x[c] * y[c * SG];
      part[s] = acc;
      if constexpr (!ONE_HEAD)
        if (FULL || p0 + s + 1 < p_end)  // past p_end the last pair repeats
          if (++h == HH) {
            h = 0;
            ++k;
          }
    }
    transpose_reduce<T, SG, SG / 2>(sg, lane, part);
    if (FULL || p0 + lane < p_end) E[p0 + lane] = part[0];
  }

  void run(const sycl::sub_group &sg, long lane, const I *rowptr, const I *col, const T *X, const T *Y, T *E,
           long M, long H, long p_begin, long p_end) {
    k = ONE_HEAD ? p_begin : p_begin / H;
    h = ONE_HEAD ? 0 : p_begin - k * H;
    i = row_of_edge(rowptr, M, k);
    row_end = long(rowptr[i + 1]);
#pragma unroll
    for (int c = 0; c < NF; ++c) x[c] = X[(i * H + h) * F + c * SG + lane];
    long p0 = p_begin;
    for (; p0 + SG <= p_end; p0 += SG) batch<true>(sg, lane, rowptr, col, X, Y, E, H, p0, p_end);
    if (p0 < p_end) batch<false>(sg, lane, rowptr, col, X, Y, E, H, p0, p_end);
  }
};

// NF = 0: any H and F (sddmm_dot_batches). NF > 0: F == NF * SG, and H == 1 where ONE_HEAD
// (policy.hpp picks the instance). One schedule per instance: a kernel that held the schedules
// of several widths ran many times slower on the CPU device (docs/performance.md).
template <typename T, typename I, int SG, int NF, bool ONE_HEAD>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void sddmm_dot_sg(const I *rowptr, const I *col, const T *X, const T *Y, T *E, long M, long total, long H, long F,
                  long chunk) {
  static_assert(SG >= 2 && (SG & (SG - 1)) == 0, "power-of-two sub-group");
  static_assert(NF > 0 || !ONE_HEAD, "NF = 0 takes any number of heads");
  const auto [sg, g, lane] = subgroup_slot();
  const long p_begin = g * chunk;
  if (p_begin >= total) return;
  const long p_end = p_begin + chunk < total ? p_begin + chunk : total;
  if constexpr (NF > 0) {
    DotRun<T, I, SG, NF, ONE_HEAD>{}.run(sg, lane, rowptr, col, X, Y, E, M, H, p_begin, p_end);
  } else {
    // the common widths with the feature loop unrolled, the rest with a loop (and a masked tail)
    if (F == SG)
      sddmm_dot_batches<T, I, SG, 1, false>(sg, lane, rowptr, col, X, Y, E, M, H, F, p_begin, p_end);
    else if (F == 2 * SG)
      sddmm_dot_batches<T, I, SG, 2, false>(sg, lane, rowptr, col, X, Y, E, M, H, F, p_begin, p_end);
    else if (F % SG == 0)
      sddmm_dot_batches<T, I, SG, 0, false>(sg, lane, rowptr, col, X, Y, E, M, H, F, p_begin, p_end);
    else
      sddmm_dot_batches<T, I, SG, 0, true>(sg, lane, rowptr, col, X, Y, E, M, H, F, p_begin, p_end);
  }
}

}  // namespace gnnsparse
