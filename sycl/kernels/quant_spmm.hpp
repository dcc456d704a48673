// Portable SYCL quantized SpMM (contract: include/gnnsparse/quant.hpp), which also serves the
// incidence SpMM (ident: row v aggregates its own edges, X has one row per edge) and the
// multi-head aggregation (W: nnz x H edge weights; column c belongs to head c / D).
//
// A sub-group per (row, feature tile of SG * kQV columns), the row uniform by construction; lane l
// owns columns tile * SG * kQV + v * SG + l and walks the row's edges in order. Bits are a run-time
// argument; reduction and weights are template arguments (an instance per index type, sub-group
// size, reduction and weighted: sycl/quant_policy.hpp). Messages without weights are
// integers summed exactly in int64 (equal to the contract's int32 sums wherever those fit);
// with weights, float32 w * q in edge order. The scale is applied once per output element. With a
// quantized output (Q), each lane quantizes its values with the delayed scale instead of storing
// float32 (qspmm_store_q), and each work-group leaves one partial absmax.
#pragma once
#include <type_traits>

#include "common.hpp"
#include "quant.hpp"

namespace gnnsparse {

template <typename Acc, Reduce R>
struct QReducer {
  static constexpr bool extremum = ::gnnsparse::has_arg(R);
  static void update(Acc &acc, long &arg, Acc v, long k) {
    if constexpr (!extremum) {
      acc += v;
    } else {
      const bool better = (R == Reduce::max) ? (v > acc) : (v < acc);
      const bool take = (arg < 0) | better | (is_nan(v) & !is_nan(acc));
      acc = take ? v : acc;
      arg = take ? k : arg;
    }
  }
};

// A delayed-scale quantized output (include/gnnsparse/quant.hpp, DELAYED SCALING): Q, the scale
// to quantize with, its bits / rounding / seed.
struct QOutArgs {
  unsigned char *Q;
  const float *scale_in;
  int bits;
  int stochastic;
  unsigned long seed;
};

// The OUT epilogue of one lane: value v of the lane (column c0 + v * SG) quantized with the delayed
// scale (one Philox call per element, keyed by its flat index row * C + c) and stored; int4 pairs
// each even column with the next lane's value (a sub-group shift: every lane of the sub-group
// calls this). Returns the max absmax_key of the values this lane wrote.
inline float qspmm_store_q(sycl::sub_group sg, const QOutArgs &o, long i, long C, long c0, long SG,
                           const float (&y)[kQV]) {
  const float inv = o.scale_in[1];
  const int qmax = quant::qmax_of(o.bits);
  const long row_bytes = o.bits == 8 ? C : (C + 1) / 2;
  unsigned char *row = o.Q + i * row_bytes;
  float m = 0.0f;
#pragma unroll
  for (int v = 0; v < kQV; ++v) {
    const long c = c0 + v * SG;
    const bool in = c < C;
    const long e = i * C + c;
    const std::uint32_t w = (in && o.stochastic) ? quant::element_words(o.seed, std::uint64_t(e) >> 2).w[e & 3] : 0u;
    const int q = in ? quant::quantize_value_sat(y[v], inv, qmax, o.stochastic != 0, w) : 0;
    if (in) m = sycl::fmax(m, absmax_key(y[v]));
    if (o.bits == 8) {
      if (in) row[c] = static_cast<unsigned char>(q);
    } else {
      const int hi = sycl::shift_group_left(sg, q, 1);  // column c + 1 (SG even: the next lane)
      if (in && (c & 1) == 0) row[c >> 1] = quant::pack4(q, c + 1 < C ? hi : 0);
    }
  }
  return m;
}

template <typename Acc, Reduce R, typename I>
inline void qspmm_row(const I *col, const float *w, const unsigned char *X, float s, float *Y, long *arg, long i,
                      long b, long e, long C, long row_bytes, long H, long D, int bits, bool ident, long c0,
                      long lane_stride, float (*yq)[kQV] = nullptr) {
  Acc acc[kQV];
  long best[kQV];
  long head[kQV];
#pragma unroll
  for (int v = 0; v < kQV; ++v) {
    acc[v] = Acc(0);
    best[v] = -1;
    const long c = c0 + v * lane_stride;
    head[v] = c < C ? c / D : 0;
  }
  for (long k = b; k < e; ++k) {
    const long j = ident ? k : long(col[k]);
    const unsigned char *row = X + j * row_bytes;
#pragma unroll
    for (int v = 0; v < kQV; ++v) {
      const long c = c0 + v * lane_stride;
      if (c >= C) continue;
      const int q = qload(row, c, bits);
      Acc m;
      if constexpr (std::is_same_v<Acc, float>) m = w[k * H + head[v]] * float(q);
      else m = Acc(q);
      QReducer<Acc, R>::update(acc[v], best[v], m, k);
    }
  }
  const long deg = e - b;
#pragma unroll
  for (int v = 0; v < kQV; ++v) {
    const long c = c0 + v * lane_stride;
    if (c >= C) continue;
    float out = s * float(acc[v]);
    if constexpr (R == Reduce::mean) out = out / float(deg);
    if (yq != nullptr) {  // a quantized output: the caller quantizes the values
      (*yq)[v] = deg == 0 ? 0.0f : out;
      continue;
    }
    Y[i * C + c] = deg == 0 ? 0.0f : out;
    if constexpr (::gnnsparse::has_arg(R))
      if (arg != nullptr) arg[i * C + c] = deg == 0 ? -1 : best[v];
  }
}

// w: A's values (H == 1) or W (nnz x H) when W, unused otherwise. One instance per (index type,
// sub-group size, reduction, weighted): each holds one edge loop, so a driver that finishes the
// SPIR-V at first use compiles only what the call needs.
// Q != nullptr: the output is written quantized with the delayed scale qscale_in (obits, ostoch,
// oseed) instead of Y, and work-group g leaves the absmax key (|y|, +inf for NaN / +-inf) of what
// it wrote in work[g] (sycl/quant.cpp folds the partials: quant_scale with a previous scale).
template <typename I, int SG, Reduce R, bool W>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void qspmm_sg(const I *rowptr, const I *col, const float *w, const unsigned char *X, const float *scale, float *Y,
              long *arg, long M, long C, long row_bytes, long H, long D, int bits, int ident, long ntiles,
              unsigned char *Q, const float *qscale_in, float *work, int obits, int ostoch, unsigned long oseed) {
  const auto [sg, g, lane] = subgroup_slot();
  const long i = g / ntiles, tile = g % ntiles;
  using Acc = std::conditional_t<W, float, long>;  // weighted: float32 w * q; else exact integer sums
  const long c0 = tile * SG * kQV + lane;
  if (Q == nullptr) {
    if (i >= M) return;
    const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
    qspmm_row<Acc, R, I>(col, w, X, scale[0], Y, arg, i, b, e, C, row_bytes, H, D, bits, ident != 0, c0, SG);
    return;
  }
  float m = 0.0f;
  if (i < M) {  // uniform across the sub-group
    const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
    float y[kQV] = {};
    qspmm_row<Acc, R, I>(col, w, X, scale[0], Y, nullptr, i, b, e, C, row_bytes, H, D, bits, ident != 0, c0, SG,
                         &y);
    m = qspmm_store_q(sg, QOutArgs{Q, qscale_in, obits, ostoch, oseed}, i, C, c0, SG, y);
  }
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  m = sycl::reduce_over_group(it.get_group(), m, sycl::maximum<float>());
  if (it.get_local_id(0) == 0) work[it.get_group(0)] = m;
}

}  // namespace gnnsparse
