// ESIMD quantizer passes (Intel GPUs with aspect::ext_intel_esimd): the absmax partials and the
// quantization, bit for bit the arithmetic of quant_math.hpp (the scale between them is the
// portable quant_scale kernel). Same three readers as the other ESIMD kernels (common.hpp): the
// kernel_compiler, icpx ahead of time, and g++ against the host shim in the tests.
//
// absmax: thread t reduces X[t * chunk, (t + 1) * chunk) in register blocks of kQB floats
//   (block loads; the chunk's tail by masked gathers) to one partial in work[t]; keys are
//   |x| and +inf for NaN / +-inf, combined by max (exact in any order).
// quantize: thread t takes quads [t * NQ, (t + 1) * NQ) (quad g = elements 4g .. 4g + 3): one
//   block load of 4 NQ floats, Philox4x32-10 on NQ counters at once in simd<uint32_t, NQ>
//   registers (the 32 x 32 -> 64-bit products as simd<uint64_t, NQ>), words interleaved so
//   element 4g + t gets word t of quad g, then floor / compare / clamp on the whole block and one
//   block store of 4 NQ int8 (or 2 NQ packed int4 bytes) at a 16-byte aligned address (the
//   launcher requires Q 16-byte aligned; thread offsets are multiples of 2 NQ bytes). The last
//   thread's partial block takes masked 16-lane gathers and scatters instead. Only the quad
//   layout runs here (n % 4 == 0 and, for int4, C even); the launcher leaves other shapes to the
//   portable kernel.
// requantize: the int8 GEMM's scale pass with a delayed scale (quant_requantize's contract: y =
//   fl32(fl32(sa sb) * fl32(acc)), quant::quantize_value_sat with the previous step's inv, the
//   quad's Philox words): thread t takes quads [t * chunk, (t + 1) * chunk) of the rows x C output
//   (C % 4 == 0, ld % 4 == 0) NQ at a time -- the int32 accumulators by one block load when the
//   rows are packed (ld == C), else by 16-lane gathers -- quantizes them as the quantize pass does
//   and stores them with one block store (a masked tail), leaving the absmax key of its values in
//   work[t] (folded by quant_scale with the previous scale).
#pragma once
#if __has_include("esimd/common.hpp")
#include "esimd/common.hpp"
#include "quant_math.hpp"
#else
#include "common.hpp"
#include "../quant_math.hpp"
#endif

#ifdef GNNSPARSE_ESIMD_HOST_SHIM
#include "esimd_shim_quant.hpp"
#endif

namespace gnnsparse::esimd {

inline constexpr int kQB = 64;  // floats per absmax register block

template <int N>
GNNSPARSE_ESIMD_FN simd<float, N> absmax_keys(simd<float, N> x) {
  simd<float, N> a = xe::abs<float, N>(x);
  const simd_mask<N> finite = a <= std::numeric_limits<float>::max();
  simd<float, N> k(std::numeric_limits<float>::infinity());
  k.merge(a, finite);
  return k;
}

GNNSPARSE_ESIMD_FN void absmax_thread(i64 t, const float *X, i64 n, i64 chunk, float *work) {
  const i64 lo = t * chunk;
  const i64 hi = lo + chunk < n ? lo + chunk : n;
  simd<float, kQB> acc(0.0f);
  i64 e = lo;
  for (; e + kQB <= hi; e += kQB) acc = xe::max<float, kQB>(acc, absmax_keys<kQB>(xe::block_load<float, kQB>(X + e)));
  if (e < hi)  // masked lanes read nothing and are 0, which never wins a max of keys
    acc = xe::max<float, kQB>(acc, absmax_keys<kQB>(load_tile<float, kQB, false>(X + e, hi - e)));
  store_tile<float, 1, false>(work + t, simd<float, 1>(xe::hmax<float>(acc)), 1);
}

// a * b as (hi, lo) 32-bit halves, NQ lanes at once.
template <int NQ>
GNNSPARSE_ESIMD_FN simd<std::uint32_t, NQ> mulhilo(std::uint32_t a, simd<std::uint32_t, NQ> b,
                                                   simd<std::uint32_t, NQ> &hi) {
  const simd<std::uint64_t, NQ> p = xe::convert<std::uint64_t>(b) * std::uint64_t(a);
  hi = xe::convert<std::uint32_t>(p >> 32);
  return xe::convert<std::uint32_t>(p & std::uint64_t(0xFFFFFFFFu));
}

// Philox4x32-10 of the counters (g lo, g hi, 0, 0), g one per lane, keyed by `seed`: the words
// of elements 4 g .. 4 g + 3 of a tensor quantized with `seed` (quant::element_words, lane by lane).
template <int NQ>
GNNSPARSE_ESIMD_FN void philox_lanes(std::uint64_t seed, simd<std::uint64_t, NQ> g, simd<std::uint32_t, NQ> (&c)[4]) {
  c[0] = xe::convert<std::uint32_t>(g & std::uint64_t(0xFFFFFFFFu));
  c[1] = xe::convert<std::uint32_t>(g >> 32);
  c[2] = simd<std::uint32_t, NQ>(0u);
  c[3] = simd<std::uint32_t, NQ>(0u);
  std::uint32_t k0 = std::uint32_t(seed), k1 = std::uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    simd<std::uint32_t, NQ> hi0, hi1;
    const simd<std::uint32_t, NQ> lo0 = mulhilo<NQ>(0xD2511F53u, c[0], hi0);
    const simd<std::uint32_t, NQ> lo1 = mulhilo<NQ>(0xCD9E8D57u, c[2], hi1);
    const simd<std::uint32_t, NQ> n0 = hi1 ^ c[1] ^ k0;
    const simd<std::uint32_t, NQ> n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
  }
}

// Philox4x32-10 for the NQ quads g0 .. g0 + NQ - 1.
template <int NQ>
GNNSPARSE_ESIMD_FN void philox_quads(std::uint64_t seed, std::uint64_t g0, simd<std::uint32_t, NQ> (&c)[4]) {
  const simd<std::uint32_t, NQ> lane(0u, 1u);
  philox_lanes<NQ>(seed, xe::convert<std::uint64_t>(lane) + g0, c);
}

// q of N elements (quant::quantize_value lane by lane; SAT: quant::quantize_value_sat, the rule of
// a producer quantizing with a delayed scale); w is ignored when !STOCH.
template <int N, int QMAX, bool STOCH, bool SAT = false>
GNNSPARSE_ESIMD_FN simd<int, N> quantize_block(simd<float, N> x, float inv, simd<std::uint32_t, N> w) {
  simd<float, N> v = x * inv;
  constexpr float lim = float(QMAX + 1);
  simd<float, N> vz(0.0f);
  if constexpr (SAT) {  // NaN -> 0, else clamped to [-lim, lim]
    vz.merge(v, v == v);
    vz.merge(simd<float, N>(lim), vz > lim);
    vz.merge(simd<float, N>(-lim), vz < -lim);
  } else {  // outside [-lim, lim] (only NaN / inf) -> 0
    vz.merge(v, (v >= -lim) & (v <= lim));
  }
  const simd<float, N> t = xe::convert<float>(xe::convert<int>(vz));  // truncation toward zero
  simd<float, N> fl = t;
  fl.merge(t - 1.0f, t > vz);  // floor
  const simd<float, N> f = vz - fl;
  simd<float, N> q = fl;
  if constexpr (STOCH) {
    const simd<float, N> u = xe::convert<float>(w >> 8) * 5.9604644775390625e-08f;
    q.merge(fl + 1.0f, u < f);
  } else {
    const simd<int, N> fi = xe::convert<int>(fl);
    const simd<int, N> odd = fi & 1;
    q.merge(fl + 1.0f, (f > 0.5f) | ((f == 0.5f) & (odd == 1)));
  }
  q.merge(simd<float, N>(float(QMAX)), q > float(QMAX));
  q.merge(simd<float, N>(-float(QMAX)), q < -float(QMAX));
  return xe::convert<int>(q);
}

// The random words of quads g0 .. g0 + NQ - 1, element 4 g + k taking word k of quad g (0 when
// !STOCH: rounding to nearest reads none).
template <int NQ, bool STOCH>
GNNSPARSE_ESIMD_FN simd<std::uint32_t, 4 * NQ> quad_words(std::uint64_t seed, i64 g0) {
  simd<std::uint32_t, 4 * NQ> w(0u);
  if constexpr (STOCH) {
    simd<std::uint32_t, NQ> c[4];
    philox_quads<NQ>(seed, std::uint64_t(g0), c);
    GNNSPARSE_UNROLL
    for (int k = 0; k < 4; ++k) w.template select<NQ, 4>(k) = c[k];
  }
  return w;
}

// Pairs of values as int4 bytes (quant::pack4 lane by lane: element 2 m in the low nibble of
// byte m, 2 m + 1 in the high one). (q by reference: select needs a non-const object.)
template <int N>
GNNSPARSE_ESIMD_FN simd<std::uint8_t, N / 2> pack4_block(simd<int, N> &q) {
  const simd<int, N / 2> lo = q.template select<N / 2, 2>(0);
  const simd<int, N / 2> hi = q.template select<N / 2, 2>(1);
  return xe::convert<std::uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
}

// The values q of quads g0 .. g0 + cnt - 1 into Q (int8: 4 bytes per quad; int4: 2, packed): one
// block store at a 16-byte aligned address when the NQ quads are whole (full), else masked
// 16-lane scatters. (q is taken by reference: select needs a non-const object.)
template <int BITS, int NQ>
GNNSPARSE_ESIMD_FN void store_quads(std::uint8_t *Q, i64 g0, simd<int, 4 * NQ> &q, i64 cnt, bool full) {
  constexpr int NE = 4 * NQ;
  if constexpr (BITS == 8) {
    const simd<std::uint8_t, NE> b = xe::convert<std::uint8_t>(q & 0xFF);
    if (full) xe::block_store<std::uint8_t, NE>(Q + 4 * g0, b);
    else store_tile<std::uint8_t, NE, false>(Q + 4 * g0, b, 4 * cnt);
  } else {
    const simd<std::uint8_t, NE / 2> b = pack4_block<NE>(q);
    if (full) xe::block_store<std::uint8_t, NE / 2>(Q + 2 * g0, b);
    else store_tile<std::uint8_t, NE / 2, false>(Q + 2 * g0, b, 2 * cnt);
  }
}

template <int BITS, bool STOCH, int NQ>
GNNSPARSE_ESIMD_FN void quantize_thread(i64 t, const float *X, i64 nquads, const float *scale, std::uint64_t seed,
                                        std::uint8_t *Q) {
  static_assert(BITS == 8 || BITS == 4, "quantize: BITS must be 8 or 4");
  static_assert(NQ == 4 || NQ == 8 || NQ == 16, "quantize: NQ quads per thread must be 4, 8 or 16");
  constexpr int QMAX = quant::qmax_of(BITS);
  constexpr int NE = 4 * NQ;
  const float inv = scale[1];
  const i64 g0 = t * NQ;
  if (g0 >= nquads) return;
  const bool full = g0 + NQ <= nquads;
  const i64 cnt = full ? NQ : nquads - g0;  // quads of this thread
  // The last thread's partial block: masked 16-lane gathers and scatters (common.hpp), the
  // same arithmetic on every lane.
  const simd<float, NE> x = full ? xe::block_load<float, NE>(X + 4 * g0) : load_tile<float, NE, false>(X + 4 * g0, 4 * cnt);
  simd<int, NE> q = quantize_block<NE, QMAX, STOCH>(x, inv, quad_words<NQ, STOCH>(seed, g0));
  store_quads<BITS, NQ>(Q, g0, q, cnt, full);
}

// The NE int32 accumulators of flat output elements e0 .. e0 + cnt - 1 of a rows x C output held
// with row stride ld (lanes >= cnt read nothing and are 0).
template <int NE>
GNNSPARSE_ESIMD_FN simd<int, NE> load_acc(const int *acc, i64 e0, i64 cnt, i64 C, i64 ld) {
  if (ld == C) return cnt >= NE ? xe::block_load<int, NE>(acc + e0) : load_tile<int, NE, false>(acc + e0, cnt);
  const i64 r0 = e0 / C;  // offsets from the first row's start: within (NE / C + 2) rows of ld
  const int *base = acc + r0 * ld;
  simd<int, NE> v(0);
  GNNSPARSE_UNROLL
  for (int s = 0; s < NE; s += kSub) {
    if (i64(s) >= cnt) continue;
    simd<std::uint32_t, kSub> off;
    for (int l = 0; l < kSub; ++l) {
      const i64 e = e0 + s + l, r = e / C;
      off[l] = std::uint32_t(((r - r0) * ld + (e - r * C)) * i64(sizeof(int)));
    }
    const simd<std::uint32_t, kSub> lane(std::uint32_t(s), 1u);
    const simd_mask<kSub> m = lane < std::uint32_t(cnt < NE ? cnt : NE);
    simd<int, kSub> part(0);
    part.merge(xe::gather<int, kSub>(base, off, m), m);
    v.template select<kSub, 1>(s) = part;
  }
  return v;
}

template <int BITS, bool STOCH, int NQ>
GNNSPARSE_ESIMD_FN void requantize_thread(i64 t, const int *acc, i64 rows, i64 C, i64 ld, i64 chunk, const float *sa,
                                          const float *sb, const float *scale_in, std::uint64_t seed, std::uint8_t *Q,
                                          float *work) {
  static_assert(BITS == 8 || BITS == 4, "requantize: BITS must be 8 or 4");
  static_assert(NQ == 4 || NQ == 8 || NQ == 16, "requantize: NQ quads per step must be 4, 8 or 16");
  constexpr int QMAX = quant::qmax_of(BITS);
  constexpr int NE = 4 * NQ;
  const float sab = sa[0] * sb[0];
  const float inv = scale_in[1];
  const i64 nquads = rows * C / 4;
  const i64 lo = t * chunk, hi = lo + chunk < nquads ? lo + chunk : nquads;
  simd<float, NE> keys(0.0f);
  for (i64 g0 = lo; g0 < hi; g0 += NQ) {
    const i64 cnt = hi - g0 < NQ ? hi - g0 : NQ;  // quads of this step
    const simd<float, NE> y = xe::convert<float>(load_acc<NE>(acc, 4 * g0, 4 * cnt, C, ld)) * sab;
    const simd<std::uint32_t, NE> lane(0u, 1u);
    const simd_mask<NE> in = lane < std::uint32_t(4 * cnt);
    simd<float, NE> k(0.0f);
    k.merge(absmax_keys<NE>(y), in);
    keys = xe::max<float, NE>(keys, k);
    simd<int, NE> q = quantize_block<NE, QMAX, STOCH, true>(y, inv, quad_words<NQ, STOCH>(seed, g0));
    store_quads<BITS, NQ>(Q, g0, q, cnt, cnt == NQ);
  }
  store_tile<float, 1, false>(work + t, simd<float, 1>(xe::hmax<float>(keys)), 1);
}

}  // namespace gnnsparse::esimd

#ifndef GNNSPARSE_ESIMD_HOST_SHIM
namespace gnnsparse::esimd {
// nd_range: global >= the number of threads (extra ones return), local any.
template <int DUMMY>
SYCL_EXTERNAL SYCL_ESIMD_KERNEL
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void quant_absmax(const float *X, std::int64_t n, std::int64_t chunk, std::int64_t nthreads, float *work) {
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  const i64 t = i64(it.get_global_id(0));
  if (t < nthreads) absmax_thread(t, X, n, chunk, work);
}

template <int BITS, bool STOCH, int NQ>
SYCL_EXTERNAL SYCL_ESIMD_KERNEL
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void quantize(const float *X, std::int64_t nquads, const float *scale, std::uint64_t seed, std::uint8_t *Q) {
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  quantize_thread<BITS, STOCH, NQ>(i64(it.get_global_id(0)), X, nquads, scale, seed, Q);
}

// nd_range: global >= nthreads (extra ones return), local any; Q 16-byte aligned (block stores at
// multiples of 2 NQ bytes); chunk a multiple of NQ quads except where it covers the end.
template <int BITS, bool STOCH, int NQ>
SYCL_EXTERNAL SYCL_ESIMD_KERNEL
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void requantize(const int *acc, std::int64_t rows, std::int64_t C, std::int64_t ld, std::int64_t chunk,
                std::int64_t nthreads, const float *sa, const float *sb, const float *scale_in, std::uint64_t seed,
                std::uint8_t *Q, float *work) {
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  const i64 t = i64(it.get_global_id(0));
  if (t < nthreads) requantize_thread<BITS, STOCH, NQ>(t, acc, rows, C, ld, chunk, sa, sb, scale_in, seed, Q, work);
}
}  // namespace gnnsparse::esimd
#endif
