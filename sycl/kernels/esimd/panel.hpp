// ESIMD row-panel SpMM (sum / mean) for dense-ish CSR matrices on the Intel Data Center GPU Max
// (pvc): Y = A X, float32. The design of cuda/panel.cu and of the portable sycl/kernels/panel.hpp:
// at 10-30 % density the row kernel (esimd/spmm.hpp) reads one row tile of X from L1/L2 per stored
// entry; here a work-group owns a panel of BM rows and one BN-wide column tile, walks K in chunks of
// BK rows of X, stages each chunk once in shared local memory (SLM) and every row of the panel reads
// its entries' rows of X there (adaptive sparse tiling: Hong, Sukumaran-Rajam, Nisa, Singh,
// Sadayappan, PPoPP 2019; the ESIMD paper's SLM blocking).
//
// Phases per chunk (numbered below): 1. the work-group's threads copy the chunk's rows of X into SLM
// (one block load of the row tile from global memory, one SLM block store); barrier; 2. each thread
// walks its rows' entries of the chunk: the row's column indices and values arrive 16 at a time as
// block loads (a batch, kept in registers across chunks: sorted columns make a chunk's entries the
// next ones of the batch), each entry's X row is one SLM block load and one multiply-add into the
// row's simd<float, BN> accumulator; barrier (the SLM is rewritten by the next chunk).
//
// Order: each output element is the sum of its row's products in CSR order (k ascending), the
// product rounded, then added, as the sparse ESIMD kernel (esimd/spmm.hpp) and gnnsparse.reference
// in float32 (the host shim compiles with -ffp-contract=off; the GPU compiler may fuse the multiply
// and the add, as in esimd/spmm.hpp). A row's cursor only moves forward, so any CSR keeps this order:
// an entry of an earlier chunk (an unsorted row) is read from X in global memory instead of SLM.
// No atomics; every output element is written once: bitwise reproducible.
#pragma once
#if __has_include("esimd/common.hpp")  // the kernel root on the include path (icpx -I, the host shim)
#include "esimd/common.hpp"
#else  // included as "esimd/panel.hpp" by the kernel_compiler
#include "common.hpp"
#endif

namespace gnnsparse::esimd {

inline constexpr int kPanelThreads = 16;      // ESIMD threads per work-group (one panel)
inline constexpr int kPanelRows = 4;          // rows per thread: a panel holds 64 rows
inline constexpr int kPanelBatch = 16;        // CSR entries per batch (one simd block of indices)
inline constexpr int kPanelSlmFloats = 8192;  // the staged chunk: 32 KB of SLM

// Shape of an instance: BN output columns per work-group (the register tile, as in esimd/spmm.hpp).
template <int BN>
struct panel_shape {
  static_assert(BN == 16 || BN == 32 || BN == 64 || BN == 128, "BN: 16, 32, 64 or 128 columns");
  static constexpr int BK = kPanelSlmFloats / BN;  // rows of X per chunk
  static constexpr int BM = kPanelThreads * kPanelRows;
  static constexpr std::uint32_t kSlmBytes = std::uint32_t(kPanelSlmFloats * sizeof(float));
  static_assert(BK % kPanelThreads == 0, "a chunk splits evenly over the threads");
};

// The body of ESIMD thread t (0 <= t < kPanelThreads) of work-group `group`. Every thread passes the
// same number of barriers (one pair per chunk, whether it has rows or not).
template <typename T, typename I, int BN, bool HAS_VAL>
GNNSPARSE_ESIMD_FN void spmm_panel_thread(i64 group, int t, const I *rowptr, const I *col, const T *val, const T *X,
                                          T *Y, i64 M, i64 K, i64 C, Reduce reduce) {
  static_assert(std::is_same_v<T, float>, "panel SpMM: float32 features");
  static_assert(std::is_integral_v<I> && std::is_signed_v<I>, "index type: int32 or int64");
  using S = panel_shape<BN>;
  constexpr int R = kPanelRows, B = kPanelBatch, NT = kPanelThreads, BK = S::BK;
  const i64 ctiles = (C + BN - 1) / BN;
  const i64 i0 = (group / ctiles) * S::BM + i64(t) * R, n0 = (group % ctiles) * BN;
  const i64 valid = C - n0;  // columns of this tile that exist (>= BN: a full tile)

  // 1. The rows' state: [base, base + B) is the batch in registers, head the next entry in it.
  i64 base[R], end[R];
  int head[R];
  simd<I, B> bc[R];
  simd<T, B> bv[R];
  simd<T, BN> acc[R];
  auto load_batch = [&](int r) {
    const i64 n = end[r] - base[r];
    if (n >= B) {
      bc[r] = load_chunk<I, B, true>(col + base[r], B, I(0));
      if constexpr (HAS_VAL) bv[r] = load_chunk<T, B, true>(val + base[r], B, T(0));
    } else {
      const int cnt = n > 0 ? int(n) : 0;
      bc[r] = load_chunk<I, B, false>(col + base[r], cnt, I(0));
      if constexpr (HAS_VAL) bv[r] = load_chunk<T, B, false>(val + base[r], cnt, T(0));
    }
    head[r] = 0;
  };
  GNNSPARSE_UNROLL
  for (int r = 0; r < R; ++r) {
    const bool here = i0 + r < M;
    base[r] = here ? i64(rowptr[i0 + r]) : 0;
    end[r] = here ? i64(rowptr[i0 + r + 1]) : 0;
    acc[r] = simd<T, BN>(T(0));
    if constexpr (!HAS_VAL) bv[r] = simd<T, B>(T(1));
    load_batch(r);
  }

  for (i64 k0 = 0; k0 < K; k0 += BK) {
    const i64 kend = k0 + BK;
    // 2. Stage X[k0 : k0 + BK, n0 : n0 + BN] in SLM: thread t copies rows t, t + NT, ... (rows past K
    //    are not copied: no entry reads them; columns past C are zeros).
    for (int kk = t; kk < BK; kk += NT) {
      if (k0 + kk >= K) break;
      const simd<T, BN> row = load_tile<T, BN>(X + (k0 + kk) * C + n0, valid);
      xe::slm_block_store<T, BN>(std::uint32_t(kk * BN * int(sizeof(T))), row);
    }
    xe::barrier();
    // 3. Each row's entries of this chunk, in CSR order.
    GNNSPARSE_UNROLL
    for (int r = 0; r < R; ++r) {
      for (;;) {
        if (head[r] == B) {
          if (base[r] + B >= end[r]) break;  // the row is done
          base[r] += B;
          load_batch(r);
        }
        if (base[r] + head[r] >= end[r]) break;  // the row is done
        const i64 j = i64(bc[r][head[r]]);
        if (j >= kend) break;  // the rest of the row belongs to later chunks
        simd<T, BN> x;
        if (j >= k0)
          x = xe::slm_block_load<T, BN>(std::uint32_t((j - k0) * BN * i64(sizeof(T))));
        else  // an entry of an earlier chunk: an unsorted row
          x = load_tile<T, BN>(X + j * C + n0, valid);
        if constexpr (HAS_VAL)
          acc[r] += T(bv[r][head[r]]) * x;
        else
          acc[r] += x;
        ++head[r];
      }
    }
    xe::barrier();  // the next chunk overwrites the SLM
  }

  // 4. Mean divides by the row length; empty rows are 0 (their accumulator never moved from +0).
  GNNSPARSE_UNROLL
  for (int r = 0; r < R; ++r) {
    const i64 i = i0 + r;
    if (i >= M) break;
    const i64 deg = i64(rowptr[i + 1]) - i64(rowptr[i]);
    simd<T, BN> y = acc[r];
    if (reduce == Reduce::mean && deg > 0) y = y / T(deg);
    if (valid >= BN)
      store_tile<T, BN, true>(Y + i * C + n0, y, valid);
    else
      store_tile<T, BN, false>(Y + i * C + n0, y, valid);
  }
}

}  // namespace gnnsparse::esimd

#ifndef GNNSPARSE_ESIMD_HOST_SHIM
namespace gnnsparse::esimd {
// nd_range: global = ceil(M / 64) * ceil(C / BN) * kPanelThreads, local = kPanelThreads (the
// launcher, sycl/esimd_policy.hpp: spmm_panel_launch). val may be null when HAS_VAL is false.
template <typename T, typename I, int BN, bool HAS_VAL>
SYCL_EXTERNAL SYCL_ESIMD_KERNEL
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void spmm_panel(const I *rowptr, const I *col, const T *val, const T *X, T *Y, std::int64_t M, std::int64_t K,
                std::int64_t C, Reduce reduce) {
  xe::slm_init<panel_shape<BN>::kSlmBytes>();
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  spmm_panel_thread<T, I, BN, HAS_VAL>(i64(it.get_group(0)), int(it.get_local_id(0)), rowptr, col, val, X, Y, M, K,
                                       C, reduce);
}
}  // namespace gnnsparse::esimd
#endif
