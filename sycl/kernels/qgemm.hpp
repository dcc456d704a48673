// Portable SYCL int8 "TN" GEMM C = scale * A^T B with A (K x M) and B (K x N) row-major int8, K
// long, M and N small: the weight gradient dW = q(dh)^T q(x) of a quantized layer (contract:
// include/gnnsparse/qgemm.hpp, shared with cuda/qgemm.cu: the same bits).
//
//   qgemm_tn_partial<SG, TM, VN>  sub-group b = s * tiles + tile (SG lanes; a work-group holds a
//       few, which share nothing: its size only sets the scheduling granularity) sums segment s
//       (rows [s seg, min(K, (s + 1) seg))) of the output tile (tile / tiles_n, tile % tiles_n)
//       of TM rows x SG * VN columns; lane l owns C[m0 + i][n0 + v SG + l] (i < TM,
//       v < VN). Per row k the sub-group reads B[k][n0 .. n0 + SG VN) as it lies (row-major,
//       consecutive lanes on consecutive bytes: no transposed copy) and A[k][m0 + i] as TM uniform
//       scalars: TM * VN multiply-adds per lane. Writes the tile's int32 segment sums to work[s]
//       (M x N).
//   qgemm_tn_combine<U>           a work-item per output element e: C[e] = fl32(fl32(sum_s
//       work[s][e]) * scale[0]), the segments added in int64 in segment order (U loads at a time).
//
// Exactness: the products a b (|a b| <= 2^14) are accumulated in float32 over blocks of at most
// kQGemmFloatRows = 1024 rows: every partial sum is an integer of magnitude <= 1024 * 2^14 = 2^24,
// which float32 holds exactly, so each multiply-add is exact (fused or not). Each block's sum is
// converted to int32 (exact) and added to the segment's int32 sum (at most kQGemmMaxSegment rows:
// <= 2^31 - 1). The float32 multiply-add is the fast integer dot product every SYCL device has
// (no dp4a / DPAS in portable SYCL). No atomics, no local memory, no barriers, no sub-group
// collectives: each output element comes from one fixed sequence of exact additions, so the
// result is bitwise reproducible and independent of the segmentation and the tile.
#pragma once
#include <sycl/group_algorithm.hpp>

#include "common.hpp"

namespace gnnsparse {

inline constexpr long kQGemmFloatRows = 1024;  // 1024 * 128 * 128 = 2^24: float32 sums stay exact

// nd_range: global >= nseg * tiles_m * tiles_n * SG, local a multiple of SG; tiles_m = ceil(M / TM),
// tiles_n = ceil(N / (SG VN)). seg: rows per segment (<= kQGemmMaxSegment), a multiple of
// kQGemmFloatRows. Tiles: sycl/quant_policy.hpp (qgemm_tile).
template <int SG, int TM, int VN>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void qgemm_tn_partial(const signed char *A, long lda, const signed char *B, long ldb, long K, long M, long N, long seg,
                      long nseg, long tiles_n, int *work) {
  static_assert(TM >= 1 && VN >= 1, "a tile has rows and columns");
  const auto [sg, g, lane] = subgroup_slot();
  const long tiles = ((M + TM - 1) / TM) * tiles_n;
  const long s = g / tiles, tile = g - s * tiles;
  if (s >= nseg) return;  // the last work-group's spare sub-groups
  const long m0 = (tile / tiles_n) * TM, n0 = (tile % tiles_n) * (long(SG) * VN);
  const long k0 = s * seg, k1 = k0 + seg < K ? k0 + seg : K;

  // Row i of the tile reads column min(m0 + i, M - 1) of A (uniform across the sub-group: one
  // scalar load; rows past M are computed and not written). Lane l reads columns n0 + v SG + l of
  // B (consecutive lanes, consecutive bytes), 0 past N.
  const signed char *pa[TM];
#pragma unroll
  for (int i = 0; i < TM; ++i) pa[i] = A + (m0 + i < M ? m0 + i : M - 1);
  bool in_b[VN];
#pragma unroll
  for (int v = 0; v < VN; ++v) in_b[v] = n0 + v * SG + lane < N;
  const signed char *pb = B + n0 + lane;

  int acc[TM][VN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int v = 0; v < VN; ++v) acc[i][v] = 0;

  for (long kb = k0; kb < k1; kb += kQGemmFloatRows) {
    const long ke = kb + kQGemmFloatRows < k1 ? kb + kQGemmFloatRows : k1;
    float f[TM][VN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int v = 0; v < VN; ++v) f[i][v] = 0.0f;
    for (long k = kb; k < ke; ++k) {
      float b[VN];
#pragma unroll
      for (int v = 0; v < VN; ++v) b[v] = in_b[v] ? float(pb[k * ldb + v * SG]) : 0.0f;
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const float ai = float(pa[i][k * lda]);
#pragma unroll
        for (int v = 0; v < VN; ++v) f[i][v] += ai * b[v];  // exact (see the header): fused or not
      }
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int v = 0; v < VN; ++v) acc[i][v] += int(f[i][v]);
  }

  int *P = work + s * M * N;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const long m = m0 + i;
    if (m >= M) break;
#pragma unroll
    for (int v = 0; v < VN; ++v)
      if (in_b[v]) P[m * N + n0 + v * SG + lane] = acc[i][v];
  }
}

// nd_range: global >= MN (a work-item per output element), any local size.
template <int U>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void qgemm_tn_combine(const int *work, long nseg, long MN, const float *scale, float *C) {
  const long e = long(global_id());
  if (e >= MN) return;
  long total = 0;
  long s = 0;
  for (; s + U <= nseg; s += U) {
    int v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = work[(s + u) * MN + e];
#pragma unroll
    for (int u = 0; u < U; ++u) total += v[u];
  }
  for (; s < nseg; ++s) total += work[s * MN + e];
  C[e] = float(total) * scale[0];  // int64 -> float32 rounds to nearest even; then one rounded product
}

}  // namespace gnnsparse
