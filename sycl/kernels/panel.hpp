// Portable SYCL row-panel SpMM for dense-ish CSR matrices (semantics: include/gnnsparse/ops.hpp; sum
// and mean, float32). The design of cuda/panel.cu: at 10-30 % density every row holds hundreds of
// entries and the row kernel (spmm.hpp) reads one row of X per entry, nnz x C x 4 bytes, from
// wherever X lives (on a CPU: L2, or L3 once K x C x 4 bytes outgrow L2). Here a panel of rows walks
// K in chunks of BK rows of X; every row of the panel reads its entries of the chunk while the chunk
// is near (local memory, or the core's cache), so X comes from far once per panel instead of once
// per entry (adaptive sparse tiling: Hong, Sukumaran-Rajam, Nisa, Singh, Sadayappan, PPoPP 2019).
//
// Two schedules, one template (STAGE):
//   STAGE = false, the cache schedule (CPU devices): one sub-group is one panel of RB = 32 rows; X's
//     chunk is read straight from global memory and stays in the core's cache while the 32 rows use
//     it; the chunk height is a kernel argument (the policy sizes it from the density and the device
//     cache). No barrier: on the OpenCL CPU device a work-group's sub-groups run one after another on
//     one core, so a chunk shared across sub-groups would not stay near any longer.
//   STAGE = true, the staged schedule (devices with work-group local memory): a work-group of 8
//     sub-groups (4 rows each) copies the chunk into local memory once, then every row of the panel
//     reads it there. (On the CPU device it was 2.6-4.5x slower than the sparse kernel: tested, not used.)
// Lanes run over the output columns: lane l of the sub-group owns columns c0 + v SG + l (v < V), so
// X loads are contiguous across lanes and the row and entry indices are uniform (scalar loads).
//
// Summation order: each output element is the sum of its row's products val[k] * x[col[k], c] in
// CSR order (k ascending), each product rounded, then added (no contraction), from +0: exactly the
// order of spmm_csr_sg (spmm.hpp) and of gnnsparse.reference in float32, so the result is bitwise
// equal to both (C >= SG; for C < SG the sparse kernel combines lanes by a butterfly). The cursor of
// a row only moves forward, so any CSR gives this order: a row whose columns are not sorted merely
// consumes some entries in a later chunk than their own (the staged schedule reads those from
// global memory). Sorted rows are what make the chunk walk cheap, not what makes it correct.
#pragma once
#include <sycl/ext/oneapi/work_group_static.hpp>
#include <sycl/group_algorithm.hpp>
#include <sycl/group_barrier.hpp>

#include "common.hpp"

namespace gnnsparse {

// Shape of a panel instance; sycl/policy.hpp (spmm_panel_launch) computes the nd_range from it.
// The chunk height BK is a kernel argument for the cache schedule (the policy sizes the chunk from the
// device's cache) and at most kStagedChunk / BN rows for the staged one (its local-memory array).
inline constexpr int kStagedChunk = 8192;  // floats of X per staged chunk (32 KB of local memory)
template <int SG, int V, bool STAGE>
struct PanelShape {
  static_assert(V == 1 || V == 2 || V == 4 || V == 8, "V: 1, 2, 4 or 8 columns per lane");
  static constexpr int BN = SG * V;          // output columns per panel
  static constexpr int RB = STAGE ? 4 : 32;  // rows per sub-group
  static constexpr int RG = STAGE ? 8 : 1;   // sub-groups per work-group
  static constexpr int BM = RB * RG;         // rows per panel
  static constexpr int WG = SG * RG;         // work-group size
  static constexpr int BK_STAGED = kStagedChunk / BN;
};

// X's row j, this lane's V columns (FULL: all < C, contiguous across lanes; else masked).
template <typename T, int SG, int V, bool FULL>
inline void panel_axpy(T (&a)[V], T w, const T *x, long valid) {
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const T xv = (FULL || v * SG < valid) ? x[v * SG] : T(0);
    const T prod = w * xv;  // rounded on its own, as in spmm_csr_sg (no contraction)
    a[v] += prod;
  }
}

// The cache schedule (CPU devices): a sub-group is a panel of RB rows; chunks of BK rows of X are
// walked in order, each row consuming its entries of the chunk. Per-row state (V accumulators and
// the cursor) waits between chunks in work-group local memory, each lane in its own slots, laid out
// contiguous across lanes: the OpenCL CPU device's vectorizer turns a per-lane private array indexed
// by the (dynamic) row into gathers and scatters, these into plain vector loads and stores. The
// cursor is the same in every lane and is read back through a sub-group broadcast, so the vectorizer
// knows it is uniform: scalar col / val loads and scalar loop control.
template <typename T, typename I, Reduce R, bool W, int SG, int V, bool FULL>
inline void panel_cache_body(const I *rowptr, const I *col, const T *val, const T *X, T *Y, long M, long K, long C,
                             long BK, long i0, long c0, long lane) {
  using S = PanelShape<SG, V, false>;
  constexpr int RB = S::RB;
  const sycl::sub_group sg = sycl::ext::oneapi::this_work_item::get_sub_group();
  const long s = long(sg.get_group_linear_id());
  const long nr = M - i0 < RB ? (M - i0 > 0 ? M - i0 : 0) : RB;  // rows of this sub-group
  const long valid = C - c0 - lane;  // this lane's columns: c0 + lane + v SG < C  <=>  v SG < valid
  static syclexp::work_group_static<T[S::RG * RB * V * SG]> acc_slots;
  static syclexp::work_group_static<long[S::RG * RB * SG]> cur_slots;
  T *acc = &acc_slots[0] + s * (RB * V * SG) + lane;  // row r, column v at acc[(r V + v) SG]
  long *cur = &cur_slots[0] + s * (RB * SG) + lane;   // row r's next entry at cur[r SG]
  for (long r = 0; r < nr; ++r) {
    cur[r * SG] = long(rowptr[i0 + r]);
#pragma unroll
    for (int v = 0; v < V; ++v) acc[(r * V + v) * SG] = T(0);
  }
  for (long k0 = 0; k0 < K; k0 += BK) {
    const long kend = k0 + BK;  // the last chunk's kend >= K > every column
    for (long r = 0; r < nr; ++r) {
      long p = sycl::group_broadcast(sg, cur[r * SG]);
      const long e = long(rowptr[i0 + r + 1]);
      if (p == e) continue;
      T a[V];
#pragma unroll
      for (int v = 0; v < V; ++v) a[v] = acc[(r * V + v) * SG];
      for (; p < e; ++p) {
        const long j = long(col[p]);
        if (j >= kend) break;
        panel_axpy<T, SG, V, FULL>(a, W ? val[p] : T(1), X + j * C + c0 + lane, valid);
      }
#pragma unroll
      for (int v = 0; v < V; ++v) acc[(r * V + v) * SG] = a[v];
      cur[r * SG] = p;
    }
  }
  for (long r = 0; r < nr; ++r) {  // mean divides by the row length, empty rows are 0
    const long i = i0 + r, deg = long(rowptr[i + 1]) - long(rowptr[i]);
#pragma unroll
    for (int v = 0; v < V; ++v)
      if (FULL || v * SG < valid) {
        T y = acc[(r * V + v) * SG];
        if (deg == 0) y = T(0);
        else if constexpr (R == Reduce::mean) y = y / T(deg);
        Y[i * C + c0 + lane + v * SG] = y;
      }
  }
}

// The staged schedule (devices with work-group local memory): RG sub-groups of RB rows share each
// chunk of X, copied once into local memory between two barriers. RB is small and the row loops are
// unrolled: the accumulators and cursors stay in registers.
template <typename T, typename I, Reduce R, bool W, int SG, int V, bool FULL>
inline void panel_staged_body(const I *rowptr, const I *col, const T *val, const T *X, T *Y, long M, long K, long C,
                              long i0, long c0, long lane) {
  using S = PanelShape<SG, V, true>;
  constexpr int RB = S::RB, BN = S::BN, BK = S::BK_STAGED;
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  const long w = long(it.get_local_id(0));
  const long nr = M - i0 < RB ? (M - i0 > 0 ? M - i0 : 0) : RB;
  const long valid = C - c0 - lane;
  static syclexp::work_group_static<T[BK * BN]> Xs;  // X[k0 + kk, c0 + c] at kk * BN + c
  long cur[RB], end[RB];
  T acc[RB][V];
#pragma unroll
  for (int r = 0; r < RB; ++r) {
    const long i = r < nr ? i0 + r : i0;
    cur[r] = r < nr ? long(rowptr[i]) : 0;
    end[r] = r < nr ? long(rowptr[i + 1]) : 0;
#pragma unroll
    for (int v = 0; v < V; ++v) acc[r][v] = T(0);
  }
  for (long k0 = 0; k0 < K; k0 += BK) {
    const long kend = k0 + BK;
    sycl::group_barrier(it.get_group());  // every row is done with the previous chunk
    for (long e = w; e < long(BK) * BN; e += S::WG) {
      const long kk = e / BN, c = e % BN;  // zeros past K and past C
      Xs[e] = (k0 + kk < K && (FULL || c0 + c < C)) ? X[(k0 + kk) * C + c0 + c] : T(0);
    }
    sycl::group_barrier(it.get_group());
#pragma unroll
    for (int r = 0; r < RB; ++r) {
      long p = cur[r];
      for (; p < end[r]; ++p) {
        const long j = long(col[p]);
        if (j >= kend) break;
        // an entry of an earlier chunk (an unsorted row) is read from X itself
        const T *x = j >= k0 ? &Xs[0] + (j - k0) * BN + lane : X + j * C + c0 + lane;
        panel_axpy<T, SG, V, FULL>(acc[r], W ? val[p] : T(1), x, j >= k0 ? long(BN) : valid);
      }
      cur[r] = p;
    }
  }
#pragma unroll
  for (int r = 0; r < RB; ++r) {
    if (r >= nr) break;
    const long i = i0 + r, deg = end[r] - long(rowptr[i]);
#pragma unroll
    for (int v = 0; v < V; ++v)
      if (FULL || v * SG < valid) {
        T y = acc[r][v];
        if (deg == 0) y = T(0);
        else if constexpr (R == Reduce::mean) y = y / T(deg);
        Y[i * C + c0 + lane + v * SG] = y;
      }
  }
}

// nd_range: global = ceil(M / BM) * ceil(C / BN) * WG, local = WG (PanelShape). R: sum or mean.
template <typename T, typename I, Reduce R, bool W, int SG, int V, bool STAGE>
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
void spmm_panel(const I *rowptr, const I *col, const T *val, const T *X, T *Y, long M, long K, long C, long BK) {
  static_assert(R == Reduce::sum || R == Reduce::mean, "panel SpMM: sum or mean");
  using S = PanelShape<SG, V, STAGE>;
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  const sycl::sub_group sg = it.get_sub_group();
  const long ctiles = (C + S::BN - 1) / S::BN;
  const long g = long(it.get_group(0));
  const long s = long(sg.get_group_linear_id()), lane = long(sg.get_local_linear_id());
  const long i0 = (g / ctiles) * S::BM + s * S::RB;  // this sub-group's first row (uniform)
  const long c0 = (g % ctiles) * S::BN;              // the panel's first column
  if constexpr (STAGE) {
    if (c0 + S::BN <= C) panel_staged_body<T, I, R, W, SG, V, true>(rowptr, col, val, X, Y, M, K, C, i0, c0, lane);
    else panel_staged_body<T, I, R, W, SG, V, false>(rowptr, col, val, X, Y, M, K, C, i0, c0, lane);
  } else {
    if (c0 + S::BN <= C) panel_cache_body<T, I, R, W, SG, V, true>(rowptr, col, val, X, Y, M, K, C, BK, i0, c0, lane);
    else panel_cache_body<T, I, R, W, SG, V, false>(rowptr, col, val, X, Y, M, K, C, BK, i0, c0, lane);
  }
}

}  // namespace gnnsparse
