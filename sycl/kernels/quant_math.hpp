// gnnsparse quantizer: the element-level definition every backend computes bit for bit.
//
// Plain C++17 without any backend header, so one text serves the CUDA kernels (nvcc, included as
// "../sycl/kernels/quant_math.hpp"), the portable SYCL kernels (embedded for the run-time
// compiler), the ESIMD kernels' scalar reference and the host. The contract of the quantized
// tensor and ops is in include/gnnsparse/quant.hpp; the NumPy model of this file is
// gnnsparse.quant.model (tests compare every backend with it bitwise).
//
// For B-bit symmetric quantization (B in {4, 8}), qmax = 2^(B-1) - 1 and, over the whole tensor,
//   absmax = max |x|                (NaN if any x is NaN or +-inf)
//   s      = absmax / qmax          (the scale; s = 0 for an all-zero tensor, NaN if not finite)
//   inv    = qmax / absmax          (0 when absmax is 0 or not finite)
// both correctly rounded float32 divisions done once per tensor. Element x at flat index e:
//   v = x * inv                                        (float32 product)
//   nearest:    q = rint(v)                            (ties to even)
//   stochastic: q = floor(v) + (u_e < v - floor(v))    u_e = (w_e >> 8) * 2^-24 in [0, 1)
//   q = clamp(q, -qmax, qmax); q = 0 when v is not finite (only when inv is 0 and x is +-inf/NaN)
// (a producer quantizing with a delayed scale, quantize_value_sat, saturates v at +-(qmax + 1)
// instead: there inv comes from another tensor, so |v| may exceed qmax)
// where w_e is word e % 4 of Philox4x32-10(counter = (g lo, g hi, 0, 0), key = (seed lo,
// seed hi)), g = e / 4. The random word of an element depends on (seed, e) only: the same seed
// gives the same q on any launch geometry and any backend. E[q] = v up to 2^-24 (unbiased).
#pragma once
#include <cstdint>
#include <limits>

#if defined(__CUDACC__)
#define GNNSPARSE_QFN __host__ __device__ __forceinline__
#else
#define GNNSPARSE_QFN inline
#endif
// A float32 product that is never fused into a following addition (nvcc contracts across
// statements; the SYCL kernels are built with -ffp-contract=on, which does not).
#if defined(__CUDA_ARCH__)
#define GNNSPARSE_QMUL(a, b) __fmul_rn((a), (b))
#else
#define GNNSPARSE_QMUL(a, b) ((a) * (b))
#endif

namespace gnnsparse::quant {

GNNSPARSE_QFN constexpr int qmax_of(int bits) { return bits == 4 ? 7 : 127; }

// ---- Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011; the constants and round of Random123's philox4x32) ------------------------------------
struct Words4 {
  std::uint32_t w[4];
};

GNNSPARSE_QFN std::uint32_t mulhilo32(std::uint32_t a, std::uint32_t b, std::uint32_t &hi) {
  const std::uint64_t p = std::uint64_t(a) * std::uint64_t(b);
  hi = std::uint32_t(p >> 32);
  return std::uint32_t(p);
}

GNNSPARSE_QFN Words4 philox4x32_10(std::uint32_t c0, std::uint32_t c1, std::uint32_t c2, std::uint32_t c3,
                                   std::uint32_t k0, std::uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    std::uint32_t hi0, hi1;
    const std::uint32_t lo0 = mulhilo32(0xD2511F53u, c0, hi0);
    const std::uint32_t lo1 = mulhilo32(0xCD9E8D57u, c2, hi1);
    const std::uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return Words4{{c0, c1, c2, c3}};
}

// The random words of elements 4 g .. 4 g + 3 of a tensor quantized with `seed`.
GNNSPARSE_QFN Words4 element_words(std::uint64_t seed, std::uint64_t g) {
  return philox4x32_10(std::uint32_t(g), std::uint32_t(g >> 32), 0u, 0u, std::uint32_t(seed),
                       std::uint32_t(seed >> 32));
}

// u in [0, 1): the top 24 bits of w, exactly representable in float32.
GNNSPARSE_QFN float uniform24(std::uint32_t w) { return float(w >> 8) * 5.9604644775390625e-08f; }

// floor of a float in [-2^31, 2^31) without a math library (truncation, then one step down for
// negative non-integers): the same on every compiler and device.
GNNSPARSE_QFN float floor_small(float v) {
  const float t = float(int(v));
  return t > v ? t - 1.0f : t;
}

// The rounding of v in [-qmax - 1, qmax + 1] to q in [-qmax, qmax] (see the header comment).
GNNSPARSE_QFN int round_scaled(float v, int qmax, bool stochastic, std::uint32_t w) {
  const float fl = floor_small(v);
  const float f = v - fl;  // exact: fl <= v < fl + 1
  float q;
  if (stochastic) {
    q = uniform24(w) < f ? fl + 1.0f : fl;
  } else {  // rint: ties to even
    const bool odd = (int(fl) & 1) != 0;
    q = (f > 0.5f || (f == 0.5f && odd)) ? fl + 1.0f : fl;
  }
  const float m = float(qmax);
  q = q > m ? m : (q < -m ? -m : q);
  return int(q);
}

// q of one element (see the header comment). w is its random word (ignored when rounding to
// nearest). v outside [-qmax - 1, qmax + 1] (only NaN / inf, since |x * inv| <= qmax (1 + 2^-23))
// gives 0.
GNNSPARSE_QFN int quantize_value(float x, float inv, int qmax, bool stochastic, std::uint32_t w) {
  float v = GNNSPARSE_QMUL(x, inv);
  const float lim = float(qmax + 1);
  v = (v >= -lim && v <= lim) ? v : 0.0f;
  return round_scaled(v, qmax, stochastic, w);
}

// q of one element quantized with a DELAYED scale (include/gnnsparse/quant.hpp): inv was not
// computed from this tensor, so |x * inv| may exceed qmax. v saturates at +-(qmax + 1) before the
// rounding (so q is +-qmax), NaN gives 0. Equal to quantize_value wherever that one's v is in range.
GNNSPARSE_QFN int quantize_value_sat(float x, float inv, int qmax, bool stochastic, std::uint32_t w) {
  float v = GNNSPARSE_QMUL(x, inv);
  const float lim = float(qmax + 1);
  v = v != v ? 0.0f : (v > lim ? lim : (v < -lim ? -lim : v));
  return round_scaled(v, qmax, stochastic, w);
}

// (s, inv) from absmax (see the header comment). absmax is NaN when the tensor held NaN or +-inf.
GNNSPARSE_QFN void scales_from_absmax(float absmax, int qmax, float &s, float &inv) {
  const bool finite = absmax <= std::numeric_limits<float>::max();  // false for NaN and +inf
  if (!finite) {
    s = std::numeric_limits<float>::quiet_NaN();
    inv = 0.0f;
  } else if (absmax == 0.0f) {
    s = 0.0f;
    inv = 0.0f;
  } else {
    s = absmax / float(qmax);
    inv = float(qmax) / absmax;
  }
}

// max |x| that lets a NaN (or +-inf, mapped to NaN) win over any number: the absmax reduction's
// combine step. Commutative and associative, so the reduction order never changes the result.
GNNSPARSE_QFN float absmax_combine(float acc, float x) {
  const float a = x < 0.0f ? -x : x;
  const bool bad = !(a <= std::numeric_limits<float>::max());  // NaN or inf
  if (bad || acc != acc) return std::numeric_limits<float>::quiet_NaN();
  return a > acc ? a : acc;
}

// The scales a delayed-scale producer writes once its output's absmax is known (absmax NaN: the
// output held NaN or +-inf). prev = {s, inv} it quantized with. cur: the QTensor's scale, prev's
// values, or {NaN, 0} when the output was not finite (so everything computed from it is NaN, as
// for quantize); next: the scale of the next step, {s, inv} of the held absmax
//   held = max(absmax, fl32(fl32(prev_s * qmax) * decay))   (decay in [0, 1); 0: held = absmax)
// (a peak hold: the scale follows a growing absmax at once and a shrinking one by `decay` per
// step, so a tensor whose absmax fluctuates from step to step is clamped less often). growth:
// absmax over the absmax prev stands for (s / s_prev with s of absmax itself; 0 / 0 -> 0,
// x / 0 -> inf); > 1 means some elements were clamped at +-qmax.
GNNSPARSE_QFN void delayed_scales(float absmax, int qmax, float prev_s, float prev_inv, float decay, float cur[2],
                                  float next[2], float &growth) {
  float s, inv;
  scales_from_absmax(absmax, qmax, s, inv);
  const bool finite = s == s;
  cur[0] = finite ? prev_s : std::numeric_limits<float>::quiet_NaN();
  cur[1] = finite ? prev_inv : 0.0f;
  const float cand = GNNSPARSE_QMUL(GNNSPARSE_QMUL(prev_s, float(qmax)), decay);  // NaN when prev_s is
  const float held = cand > absmax ? cand : absmax;                               // NaN never wins
  scales_from_absmax(held, qmax, next[0], next[1]);
  if (!finite || prev_s != prev_s)
    growth = std::numeric_limits<float>::quiet_NaN();
  else if (prev_s > 0.0f)
    growth = s / prev_s;
  else
    growth = s > 0.0f ? std::numeric_limits<float>::infinity() : 0.0f;
}

// ---- int4 packing: element c of a row in byte c / 2, low nibble for even c, high for odd c,
// 4-bit two's complement; a row of C elements takes (C + 1) / 2 bytes, the unused high nibble of
// an odd row is 0 --------------------------------------------------------------------------------
GNNSPARSE_QFN std::uint8_t pack4(int lo, int hi) {
  return std::uint8_t((unsigned(lo) & 0xFu) | ((unsigned(hi) & 0xFu) << 4));
}
GNNSPARSE_QFN int nibble_lo(unsigned b) { return int(std::int8_t(std::uint8_t(b << 4))) >> 4; }
GNNSPARSE_QFN int nibble_hi(unsigned b) { return int(std::int8_t(std::uint8_t(b & 0xF0u))) >> 4; }

}  // namespace gnnsparse::quant
