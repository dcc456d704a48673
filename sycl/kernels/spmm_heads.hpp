// Portable SYCL SpMM with per-(edge, head) weights (semantics: include/gnnsparse/ops.hpp,
// spmm_heads): Out[i, h, :] = sum_k W[k, h] Z[col k, h, :], every head in one launch. The two
// schedules of spmm.hpp over the C = H * D columns of a row, column c weighted by W[k, c / D]:
//   spmm_heads_sg     C >= SG: lanes over columns (V per lane, ntiles tiles of SG * V; with one
//                     tile, `rows` consecutive rows per sub-group), the sub-group walks the row's
//                     edges in order;
//   spmm_heads_narrow C <  SG: lanes over edges, a lane keeps all C <= V columns, then a fixed
//                     butterfly across lanes.
// Each output element comes from one fixed sequence of operations: no atomics, bitwise
// reproducible for a given device and sub-group size.
#pragma once
#include <sycl/group_algorithm.hpp>

#include "common.hpp"

namespace gnnsparse {

// Row i, feature tile `tile`: lane `lane` owns columns c0 + v * SG (c0 = tile * SG * V + lane),
// whose heads are h[v]. The full-tile test is uniform across the sub-group, so the edge loop
// stays scalar control flow (as in spmm_sg_row).
template <typename T, typename I, int SG, int V>
inline void spmm_heads_row(const I *rowptr, const I *col, const T *W, const T *Z, T *out, long H, long C, long i,
                           long tile, long c0, const long (&h)[V]) {
  T acc[V];
#pragma unroll
  for (int v = 0; v < V; ++v) acc[v] = T(0);
  const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
  T *y = out + i * C + c0;
  if ((tile + 1) * SG * V <= C) {  // full tile: no per-column bounds checks
    for (long k = b; k < e; ++k) {
      const T *z = Z + long(col[k]) * C + c0;
      const T *w = W + k * H;
#pragma unroll
      for (int v = 0; v < V; ++v) acc[v] += w[h[v]] * z[v * SG];
    }
#pragma unroll
    for (int v = 0; v < V; ++v) y[v * SG] = acc[v];
  } else {
    for (long k = b; k < e; ++k) {
      const T *z = Z + long(col[k]) * C + c0;
      const T *w = W + k * H;
#pragma unroll
      for (int v = 0; v < V; ++v)
        if (c0 + v * SG < C) acc[v] += w[h[v]] * z[v * SG];
    }
#pragma unroll
    for (int v = 0; v < V; ++v)
      if (c0 + v * SG < C) y[v * SG] = acc[v];
  }
}

template <typename T, typename I, int SG, int V>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void spmm_heads_sg(const I *rowptr, const I *col, const T *W, const T *Z, T *out, long M, long H, long D,
                   long ntiles, long rows) {
  static_assert(V >= 1 && V <= 16, "columns per lane");
  const auto [sg, g, lane] = subgroup_slot();
  const long C = H * D;
  long i0, i1, tile;
  if (ntiles == 1) {  // `rows` rows per sub-group, no division
    i0 = g * rows;
    i1 = i0 + rows < M ? i0 + rows : M;
    tile = 0;
  } else {
    i0 = g / ntiles;
    i1 = i0 < M ? i0 + 1 : i0;
    tile = g - i0 * ntiles;
  }
  const long c0 = tile * SG * V + lane;
  // The head of each of this lane's columns (columns past C are never read). With one head, or
  // with D a multiple of SG, the SG columns of each v lie in one head: the head then comes from
  // the sub-group's first column, uniform across lanes, so each weight is one scalar load (a
  // per-lane index is a gather: on the CPU device it made one head with D = 64 3x slower than
  // the weighted SpMM).
  if (H == 1 || D % SG == 0) {
    long h[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const long hv = (tile * SG * V + v * SG) / D;
      h[v] = hv < H ? hv : H - 1;
    }
    for (long i = i0; i < i1; ++i) spmm_heads_row<T, I, SG, V>(rowptr, col, W, Z, out, H, C, i, tile, c0, h);
  } else {
    long h[V];
#pragma unroll
    for (int v = 0; v < V; ++v) h[v] = (c0 + v * SG) / D;
    for (long i = i0; i < i1; ++i) spmm_heads_row<T, I, SG, V>(rowptr, col, W, Z, out, H, C, i, tile, c0, h);
  }
}

// Narrow rows (C < SG): lane l takes edges b + l, b + l + SG, ... and keeps all C <= V columns;
// then a butterfly across lanes whose order depends only on SG (as spmm_csr_narrow's).
template <typename T, typename I, int SG, int V>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void spmm_heads_narrow(const I *rowptr, const I *col, const T *W, const T *Z, T *out, long M, long H, long D) {
  static_assert(V >= 1 && V <= SG, "a lane keeps all C <= V columns");
  const auto [sg, i, lane] = subgroup_slot();
  if (i >= M) return;
  const long C = H * D;
  long h[V];
  T acc[V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
    h[v] = v < C ? v / D : 0;
    acc[v] = T(0);
  }
  const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
  for (long k = b + lane; k < e; k += SG) {
    const T *z = Z + long(col[k]) * C;
    const T *w = W + k * H;
#pragma unroll
    for (int v = 0; v < V; ++v)
      if (v < C) acc[v] += w[h[v]] * z[v];
  }
  // 1. butterfly across lanes: after log2(SG) steps every lane holds the sum, the lower lanes'
  //    part on the left, so both partners of an exchange compute the same value
#pragma unroll
  for (int v = 0; v < V; ++v)
    for (int d = SG / 2; d > 0; d /= 2) {
      const T o = sycl::permute_group_by_xor(sg, acc[v], d);
      acc[v] = (lane & d) ? o + acc[v] : acc[v] + o;
    }
  // 2. lane v writes column v (an empty row: 0)
#pragma unroll
  for (int v = 0; v < V; ++v)
    if (v < C && lane == v % SG) out[i * C + v] = acc[v];
}

}  // namespace gnnsparse
