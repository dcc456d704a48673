// Portable SYCL tiled SpMM and SDDMM (dot) for dense-ish CSR matrices (semantics: include/gnnsparse/ops.hpp; sum and
// mean, float32). At a few percent density and more, a row block of A touches most rows of X, so
// the work is a dense product with a sparse description: a work-group owns a block of rows and
// one column tile of the output, densifies A's row block chunk by chunk (BK columns) into local
// memory straight from the CSR, and multiplies it with X's chunk rows with register blocking
// (each lane keeps RB rows x V columns of accumulators; X's chunk is reused by all RB * RG rows
// of the block from cache instead of being re-read per edge).
//
// Summation order: for every output element, the products a[i, k] * x[k, c] are rounded and
// added one by one in increasing column k over ALL k (the absent entries add a * x = +-0, which
// leaves a non-zero sum unchanged, and the sum never becomes -0 since it starts at +0). For rows
// whose stored columns are strictly increasing and for finite X this is exactly the sparse kernel's
// edge-order sum (spmm.hpp rounds the product and the sum separately too): the tiled result is
// bitwise equal to the sparse kernel's. A work-group that finds an unsorted or duplicated column
// in one of its rows, or a non-finite value in the X rows it reads (0 * inf would be NaN where the
// sparse sum skips the absent entry), recomputes its whole block with the sparse kernel's edge-order
// loop: the result is the sparse kernel's in every case, and always bitwise reproducible.
#pragma once
#include <sycl/builtins.hpp>
#include <sycl/ext/oneapi/work_group_static.hpp>
#include <sycl/group_algorithm.hpp>
#include <sycl/group_barrier.hpp>

#include "common.hpp"

namespace gnnsparse {

// Shape of a tiled SpMM instance. Lanes of a sub-group run over V * SG output columns (lane l owns
// columns tile * SG * V + v * SG + l); each sub-group of the work-group owns RB consecutive rows,
// RG sub-groups per work-group: BM = RB * RG rows per block. RB * V = 16 accumulators per lane.
template <int SG, int V>
struct TileShape {
  static_assert(V == 1 || V == 2 || V == 4, "V: 1, 2 or 4 columns per lane");
  static constexpr int RB = 16 / V;      // rows per sub-group (registers: RB * V accumulators)
  static constexpr int RG = 4;           // sub-groups per work-group
  static constexpr int BM = RB * RG;     // rows per work-group
  static constexpr int BK = 128;         // columns of A per densified chunk (BM * BK floats of local memory)
  static constexpr int WG = SG * RG;     // work-group size
  static constexpr int CW = SG * V;      // output columns per work-group
};

// nd_range: global = ceil(M / BM) * ceil(C / CW) * WG, local = WG (TileShape). R: sum or mean.
template <typename T, typename I, Reduce R, bool W, int SG, int V>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void spmm_tiles(const I *rowptr, const I *col, const T *val, const T *X, T *Y, long M, long K, long C) {
  static_assert(R == Reduce::sum || R == Reduce::mean, "tiled SpMM: sum or mean");
  using S = TileShape<SG, V>;
  constexpr int RB = S::RB, BM = S::BM, BK = S::BK;
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  const auto grp = it.get_group();
  const sycl::sub_group sg = it.get_sub_group();
  const long ctiles = (C + S::CW - 1) / S::CW;
  const long g = long(it.get_group(0));
  const long i0 = (g / ctiles) * BM, c0 = (g % ctiles) * S::CW;
  const long s = long(sg.get_group_linear_id()), lane = long(sg.get_local_linear_id());
  const long w = long(it.get_local_id(0));  // 0 .. WG - 1
  const long r0 = i0 + s * RB;               // this sub-group's first row (uniform)

  // the densified chunk of A (work_group_static: group_local_memory_for_overwrite crashes the
  // run-time compiler of intel-sycl-rt 2026.2 in free-function kernels)
  static syclexp::work_group_static<T[BM * BK]> As;

  // The densifying work-items: work-item w < BM walks row i0 + w, one chunk after another, with a
  // cursor into the row (sorted rows: a chunk's entries are the next ones of the row).
  long cur = 0, end = 0, prev = -1;
  if (w < BM && i0 + w < M) { cur = long(rowptr[i0 + w]); end = long(rowptr[i0 + w + 1]); }
  bool bad = false;  // this work-item saw an unsorted / duplicate column or a non-finite x

  T acc[RB][V];
#pragma unroll
  for (int r = 0; r < RB; ++r)
#pragma unroll
    for (int v = 0; v < V; ++v) acc[r][v] = T(0);
  long cols[V];
  bool in[V];
#pragma unroll
  for (int v = 0; v < V; ++v) { cols[v] = c0 + v * SG + lane; in[v] = cols[v] < C; }

  for (long k0 = 0; k0 < K; k0 += BK) {
    const long kc = K - k0 < BK ? K - k0 : BK;
    // 1. densify A[i0 : i0 + BM, k0 : k0 + kc] into As: zero-fill, then each row's entries.
    for (long e = w; e < BM * BK; e += S::WG) As[e] = T(0);
    sycl::group_barrier(grp);
    if (w < BM) {
      while (cur < end) {
        const long j = long(col[cur]);
        // the value is read before the tests: written after them, Debian's ocloc 22.43 crashes
        // (SIGSEGV) compiling the weighted instances for pvc
        const T a = W ? val[cur] : T(1);
        if (j >= k0 + kc) break;
        if (j <= prev || j < k0) { bad = true; break; }  // unsorted or duplicate: this block falls back
        As[w * BK + (j - k0)] = a;
        prev = j;
        ++cur;
      }
    }
    sycl::group_barrier(grp);
    // 2. acc[r][v] += As[row r, k] * X[k0 + k, col v] for k ascending; the row index is uniform in
    //    the sub-group, so the As reads are broadcasts and the X reads contiguous across lanes.
    T fin[V];  // x - x over every x read: 0 when all are finite, NaN otherwise (one chain per v)
#pragma unroll
    for (int v = 0; v < V; ++v) fin[v] = T(0);
    const T *a_rows = &As[0] + s * RB * BK;
    for (long k = 0; k < kc; ++k) {
      const T *xr = X + (k0 + k) * C;
      T x[V];
#pragma unroll
      for (int v = 0; v < V; ++v) {
        x[v] = in[v] ? xr[cols[v]] : T(0);
        fin[v] += x[v] - x[v];
      }
#pragma unroll
      for (int r = 0; r < RB; ++r) {
        const T a = a_rows[r * BK + k];
#pragma unroll
        for (int v = 0; v < V; ++v) {
          const T p = a * x[v];  // rounded on its own, as in the sparse kernel (no contraction)
          acc[r][v] += p;
        }
      }
    }
#pragma unroll
    for (int v = 0; v < V; ++v) bad |= fin[v] != T(0);
    sycl::group_barrier(grp);  // As is rewritten by the next chunk
  }
  if (w < BM && cur != end) bad = true;  // entries left over: a column < an earlier one (unsorted)

  const bool fallback = sycl::any_of_group(grp, bad);
#pragma unroll
  for (int r = 0; r < RB; ++r) {
    const long i = r0 + r;
    if (i >= M) break;
    const long b = long(rowptr[i]), e = long(rowptr[i + 1]);
    if (fallback) {  // the sparse kernel's edge-order sum (spmm.hpp, spmm_csr_sg)
#pragma unroll
      for (int v = 0; v < V; ++v) acc[r][v] = T(0);
      for (long k = b; k < e; ++k) {
        const T *x = X + long(col[k]) * C;
        const T wk = W ? val[k] : T(1);
#pragma unroll
        for (int v = 0; v < V; ++v)
          if (in[v]) {
            const T p = W ? wk * x[cols[v]] : x[cols[v]];
            acc[r][v] += p;
          }
      }
    }
#pragma unroll
    for (int v = 0; v < V; ++v)
      if (in[v]) {
        T y = acc[r][v];
        if (e == b) y = T(0);
        else if constexpr (R == Reduce::mean) y = y / T(e - b);
        Y[i * C + cols[v]] = y;
      }
  }
}

// ---- SDDMM (dot) ---------------------------------------------------------------------------
// E[k, h] = <X[i, h, :], Y[j, h, :]> for the stored entries (i, j) = (row of k, col[k]).
// A work-group of 16 sub-groups owns BM = 64 rows and one head; K is walked in chunks of BK = 4 SG
// columns. Per chunk the dense 16 x BK block of dot products is computed with register blocking
// (lane l keeps 4 rows x 4 columns l, l + SG, l + 2 SG, l + 3 SG), F in slices of FC features
// whose Y values are staged transposed in local memory (contiguous across lanes) while X values
// are broadcasts; the block is parked in local memory and each row's stored entries of the chunk
// are picked out (a cursor per row: sorted rows) and written: only sampled entries are stored.
// Order: each dot product is sum_f x_f y_f in increasing f (a multiply-add per step): fixed, so
// results are bitwise reproducible; fp32-accurate, not bitwise equal to the sparse kernel (which
// splits F over lanes and reduces by a tree). Non-finite features only reach the entries that use
// them (unsampled dot products are discarded). A block with an unsorted or duplicate column in one
// of its rows recomputes all its rows' entries one edge at a time (same f order).
struct SddmmTileShape {
  static constexpr int RB = 4;   // rows per sub-group
  static constexpr int RG = 16;  // sub-groups per work-group (the staged Y slice serves BM rows)
  static constexpr int BM = RB * RG;
  static constexpr int V = 4;    // chunk columns per lane
  static constexpr int FC = 32;  // features per staged slice
};

// nd_range: global = ceil(M / 64) * H * 16 SG, local = 16 SG.
template <typename T, typename I, int SG>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void sddmm_tiles(const I *rowptr, const I *col, const T *X, const T *Y, T *E, long M, long K, long H, long F) {
  using S = SddmmTileShape;
  constexpr int RB = S::RB, BM = S::BM, V = S::V, FC = S::FC, BK = SG * V, WG = SG * S::RG;
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  const auto grp = it.get_group();
  const sycl::sub_group sg = it.get_sub_group();
  const long g = long(it.get_group(0));
  const long i0 = (g / H) * BM, h = g % H;
  const long s = long(sg.get_group_linear_id()), lane = long(sg.get_local_linear_id());
  const long w = long(it.get_local_id(0));
  const long r0 = i0 + s * RB;
  const long ld = H * F;  // row stride of X and Y

  static syclexp::work_group_static<T[FC * BK]> Yt;  // Y[k0 + c, h, f0 + f] at f * BK + c
  static syclexp::work_group_static<T[BM * BK]> St;  // the chunk's dense dot products

  long cur = 0, end = 0, prev = -1;
  if (w < BM && i0 + w < M) { cur = long(rowptr[i0 + w]); end = long(rowptr[i0 + w + 1]); }
  bool bad = false;
  const T *xr[RB];
#pragma unroll
  for (int r = 0; r < RB; ++r) xr[r] = X + (r0 + r < M ? r0 + r : 0) * ld + h * F;

  for (long k0 = 0; k0 < K; k0 += BK) {
    const long kc = K - k0 < BK ? K - k0 : BK;
    T acc[RB][V];
#pragma unroll
    for (int r = 0; r < RB; ++r)
#pragma unroll
      for (int v = 0; v < V; ++v) acc[r][v] = T(0);
    for (long f0 = 0; f0 < F; f0 += FC) {
      const long fc = F - f0 < FC ? F - f0 : FC;
      for (long e = w; e < FC * BK; e += WG) {  // stage Y's slice, transposed; zeros outside
        const long c = e / FC, f = e % FC;
        Yt[f * BK + c] = (c < kc && f < fc) ? Y[(k0 + c) * ld + h * F + f0 + f] : T(0);
      }
      sycl::group_barrier(grp);
      for (long f = 0; f < fc; ++f) {
        T y[V];
#pragma unroll
        for (int v = 0; v < V; ++v) y[v] = Yt[f * BK + v * SG + lane];
#pragma unroll
        for (int r = 0; r < RB; ++r) {
          const T x = xr[r][f0 + f];
#pragma unroll
          for (int v = 0; v < V; ++v) acc[r][v] = sycl::fma(x, y[v], acc[r][v]);
        }
      }
      sycl::group_barrier(grp);
    }
#pragma unroll
    for (int r = 0; r < RB; ++r)
#pragma unroll
      for (int v = 0; v < V; ++v) St[(s * RB + r) * BK + v * SG + lane] = acc[r][v];
    sycl::group_barrier(grp);
    if (w < BM) {  // the stored entries of row i0 + w in this chunk
      while (cur < end) {
        const long j = long(col[cur]);
        if (j >= k0 + kc) break;
        if (j <= prev || j < k0) { bad = true; break; }
        E[cur * H + h] = St[w * BK + (j - k0)];
        prev = j;
        ++cur;
      }
    }
    sycl::group_barrier(grp);
  }
  if (w < BM && cur != end) bad = true;
  if (sycl::any_of_group(grp, bad)) {  // one edge at a time, same f order
#pragma unroll
    for (int r = 0; r < RB; ++r) {
      const long i = r0 + r;
      if (i >= M) break;
      for (long k = long(rowptr[i]) + lane; k < long(rowptr[i + 1]); k += SG) {
        const T *y = Y + long(col[k]) * ld + h * F;
        T d = T(0);
        for (long f = 0; f < F; ++f) d = sycl::fma(xr[r][f], y[f], d);
        E[k * H + h] = d;
      }
    }
  }
}

}  // namespace gnnsparse
