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
  // Element e (0 <= e < CPL) as an exact float, without I2F (a quarter-rate conversion on sm_80 /
  // sm_90: 12 of a lane's 16 int8 elements per edge took one, 2026-12-06): the element, biased to
  // be non-negative, is placed in the low mantissa bits of 2^23 (one PRMT or LOP3) and 2^23 plus the
  // bias subtracted (one FADD) -- the same float value as float(get(e)).
  __device__ __forceinline__ float getf(int e) const {
    constexpr unsigned kTwo23 = 0x4B000000u;  // the bits of 2^23
    if constexpr (BITS == 8) {
      constexpr float kBias = 8388608.0f + 128.0f;
      if constexpr (CPL == 1) {
        return __uint_as_float(kTwo23 | ((w[0] ^ 0x80u) & 0xFFu)) - kBias;
      } else {
        // byte (e & 3) of the sign-flipped word into byte 0, the bytes of 2^23 above it
        const unsigned u = w[e >> 2] ^ 0x80808080u;
        return __uint_as_float(__byte_perm(u, kTwo23, 0x7540u | unsigned(e & 3))) - kBias;
      }
    } else {
      constexpr float kBias = 8388608.0f + 8.0f;
      if constexpr (CPL == 1) {
        return __uint_as_float(kTwo23 | (((w[0] >> (nib ? 4 : 0)) & 0xFu) ^ 0x8u)) - kBias;
      } else {
        // element e is nibble (e & 7) of word e >> 3 (see get)
        const unsigned u = w[e >> 3] ^ 0x88888888u;
        return __uint_as_float(kTwo23 | ((u >> (4 * (e & 7))) & 0xFu)) - kBias;
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

// ---- delayed-scale outputs (gnnsparse/quant.hpp, DELAYED SCALING) ---------------------------------
// Block-wide absmax_combine of one float per thread (every thread of the block must call it;
// blockDim.x a multiple of 32); the result is valid in thread 0.
__device__ __forceinline__ float block_absmax(float v, float* smem) {
  for (int o = 16; o > 0; o >>= 1) v = quant::absmax_combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < nw ? smem[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v = quant::absmax_combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;
}

// quant::quantize_value_sat without conversion instructions (F2I / I2F run at a quarter of the
// FMA rate on sm_80 / sm_90): floor and rint by one directed FADD of 1.5 * 2^23, whose sum has an
// ulp of 1 for |v| <= 2^22 (here |v| <= qmax + 1), so the integer is exact in the low mantissa bits
// and (sum - 1.5 * 2^23) is it as a float: the same q bit for bit.
__device__ __forceinline__ int quantize_sat_fast(float x, float inv, int qmax, bool stoch, std::uint32_t w) {
  constexpr float kMagic = 12582912.0f;   // 1.5 * 2^23
  constexpr int kMagicBits = 0x4B400000;  // its bits
  float v = __fmul_rn(x, inv);
  const float lim = float(qmax + 1);
  v = v != v ? 0.0f : fminf(fmaxf(v, -lim), lim);
  int q;
  if (stoch) {
    const float t = __fadd_rd(v, kMagic);  // 1.5 * 2^23 + floor(v)
    const int fl = __float_as_int(t) - kMagicBits;
    const float f = v - (t - kMagic);      // v - floor(v), exact
    q = quant::uniform24(w) < f ? fl + 1 : fl;
  } else {
    q = __float_as_int(__fadd_rn(v, kMagic)) - kMagicBits;  // rint(v), ties to even
  }
  return q > qmax ? qmax : (q < -qmax ? -qmax : q);
}

// What a kernel writing a delayed-scale output reads (from QOut).
struct QOutParams {
  std::uint8_t* __restrict__ Q;
  const float* __restrict__ scale_in;
  int64_t row_bytes;
  int bits;
  bool stoch;
  bool vec;  // Q 16-byte aligned: a lane's CPL values go out in one store
  std::uint64_t seed;
};

inline QOutParams qout_params(const QOut& o, int64_t C) {
  return QOutParams{static_cast<std::uint8_t*>(o.Q), o.scale_in, o.bits == 4 ? (C + 1) / 2 : C, o.bits,
                    o.rounding == Rounding::stochastic,
                    reinterpret_cast<std::uintptr_t>(o.Q) % 16 == 0, o.seed};
}

// Quantizes CPL consecutive values y[0 .. CPL) of row `row` at columns c0 .. c0 + CPL - 1 (c0 a
// multiple of CPL; CPL 4 or 16 only when C % CPL == 0) into q (values past C: 0). The random words
// are those of flat elements row * C + c: one Philox call per 4 values when CPL >= 4.
template <int CPL>
__device__ __forceinline__ void quantize_run(const QOutParams& o, int64_t row, int64_t c0, int64_t C,
                                             const float (&y)[CPL], int (&q)[CPL]) {
  const float inv = __ldg(o.scale_in + 1);
  const int qmax = o.bits == 4 ? 7 : 127;
  const int64_t e0 = row * C + c0;
  if constexpr (CPL >= 4) {
#pragma unroll
    for (int t = 0; t < CPL / 4; ++t) {
      quant::Words4 w{{0u, 0u, 0u, 0u}};
      if (o.stoch) w = quant::element_words(o.seed, std::uint64_t(e0 / 4 + t));
#pragma unroll
      for (int u = 0; u < 4; ++u) q[4 * t + u] = quantize_sat_fast(y[4 * t + u], inv, qmax, o.stoch, w.w[u]);
    }
  } else {
#pragma unroll
    for (int e = 0; e < CPL; ++e) {
      const int64_t el = e0 + e;
      const std::uint32_t w = o.stoch ? quant::element_words(o.seed, std::uint64_t(el) >> 2).w[el & 3] : 0u;
      q[e] = c0 + e < C ? quantize_sat_fast(y[e], inv, qmax, o.stoch, w) : 0;
    }
  }
}

// Stores q (see quantize_run) of row `row` at columns c0 ..; int4 with CPL 1 pairs each even
// column with the next lane's value (`next`, from the caller's shuffle).
template <int CPL>
__device__ __forceinline__ void store_run(const QOutParams& o, int64_t row, int64_t c0, int64_t C,
                                          const int (&q)[CPL], int next) {
  std::uint8_t* r = o.Q + row * o.row_bytes;
  if (o.bits == 8) {
    if constexpr (CPL == 16) {
      std::uint32_t w[4];
#pragma unroll
      for (int t = 0; t < 4; ++t)
        w[t] = (std::uint32_t(q[4 * t]) & 0xFFu) | ((std::uint32_t(q[4 * t + 1]) & 0xFFu) << 8) |
               ((std::uint32_t(q[4 * t + 2]) & 0xFFu) << 16) | ((std::uint32_t(q[4 * t + 3]) & 0xFFu) << 24);
      if (o.vec) {
        *reinterpret_cast<uint4*>(r + c0) = make_uint4(w[0], w[1], w[2], w[3]);
      } else {
#pragma unroll
        for (int e = 0; e < 16; ++e) r[c0 + e] = std::uint8_t(q[e]);
      }
    } else if constexpr (CPL == 4) {
      const std::uint32_t w = (std::uint32_t(q[0]) & 0xFFu) | ((std::uint32_t(q[1]) & 0xFFu) << 8) |
                              ((std::uint32_t(q[2]) & 0xFFu) << 16) | ((std::uint32_t(q[3]) & 0xFFu) << 24);
      if (o.vec) {
        *reinterpret_cast<std::uint32_t*>(r + c0) = w;
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) r[c0 + e] = std::uint8_t(q[e]);
      }
    } else {
      if (c0 < C) r[c0] = std::uint8_t(q[0]);
    }
  } else {
    if constexpr (CPL >= 4) {
      std::uint8_t b[CPL / 2];
#pragma unroll
      for (int t = 0; t < CPL / 2; ++t) b[t] = quant::pack4(q[2 * t], q[2 * t + 1]);
      std::uint8_t* d = r + c0 / 2;
      if (o.vec) {
        if constexpr (CPL == 16) {
          std::uint32_t w[2];
#pragma unroll
          for (int t = 0; t < 2; ++t)
            w[t] = std::uint32_t(b[4 * t]) | (std::uint32_t(b[4 * t + 1]) << 8) |
                   (std::uint32_t(b[4 * t + 2]) << 16) | (std::uint32_t(b[4 * t + 3]) << 24);
          *reinterpret_cast<uint2*>(d) = make_uint2(w[0], w[1]);
        } else {
          *reinterpret_cast<unsigned short*>(d) = static_cast<unsigned short>(b[0] | (b[1] << 8));
        }
      } else {
#pragma unroll
        for (int t = 0; t < CPL / 2; ++t) d[t] = b[t];
      }
    } else {
      if (c0 < C && (c0 & 1) == 0) r[c0 / 2] = quant::pack4(q[0], c0 + 1 < C ? next : 0);
    }
  }
}

// The fold of a delayed-scale output's partial maxima (work[0 .. P)) and its scales (quantize.cu).
void launch_delayed_finish(const QOut& o, int64_t P, cudaStream_t stream);
void check_qout(const char* op, const QOut& o, int64_t need_work);

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
