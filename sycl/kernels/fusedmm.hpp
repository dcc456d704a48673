// Portable SYCL FusedMM (semantics: include/gnnsparse/ops.hpp): per edge, the SDDMM value, the edge
// function, the value scaling and the SpMM accumulation happen in registers; the edge array is
// written only when E != nullptr. Work-item (row i, head h, lane t) owns features t + v * ntiles
// of Out[i, h, :]. Each work-item recomputes the edge values of its row (the same code in the same
// order, so all lanes agree bitwise); lane t == 0 writes E. Row softmax takes three passes over the
// row's edges (max, sum of exponentials, accumulate), the standard max subtraction for stability.
#pragma once
#include <sycl/builtins.hpp>

#include "common.hpp"

namespace gnnsparse {

template <typename T, int OP>
inline T edge_score(const T *X, const T *Y, long i, long j, long h, long H, long F) {
  if constexpr (OP == kAdd) {
    return X[i * H + h] + Y[j * H + h];
  } else {
    const T *x = X + (i * H + h) * F, *y = Y + (j * H + h) * F;
    constexpr int V = 4;
    T part[V] = {};
    long f = 0;
    for (; f + V <= F; f += V)
#pragma unroll
      for (int v = 0; v < V; ++v) part[v] += x[f + v] * y[f + v];
    for (; f < F; ++f) part[0] += x[f] * y[f];
    return (part[0] + part[1]) + (part[2] + part[3]);
  }
}

template <typename T, typename I, int OP, int EF, bool W, int V>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void fusedmm_csr(const I *rowptr, const I *col, const T *val, const T *X, const T *Y, const T *Z, T *Out, T *E,
                 long M, long H, long F, long D, long ntiles, T slope) {
  const long gid = long(global_id());
  const long t = gid % ntiles, ih = gid / ntiles;
  const long i = ih / H, h = ih % H;
  if (i >= M) return;
  const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
  // 1. row statistics for the softmax
  T mx = T(0), denom = T(1);
  if constexpr (EF == kEdgeSoftmax) {
    if (e > b) {
      mx = edge_score<T, OP>(X, Y, i, long(col[b]), h, H, F);
      for (long k = b + 1; k < e; ++k) {
        const T s = edge_score<T, OP>(X, Y, i, long(col[k]), h, H, F);
        if (s > mx || is_nan(s)) mx = s;
      }
      denom = T(0);
      for (long k = b; k < e; ++k) denom += sycl::exp(edge_score<T, OP>(X, Y, i, long(col[k]), h, H, F) - mx);
    }
  }
  // 2. accumulate w_k * Z[j, h, :]
  T acc[V];
#pragma unroll
  for (int v = 0; v < V; ++v) acc[v] = T(0);
  for (long k = b; k < e; ++k) {
    const long j = long(col[k]);
    T w = edge_score<T, OP>(X, Y, i, j, h, H, F);
    if constexpr (EF == kEdgeLeakyRelu) w = w > T(0) ? w : slope * w;
    if constexpr (EF == kEdgeExp) w = sycl::exp(w);
    if constexpr (EF == kEdgeSoftmax) w = sycl::exp(w - mx) / denom;
    if constexpr (W) w *= val[k];
    if (E && t == 0) E[k * H + h] = w;
    const T *z = Z + (j * H + h) * D + t;
#pragma unroll
    for (int v = 0; v < V; ++v)
      if (t + v * ntiles < D) acc[v] += w * z[v * ntiles];
  }
  T *o = Out + (i * H + h) * D + t;
#pragma unroll
  for (int v = 0; v < V; ++v)
    if (t + v * ntiles < D) o[v * ntiles] = acc[v];
}

}  // namespace gnnsparse
