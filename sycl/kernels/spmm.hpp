// Portable SYCL SpMM over CSR (semantics: include/gnnsparse/ops.hpp). Two schedules, both a
// sub-group per row with the row index uniform by construction (taken from the sub-group id):
//   spmm_csr_sg     C >= SG: lanes over features, the sub-group walks the row's edges in order;
//   spmm_csr_narrow C <  SG: lanes over edges, then a fixed butterfly combine across lanes.
// Every output element comes from one fixed sequence of operations: no atomics, bitwise
// reproducible for a given device and sub-group size.
#pragma once
#include <sycl/group_algorithm.hpp>

#include "common.hpp"

namespace gnnsparse {

// Sub-group per (row, feature tile): the row index is uniform across the sub-group by construction
// (it comes from the sub-group id), so rowptr/col/val loads are scalar and each lane's X loads are
// one contiguous vector across the sub-group. Lane l owns features tile * SG * V + v * SG + l.
// Used for wider rows (C >= SG); one sub-group walks the row's edges in order: deterministic.
// With one tile per row (ntiles == 1) a sub-group takes `rows` consecutive rows, one after the
// other: on the CPU device that spreads the per-sub-group cost (a pass of the work-group loop,
// the index arithmetic) over several rows (policy.hpp); the order inside each row is unchanged.
template <typename T, typename I, Reduce R, bool W, bool ARG, int SG, int V>
inline void spmm_sg_row(const I *rowptr, const I *col, const T *val, const T *X, T *Y, long *arg, long C, long i,
                        long tile, long lane) {
  using Red = Reducer<T, R, ARG>;
  const long c0 = tile * SG * V + lane;
  T acc[V];
  long best[V];
#pragma unroll
  for (int v = 0; v < V; ++v) { acc[v] = Red::init(); best[v] = -1; }
  const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
  T *y = Y + i * C + c0;
  // The tests below are uniform across the sub-group (they depend on the tile, not the lane), so the
  // edge loop stays scalar control flow; a per-lane test would turn it into masked code.
  if ((tile + 1) * SG * V <= C) {  // full tile: no per-feature bounds checks
    for (long k = b; k < e; ++k) {
      const T *x = X + long(col[k]) * C + c0;
      const T w = W ? val[k] : T(1);
#pragma unroll
      for (int v = 0; v < V; ++v) Red::update(acc[v], best[v], W ? w * x[v * SG] : x[v * SG], k);
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
      y[v * SG] = Red::write(acc[v], e - b);
      if constexpr (Red::has_arg)
        arg[i * C + c0 + v * SG] = (e == b) ? -1 : best[v];
    }
  } else {
    for (long k = b; k < e; ++k) {
      const T *x = X + long(col[k]) * C + c0;
      const T w = W ? val[k] : T(1);
#pragma unroll
      for (int v = 0; v < V; ++v)
        if (c0 + v * SG < C) Red::update(acc[v], best[v], W ? w * x[v * SG] : x[v * SG], k);
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
      if (c0 + v * SG >= C) break;
      y[v * SG] = Red::write(acc[v], e - b);
      if constexpr (Red::has_arg)
        arg[i * C + c0 + v * SG] = (e == b) ? -1 : best[v];
    }
  }
}

template <typename T, typename I, Reduce R, bool W, bool ARG, int SG, int V>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void spmm_csr_sg(const I *rowptr, const I *col, const T *val, const T *X, T *Y, long *arg, long M, long C,
                 long ntiles, long rows) {
  static_assert(V >= 1 && V <= 16, "features per lane");
  const auto [sg, g, lane] = subgroup_slot();
  if (ntiles == 1) {  // `rows` rows per sub-group, no division
    const long i0 = g * rows, i1 = i0 + rows < M ? i0 + rows : M;
    for (long i = i0; i < i1; ++i) spmm_sg_row<T, I, R, W, ARG, SG, V>(rowptr, col, val, X, Y, arg, C, i, 0, lane);
  } else {
    const long i = g / ntiles, tile = g - i * ntiles;
    if (i < M) spmm_sg_row<T, I, R, W, ARG, SG, V>(rowptr, col, val, X, Y, arg, C, i, tile, lane);
  }
}

// Narrow rows (C < SG): a sub-group per row, lanes over the row's edges (lane l takes edges
// b + l, b + l + SG, ...), each lane keeping all C <= V features, then a fixed butterfly combine
// across lanes. The combine order depends only on SG, so results are bitwise reproducible; for
// max/min the combine keeps (value, edge) pairs with the same NaN and tie rules as Reducer.
template <typename T, Reduce R, bool ARG>
inline void combine(T &acc, long &arg, T other, long other_arg) {
  if constexpr (!has_arg(R)) {
    acc += other;
  } else if constexpr (!ARG) {
    const bool take = ((R == Reduce::max) ? (other > acc) : (other < acc)) | (is_nan(other) & !is_nan(acc));
    acc = take ? other : acc;
  } else {
    if (other_arg < 0) return;
    if (arg < 0) { acc = other; arg = other_arg; return; }
    const bool an = is_nan(acc), on = is_nan(other);
    bool take;
    if (an || on) take = (an && on) ? other_arg < arg : on;
    else if (other == acc) take = other_arg < arg;
    else take = (R == Reduce::max) ? (other > acc) : (other < acc);
    if (take) { acc = other; arg = other_arg; }
  }
}

template <typename T, typename I, Reduce R, bool W, bool ARG, int SG, int V>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void spmm_csr_narrow(const I *rowptr, const I *col, const T *val, const T *X, T *Y, long *arg, long M, long C) {
  static_assert(V >= 1 && V <= SG, "a lane keeps all C <= V features");
  using Red = Reducer<T, R, ARG>;
  const auto [sg, i, lane] = subgroup_slot();
  if (i >= M) return;
  T acc[V];
  long best[V];
#pragma unroll
  for (int v = 0; v < V; ++v) { acc[v] = Red::init(); best[v] = -1; }
  const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
  for (long k = b + lane; k < e; k += SG) {
    const T *x = X + long(col[k]) * C;
    const T w = W ? val[k] : T(1);
#pragma unroll
    for (int v = 0; v < V; ++v)
      if (v < C) Red::update(acc[v], best[v], W ? w * x[v] : x[v], k);
  }
  // 1. butterfly across lanes: after log2(SG) steps every lane holds the combined value
#pragma unroll
  for (int v = 0; v < V; ++v) {
    for (int d = SG / 2; d > 0; d /= 2) {
      const T o = sycl::permute_group_by_xor(sg, acc[v], d);
      long oa = -1;
      if constexpr (Red::has_arg) oa = sycl::permute_group_by_xor(sg, best[v], d);
      // combine in lane order so both partners compute the same value
      if (lane & d) {
        T mine = acc[v];
        long ma = best[v];
        acc[v] = o;
        best[v] = oa;
        combine<T, R, ARG>(acc[v], best[v], mine, ma);
      } else {
        combine<T, R, ARG>(acc[v], best[v], o, oa);
      }
    }
  }
  // 2. lane v writes feature v
#pragma unroll
  for (int v = 0; v < V; ++v)
    if (v < C && lane == v % SG) {
      Y[i * C + v] = Red::write(acc[v], e - b);
      if constexpr (Red::has_arg)
        arg[i * C + v] = (e == b) ? -1 : best[v];
    }
}

}  // namespace gnnsparse
