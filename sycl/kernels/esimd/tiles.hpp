// ESIMD tiled SpMM on the XMX systolic arrays (DPAS) of the Intel Data Center GPU Max (pvc), for
// dense-ish CSR matrices: Y = A X (sum) or its row mean, float32 in and out.
//
// One ESIMD thread owns a block of 8 rows (the dpas repeat count) and NB * 16 output columns (16:
// the pvc dpas execution size). It walks K in chunks of 32 columns: each chunk of A's 8 rows is
// densified from the CSR into registers (per row a cursor into its sorted entries), X's 32 x 16
// tiles arrive as block loads of the rows, and 4 dpas k-steps (systolic depth 8, tf32: one
// operand per channel, so K = 8 per step) multiply them.
//   * precision fp32 (SPLIT = true, the default): 3xTF32 as CUTLASS's "fast accurate" mode: each
//     operand v = hi + lo with hi = tf32(v), lo = tf32(v - hi) (round to nearest by a Veltkamp
//     split, so the hardware's own tf32 conversion of the operand bits is exact); per k-step the
//     products lo*hi + hi*lo + hi*hi (small terms first). The dropped terms (lo*lo, and the
//     tf32 rounding of lo) are at most ~2^-22 of |a x| each, against 2^-24 for one fp32 rounding.
//   * precision tf32 (SPLIT = false): one dpas per k-step on the rounded operands.
// Each chunk is accumulated from zero by the dpas chain (the hardware's internal accumulation of
// one chunk), then added to the running fp32 sum with one EU add: a fixed order, so results are
// bitwise reproducible run to run; they are fp32-accurate, not bitwise equal to the sparse kernels.
//
// Fallback inside the kernel (no host check of the CSR is needed): a thread that finds an unsorted
// or duplicate column in one of its rows, or a non-finite operand (0 * inf would be NaN where the
// sparse sum skips the absent entry; |v| > 2^114 overflows the split), recomputes its rows with
// the sparse ESIMD kernel's body (esimd/spmm.hpp, spmm_thread: edge-order sums).
#pragma once
#if __has_include("esimd/common.hpp")  // the kernel root on the include path (icpx -I, the host shim)
#include "esimd/common.hpp"
#include "esimd/spmm.hpp"
#else  // included as "esimd/tiles.hpp" by the kernel_compiler
#include "common.hpp"
#include "spmm.hpp"
#endif

namespace gnnsparse::esimd {

inline constexpr int kXmxRows = 8;    // dpas RepeatCount: rows of A (and of the result) per dpas
inline constexpr int kXmxDepth = 8;   // dpas SystolicDepth; tf32 has one operand per channel: K = 8
inline constexpr int kXmxExec = 16;   // dpas ExecutionSize on pvc: columns of B and of the result
inline constexpr int kXmxChunk = 32;  // columns of A densified per step (4 dpas k-steps)

// The tf32 part of v, rounded to nearest: Veltkamp's split with 2^13 + 1 keeps the 11 leading
// significant bits (tf32's 10 stored + 1 implicit); v - tf32_hi(v) is exact in fp32.
template <int N>
GNNSPARSE_ESIMD_FN simd<float, N> tf32_hi(simd<float, N> v) {
  const simd<float, N> t = v * 8193.0f;
  const simd<float, N> d = t - v;
  return t - d;
}

// One dpas: C + A (8 x 8, row-major) x B (8 x 16, row-major; tf32 has one operand per channel, so
// the VNNI layout is the plain one), tf32 operands, fp32 accumulator and result (8 x 16).
GNNSPARSE_ESIMD_FN simd<float, kXmxRows * kXmxExec> dpas_tf32(simd<float, kXmxRows * kXmxExec> c,
                                                             simd<float, kXmxDepth * kXmxExec> b,
                                                             simd<float, kXmxRows * kXmxDepth> a) {
  return xe::xmx::dpas<kXmxDepth, kXmxRows, float, float, float, float, xe::xmx::dpas_argument_type::tf32,
                       xe::xmx::dpas_argument_type::tf32>(c, b, a);
}

template <typename T, typename I, int NB, bool SPLIT, bool HAS_VAL>
GNNSPARSE_ESIMD_FN void spmm_xmx_thread(i64 gid, const I *rowptr, const I *col, const T *val, const T *X, T *Y,
                                        i64 M, i64 K, i64 C, Reduce reduce) {
  static_assert(std::is_same_v<T, float>, "XMX tiles: float32 features");
  static_assert(NB == 1 || NB == 2, "NB: 16 or 32 output columns per thread");
  constexpr int R = kXmxRows, KS = kXmxDepth, NN = kXmxExec, KC = kXmxChunk, CW = NN * NB;
  constexpr int STEPS = KC / KS;
  const i64 ctiles = (C + CW - 1) / CW;
  const i64 i0 = (gid / ctiles) * R, n0 = (gid % ctiles) * CW;
  if (i0 >= M) return;

  // 1. The rows' cursors (rows past M are empty).
  i64 cur[R], end[R], prev[R];
  GNNSPARSE_UNROLL
  for (int r = 0; r < R; ++r) {
    const bool here = i0 + r < M;
    cur[r] = here ? i64(rowptr[i0 + r]) : 0;
    end[r] = here ? i64(rowptr[i0 + r + 1]) : 0;
    prev[r] = -1;
  }
  simd<float, R * NN> acc[NB];
  GNNSPARSE_UNROLL
  for (int nb = 0; nb < NB; ++nb) acc[nb] = simd<float, R * NN>(0.0f);
  simd<float, KS * NN> fin(0.0f);  // x - x over every split operand: 0 when all are finite
  bool bad = false;

  for (i64 k0 = 0; k0 < K && !bad; k0 += KC) {
    // 2. Densify A[i0 : i0 + 8, k0 : k0 + 32] into registers, laid out [k-step][row][k] so that
    //    k-step s is the dpas A operand select<64, 1>(64 s).
    simd<float, KC * R> a(0.0f);
    GNNSPARSE_UNROLL
    for (int r = 0; r < R; ++r) {
      while (cur[r] < end[r]) {
        const i64 j = i64(col[cur[r]]);
        if (j >= k0 + KC) break;
        if (j <= prev[r] || j < k0) { bad = true; break; }  // unsorted or duplicate column
        const int kk = int(j - k0);
        a[(kk / KS) * (R * KS) + r * KS + kk % KS] = HAS_VAL ? float(val[cur[r]]) : 1.0f;
        prev[r] = j;
        ++cur[r];
      }
    }
    simd<float, KC * R> a_hi = tf32_hi(a);
    simd<float, KC * R> a_lo = SPLIT ? tf32_hi(simd<float, KC * R>(a - a_hi)) : simd<float, KC * R>(0.0f);
    if (!(xe::reduce<float>(simd<float, KC * R>(a_hi - a_hi), std::plus<>()) == 0.0f)) bad = true;

    // 3. Per column block: the 4 k-steps' products accumulated by the dpas chain, then one fp32 add.
    GNNSPARSE_UNROLL
    for (int nb = 0; nb < NB; ++nb) {
      const i64 c = n0 + nb * NN;
      if (c >= C) break;
      simd<float, R * NN> part(0.0f);
      GNNSPARSE_UNROLL
      for (int s = 0; s < STEPS; ++s) {
        simd<float, KS * NN> b(0.0f);
        GNNSPARSE_UNROLL
        for (int k = 0; k < KS; ++k) {
          const i64 kr = k0 + s * KS + k;
          if (kr < K) b.template select<NN, 1>(k * NN) = load_tile<T, NN>(X + kr * C + c, C - c);
        }
        const simd<float, KS * NN> b_hi = tf32_hi(b);
        fin += b_hi - b_hi;
        const simd<float, R * KS> ah = a_hi.template select<R * KS, 1>(s * R * KS);
        if constexpr (SPLIT) {
          const simd<float, KS * NN> b_lo = tf32_hi(simd<float, KS * NN>(b - b_hi));
          const simd<float, R * KS> al = a_lo.template select<R * KS, 1>(s * R * KS);
          part = dpas_tf32(part, b_hi, al);
          part = dpas_tf32(part, b_lo, ah);
        }
        part = dpas_tf32(part, b_hi, ah);
      }
      acc[nb] += part;
    }
  }
  GNNSPARSE_UNROLL
  for (int r = 0; r < R; ++r)
    if (cur[r] != end[r]) bad = true;  // entries left over: a column below an earlier one
  if (!(xe::reduce<float>(fin, std::plus<>()) == 0.0f)) bad = true;

  // 4. Fallback: the sparse ESIMD body for each (row, 16-column tile) of this thread.
  if (bad) {
    const i64 t16 = (C + NN - 1) / NN;
    for (int r = 0; r < R; ++r) {
      if (i0 + r >= M) break;
      for (int nb = 0; nb < NB; ++nb) {
        const i64 t = n0 / NN + nb;
        if (t >= t16) break;
        spmm_thread<T, I, 16, NN, HAS_VAL>((i0 + r) * t16 + t, rowptr, col, val, X, Y, M, C, reduce);
      }
    }
    return;
  }
  // 5. Store: empty rows are 0, mean divides by the row's number of entries.
  GNNSPARSE_UNROLL
  for (int r = 0; r < R; ++r) {
    const i64 i = i0 + r;
    if (i >= M) break;
    const i64 deg = i64(rowptr[i + 1]) - i64(rowptr[i]);
    GNNSPARSE_UNROLL
    for (int nb = 0; nb < NB; ++nb) {
      const i64 c = n0 + nb * NN;
      if (c >= C) break;
      simd<float, NN> y = acc[nb].template select<NN, 1>(r * NN);
      if (deg == 0) y = simd<float, NN>(0.0f);
      else if (reduce == Reduce::mean) y = y / float(deg);
      if (C - c >= NN)
        store_tile<T, NN, true>(Y + i * C + c, y, NN);
      else
        store_tile<T, NN, false>(Y + i * C + c, y, C - c);
    }
  }
}

}  // namespace gnnsparse::esimd

#ifndef GNNSPARSE_ESIMD_HOST_SHIM
namespace gnnsparse::esimd {
// nd_range: global >= ceil(M / 8) * ceil(C / (16 NB)) (a multiple of local), any local size.
// val may be null when HAS_VAL is false. reduce: sum or mean. SPLIT: 3xTF32 (fp32) or tf32.
template <typename T, typename I, int NB, bool SPLIT, bool HAS_VAL>
SYCL_EXTERNAL SYCL_ESIMD_KERNEL
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void spmm_xmx(const I *rowptr, const I *col, const T *val, const T *X, T *Y, std::int64_t M, std::int64_t K,
              std::int64_t C, Reduce reduce) {
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  spmm_xmx_thread<T, I, NB, SPLIT, HAS_VAL>(i64(it.get_global_id(0)), rowptr, col, val, X, Y, M, K, C, reduce);
}
}  // namespace gnnsparse::esimd
#endif
