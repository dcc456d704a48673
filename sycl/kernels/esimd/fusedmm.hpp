// ESIMD FusedMM (dot): for each stored entry k = (i, j) of row i and head h
//   e = <X[i, h, :], Y[j, h, :]>,  w = edge(e) (none | leaky_relu | exp),  w *= val[k] if A has values,
//   Out[i, h, :] = sum_k w * Z[j, h, :]        (summed in edge order)
// and, only when E is not null, E[k, h] = w. Row softmax is not an ESIMD path (the host returns
// nullopt and the portable kernel runs it).
// The ESIMD paper, Algorithm 3 and Figure 11: the SDDMM with NT = 1 feeds the SpMM directly; a chunk's
// edge values live in one simd<float, VLC> register block and are never written to memory unless
// asked for. One thread per (row, head, output tile of ND); for D > 128 each output tile recomputes
// the row's edge values. Empty rows write zeros.
#pragma once
#if __has_include("esimd/common.hpp")  // the kernel root on the include path (icpx -I, or the entry
#include "esimd/common.hpp"             // text compiled as the source)
#else                                 // included as "esimd/<op>.hpp" by the kernel_compiler
#include "common.hpp"
#endif
#if __has_include("esimd/spmm.hpp")  // the kernel root on the include path (icpx -I, or the entry
#include "esimd/spmm.hpp"             // text compiled as the source)
#else                                 // included as "esimd/<op>.hpp" by the kernel_compiler
#include "spmm.hpp"
#endif

namespace gnnsparse::esimd {

// Edge function on a chunk's VLC values, without branches (merges under uniform masks): ocloc's pvc
// backend (IGC 1.0.12504) aborts on the NF = ND = 128 kernels when this is a run-time branch.
template <typename T, int VLC>
GNNSPARSE_ESIMD_FN simd<T, VLC> apply_edge(simd<T, VLC> w, EdgeFn edge, T slope) {
  const simd<T, VLC> ex = xe::exp(w);
  w.merge(w * slope, (w <= T(0)) & simd_mask<VLC>(edge == EdgeFn::leaky_relu ? 1 : 0));  // NaN stays NaN
  w.merge(ex, simd_mask<VLC>(edge == EdgeFn::exp ? 1 : 0));
  return w;
}

template <typename T, typename I, int VLC, int NF, int ND, bool HAS_VAL>
GNNSPARSE_ESIMD_FN void fusedmm_thread(i64 gid, const I *rowptr, const I *col, const T *val, const T *X, const T *Y,
                                       const T *Z, T *Out, T *E, i64 M, i64 H, i64 F, i64 D, EdgeFn edge, T slope) {
  using PF = kernel_param<1, VLC, NF>;  // the SDDMM half (NT = 1)
  using PD = kernel_param<1, VLC, ND>;  // the SpMM half
  static_assert(std::is_integral_v<I> && std::is_signed_v<I>, "index type: int32 or int64");

  // 1. This thread's (row, head, output tile).
  const i64 ntiles = (D + PD::N - 1) / PD::N;
  const i64 ih = gid / ntiles, d0 = (gid % ntiles) * PD::N;
  if (ih >= M * H) return;
  const i64 i = ih / H, h = ih % H;
  const i64 b = i64(rowptr[i]), e = i64(rowptr[i + 1]);
  const i64 valid = D - d0;
  const bool write_e = E != nullptr && d0 == 0;  // one writer per (row, head)

  const T *xi = X + (i * H + h) * F;
  const T *yh = Y + h * F;        // Y[j, h, :] = yh + j * H * F
  const T *zh = Z + h * D + d0;   // Z[j, h, d0:] = zh + j * H * D

  auto row = [&](auto tile_mode_f, auto full_d) {
    constexpr int TMF = decltype(tile_mode_f)::value;
    constexpr bool FD = decltype(full_d)::value;
    // 2. X[i, h, :]'s first tile in registers, the output tile accumulator in registers.
    const simd<T, PF::N> regL = load_tile<T, PF::N, TMF != tile_masked>(xi, F);
    simd<T, PD::N> acc(T(0));
    auto chunk = [&](i64 k0, int cnt, auto full) {
      constexpr bool FULL = decltype(full)::value;
      // 3. Indices (and values) of the chunk, next chunk prefetched.
      const simd<I, PF::VLC> ja = load_chunk<I, PF::VLC, FULL>(col + k0, cnt, I(0));
      if constexpr (FULL) prefetch_chunk<I, PF::VLC>(col + k0 + PF::VLC, k0 + 2 * PF::VLC <= e);
      // 4. SDDMM of the chunk, edge function and value scaling in registers.
      simd<T, PF::VLC> w = dot_chunk<T, I, PF::VLC, PF::N, FULL, TMF>(regL, xi, ja, cnt, yh, H * F, F);
      w = apply_edge<T, PF::VLC>(w, edge, slope);
      if constexpr (HAS_VAL) w *= load_chunk<T, PF::VLC, FULL>(val + k0, cnt, T(0));
      if (write_e) store_chunk<T, PF::VLC, FULL>(E + k0 * H + h, w, cnt, H);
      // 5. SpMM of the chunk: acc += w_l * Z[ja[l], h, tile].
      saxpy_chunk<T, I, PD::VLC, PD::N, true, FULL, FD>(acc, ja, w, cnt, zh, H * D, valid);
    };
    i64 k0 = b;
    for (; k0 + PF::VLC <= e; k0 += PF::VLC) chunk(k0, PF::VLC, std::true_type{});
    if (k0 < e) chunk(k0, int(e - k0), std::false_type{});
    // 6. One store of the output tile.
    store_tile<T, PD::N, FD>(Out + (i * H + h) * D + d0, acc, valid);
  };
  auto with_d = [&](auto tmf) {
    if (valid >= PD::N)
      row(tmf, std::true_type{});
    else
      row(tmf, std::false_type{});
  };
  switch (tile_mode_of<PF::N>(F)) {
    case tile_full: with_d(std::integral_constant<int, tile_full>{}); break;
    case tile_masked: with_d(std::integral_constant<int, tile_masked>{}); break;
    default: with_d(std::integral_constant<int, tile_multi>{}); break;
  }
}

}  // namespace gnnsparse::esimd

#ifndef GNNSPARSE_ESIMD_HOST_SHIM
namespace gnnsparse::esimd {
// nd_range: global >= M * H * ceil(D / ND) (a multiple of local), any local size. val is read only
// when HAS_VAL (a template parameter: a load under a run-time branch crashes ocloc's pvc backend
// in IGC 1.0.12504); E may be null. edge: none, leaky_relu (slope) or exp, a run-time argument
// (one instance serves all three; the selects above are branch-free).
template <typename T, typename I, int VLC, int NF, int ND, bool HAS_VAL>
SYCL_EXTERNAL SYCL_ESIMD_KERNEL
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void fusedmm(const I *rowptr, const I *col, const T *val, const T *X, const T *Y, const T *Z, T *Out, T *E,
             std::int64_t M, std::int64_t H, std::int64_t F, std::int64_t D, EdgeFn edge, T slope) {
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  fusedmm_thread<T, I, VLC, NF, ND, HAS_VAL>(i64(it.get_global_id(0)), rowptr, col, val, X, Y, Z, Out, E, M, H, F, D, edge,
                                    slope);
}
}  // namespace gnnsparse::esimd
#endif
