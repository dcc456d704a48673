// Portable SYCL SDDMM (semantics: include/gnnsparse/ops.hpp). One work-item per (edge k, head h):
// the edge's row comes from a binary search in rowptr, so hub rows spread over many work-items.
// The dot product runs in a fixed order (V independent partial sums, combined in lane order).
#pragma once
#include "common.hpp"

namespace gnnsparse {

template <typename T, typename I, int OP>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void sddmm_csr(const I *rowptr, const I *col, const T *X, const T *Y, T *E, long M, long nnz, long H, long F) {
  const long gid = long(global_id());
  if (gid >= nnz * H) return;
  const long k = gid / H, h = gid % H;
  const long i = row_of_edge(rowptr, M, k), j = long(col[k]);
  if constexpr (OP == kAdd) {
    E[gid] = X[i * H + h] + Y[j * H + h];
  } else {
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

}  // namespace gnnsparse
