// Portable SYCL FusedMM (semantics: include/gnnsparse/ops.hpp): per edge, the SDDMM value, the edge
// function, the value scaling and the SpMM accumulation happen in registers; the edge array is
// written only when E != nullptr.
#pragma once
#include <sycl/builtins.hpp>
#include <sycl/group_algorithm.hpp>
#include <sycl/group_barrier.hpp>

#include "common.hpp"
#include "sddmm.hpp"  // transpose_reduce

namespace gnnsparse {

// Sub-group per (row, head, feature tile of SG * V): the edge score is computed once per edge by
// the whole sub-group (dot: lanes split F, one reduce_over_group; add: uniform scalar loads), the
// lanes then accumulate w * Z[j, h, :] over their features. Row softmax runs online in one pass
// (running max m and sum s; on a new maximum the sum and the accumulators are rescaled by
// exp(m_old - m_new)); when E is requested the first pass also stores the raw scores there and a
// second pass turns them into the normalized weights (no score is computed twice). D == 0 (edge
// values only, E given) skips the Z gathers and the Out stores: the scores and the softmax are
// those of any D. With op add and D == 0 there is nothing for the lanes to share (the score is one
// scalar sum, no columns), so each lane takes its own (row, head) -- the same operations in the same
// order per (row, head), SG times fewer sub-groups (sycl/policy.hpp fusedmm_launch sizes the range).
template <typename T, SddmmOp OP, int SG>
inline T sg_score(const sycl::sub_group &sg, long lane, const T *X, const T *Y, long i, long j, long h, long H,
                  long F) {
  if constexpr (OP == SddmmOp::add) {
    return X[i * H + h] + Y[j * H + h];
  } else {
    const T *x = X + (i * H + h) * F, *y = Y + (j * H + h) * F;
    T part = T(0);
    for (long f = lane; f < F; f += SG) part += x[f] * y[f];
    return sycl::reduce_over_group(sg, part, sycl::plus<T>());
  }
}

// One edge of a row softmax computed online: score w into the running max m and sum s, the
// accumulators rescaled when the max grows; returns the edge's weight exp(w - m). fmax skips a NaN
// score, and every score goes through exp(w - m), so a NaN, or an infinity that makes w - m NaN,
// turns the row NaN as exp(e - max(e)) does (ops.hpp).
template <typename T, int V>
inline void raise_max(T w, T &m, T &s, T (&acc)[V]) {  // (m, s, acc) onto the max fmax(m, w)
  const T mn = sycl::fmax(m, w);
  if (mn != m) {
    const T scale = sycl::exp(m - mn);
    s *= scale;
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] *= scale;
    m = mn;
  }
}

template <typename T, int V>
inline T online_softmax(T w, T &m, T &s, T (&acc)[V]) {
  raise_max(w, m, s, acc);
  const T p = sycl::exp(w - m);
  s += p;
  return p;
}

template <typename T, typename I, SddmmOp OP, EdgeFn EF, bool W, int SG, int V>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void fusedmm_csr_sg(const I *rowptr, const I *col, const T *val, const T *X, const T *Y, const T *Z, T *Out, T *E,
                    long M, long H, long F, long D, long ntiles, T slope) {
  const auto [sg, g, lane] = subgroup_slot();
  const bool per_lane = OP == SddmmOp::add && D == 0;  // uniform: no sub-group operation below then
  const long tile = per_lane ? 0 : g % ntiles, ih = per_lane ? g * SG + lane : g / ntiles;
  const long i = ih / H, h = ih % H;
  if (i >= M) return;
  const long c0 = tile * SG * V + lane;
  const bool write_e = E != nullptr && tile == 0;
  const bool writer = per_lane || lane == 0;  // of the raw scores / weights in the first pass
  const bool agg = D > 0;  // D == 0: edge values only
  const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
  T acc[V];
#pragma unroll
  for (int v = 0; v < V; ++v) acc[v] = T(0);
  T m = -std::numeric_limits<T>::infinity(), s = T(0);
  for (long k = b; k < e; ++k) {
    const long j = long(col[k]);
    T w = sg_score<T, OP, SG>(sg, lane, X, Y, i, j, h, H, F);
    if constexpr (EF == EdgeFn::leaky_relu_softmax) w = w > T(0) ? w : slope * w;
    const T raw = w;  // softmax: the score E keeps until the second pass
    if constexpr (row_softmax(EF)) {
      w = online_softmax(w, m, s, acc);
    } else {
      if constexpr (EF == EdgeFn::leaky_relu) w = w > T(0) ? w : slope * w;
      if constexpr (EF == EdgeFn::exp) w = sycl::exp(w);
    }
    if constexpr (W) w *= val[k];
    if (write_e && writer) E[k * H + h] = row_softmax(EF) ? raw : w;
    if (agg) {
      const T *z = Z + (j * H + h) * D + c0;
#pragma unroll
      for (int v = 0; v < V; ++v)
        if (c0 + v * SG < D) acc[v] += w * z[v * SG];
    }
  }
  const T inv = (row_softmax(EF) && e > b) ? T(1) / s : T(1);
  if (agg) {
    T *o = Out + (i * H + h) * D + c0;
#pragma unroll
    for (int v = 0; v < V; ++v)
      if (c0 + v * SG < D) o[v * SG] = acc[v] * inv;
  }
  if constexpr (row_softmax(EF)) {
    if (write_e) {  // second pass: the raw scores (the writer's stores) into the normalized weights
      if (!per_lane) sycl::group_barrier(sg);  // per lane: its own stores
      const long step = per_lane ? 1 : SG;
      for (long k = per_lane ? b : b + lane; k < e; k += step) {
        T w = sycl::exp(E[k * H + h] - m) * inv;
        if constexpr (W) w *= val[k];
        E[k * H + h] = w;
      }
    }
  }
}

// dot with one head and F = NF * SG (CPU devices; sycl/policy.hpp fusedmm_launch): a sub-group per
// run of `rows` consecutive rows (and feature tile of SG * V), the run's edges in batches of SG that
// cross row ends, as sddmm_dot_sg walks its pairs. Per batch: the SG edges' dot products with the X
// slice of each edge's row in registers (reloaded when the walk enters a row), summed across lanes
// by one transpose-reduce (lane l: edge p0 + l's score, in sddmm_dot_sg's order); the edge function
// on every lane at once (E stored as one vector: the weight, or for a row softmax the raw score);
// then the batch's edges in order, each weight broadcast from its lane, accumulated into the current
// row, whose result is stored when the walk leaves it (its E normalized then). A row softmax folds
// the batch's part of a row into its running (max, sum) at once (two sub-group reductions, one
// rescale); edge values alone (D = 0) without a softmax skip the per-edge walk. The edge function
// and the values are run-time arguments (uniform branches), so one instance serves them all. Where
// the per-edge group reduction of fusedmm_csr_sg cost ~10 instructions per edge, the
// transpose-reduce costs ~5. Fixed order: bitwise reproducible for a
// given sub-group size and row run; the edge values do not depend on D (D = 0: edge values only).
template <typename T, typename I, int SG, int NF, int V>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void fusedmm_dot_rows_sg(const I *rowptr, const I *col, const T *val, const T *X, const T *Y, const T *Z, T *Out,
                         T *E, long M, long D, long ntiles, long rows, int edge, T slope) {
  static_assert(SG >= 2 && (SG & (SG - 1)) == 0, "power-of-two sub-group");
  constexpr long F = long(NF) * SG;
  const auto [sg, g, lane] = subgroup_slot();
  const long tile = g % ntiles, r0 = (g / ntiles) * rows;
  if (r0 >= M) return;
  const long r1 = r0 + rows < M ? r0 + rows : M;
  const long c0 = tile * SG * V + lane;
  const bool write_e = E != nullptr && tile == 0, agg = D > 0, weighted = val != nullptr;
  // a whole tile inside D: a uniform test, so the column loops below are not masked per lane
  const bool full = (tile + 1) * SG * V <= D;
  const EdgeFn ef = EdgeFn(edge);
  const bool sm = row_softmax(ef), leaky = ef == EdgeFn::leaky_relu || ef == EdgeFn::leaky_relu_softmax;
  const long kb = long(rowptr[r0]), ke = long(rowptr[r1]);
  // the scoring walk: the row of the batch's edges and its X slice
  long si = r0, s_end = long(rowptr[r0 + 1]);
  T x[NF];
#pragma unroll
  for (int c = 0; c < NF; ++c) x[c] = X[si * F + c * SG + lane];
  // the aggregation walk: the current row, its edges [a_beg, a_end), its state
  long ai = r0, a_beg = kb, a_end = s_end;
  T acc[V];
#pragma unroll
  for (int v = 0; v < V; ++v) acc[v] = T(0);
  T m = -std::numeric_limits<T>::infinity(), s = T(0);
  // Out of row ai (and, for a softmax with E, its raw scores into the weights); then the next row
  auto next_row = [&]() {
    const T inv = (sm && a_end > a_beg) ? T(1) / s : T(1);
    if (agg) {
      T *o = Out + ai * D + c0;
      if (full) {
#pragma unroll
        for (int v = 0; v < V; ++v) o[v * SG] = acc[v] * inv;
      } else {
#pragma unroll
        for (int v = 0; v < V; ++v)
          if (c0 + v * SG < D) o[v * SG] = acc[v] * inv;
      }
    }
    if (sm && write_e && a_end > a_beg) {
      sycl::group_barrier(sg);  // the raw scores were stored by other lanes
      for (long k = a_beg + lane; k < a_end; k += SG) {
        T w = sycl::exp(E[k] - m) * inv;
        if (weighted) w *= val[k];
        E[k] = w;
      }
    }
    ++ai;
    a_beg = a_end;
    if (ai < r1) a_end = long(rowptr[ai + 1]);
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = T(0);
    m = -std::numeric_limits<T>::infinity();
    s = T(0);
  };
  for (long p0 = kb; p0 < ke; p0 += SG) {
    const long n = ke - p0 < SG ? ke - p0 : SG;
    T part[SG];
#pragma unroll
    for (int q = 0; q < SG; ++q) {
      const long k = q < n ? p0 + q : ke - 1;  // past the run's end: the last edge again (not stored)
      if (k >= s_end) {  // uniform: the walk enters the next non-empty row
        do {
          ++si;
          s_end = long(rowptr[si + 1]);
        } while (k >= s_end);
#pragma unroll
        for (int c = 0; c < NF; ++c) x[c] = X[si * F + c * SG + lane];
      }
      const T *y = Y + long(col[k]) * F + lane;
      T a = T(0);
#pragma unroll
      for (int c = 0; c < NF; ++c) a += x[c] * y[c * SG];
      part[q] = a;
    }
    transpose_reduce<T, SG, SG / 2>(sg, lane, part);
    const bool mine = lane < n;
    const long kl = mine ? p0 + lane : ke - 1;
    T w = part[0];
    if (leaky) w = w > T(0) ? w : slope * w;
    if (!sm) {
      if (ef == EdgeFn::exp) w = sycl::exp(w);
      if (weighted) w *= val[kl];
    }
    if (write_e && mine) E[kl] = w;  // the weight, or a softmax's raw score (normalized by next_row)
    if (!agg && !sm) continue;  // edge values only, nothing per row: the rows are walked by the scores
    // the batch's edges row by row: lanes [q, qe) hold row ai's. A row softmax folds each such
    // segment into (m, s) at once: its max and its sum of exp(w - max) by two sub-group
    // reductions, the accumulators rescaled once per segment (a per-edge online softmax cost two
    // exps and a rescale per edge). Every score still goes through exp(w - m): a NaN, or an
    // infinity that makes w - m NaN, turns the row NaN as exp(e - max(e)) does.
    for (long q = 0; q < n;) {
      while (p0 + q >= a_end) next_row();
      const long qe = a_end - p0 < n ? a_end - p0 : n;
      T p = T(0);
      if (sm) {
        const bool in = lane >= q && lane < qe;
        raise_max(sycl::reduce_over_group(sg, in ? w : -std::numeric_limits<T>::infinity(), sycl::maximum<T>()), m,
                  s, acc);
        p = in ? sycl::exp(w - m) : T(0);
        s += sycl::reduce_over_group(sg, p, sycl::plus<T>());
        if (!agg) {
          q = qe;
          continue;
        }
      }
      for (; q < qe; ++q) {
        const long k = p0 + q;
        T wq = sycl::group_broadcast(sg, sm ? p : w, q);
        if (sm && weighted) wq *= val[k];
        if (agg) {
          const T *z = Z + long(col[k]) * D + c0;
          if (full) {
#pragma unroll
            for (int v = 0; v < V; ++v) acc[v] += wq * z[v * SG];
          } else {
#pragma unroll
            for (int v = 0; v < V; ++v)
              if (c0 + v * SG < D) acc[v] += wq * z[v * SG];
          }
        }
      }
    }
  }
  while (ai < r1) next_row();  // the run's last row and the empty rows after it
}

}  // namespace gnnsparse
