// gnnsparse ESIMD kernels: shared pieces (tuning type, tile loads/stores, index chunks).
//
// Device code for Intel GPUs with aspect::ext_intel_esimd (Data Center GPU Max 1550), after the ESIMD
// paper ("Performance Optimization of Deep Learning Sparse Matrix Kernels on Intel Max Series
// GPU"). One source serves three readers:
//   * the SYCL kernel_compiler at run time (sycl/runtime.hpp embeds every file under sycl/kernels/),
//   * icpx ahead of time (cmake/SyclAot.cmake, -fsycl-targets=spir64_gen -Xs "-device pvc"),
//   * g++ against the host shim in tests/esimd_shim/ (GNNSPARSE_ESIMD_HOST_SHIM defined), which
//     runs the kernel bodies on the CPU in the tests.
// Kernel bodies are templates taking explicit thread ids; the ESIMD entry points are thin wrappers.
// Every ESIMD call a body makes goes through the namespace alias `xe`.
#pragma once
#include <cstdint>
#include <functional>
#include <type_traits>

#if __has_include("gnnsparse/ops.hpp")  // Reduce, EdgeFn: on the include path (icpx, the host shim)
#include "gnnsparse/ops.hpp"
#else  // the kernel_compiler's include files resolve relative to this file
#include "../gnnsparse/ops.hpp"
#endif

#ifdef GNNSPARSE_ESIMD_HOST_SHIM
#include "esimd_shim.hpp"
namespace gnnsparse::esimd {
namespace xe = ::gnnsparse_shim::esimd;
}
#define GNNSPARSE_ESIMD_FN inline
#define GNNSPARSE_UNROLL _Pragma("GCC unroll 16")
#else
#include <sycl/sycl.hpp>
#include <sycl/ext/intel/esimd.hpp>
namespace gnnsparse::esimd {
namespace xe = ::sycl::ext::intel::esimd;
}
#define GNNSPARSE_ESIMD_FN SYCL_ESIMD_FUNCTION inline
#define GNNSPARSE_UNROLL _Pragma("unroll")
#endif

namespace gnnsparse::esimd {

using xe::simd;
using xe::simd_mask;
using i64 = std::int64_t;

// Tuning of one kernel instance (oneDPL kernel_param style): NT threads per row (SDDMM), VLC
// nonzeros per chunk, N features per register tile. The allowed sets match the host launch policy
// (sycl/esimd_policy.hpp: kNT, kVLC, kN).
template <int NT_, int VLC_, int N_>
struct kernel_param {
  static constexpr int NT = NT_;
  static constexpr int VLC = VLC_;
  static constexpr int N = N_;
  static_assert(NT == 1 || NT == 2 || NT == 4 || NT == 8 || NT == 16, "NT must be a power of two <= 16");
  static_assert(VLC == 8 || VLC == 16, "VLC must be 8 or 16 (one index block; masked tails <= 16 lanes)");
  static_assert(N >= 8 && N <= 128 && (N & (N - 1)) == 0, "feature tile N must be a power of two in [8, 128]");
};

// ---- block stores ----------------------------------------------------------------------------
// block_store without an alignment property assumes a 16-byte (OWORD) aligned address (ESIMD spec,
// usm-bs-1); output rows and chunks here are only element aligned (any C, any k0), so the element
// alignment is stated explicitly. (block_load's default is already 4 / 8 bytes: usm-bl-1.)
template <typename T, int N>
GNNSPARSE_ESIMD_FN void store_block(T *p, simd<T, N> v) {
  xe::block_store<T, N>(p, v, xe::properties{xe::alignment<int(sizeof(T))>});
}

// ---- feature tiles --------------------------------------------------------------------------
// A tile is N consecutive features of one dense row starting at p; `valid` = features left in the
// row from p (may exceed N). Full tiles are one block message; the tail tile is a masked gather
// whose masked lanes read nothing and are zero (so they add nothing to dot products).

// Masked messages and predicates are issued SUB lanes at a time: the pvc vector backend does not
// split wider predicates ("SOA predicate splitting is currently not supported" from ocloc for
// 64- and 128-lane masked gathers), so a tail tile is N / SUB masked 16-lane pieces.
inline constexpr int kSub = 16;

template <typename T, int N, bool FULL>
GNNSPARSE_ESIMD_FN simd<T, N> load_tile(const T *p, i64 valid) {
  if constexpr (FULL) {
    return xe::block_load<T, N>(p);
  } else {
    constexpr int SUB = N < kSub ? N : kSub;
    static_assert(N % SUB == 0, "tile must be a multiple of the masked piece");
    const simd<std::uint32_t, SUB> byte_off(0u, std::uint32_t(sizeof(T)));
    simd<T, N> v(T(0));
    GNNSPARSE_UNROLL
    for (int s = 0; s < N; s += SUB) {
      if (i64(s) >= valid) continue;
      const i64 rem = valid - s < SUB ? valid - s : SUB;
      const simd_mask<SUB> m = byte_off < std::uint32_t(rem * i64(sizeof(T)));
      simd<T, SUB> part(T(0));
      part.merge(xe::gather<T, SUB>(p + s, byte_off, m), m);
      v.template select<SUB, 1>(s) = part;
    }
    return v;
  }
}

template <typename T, int N>
GNNSPARSE_ESIMD_FN simd<T, N> load_tile(const T *p, i64 valid) {
  return valid >= N ? load_tile<T, N, true>(p, valid) : load_tile<T, N, false>(p, valid);
}

template <typename T, int N, bool FULL>
GNNSPARSE_ESIMD_FN void store_tile(T *p, simd<T, N> v, i64 valid) {
  if constexpr (FULL) {
    store_block<T, N>(p, v);
  } else {
    constexpr int SUB = N < kSub ? N : kSub;
    const simd<std::uint32_t, SUB> byte_off(0u, std::uint32_t(sizeof(T)));
    GNNSPARSE_UNROLL
    for (int s = 0; s < N; s += SUB) {
      if (i64(s) >= valid) continue;
      const i64 rem = valid - s < SUB ? valid - s : SUB;
      const simd_mask<SUB> m = byte_off < std::uint32_t(rem * i64(sizeof(T)));
      xe::scatter<T, SUB>(p + s, byte_off, simd<T, SUB>(v.template select<SUB, 1>(s)), m);
    }
  }
}

// ---- nonzero chunks -------------------------------------------------------------------------
// VLC consecutive entries of col (or val) starting at p; `cnt` of them belong to the thread. A full
// chunk is one block load; a tail chunk (cnt < VLC) is a masked gather padded with `pad`, so it
// never reads past the thread's range (the paper's block loads would run off the array's end).

template <typename V, int VLC, bool FULL>
GNNSPARSE_ESIMD_FN simd<V, VLC> load_chunk(const V *p, int cnt, V pad) {
  if constexpr (FULL) {
    return xe::block_load<V, VLC>(p);
  } else {
    const simd<std::uint32_t, VLC> byte_off(0u, std::uint32_t(sizeof(V)));
    const simd_mask<VLC> m = byte_off < std::uint32_t(cnt * int(sizeof(V)));
    simd<V, VLC> v(pad);
    v.merge(xe::gather<V, VLC>(p, byte_off, m), m);
    return v;
  }
}

// Per-nonzero results of a chunk, stored once: E[k0 + l, h] for l < cnt, row stride H.
template <typename T, int VLC, bool FULL>
GNNSPARSE_ESIMD_FN void store_chunk(T *p, simd<T, VLC> v, int cnt, i64 H) {
  if (FULL && H == 1) {
    store_block<T, VLC>(p, v);
  } else {
    const simd<std::uint32_t, VLC> lane(0u, 1u);
    const simd<std::uint32_t, VLC> byte_off = lane * std::uint32_t(H * i64(sizeof(T)));
    const simd_mask<VLC> m = lane < std::uint32_t(cnt);
    xe::scatter<T, VLC>(p, byte_off, v, m);
  }
}

// Prefetch the next chunk's VLC entries into L1/L2 (ESIMD paper, Figure 8) when that chunk is full;
// a partial next chunk is not prefetched (the block could cross the end of the array).
template <typename V, int VLC>
GNNSPARSE_ESIMD_FN void prefetch_chunk(const V *p, bool full) {
  xe::prefetch<V, VLC>(p, 0, simd_mask<1>(full ? 1 : 0),
                       xe::properties{xe::cache_hint_L1<xe::cache_hint::cached>,
                                      xe::cache_hint_L2<xe::cache_hint::cached>});
}

// ---- dot products of one chunk (SDDMM, FusedMM) ---------------------------------------------
// How a row's F features map onto the N-wide register tile.
enum tile_mode : int {
  tile_full = 0,    // F == N: the paper's case, one full tile
  tile_masked = 1,  // F < N: one tile, lanes >= F masked (zero)
  tile_multi = 2,   // F > N: tile 0 in registers, the others streamed (the last one masked)
};
template <int N>
GNNSPARSE_ESIMD_FN int tile_mode_of(i64 F) {
  return F == N ? tile_full : (F < N ? tile_masked : tile_multi);
}

// dp[l] = <x_i, Y[ja[l]]> over F features for l < cnt (lanes >= cnt are 0). The first tile of x_i
// lives in registers (regL, loaded once per row as in the ESIMD paper). The inner loop is fully unrolled
// (ESIMD paper, Figure 8) for full chunks of full tiles; masked variants keep a rolled loop, which
// keeps the vISA code (and its predicate count) within the pvc backend's limits.
template <typename T, typename I, int VLC, int N, bool FULL, int TM>
GNNSPARSE_ESIMD_FN simd<T, VLC> dot_chunk(const simd<T, N> &regL, const T *xi, simd<I, VLC> ja, int cnt,
                                          const T *Y, i64 ldy, i64 F) {
  simd<T, VLC> dp(T(0));
  auto one = [&](int l) {
    const T *yj = Y + i64(ja[l]) * ldy;
    simd<T, N> acc = regL * load_tile<T, N, TM != tile_masked>(yj, F);
    if constexpr (TM == tile_multi)
      for (i64 f0 = N; f0 < F; f0 += N) acc += load_tile<T, N>(xi + f0, F - f0) * load_tile<T, N>(yj + f0, F - f0);
    dp[l] = xe::reduce<T>(acc, std::plus<>());
  };
  if constexpr (FULL && TM == tile_full) {
    GNNSPARSE_UNROLL
    for (int l = 0; l < VLC; ++l) one(l);
  } else {
    for (int l = 0; l < cnt; ++l) one(l);
  }
  return dp;
}

}  // namespace gnnsparse::esimd
