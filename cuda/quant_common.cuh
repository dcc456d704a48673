// Device helpers of the quantized CUDA kernels: vectors of quantized features (int8 or packed
// int4) as loaded by one lane, their integer dot products (dp4a), argument checks.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "../sycl/kernels/quant_math.hpp"
#include "common.cuh"
#include "dispatch.cuh"
#include "gnnsparse/quant.hpp"

namespace gnnsparse::cuda_detail {

// CPL consecutive quantized features of one row, starting at a column that is a multiple of CPL,
// loaded as one transaction:
//   int8: CPL 16 -> 16 bytes (uint4), 4 -> 4 bytes, 1 -> 1 byte
//   int4: CPL 16 ->  8 bytes (uint2), 4 -> 2 bytes, 1 -> the byte holding the nibble
// A plan may use CPL > 1 only when every vector it loads is aligned: the data pointer to 16 bytes
// and every vector's first column (row starts included) a multiple of CPL, with whole bytes
// (row_bytes * 2 == C for int4).
template <int BITS, int CPL>
struct QVec {
  static constexpr int kBytes = BITS == 8 ? CPL : (CPL == 1 ? 1 : CPL / 2);
  static_assert(CPL == 1 || CPL == 4 || CPL == 16, "CPL: 1, 4 or 16");
  std::uint32_t w[kBytes >= 4 ? kBytes / 4 : 1];
  int nib = 0;  // int4, CPL 1: which nibble

  // Column c of the row that starts at `row`.
  __device__ __forceinline__ void load(const std::uint8_t* __restrict__ row, int64_t c) {
    if constexpr (BITS == 8) {
      const std::uint8_t* p = row + c;
      if constexpr (CPL == 16) {
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
        w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
      } else if constexpr (CPL == 4) {
        w[0] = __ldg(reinterpret_cast<const unsigned int*>(p));
      } else {
        w[0] = __ldg(p);
      }
    } else {
      const std::uint8_t* p = row + (c >> 1);
      if constexpr (CPL == 16) {
        const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
        w[0] = v.x; w[1] = v.y;
      } else if constexpr (CPL == 4) {
        w[0] = __ldg(reinterpret_cast<const unsigned short*>(p));
      } else {
        w[0] = __ldg(p);
        nib = int(c & 1);
      }
    }
  }
  // Element e (0 <= e < CPL) as an int.
  __device__ __forceinline__ int get(int e) const {
    if constexpr (BITS == 8) {
      if constexpr (CPL == 1) return int(std::int8_t(std::uint8_t(w[0])));
      else return int(std::int8_t(std::uint8_t(w[e >> 2] >> (8 * (e & 3)))));
    } else {
      if constexpr (CPL == 1) {
        return nib ? quant::nibble_hi(w[0]) : quant::nibble_lo(w[0]);
      } else {
        const unsigned b = (w[e >> 3] >> (8 * ((e >> 1) & 3))) & 0xFFu;
        return (e & 1) ? quant::nibble_hi(b) : quant::nibble_lo(b);
      }
    }
  }
};

// int4 word (8 nibbles) -> two words of 4 sign-extended bytes: lo holds elements 0, 2, 4, 6 and
// hi elements 1, 3, 5, 7 (a dot product pairs them up the same way on both sides).
__device__ __forceinline__ void unpack_nibbles(std::uint32_t w, std::uint32_t& lo, std::uint32_t& hi) {
  lo = __vsub4((w & 0x0F0F0F0Fu) ^ 0x08080808u, 0x08080808u);
  hi = __vsub4(((w >> 4) & 0x0F0F0F0Fu) ^ 0x08080808u, 0x08080808u);
}

// Integer dot product of two vectors of the same shape (int8 . int8 or int4 . int4).
template <int BITS, int CPL>
__device__ __forceinline__ int qdot(const QVec<BITS, CPL>& a, const QVec<BITS, CPL>& b) {
  int acc = 0;
  if constexpr (BITS == 8 && CPL >= 4) {
#pragma unroll
    for (int t = 0; t < CPL / 4; ++t) acc = __dp4a(int(a.w[t]), int(b.w[t]), acc);
  } else if constexpr (BITS == 4 && CPL == 16) {
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      std::uint32_t al, ah, bl, bh;
      unpack_nibbles(a.w[t], al, ah);
      unpack_nibbles(b.w[t], bl, bh);
      acc = __dp4a(int(al), int(bl), acc);
      acc = __dp4a(int(ah), int(bh), acc);
    }
  } else {
#pragma unroll
    for (int e = 0; e < CPL; ++e) acc += a.get(e) * b.get(e);
  }
  return acc;
}

// Integer dot product of mixed widths (int8 . int4 or int4 . int8): element by element.
template <int BA, int BB, int CPL>
__device__ __forceinline__ int qdot_mixed(const QVec<BA, CPL>& a, const QVec<BB, CPL>& b) {
  int acc = 0;
#pragma unroll
  for (int e = 0; e < CPL; ++e) acc += a.get(e) * b.get(e);
  return acc;
}

template <int BA, int BB, int CPL>
__device__ __forceinline__ int qdot_any(const QVec<BA, CPL>& a, const QVec<BB, CPL>& b) {
  if constexpr (BA == BB) return qdot<BA, CPL>(a, b);
  else return qdot_mixed<BA, BB, CPL>(a, b);
}

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// The widest CPL in {16, 4, 1} whose vectors are all aligned (see QVec) for features of width
// `unit` (C for a whole row, or F / D when vectors must not cross heads) in rows of C features.
inline int plan_cpl(int bits, const void* data, int64_t C, int64_t unit) {
  if (!aligned16(data)) return 1;
  for (int cpl : {16, 4}) {
    if (unit % cpl || C % cpl) continue;
    return cpl;
  }
  return 1;
}

template <class F> decltype(auto) dispatch_cpl(int cpl, F&& f) {
  if (cpl == 16) return f(ValueTag<16>{});
  if (cpl == 4) return f(ValueTag<4>{});
  return f(ValueTag<1>{});
}

template <class F> decltype(auto) dispatch_bits(int bits, F&& f) {
  if (bits == 8) return f(ValueTag<8>{});
  if (bits == 4) return f(ValueTag<4>{});
  throw std::invalid_argument("gnnsparse cuda: quantized data must have 4 or 8 bits, got " + std::to_string(bits));
}

inline void check_qview(const char* op, const char* name, const QView& v, bool needed) {
  if (v.bits != 4 && v.bits != 8)
    throw std::invalid_argument(std::string("gnnsparse cuda ") + op + ": " + name + " must have 4 or 8 bits");
  if (v.C < 0) throw std::invalid_argument(std::string("gnnsparse cuda ") + op + ": negative size");
  if (needed && (v.data == nullptr || v.scale == nullptr))
    throw std::invalid_argument(std::string("gnnsparse cuda ") + op + ": null pointer for " + name);
}

}  // namespace gnnsparse::cuda_detail
