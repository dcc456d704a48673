// Portable SYCL quantized SpMM (contract: include/gnnsparse/quant.hpp), which also serves the
// incidence SpMM (ident: row v aggregates its own edges, X has one row per edge) and the
// multi-head aggregation (W: nnz x H edge weights; column c belongs to head c / D).
//
// A sub-group per (row, feature tile of SG * kQV columns), the row uniform by construction; lane l
// owns columns tile * SG * kQV + v * SG + l and walks the row's edges in order. Bits are a run-time
// argument; reduction and weights are template arguments (an instance per index type, sub-group
// size, reduction and weighted: sycl/quant_policy.hpp). Messages without weights are
// integers summed exactly in int64 (equal to the contract's int32 sums wherever those fit);
// with weights, float32 w * q in edge order. The scale is applied once per output element.
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

template <typename Acc, Reduce R, typename I>
inline void qspmm_row(const I *col, const float *w, const unsigned char *X, float s, float *Y, long *arg, long i,
                      long b, long e, long C, long row_bytes, long H, long D, int bits, bool ident, long c0,
                      long lane_stride) {
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
    Y[i * C + c] = deg == 0 ? 0.0f : out;
    if constexpr (::gnnsparse::has_arg(R))
      if (arg != nullptr) arg[i * C + c] = deg == 0 ? -1 : best[v];
  }
}

// w: A's values (H == 1) or W (nnz x H) when W, unused otherwise. One instance per (index type,
// sub-group size, reduction, weighted): each holds one edge loop, so a driver that finishes the
// SPIR-V at first use compiles only what the call needs.
template <typename I, int SG, Reduce R, bool W>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void qspmm_sg(const I *rowptr, const I *col, const float *w, const unsigned char *X, const float *scale, float *Y,
              long *arg, long M, long C, long row_bytes, long H, long D, int bits, int ident, long ntiles) {
  const auto [sg, g, lane] = subgroup_slot();
  const long i = g / ntiles, tile = g % ntiles;
  if (i >= M) return;
  const long c0 = tile * SG * kQV + lane;
  const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
  using Acc = std::conditional_t<W, float, long>;  // weighted: float32 w * q; else exact integer sums
  qspmm_row<Acc, R, I>(col, w, X, scale[0], Y, arg, i, b, e, C, row_bytes, H, D, bits, ident != 0, c0, SG);
}

}  // namespace gnnsparse
