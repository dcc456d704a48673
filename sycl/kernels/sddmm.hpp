// Portable SYCL SDDMM (semantics: include/gnnsparse/ops.hpp). One work-item per (edge k, head h):
// the edge's row comes from a binary search in rowptr, so hub rows spread over many work-items.
// The dot product runs in a fixed order (V independent partial sums, combined in lane order).
#pragma once
#include <sycl/group_algorithm.hpp>

#include "common.hpp"

namespace gnnsparse {

template <typename T, typename I, SddmmOp OP>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void sddmm_csr(const I *rowptr, const I *col, const T *X, const T *Y, T *E, long M, long nnz, long H, long F) {
  const long gid = long(global_id());
  if (gid >= nnz * H) return;
  const long k = gid / H, h = gid % H;
  const long i = row_of_edge(rowptr, M, k), j = long(col[k]);
  if constexpr (OP == SddmmOp::add) {
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

// dot with F >= SG: a sub-group per (row, head), the row uniform by construction; lanes split the
// feature axis (contiguous vector loads), one reduce_over_group per edge (a fixed tree for a fixed
// sub-group size: reproducible), lane 0 writes E.
template <typename T, typename I, int SG>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void sddmm_dot_sg(const I *rowptr, const I *col, const T *X, const T *Y, T *E, long M, long H, long F) {
  const auto [sg, ih, lane] = subgroup_slot();
  const long i = ih / H, h = ih % H;
  if (i >= M) return;
  const T *x = X + (i * H + h) * F;
  const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
  for (long k = b; k < e; ++k) {
    const T *y = Y + (long(col[k]) * H + h) * F;
    T part = T(0);
    for (long f = lane; f < F; f += SG) part += x[f] * y[f];
    const T s = sycl::reduce_over_group(sg, part, sycl::plus<T>());
    if (lane == 0) E[k * H + h] = s;
  }
}

}  // namespace gnnsparse
