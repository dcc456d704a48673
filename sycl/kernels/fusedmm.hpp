// Portable SYCL FusedMM (semantics: include/gnnsparse/ops.hpp): per edge, the SDDMM value, the edge
// function, the value scaling and the SpMM accumulation happen in registers; the edge array is
// written only when E != nullptr.
#pragma once
#include <sycl/builtins.hpp>
#include <sycl/group_algorithm.hpp>
#include <sycl/group_barrier.hpp>

#include "common.hpp"

namespace gnnsparse {

// Sub-group per (row, head, feature tile of SG * V): the edge score is computed once per edge by
// the whole sub-group (dot: lanes split F, one reduce_over_group; add: uniform scalar loads), the
// lanes then accumulate w * Z[j, h, :] over their features. Row softmax runs online in one pass
// (running max m and sum s; on a new maximum the sum and the accumulators are rescaled by
// exp(m_old - m_new)); when E is requested the first pass also stores the raw scores there and a
// second pass turns them into the normalized weights (no score is computed twice). D == 0 (edge
// values only, E given) skips the Z gathers and the Out stores: the scores and the softmax are
// those of any D.
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

template <typename T, typename I, SddmmOp OP, EdgeFn EF, bool W, int SG, int V>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void fusedmm_csr_sg(const I *rowptr, const I *col, const T *val, const T *X, const T *Y, const T *Z, T *Out, T *E,
                    long M, long H, long F, long D, long ntiles, T slope) {
  const auto [sg, g, lane] = subgroup_slot();
  const long tile = g % ntiles, ih = g / ntiles;
  const long i = ih / H, h = ih % H;
  if (i >= M) return;
  const long c0 = tile * SG * V + lane;
  const bool write_e = E != nullptr && tile == 0;
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
      // online softmax: m is the running max (fmax skips a NaN score), and every score goes through
      // exp(w - m), so a NaN, or an infinity that makes w - m NaN, turns the row NaN as
      // exp(e - max(e)) does (ops.hpp)
      const T mn = sycl::fmax(m, w);
      if (mn != m) {
        const T scale = sycl::exp(m - mn);
        s *= scale;
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] *= scale;
        m = mn;
      }
      const T p = sycl::exp(w - m);
      s += p;
      w = p;
    } else {
      if constexpr (EF == EdgeFn::leaky_relu) w = w > T(0) ? w : slope * w;
      if constexpr (EF == EdgeFn::exp) w = sycl::exp(w);
    }
    if constexpr (W) w *= val[k];
    if (write_e && lane == 0) E[k * H + h] = row_softmax(EF) ? raw : w;
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
    if (write_e) {  // second pass: the raw scores (lane 0's stores) into the normalized weights
      sycl::group_barrier(sg);
      for (long k = b + lane; k < e; k += SG) {
        T w = sycl::exp(E[k * H + h] - m) * inv;
        if constexpr (W) w *= val[k];
        E[k * H + h] = w;
      }
    }
  }
}

}  // namespace gnnsparse
