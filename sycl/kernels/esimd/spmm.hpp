// ESIMD SpMM (sum / mean): Y[i, c] = sum_{k in row i} val[k] * X[col[k], c]   (val = 1 when absent),
// mean divides by the row's number of stored entries; empty rows are 0.
// The ESIMD paper, Algorithm 2 and Figures 9-10, with the remainders the paper leaves out.
//
// One thread per (row, feature tile of N): the row's column indices and values are read in chunks
// of VLC (one simd block each, the next chunk prefetched), the unrolled inner loop does the saxpy
// s * X[col[k], tile] into a simd<float, N> accumulator, and the row's tile is stored once. Work-
// groups hold several rows for small matrices (policy.hpp); threads past M * tiles do nothing.
// Summation order is the edge order k = rowptr[i] .. rowptr[i+1]-1 for every column, so the result
// is bitwise reproducible and equal to a sequential left-to-right sum.
#pragma once
#if __has_include("esimd/common.hpp")  // the kernel root on the include path (icpx -I, or the entry
#include "esimd/common.hpp"             // text compiled as the source)
#else                                 // included as "esimd/<op>.hpp" by the kernel_compiler
#include "common.hpp"
#endif

namespace gnnsparse::esimd {

// One chunk: acc += s_l * X[ja[l], c0 : c0 + N] for l < cnt. Fully unrolled (ESIMD paper, Figure 10)
// for full chunks of full tiles, rolled for the masked variants (see dot_chunk).
template <typename T, typename I, int VLC, int N, bool HAS_VAL, bool FULL, bool FULL_TILE>
GNNSPARSE_ESIMD_FN void saxpy_chunk(simd<T, N> &acc, simd<I, VLC> ja, simd<T, VLC> s, int cnt, const T *Xc, i64 ldx,
                                    i64 valid) {
  auto one = [&](int l) {
    const simd<T, N> b_row = load_tile<T, N, FULL_TILE>(Xc + i64(ja[l]) * ldx, valid);
    if constexpr (HAS_VAL)
      acc += T(s[l]) * b_row;
    else
      acc += b_row;
  };
  if constexpr (FULL && FULL_TILE) {
    GNNSPARSE_UNROLL
    for (int l = 0; l < VLC; ++l) one(l);
  } else {
    for (int l = 0; l < cnt; ++l) one(l);
  }
}

template <typename T, typename I, int VLC, int N, bool HAS_VAL>
GNNSPARSE_ESIMD_FN void spmm_thread(i64 gid, const I *rowptr, const I *col, const T *val, const T *X, T *Y, i64 M,
                                    i64 C, Reduce reduce) {
  using P = kernel_param<1, VLC, N>;
  static_assert(std::is_integral_v<I> && std::is_signed_v<I>, "index type: int32 or int64");

  // 1. This thread's (row, feature tile).
  const i64 ntiles = (C + P::N - 1) / P::N;
  const i64 i = gid / ntiles, c0 = (gid % ntiles) * P::N;
  if (i >= M) return;
  const i64 b = i64(rowptr[i]), e = i64(rowptr[i + 1]);
  const i64 valid = C - c0;
  const T *Xc = X + c0;

  auto row = [&](auto full_tile) {
    constexpr bool FT = decltype(full_tile)::value;
    simd<T, P::N> acc(T(0));
    // 2. Full chunks: indices and values as blocks, the next ones prefetched, unrolled saxpy.
    i64 k = b;
    for (; k + P::VLC <= e; k += P::VLC) {
      const simd<I, P::VLC> ja = load_chunk<I, P::VLC, true>(col + k, P::VLC, I(0));
      simd<T, P::VLC> s(T(1));
      prefetch_chunk<I, P::VLC>(col + k + P::VLC, k + 2 * P::VLC <= e);
      if constexpr (HAS_VAL) {
        s = load_chunk<T, P::VLC, true>(val + k, P::VLC, T(0));
        prefetch_chunk<T, P::VLC>(val + k + P::VLC, k + 2 * P::VLC <= e);
      }
      saxpy_chunk<T, I, P::VLC, P::N, HAS_VAL, true, FT>(acc, ja, s, P::VLC, Xc, C, valid);
    }
    // 3. The tail chunk (nnzr not a multiple of VLC), masked.
    if (k < e) {
      const int cnt = int(e - k);
      const simd<I, P::VLC> ja = load_chunk<I, P::VLC, false>(col + k, cnt, I(0));
      simd<T, P::VLC> s(T(1));
      if constexpr (HAS_VAL) s = load_chunk<T, P::VLC, false>(val + k, cnt, T(0));
      saxpy_chunk<T, I, P::VLC, P::N, HAS_VAL, false, FT>(acc, ja, s, cnt, Xc, C, valid);
    }
    // 4. mean, then one store of the row's tile (the feature tail masked).
    if (reduce == Reduce::mean && e > b) acc = acc / T(e - b);
    store_tile<T, P::N, FT>(Y + i * C + c0, acc, valid);
  };
  if (valid >= P::N)
    row(std::true_type{});
  else
    row(std::false_type{});
}

}  // namespace gnnsparse::esimd

#ifndef GNNSPARSE_ESIMD_HOST_SHIM
namespace gnnsparse::esimd {
// nd_range: global >= M * ceil(C / N) (a multiple of local), any local size. val may be null
// when HAS_VAL is false. reduce: sum or mean (a run-time argument).
template <typename T, typename I, int VLC, int N, bool HAS_VAL>
SYCL_EXTERNAL SYCL_ESIMD_KERNEL
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void spmm(const I *rowptr, const I *col, const T *val, const T *X, T *Y, std::int64_t M, std::int64_t C,
          Reduce reduce) {
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  spmm_thread<T, I, VLC, N, HAS_VAL>(i64(it.get_global_id(0)), rowptr, col, val, X, Y, M, C, reduce);
}
}  // namespace gnnsparse::esimd
#endif
