// Device building blocks of the tensor-core kernels (sm_80+; the package's tensor-core row panels
// and the grid harness's tiles in bench/grid/tiles): cp.async staging, mma.sync wrappers for tf32
// (m16n8k8) and bf16 (m16n8k16), the 3xTF32 split, and the per-precision fragment loaders.
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k8 / m16n8k16"), lane = 4 * g + t:
//   tf32 m16n8k8  A (16x8, row): a0 (g, t)  a1 (g+8, t)  a2 (g, t+4)  a3 (g+8, t+4)
//                 B (8x8, col):  b0 (t, g)  b1 (t+4, g)
//   bf16 m16n8k16 A: r0 = (g, 2t..2t+1)  r1 = (g+8, 2t..2t+1)  r2 = (g, 2t+8..)  r3 = (g+8, 2t+8..)
//                 B: r0 = (2t..2t+1, g)  r1 = (2t+8..2t+9, g)
//   C (16x8, f32): c0 (g, 2t)  c1 (g, 2t+1)  c2 (g+8, 2t)  c3 (g+8, 2t+1)
// Every tf32 product here uses a permuted k order inside each group of 8: hardware slot t holds
// logical k = 2t and slot t+4 holds k = 2t+1, for A and B alike (the sum over k is unchanged).
// Then an A fragment reads two adjacent columns (one 64-bit shared load), and a C fragment of one
// product (c0, c1 = columns 2t, 2t+1) is directly the A fragment of the next (FusedMM).
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

#include "gnnsparse/ops.hpp"

namespace gnnsparse::tiles {

// ---- cp.async --------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 4 bytes; when !pred the destination is zero-filled and src is not read.
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool pred) {
  const int n = pred ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(n));
}
// 16 bytes (L1 bypass); when !pred the destination is zero-filled.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool pred) {
  const int n = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Index array element i (int64 or int32 storage).
__device__ __forceinline__ long long load_index(const void* p, int is64, int64_t i) {
  return is64 ? static_cast<long long>(__ldg(static_cast<const long long*>(p) + i))
              : static_cast<long long>(__ldg(static_cast<const int*>(p) + i));
}

// ---- conversions ------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
// x ~= big + small, both tf32 (round-to-nearest): the 3xTF32 split (big*big + big*small +
// small*big recovers ~22 significand bits of every product).
__device__ __forceinline__ void split_tf32(float x, uint32_t& big, uint32_t& small) {
  big = to_tf32(x);
  small = to_tf32(x - __uint_as_float(big));
}
// Two floats -> bf16x2, `lo` in the low half (the lower k / column index, as mma expects).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// ---- mma.sync --------------------------------------------------------------------------------
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// d = a * b (accumulator starts at zero).
__device__ __forceinline__ void mma_tf32_zero(float (&d)[4], const uint32_t (&a)[4],
                                              const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%10,%10,%10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.f));
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---- precision policy --------------------------------------------------------------------------
// One "k step" of the product: 8 (tf32, 3xTF32) or 16 (bf16) values of k.
// Frag<P> holds an operand fragment in the form its mma needs; fma_step accumulates a (m16 x n8)
// tile over one k step. For fp32 the three products are ordered small*big, big*small, big*big
// (the small terms first, as CUTLASS's 3xTF32 does).
template <Precision P> struct Prec;

template <> struct Prec<Precision::fp32> {
  static constexpr int kStep = 8;
  struct FragA { uint32_t big[4], small[4]; };
  struct FragB { uint32_t big[2], small[2]; };
  // A from four floats in slot order (a0..a3).
  __device__ __forceinline__ static void make_a(FragA& f, float a0, float a1, float a2, float a3) {
    split_tf32(a0, f.big[0], f.small[0]);
    split_tf32(a1, f.big[1], f.small[1]);
    split_tf32(a2, f.big[2], f.small[2]);
    split_tf32(a3, f.big[3], f.small[3]);
  }
  __device__ __forceinline__ static void make_b(FragB& f, float b0, float b1) {
    split_tf32(b0, f.big[0], f.small[0]);
    split_tf32(b1, f.big[1], f.small[1]);
  }
  __device__ __forceinline__ static void mma(float (&d)[4], const FragA& a, const FragB& b) {
    mma_tf32(d, a.small, b.big);
    mma_tf32(d, a.big, b.small);
    mma_tf32(d, a.big, b.big);
  }
  __device__ __forceinline__ static void mma_zero(float (&d)[4], const FragA& a, const FragB& b) {
    mma_tf32_zero(d, a.small, b.big);
    mma_tf32(d, a.big, b.small);
    mma_tf32(d, a.big, b.big);
  }
};

template <> struct Prec<Precision::tf32> {
  static constexpr int kStep = 8;
  struct FragA { uint32_t v[4]; };
  struct FragB { uint32_t v[2]; };
  __device__ __forceinline__ static void make_a(FragA& f, float a0, float a1, float a2, float a3) {
    f.v[0] = to_tf32(a0);
    f.v[1] = to_tf32(a1);
    f.v[2] = to_tf32(a2);
    f.v[3] = to_tf32(a3);
  }
  __device__ __forceinline__ static void make_b(FragB& f, float b0, float b1) {
    f.v[0] = to_tf32(b0);
    f.v[1] = to_tf32(b1);
  }
  __device__ __forceinline__ static void mma(float (&d)[4], const FragA& a, const FragB& b) {
    mma_tf32(d, a.v, b.v);
  }
  __device__ __forceinline__ static void mma_zero(float (&d)[4], const FragA& a, const FragB& b) {
    mma_tf32_zero(d, a.v, b.v);
  }
};

template <> struct Prec<Precision::bf16> {
  static constexpr int kStep = 16;
  struct FragA { uint32_t v[4]; };
  struct FragB { uint32_t v[2]; };
  __device__ __forceinline__ static void mma(float (&d)[4], const FragA& a, const FragB& b) {
    mma_bf16(d, a.v, b.v);
  }
  __device__ __forceinline__ static void mma_zero(float (&d)[4], const FragA& a, const FragB& b) {
    d[0] = d[1] = d[2] = d[3] = 0.f;
    mma_bf16(d, a.v, b.v);
  }
};

// ---- fragment loads from shared memory ----------------------------------------------------------
// A fragment of a row-major fp32 tile S (leading dimension ld floats): rows r0 .. r0+15,
// k columns k0 .. k0 + kStep - 1. ld must be = 8 (mod 32) for conflict-free 64-bit loads.
template <Precision P>
__device__ __forceinline__ void load_a(typename Prec<P>::FragA& f, const float* S, int ld, int r0,
                                       int k0, int g, int t) {
  const float* p0 = S + (r0 + g) * ld + k0 + 2 * t;
  const float* p1 = p0 + 8 * ld;
  if constexpr (P == Precision::bf16) {
    const float2 x0 = *reinterpret_cast<const float2*>(p0);
    const float2 x1 = *reinterpret_cast<const float2*>(p1);
    const float2 x2 = *reinterpret_cast<const float2*>(p0 + 8);
    const float2 x3 = *reinterpret_cast<const float2*>(p1 + 8);
    f.v[0] = pack_bf16(x0.x, x0.y);
    f.v[1] = pack_bf16(x1.x, x1.y);
    f.v[2] = pack_bf16(x2.x, x2.y);
    f.v[3] = pack_bf16(x3.x, x3.y);
  } else {
    // permuted k: slot t <- column 2t, slot t+4 <- column 2t+1
    const float2 x0 = *reinterpret_cast<const float2*>(p0);
    const float2 x1 = *reinterpret_cast<const float2*>(p1);
    Prec<P>::make_a(f, x0.x, x1.x, x0.y, x1.y);
  }
}

// B fragment of a row-major (k x n) fp32 tile S (leading dimension ld = 4 (mod 32)): k rows
// k0 .., column n0 + g. (SpMM's X tile, FusedMM's Z tile.)
template <Precision P>
__device__ __forceinline__ void load_b_kn(typename Prec<P>::FragB& f, const float* S, int ld,
                                          int k0, int n0, int g, int t) {
  const float* p = S + (k0 + 2 * t) * ld + n0 + g;
  if constexpr (P == Precision::bf16) {
    f.v[0] = pack_bf16(p[0], p[ld]);
    f.v[1] = pack_bf16(p[8 * ld], p[9 * ld]);
  } else {
    Prec<P>::make_b(f, p[0], p[ld]);
  }
}

// B fragment of an (n x k) row-major fp32 tile S, i.e. B[k][n] = S[n][k] (ld = 8 (mod 32)):
// columns n0 + g, k0 .. (SDDMM's and FusedMM's Y tile: rows of Y are the n index.)
template <Precision P>
__device__ __forceinline__ void load_b_nk(typename Prec<P>::FragB& f, const float* S, int ld,
                                          int k0, int n0, int g, int t) {
  const float* p = S + (n0 + g) * ld + k0 + 2 * t;
  const float2 x = *reinterpret_cast<const float2*>(p);
  if constexpr (P == Precision::bf16) {
    const float2 y = *reinterpret_cast<const float2*>(p + 8);
    f.v[0] = pack_bf16(x.x, x.y);
    f.v[1] = pack_bf16(y.x, y.y);
  } else {
    Prec<P>::make_b(f, x.x, x.y);
  }
}

// A fragments of one k step from the C fragments of score tiles (FusedMM: the scores of a 16 x 32
// chunk, c[j] = n-tile j, become the A operand of the aggregation without leaving registers).
// tf32 step j (k = 8j .. 8j+7) uses c[j]; bf16 step j (k = 16j ..) uses c[2j], c[2j+1].
template <Precision P>
__device__ __forceinline__ void a_from_c(typename Prec<P>::FragA& f, const float (*c)[4], int j) {
  if constexpr (P == Precision::bf16) {
    f.v[0] = pack_bf16(c[2 * j][0], c[2 * j][1]);
    f.v[1] = pack_bf16(c[2 * j][2], c[2 * j][3]);
    f.v[2] = pack_bf16(c[2 * j + 1][0], c[2 * j + 1][1]);
    f.v[3] = pack_bf16(c[2 * j + 1][2], c[2 * j + 1][3]);
  } else {
    // c0 = (g, 2t) -> slot (g, t); c2 = (g+8, 2t) -> (g+8, t); c1 -> (g, t+4); c3 -> (g+8, t+4)
    Prec<P>::make_a(f, c[j][0], c[j][2], c[j][1], c[j][3]);
  }
}

}  // namespace gnnsparse::tiles
