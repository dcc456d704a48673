// Portable SYCL quantizer (contract: include/gnnsparse/quant.hpp; element arithmetic:
// quant_math.hpp, shared with the CUDA and ESIMD kernels, so every backend gives the same bits).
//
//   quant_absmax<WG>     work-group g reduces X[g * chunk, (g + 1) * chunk) to work[g]
//   quant_scale<WG>      one work-group folds the partials into scale = {s, inv}
//   quant_quantize<B>    quads: a work-item per 4 consecutive elements (one Philox call, whose 4
//                        words are exactly those elements' words); otherwise a work-item per
//                        output byte (one Philox call per element)
//   quant_dequantize<B>  a work-item per element: Y = s * q
//   quant_requantize<B>  the int8 GEMM's scale pass writing B-bit values with a delayed scale
//                        (quant_scale with a previous scale folds its partials)
// The absmax reduction runs on keys (|x|, or +inf for NaN / +-inf) with sycl::maximum, which is
// exact in any order; a +inf result means "not finite" (s = NaN). Nothing is ever read back to
// the host.
#pragma once
#include <sycl/builtins.hpp>
#include <sycl/group_algorithm.hpp>

#include "common.hpp"
#include "quant_math.hpp"

namespace gnnsparse {

inline constexpr int kQV = 4;  // columns per lane per feature tile of the quantized SpMM / FusedMM

// The absmax key of one element: |x|, or +inf when x is NaN or +-inf.
inline float absmax_key(float x) {
  const float a = sycl::fabs(x);
  return a <= std::numeric_limits<float>::max() ? a : std::numeric_limits<float>::infinity();
}

// Quantized element c of a row (int8, or a nibble of packed int4).
inline int qload(const unsigned char *row, long c, int bits) {
  if (bits == 8) return int(static_cast<signed char>(row[c]));
  const unsigned b = row[c >> 1];
  return (c & 1) ? quant::nibble_hi(b) : quant::nibble_lo(b);
}

template <int WG>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void quant_absmax(const float *X, long n, long chunk, float *work) {
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  const long g = long(it.get_group(0)), l = long(it.get_local_id(0));
  const long lo = g * chunk, hi = sycl::min(n, lo + chunk);
  float acc = 0.0f;
  for (long e = lo + l; e < hi; e += WG) acc = sycl::fmax(acc, absmax_key(X[e]));
  acc = sycl::reduce_over_group(it.get_group(), acc, sycl::maximum<float>());
  if (l == 0) work[g] = acc;
}

// prev == nullptr: scale = {s, inv} of the absmax. prev = {s, inv} a producer quantized with
// (DELAYED SCALING): scale[0..3] = the QTensor's scale and the next step's (peak hold `decay`),
// stats (if not null) updated (quant::delayed_scales).
template <int WG>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void quant_scale(const float *work, long P, int qmax, float *scale, const float *prev, float decay, float *stats) {
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  const long l = long(it.get_local_id(0));
  float acc = 0.0f;
  for (long p = l; p < P; p += WG) acc = sycl::fmax(acc, work[p]);
  acc = sycl::reduce_over_group(it.get_group(), acc, sycl::maximum<float>());
  if (l == 0) {
    const float absmax = acc <= std::numeric_limits<float>::max() ? acc : std::numeric_limits<float>::quiet_NaN();
    if (prev == nullptr) {
      float s, inv;
      quant::scales_from_absmax(absmax, qmax, s, inv);
      scale[0] = s;
      scale[1] = inv;
    } else {
      float cur[2], next[2], growth;
      quant::delayed_scales(absmax, qmax, prev[0], prev[1], decay, cur, next, growth);
      scale[0] = cur[0];
      scale[1] = cur[1];
      scale[2] = next[0];
      scale[3] = next[1];
      if (stats != nullptr) {
        if (growth > stats[0]) stats[0] = growth;  // NaN never wins
        if (growth > 1.0f) stats[1] += 1.0f;
      }
    }
  }
}

// The int8 GEMM's scale pass writing its output quantized with a delayed scale (DELAYED SCALING):
// y = fl32(fl32(sa[0] sb[0]) * fl32(acc)) for acc (rows x ld int32, C columns used), quantized
// with scale_in (saturating) into Q. Work-group g owns units [g * chunk, ...): quads of 4
// consecutive elements (quads != 0: C % 4 == 0 and ld % 4 == 0; one Philox call, 4 or 2 bytes out)
// or output bytes; it leaves the absmax key of its values in work[g].
template <int BITS>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void quant_requantize(const int *acc, long rows, long C, long ld, long chunk, int quads, const float *sa,
                      const float *sb, const float *scale_in, int stochastic, unsigned long seed, unsigned char *Q,
                      float *work) {
  constexpr int QMAX = quant::qmax_of(BITS);
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  const long g = long(it.get_group(0)), l = long(it.get_local_id(0)), L = long(it.get_local_range(0));
  const float sab = sa[0] * sb[0];
  const float inv = scale_in[1];
  const long row_bytes = BITS == 8 ? C : (C + 1) / 2;
  const long units = quads ? rows * C / 4 : rows * row_bytes;
  const long lo = g * chunk, hi = sycl::min(units, lo + chunk);
  float m = 0.0f;
  for (long u = lo + l; u < hi; u += L) {
    if (quads) {
      const long e = 4 * u, r = e / C, c = e - r * C;
      quant::Words4 w{{0u, 0u, 0u, 0u}};
      if (stochastic) w = quant::element_words(seed, std::uint64_t(u));
      int q[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const float y = float(acc[r * ld + c + t]) * sab;
        m = sycl::fmax(m, absmax_key(y));
        q[t] = quant::quantize_value_sat(y, inv, QMAX, stochastic != 0, w.w[t]);
      }
      if constexpr (BITS == 8) {
#pragma unroll
        for (int t = 0; t < 4; ++t) Q[e + t] = static_cast<unsigned char>(q[t]);
      } else {
        Q[2 * u] = quant::pack4(q[0], q[1]);
        Q[2 * u + 1] = quant::pack4(q[2], q[3]);
      }
    } else {
      const long r = u / row_bytes, cb = u - r * row_bytes;
      const long c0 = BITS == 8 ? cb : 2 * cb;
      const int n = (BITS == 8 || c0 + 1 >= C) ? 1 : 2;
      int q[2] = {0, 0};
      for (int t = 0; t < n; ++t) {
        const float y = float(acc[r * ld + c0 + t]) * sab;
        const long e = r * C + c0 + t;
        const std::uint32_t w = stochastic ? quant::element_words(seed, std::uint64_t(e) >> 2).w[e & 3] : 0u;
        m = sycl::fmax(m, absmax_key(y));
        q[t] = quant::quantize_value_sat(y, inv, QMAX, stochastic != 0, w);
      }
      Q[u] = BITS == 8 ? static_cast<unsigned char>(q[0]) : quant::pack4(q[0], q[1]);
    }
  }
  m = sycl::reduce_over_group(it.get_group(), m, sycl::maximum<float>());
  if (l == 0) work[g] = m;
}

template <int BITS>
inline int quantize_at(const float *X, long e, float inv, int stochastic, unsigned long seed) {
  const std::uint32_t w = stochastic ? quant::element_words(seed, std::uint64_t(e) >> 2).w[e & 3] : 0u;
  return quant::quantize_value(X[e], inv, quant::qmax_of(BITS), stochastic != 0, w);
}

// quads != 0: n % 4 == 0 and (BITS == 8 or C even); a work-item per quad g (elements 4g .. 4g+3;
// int8 bytes 4g .., int4 bytes 2g, 2g + 1). Otherwise a work-item per output byte.
template <int BITS>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void quant_quantize(const float *X, long rows, long C, long row_bytes, int stochastic, unsigned long seed,
                    const float *scale, unsigned char *Q, int quads) {
  constexpr int QMAX = quant::qmax_of(BITS);
  const long gid = long(global_id());
  const float inv = scale[1];
  if (quads) {
    if (gid >= rows * C / 4) return;
    quant::Words4 w{{0u, 0u, 0u, 0u}};
    if (stochastic) w = quant::element_words(seed, std::uint64_t(gid));
    int q[4];
#pragma unroll
    for (int t = 0; t < 4; ++t) q[t] = quant::quantize_value(X[4 * gid + t], inv, QMAX, stochastic != 0, w.w[t]);
    if constexpr (BITS == 8) {
#pragma unroll
      for (int t = 0; t < 4; ++t) Q[4 * gid + t] = static_cast<unsigned char>(q[t]);
    } else {
      Q[2 * gid] = quant::pack4(q[0], q[1]);
      Q[2 * gid + 1] = quant::pack4(q[2], q[3]);
    }
    return;
  }
  if (gid >= rows * row_bytes) return;
  const long r = gid / row_bytes, cb = gid - r * row_bytes;
  if constexpr (BITS == 8) {
    Q[gid] = static_cast<unsigned char>(quantize_at<8>(X, r * C + cb, inv, stochastic, seed));
  } else {
    const long c0 = 2 * cb;
    const int q0 = quantize_at<4>(X, r * C + c0, inv, stochastic, seed);
    const int q1 = c0 + 1 < C ? quantize_at<4>(X, r * C + c0 + 1, inv, stochastic, seed) : 0;
    Q[gid] = quant::pack4(q0, q1);
  }
}

template <int BITS>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void quant_dequantize(const unsigned char *Q, const float *scale, long rows, long C, long row_bytes, float *Y) {
  const long e = long(global_id());
  if (e >= rows * C) return;
  const long r = e / C, c = e - r * C;
  Y[e] = scale[0] * float(qload(Q + r * row_bytes, c, BITS));
}

}  // namespace gnnsparse
