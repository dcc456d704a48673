// ESIMD SDDMM (dot): E[k, h] = <X[i, h, :], Y[col[k], h, :]> for every stored entry k of row i.
// The ESIMD paper, Algorithm 1 and Figures 7-8, with the remainders the paper leaves out.
//
// A work-group of NT threads computes one (row, head). Thread t takes nnzt = ceil(nnzr / NT)
// consecutive nonzeros of the row (trailing threads may get fewer or none), in chunks of VLC:
// the chunk's column indices are one simd<I, VLC> block load, the next chunk's indices are
// prefetched, the inner loop over the chunk is unrolled, X_i's first feature tile is held in a
// simd<float, N> register block for the whole row, and the chunk's VLC results are one
// simd<float, VLC> stored once. Features beyond the register tile (F > N) are streamed per tile;
// the feature tail (F % N) is masked. Values of A are unused. Empty rows write nothing.
#pragma once
#if __has_include("esimd/common.hpp")  // the kernel root on the include path (icpx -I, or the entry
#include "esimd/common.hpp"             // text compiled as the source)
#else                                 // included as "esimd/<op>.hpp" by the kernel_compiler
#include "common.hpp"
#endif

namespace gnnsparse::esimd {

template <typename T, typename I, int NT, int VLC, int N>
GNNSPARSE_ESIMD_FN void sddmm_thread(i64 group, int tid, const I *rowptr, const I *col, const T *X, const T *Y,
                                     T *E, i64 H, i64 F) {
  using P = kernel_param<NT, VLC, N>;
  static_assert(std::is_integral_v<I> && std::is_signed_v<I>, "index type: int32 or int64");

  // 1. This work-group's (row, head) and this thread's share of the row's nonzeros.
  const i64 i = group / H, h = group % H;
  const i64 b = i64(rowptr[i]), e = i64(rowptr[i + 1]);
  const i64 nnzt = (e - b + P::NT - 1) / P::NT;
  const i64 kb = b + i64(tid) * nnzt;
  const i64 ke = kb + nnzt < e ? kb + nnzt : e;
  if (kb >= ke) return;

  // 2. The first feature tile of X[i, h, :] in registers (regL of Figure 7).
  const T *xi = X + (i * H + h) * F;
  const T *yh = Y + h * F;  // Y[j, h, :] = yh + j * H * F
  const i64 ldy = H * F;

  auto rows = [&](auto tile_mode) {
    constexpr int TM = decltype(tile_mode)::value;
    const simd<T, P::N> regL = load_tile<T, P::N, TM != tile_masked>(xi, F);
    // 3. Full chunks: indices as one block, next block prefetched, VLC dot products, one store.
    i64 k0 = kb;
    for (; k0 + P::VLC <= ke; k0 += P::VLC) {
      const simd<I, P::VLC> ja = load_chunk<I, P::VLC, true>(col + k0, P::VLC, I(0));
      prefetch_chunk<I, P::VLC>(col + k0 + P::VLC, k0 + 2 * P::VLC <= ke);
      const simd<T, P::VLC> dp = dot_chunk<T, I, P::VLC, P::N, true, TM>(regL, xi, ja, P::VLC, yh, ldy, F);
      store_chunk<T, P::VLC, true>(E + k0 * H + h, dp, P::VLC, H);
    }
    // 4. The tail chunk (nnzt not a multiple of VLC): masked index load, masked store.
    if (k0 < ke) {
      const int cnt = int(ke - k0);
      const simd<I, P::VLC> ja = load_chunk<I, P::VLC, false>(col + k0, cnt, I(0));
      const simd<T, P::VLC> dp = dot_chunk<T, I, P::VLC, P::N, false, TM>(regL, xi, ja, cnt, yh, ldy, F);
      store_chunk<T, P::VLC, false>(E + k0 * H + h, dp, cnt, H);
    }
  };
  switch (tile_mode_of<P::N>(F)) {
    case tile_full: rows(std::integral_constant<int, tile_full>{}); break;
    case tile_masked: rows(std::integral_constant<int, tile_masked>{}); break;
    default: rows(std::integral_constant<int, tile_multi>{}); break;
  }
}

}  // namespace gnnsparse::esimd

#ifndef GNNSPARSE_ESIMD_HOST_SHIM
namespace gnnsparse::esimd {
// nd_range: global = M * H * NT, local = NT. E is nnz x H.
template <typename T, typename I, int NT, int VLC, int N>
SYCL_EXTERNAL SYCL_ESIMD_KERNEL
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void sddmm(const I *rowptr, const I *col, const T *X, const T *Y, T *E, std::int64_t H, std::int64_t F) {
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  sddmm_thread<T, I, NT, VLC, N>(i64(it.get_group(0)), int(it.get_local_id(0)), rowptr, col, X, Y, E, H, F);
}
}  // namespace gnnsparse::esimd
#endif
