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
inline T online_softmax(T w, T &m, T &s, T (&acc)[V]) {
  const T mn = sycl::fmax(m, w);
  if (mn != m) {  // (m, s, acc) onto the new max
    const T scale = sycl::exp(m - mn);
    s *= scale;
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] *= scale;
    m = mn;
  }
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

// dot with F = NF * SG (CPU devices; sycl/policy.hpp fusedmm_launch): a sub-group per run of `rows`
// consecutive rows, in two phases that meet in E (the caller's edge values, or sycl/fusedmm.cpp's
// workspace of nnz x H values when they are not asked for):
//  1. the run's (edge, head) dot products into E by sddmm_dot_sg's run schedule (DotRun: batches
//     of SG pairs across row ends, the X slice of the pair's (row, head) in registers -- with one
//     head (ONE_HEAD) kept across a row --, one transpose-reduce per batch, one contiguous store):
//     the same bits as gs.sddmm;
//  2. per row and head, the edge function in place over the (row, head)'s entries of E (lanes
//     strided over the edges; a row softmax's max and sum by two sub-group reductions, then
//     exp(w - max) / sum), the values applied, then the aggregation over the head's D columns in
//     chunks of SG * V, each edge's weight a uniform scalar load of E (in L1 by then), as
//     spmm_csr_sg walks a row.
// On the CPU device, which runs a sub-group as one SIMD instruction stream and is bound by
// instructions rather than bytes, this is SDDMM + SpMM without E's round trip through memory and
// with one launch; a single walk that broadcast each edge's weight from its lane cost twice the
// SpMM's instructions per edge, and a sub-group per (row, head) with a group reduction per edge
// (fusedmm_csr_sg) more (docs/performance.md). The edge values do not depend on D (D = 0: phase 1
// and phase 2's edge function only), every sum runs in a fixed order: bitwise reproducible for a
// given sub-group size and row run. A NaN score, or an infinity that makes w - max NaN, turns its
// (row, head) NaN under a row softmax, as exp(e - max(e)) does (ops.hpp).
template <typename T, typename I, int SG, int NF, int V, bool ONE_HEAD>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void fusedmm_dot_rows_sg(const I *rowptr, const I *col, const T *val, const T *X, const T *Y, const T *Z, T *Out,
                         T *E, long M, long H, long D, long rows, int edge, T slope) {
  static_assert(SG >= 2 && (SG & (SG - 1)) == 0, "power-of-two sub-group");
  const auto [sg, g, lane] = subgroup_slot();
  const long r0 = g * rows;
  if (r0 >= M) return;
  const long r1 = r0 + rows < M ? r0 + rows : M;
  const long HH = ONE_HEAD ? 1 : H;  // a compile-time 1 with one head
  const long kb = long(rowptr[r0]), ke = long(rowptr[r1]);
  const EdgeFn ef = EdgeFn(edge);
  const bool sm = row_softmax(ef), leaky = ef == EdgeFn::leaky_relu || ef == EdgeFn::leaky_relu_softmax;
  const bool weighted = val != nullptr, ex = ef == EdgeFn::exp;
  if (ke > kb) DotRun<T, I, SG, NF, ONE_HEAD>{}.run(sg, lane, rowptr, col, X, Y, E, M, HH, kb * HH, ke * HH);
  sycl::group_barrier(sg);  // the scores were stored by other lanes
  for (long i = r0; i < r1; ++i) {
    const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
    for (long h = 0; h < HH; ++h) {
      T *eh = E + h;  // the head's entry of edge k: eh[k * HH]
      if (sm) {
        T mx = -std::numeric_limits<T>::infinity();
        for (long k = b + lane; k < e; k += SG) {
          T w = eh[k * HH];
          if (leaky) w = w > T(0) ? w : slope * w;
          mx = sycl::fmax(mx, w);
        }
        const T m = sycl::reduce_over_group(sg, mx, sycl::maximum<T>());
        T s = T(0);
        for (long k = b + lane; k < e; k += SG) {
          T w = eh[k * HH];
          if (leaky) w = w > T(0) ? w : slope * w;
          s += sycl::exp(w - m);
        }
        const T inv = T(1) / sycl::reduce_over_group(sg, s, sycl::plus<T>());
        for (long k = b + lane; k < e; k += SG) {
          T w = eh[k * HH];
          if (leaky) w = w > T(0) ? w : slope * w;
          w = sycl::exp(w - m) * inv;
          if (weighted) w *= val[k];
          eh[k * HH] = w;
        }
      } else if (leaky || ex || weighted) {
        for (long k = b + lane; k < e; k += SG) {
          T w = eh[k * HH];
          if (leaky) w = w > T(0) ? w : slope * w;
          if (ex) w = sycl::exp(w);
          if (weighted) w *= val[k];
          eh[k * HH] = w;
        }
      }
      if (D == 0) continue;
      if (sm || leaky || ex || weighted) sycl::group_barrier(sg);  // the weights, stored by other lanes
      T *o = Out + (i * HH + h) * D + lane;
      const T *zh = Z + h * D + lane;  // the head's columns of Z row j: zh[j * HH * D + c]
      for (long c = 0; c < D; c += SG * V) {
        T acc[V];
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = T(0);
        if (c + SG * V <= D) {  // uniform: a whole chunk, no per-column tests
          for (long k = b; k < e; ++k) {
            const T w = eh[k * HH];
            const T *z = zh + long(col[k]) * HH * D + c;
#pragma unroll
            for (int v = 0; v < V; ++v) acc[v] += w * z[v * SG];
          }
#pragma unroll
          for (int v = 0; v < V; ++v) o[c + v * SG] = acc[v];
        } else {
          for (long k = b; k < e; ++k) {
            const T w = eh[k * HH];
            const T *z = zh + long(col[k]) * HH * D + c;
#pragma unroll
            for (int v = 0; v < V; ++v)
              if (c + v * SG + lane < D) acc[v] += w * z[v * SG];
          }
#pragma unroll
          for (int v = 0; v < V; ++v)
            if (c + v * SG + lane < D) o[c + v * SG] = acc[v];
        }
      }
    }
  }
}

}  // namespace gnnsparse
