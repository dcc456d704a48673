// Portable SYCL GATv2 scores and their backward pass (semantics: include/gnnsparse/ops.hpp,
// gatv2_scores), without an (nnz, H, C) tensor. A sub-group per (row, head) item, lanes over the
// C channels of the head:
//   gatv2_scores_sg  per edge, each lane sums its channels' att * lrelu(x + y), then a fixed
//                    butterfly across the sub-group; lane 0 writes S[k, h]
//   gatv2_grad_sg    V channels per lane (tiles of SG * V channels walk the row again): per-lane
//                    sums of dS * att * lrelu'(z) (dX) and dS * lrelu(z) (dAtt's row partial)
// Each output element comes from one fixed sequence of operations: no atomics, bitwise
// reproducible for a given device and sub-group size.
#pragma once
#include <sycl/group_algorithm.hpp>

#include "common.hpp"

namespace gnnsparse {

template <typename T, typename I, int SG>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void gatv2_scores_sg(const I *rowptr, const I *col, const T *X, const T *Y, const T *att, T *S, long M, long H,
                     long C, T slope) {
  const auto [sg, g, lane] = subgroup_slot();
  if (g >= M * H) return;  // uniform across the sub-group
  const long i = g / H, h = g - i * H;
  const T *x = X + g * C;  // X[i, h]
  const T *w = att + h * C;
  const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
  for (long k = b; k < e; ++k) {
    const T *y = Y + (long(col[k]) * H + h) * C;
    T p = T(0);
    for (long c = lane; c < C; c += SG) {
      const T z = x[c] + y[c];
      p += w[c] * (z > T(0) ? z : z * slope);
    }
    // butterfly: after log2(SG) steps every lane holds the sum (lower lanes' part on the left)
    for (int d = SG / 2; d > 0; d /= 2) {
      const T o = sycl::permute_group_by_xor(sg, p, d);
      p = (lane & d) ? o + p : p + o;
    }
    if (lane == 0) S[k * H + h] = p;
  }
}

// dX[i, h, c] = sum_k dS[k, h] att[h, c] lrelu'(z), dAtt[i, h, c] = sum_k dS[k, h] lrelu(z) (dAtt
// may be null: not computed). Lane `lane` of tile t0 owns channels t0 + lane + v * SG.
template <typename T, typename I, int SG, int V>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void gatv2_grad_sg(const I *rowptr, const I *col, const T *X, const T *Y, const T *att, const T *dS, T *dX, T *dAtt,
                   long M, long H, long C, T slope) {
  static_assert(V >= 1 && V <= 16, "channels per lane");
  const auto [sg, g, lane] = subgroup_slot();
  if (g >= M * H) return;
  const long i = g / H, h = g - i * H;
  const T *x = X + g * C;
  const T *w = att + h * C;
  const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
  for (long t0 = 0; t0 < C; t0 += long(SG) * V) {  // uniform trip count
    const long c0 = t0 + lane;
    T xv[V], wv[V], dx[V], da[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const long c = c0 + long(v) * SG;
      xv[v] = c < C ? x[c] : T(0);
      wv[v] = c < C ? w[c] : T(0);
      dx[v] = da[v] = T(0);
    }
    for (long k = b; k < e; ++k) {
      const T ds = dS[k * H + h];
      const T *y = Y + (long(col[k]) * H + h) * C;
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const long c = c0 + long(v) * SG;
        if (c < C) {
          const T z = xv[v] + y[c];
          const T gz = z > T(0) ? ds : ds * slope;  // dS * lrelu'(z)
          dx[v] += gz * wv[v];
          da[v] += z * gz;  // dS * lrelu(z)
        }
      }
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const long c = c0 + long(v) * SG;
      if (c < C) {
        dX[g * C + c] = dx[v];
        if (dAtt != nullptr) dAtt[g * C + c] = da[v];
      }
    }
  }
}

}  // namespace gnnsparse
