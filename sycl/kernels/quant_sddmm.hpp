// Portable SYCL quantized SDDMM and FusedMM (contract: include/gnnsparse/quant.hpp).
//
// qsddmm_sg: a sub-group per (row, head) walks the row's edges; dot: lanes split the head's F
//   features, int64 lane partials of exact integer products, one reduce_over_group per edge (exact
//   in any order), E = fl32(s_X s_Y) * fl32(acc); add: E = fl32(s_X qx) + fl32(s_Y qy).
// qfusedmm_sg: a sub-group per (row, head, tile of SG * kQV columns of D): the score as qsddmm,
//   the edge function, the value, and w * q_Z accumulated in float32; softmax online (running
//   max and sum, accumulators rescaled when the max grows), E normalized in a second pass. The
//   result is scaled by s_Z once per output element.
// Bits, op and edge function are run-time arguments: one instance per index type and sub-group
// size.
#pragma once
#include <sycl/builtins.hpp>
#include <sycl/group_algorithm.hpp>
#include <sycl/group_barrier.hpp>

#include "common.hpp"
#include "quant.hpp"

namespace gnnsparse {

// The score of edge (i, j), head h, from the whole sub-group (every lane gets it).
inline float qscore(const sycl::sub_group &sg, long lane, long SG, int op, const unsigned char *X,
                    const unsigned char *Y, long rbx, long rby, int xbits, int ybits, float sx, float sy, long i,
                    long j, long h, long F) {
  if (SddmmOp(op) == SddmmOp::add) {
    const float a = sx * float(qload(X + i * rbx, h, xbits));
    const float b = sy * float(qload(Y + j * rby, h, ybits));
    return a + b;
  }
  const unsigned char *x = X + i * rbx, *y = Y + j * rby;
  long part = 0;
  for (long f = lane; f < F; f += SG) part += long(qload(x, h * F + f, xbits) * qload(y, h * F + f, ybits));
  const long acc = sycl::reduce_over_group(sg, part, sycl::plus<long>());
  const float sxy = sx * sy;
  return sxy * float(acc);
}

template <typename I, int SG>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void qsddmm_sg(const I *rowptr, const I *col, int op, const unsigned char *X, const float *xs, int xbits,
               const unsigned char *Y, const float *ys, int ybits, float *E, long M, long H, long F, long rbx,
               long rby) {
  const auto [sg, ih, lane] = subgroup_slot();
  const long i = ih / H, h = ih % H;
  if (i >= M) return;
  const float sx = xs[0], sy = ys[0];
  const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
  for (long k = b; k < e; ++k) {
    const float v = qscore(sg, lane, SG, op, X, Y, rbx, rby, xbits, ybits, sx, sy, i, long(col[k]), h, F);
    if (lane == 0) E[k * H + h] = v;
  }
}

template <typename I, int SG>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void qfusedmm_sg(const I *rowptr, const I *col, const float *val, int op, int edge, float slope,
                 const unsigned char *X, const float *xs, int xbits, const unsigned char *Y, const float *ys,
                 int ybits, const unsigned char *Z, const float *zs, int zbits, float *Out, float *E, long M,
                 long H, long F, long D, long rbx, long rby, long rbz, long ntiles) {
  const auto [sg, g, lane] = subgroup_slot();
  const long tile = g % ntiles, ih = g / ntiles;
  const long i = ih / H, h = ih % H;
  if (i >= M) return;
  const long c0 = tile * SG * kQV + lane;
  const bool write_e = E != nullptr && tile == 0;
  const float sx = xs[0], sy = ys[0];
  const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
  const bool softmax = row_softmax(EdgeFn(edge));
  const bool leaky = EdgeFn(edge) == EdgeFn::leaky_relu || EdgeFn(edge) == EdgeFn::leaky_relu_softmax;
  float acc[kQV];
#pragma unroll
  for (int v = 0; v < kQV; ++v) acc[v] = 0.0f;
  float m = -std::numeric_limits<float>::infinity(), ssum = 0.0f;
  for (long k = b; k < e; ++k) {
    const long j = long(col[k]);
    float sc = qscore(sg, lane, SG, op, X, Y, rbx, rby, xbits, ybits, sx, sy, i, j, h, F);
    const float wv = val != nullptr ? val[k] : 1.0f;
    float w, scale = 1.0f;
    if (softmax) {
      if (leaky) sc = sc > 0.0f ? sc : slope * sc;
      const float mn = sycl::fmax(m, sc);
      scale = m == mn ? 1.0f : sycl::exp(m - mn);
      const float p = sycl::exp(sc - mn);
      ssum = ssum * scale + p;
      m = mn;
      w = p * wv;
      if (write_e && lane == 0) E[k * H + h] = sc;
    } else {
      w = sc;
      if (leaky) w = w > 0.0f ? w : slope * w;
      if (EdgeFn(edge) == EdgeFn::exp) w = sycl::exp(w);
      w *= wv;
      if (write_e && lane == 0) E[k * H + h] = w;
    }
    const unsigned char *zrow = Z + j * rbz;
#pragma unroll
    for (int v = 0; v < kQV; ++v) {
      const long c = c0 + v * SG;
      if (c < D) {
        const float zq = float(qload(zrow, h * D + c, zbits));
        const float scaled = acc[v] * scale;
        acc[v] = scaled + w * zq;
      }
    }
  }
  const float sz = zs[0];
  const float inv = (softmax && e > b) ? 1.0f / ssum : 1.0f;
#pragma unroll
  for (int v = 0; v < kQV; ++v) {
    const long c = c0 + v * SG;
    if (c < D) {
      const float r = acc[v] * inv;
      Out[(i * H + h) * D + c] = sz * r;
    }
  }
  if (softmax && write_e && e > b) {  // second pass: the normalized, value-scaled weights
    sycl::group_barrier(sg);
    for (long k = b + lane; k < e; k += SG) {
      float w = sycl::exp(E[k * H + h] - m) * inv;
      if (val != nullptr) w *= val[k];
      E[k * H + h] = w;
    }
  }
}

}  // namespace gnnsparse
