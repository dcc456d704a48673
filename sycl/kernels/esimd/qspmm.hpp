// ESIMD quantized SpMM (sum / mean) for Intel GPUs with aspect::ext_intel_esimd, with the same
// contract and bits as the portable qspmm_sg (sycl/kernels/quant_spmm.hpp; gnnsparse/quant.hpp):
//   Y[i, c] = s_X * sum_{k in row i} m_k(c)     (mean: / the row's entries; empty rows 0)
// m_k(c) = q(X)[col k, c] (an exact int32 sum: the launcher takes this kernel only while the
// longest row times qmax fits) or, weighted, fl32(w * q) summed in float32 in edge order, w =
// A's value of edge k or W[k, c / D] (per-head weights). ident: X has one row per edge (k).
// With a quantized output (Q) the row's values are quantized with the delayed scale qscale_in
// where they are produced (quant::quantize_value_sat, the element's Philox word keyed by its flat
// index i C + c: bit for bit the portable epilogue) and each work-group leaves one partial absmax
// key (|y|, +inf for NaN / +-inf) of what it wrote in work[group] (folded by quant_scale).
//
// One thread per (row, tile of kQN = 32 columns): the row's indices (and A's values) in chunks of
// 16 (one block load each), per edge one load of the tile's 32 int8 bytes (16 packed int4 bytes:
// a block load where rows are 4-byte aligned and the tile is whole, else masked 16-lane byte
// gathers), the integers unpacked in registers, one store of the tile (float32 block store, or the
// quantized bytes by masked scatters: output rows of C bytes are not 4-byte aligned in general).
// The partial absmax: each thread's key max into SLM (16 bytes per thread), a barrier, thread 0
// folds the group's and stores work[group]. Threads past M * tiles do nothing but take part.
// Same three readers as the other ESIMD kernels (common.hpp): the kernel_compiler, icpx ahead of
// time, and g++ against the host shim in the tests.
#pragma once
#if __has_include("esimd/common.hpp")
#include "esimd/quantize.hpp"
#else
#include "quantize.hpp"
#endif

namespace gnnsparse::esimd {

inline constexpr int kQN = 32;        // output columns per thread
inline constexpr int kQChunk = 16;    // edges per index chunk
inline constexpr int kQSpmmLocal = 16;  // threads per work-group (sycl/quant_policy.hpp kEsimdQSpmmLocal)

// The kQN integers of one tile of row `p` (already offset to the tile's first byte); bytes past
// `vbytes` read nothing and are 0. ALIGNED: one block load (p 4-byte aligned, the tile whole).
template <int BITS, bool ALIGNED>
GNNSPARSE_ESIMD_FN simd<int, kQN> qload_tile(const std::uint8_t *p, i64 vbytes) {
  constexpr int NB = BITS == 8 ? kQN : kQN / 2;
  const simd<std::uint8_t, NB> raw = load_tile<std::uint8_t, NB, ALIGNED>(p, vbytes);
  const simd<int, NB> u = xe::convert<int>(raw);
  if constexpr (BITS == 8) {
    return u - (u & 0x80) * 2;  // two's complement byte
  } else {
    simd<int, kQN> q;
    const simd<int, NB> hi = (u >> 4) & 0xF;
    q.template select<NB, 2>(0) = (u & 0xF) - (u & 0x8) * 2;  // even columns: the low nibble
    q.template select<NB, 2>(1) = hi - (hi & 0x8) * 2;
    return q;
  }
}

// The weight of edge k for each lane (per-head weights W, nnz x H: lane c's head is c / D; heads
// of lanes at or past C are 0 and their weight is 0).
GNNSPARSE_ESIMD_FN simd<float, kQN> head_weights(const float *w, i64 k, i64 H, simd<std::uint32_t, kQN> woff,
                                                 i64 valid) {
  simd<float, kQN> wv(0.0f);
  const float *wk = w + k * H;
  GNNSPARSE_UNROLL
  for (int s = 0; s < kQN; s += kSub) {
    if (i64(s) >= valid) continue;
    const simd<std::uint32_t, kSub> lane(std::uint32_t(s), 1u);
    const simd_mask<kSub> m = lane < std::uint32_t(valid < kQN ? valid : kQN);
    simd<float, kSub> part(0.0f);
    part.merge(xe::gather<float, kSub>(wk, simd<std::uint32_t, kSub>(woff.template select<kSub, 1>(s)), m), m);
    wv.template select<kSub, 1>(s) = part;
  }
  return wv;
}

// One thread's (row, tile): the row's values y for lanes c0 .. c0 + kQN - 1 (lanes past C are 0).
template <typename I, int BITS, bool W, bool ALIGNED>
GNNSPARSE_ESIMD_FN simd<float, kQN> qspmm_tile(const I *col, const float *w, const std::uint8_t *X, float s,
                                               i64 b, i64 e, i64 c0, i64 C, i64 row_bytes, i64 H, i64 D, bool ident,
                                               bool mean) {
  const i64 valid = C - c0;
  const i64 vbytes = BITS == 8 ? valid : (valid + 1) / 2;
  const std::uint8_t *Xc = X + (BITS == 8 ? c0 : c0 / 2);
  simd<int, kQN> acc_i(0);
  simd<float, kQN> acc_f(0.0f);
  simd<std::uint32_t, kQN> woff(0u);  // per-head weights: byte offset of lane c's head
  if constexpr (W) {
    if (H > 1) {
      const simd<std::uint32_t, kQN> lane(0u, 1u);
      const simd<std::uint32_t, kQN> c = lane + std::uint32_t(c0);
      simd<std::uint32_t, kQN> head(0u);
      for (int l = 0; l < kQN; ++l)
        if (i64(l) < valid) head[l] = std::uint32_t(i64(c[l]) / D);
      woff = head * std::uint32_t(sizeof(float));
    }
  }
  for (i64 k0 = b; k0 < e; k0 += kQChunk) {
    const int cnt = e - k0 < kQChunk ? int(e - k0) : kQChunk;
    simd<I, kQChunk> ja(I(0));
    if (!ident) ja = cnt == kQChunk ? load_chunk<I, kQChunk, true>(col + k0, cnt, I(0))
                                    : load_chunk<I, kQChunk, false>(col + k0, cnt, I(0));
    simd<float, kQChunk> wk(0.0f);
    if constexpr (W)
      if (H == 1) wk = cnt == kQChunk ? load_chunk<float, kQChunk, true>(w + k0, cnt, 0.0f)
                                      : load_chunk<float, kQChunk, false>(w + k0, cnt, 0.0f);
    for (int l = 0; l < cnt; ++l) {
      const i64 k = k0 + l;
      const i64 j = ident ? k : i64(ja[l]);
      const simd<int, kQN> q = qload_tile<BITS, ALIGNED>(Xc + j * row_bytes, vbytes);
      if constexpr (W) {
        const simd<float, kQN> wv = H == 1 ? simd<float, kQN>(float(wk[l])) : head_weights(w, k, H, woff, valid);
        const simd<float, kQN> m = wv * xe::convert<float>(q);  // the message, rounded; then added
        acc_f += m;
      } else {
        acc_i += q;
      }
    }
  }
  simd<float, kQN> y(0.0f);
  if (e > b) {
    if constexpr (W)
      y = acc_f * s;
    else
      y = xe::convert<float>(acc_i) * s;
    if (mean) y = y / float(e - b);
  }
  return y;
}

// The quantized tile of row i (columns c0 .. c0 + valid - 1) stored into Q with the delayed
// scale; returns the largest absmax key of the stored values.
template <int OBITS, bool STOCH>
GNNSPARSE_ESIMD_FN float qstore_tile(simd<float, kQN> y, i64 i, i64 c0, i64 C, const float *qscale_in,
                                     std::uint64_t seed, std::uint8_t *Q) {
  constexpr int QMAX = quant::qmax_of(OBITS);
  const i64 valid = C - c0;
  const simd<std::uint32_t, kQN> lane(0u, 1u);
  const simd_mask<kQN> in = lane < std::uint32_t(valid < kQN ? valid : kQN);
  simd<std::uint32_t, kQN> words(0u);
  if constexpr (STOCH) {  // element e = i C + c takes word e % 4 of quad e / 4
    const simd<std::uint64_t, kQN> el = xe::convert<std::uint64_t>(lane) + std::uint64_t(i * C + c0);
    simd<std::uint32_t, kQN> c[4];
    philox_lanes<kQN>(seed, el >> 2, c);
    const simd<std::uint32_t, kQN> which = xe::convert<std::uint32_t>(el & std::uint64_t(3));
    words = c[0];
    words.merge(c[1], which == 1u);
    words.merge(c[2], which == 2u);
    words.merge(c[3], which == 3u);
  }
  simd<int, kQN> q(0);
  q.merge(quantize_block<kQN, QMAX, STOCH, true>(y, qscale_in[1], words), in);
  simd<float, kQN> keys(0.0f);
  keys.merge(absmax_keys<kQN>(y), in);
  if constexpr (OBITS == 8) {
    store_tile<std::uint8_t, kQN, false>(Q + i * C + c0, xe::convert<std::uint8_t>(q & 0xFF), valid);
  } else {
    store_tile<std::uint8_t, kQN / 2, false>(Q + i * ((C + 1) / 2) + c0 / 2, pack4_block<kQN>(q), (valid + 1) / 2);
  }
  return xe::hmax<float>(keys);
}

// Thread gid of the launch: its tile's float32 values into Y, or (Q) quantized into Q; returns
// the largest absmax key it wrote (0 without Q or past the last tile).
template <typename I, int BITS, bool W>
GNNSPARSE_ESIMD_FN float qspmm_thread(i64 gid, const I *rowptr, const I *col, const float *w, const std::uint8_t *X,
                                      const float *scale, float *Y, i64 M, i64 C, i64 row_bytes, i64 H, i64 D,
                                      int ident, int mean, std::uint8_t *Q, const float *qscale_in, int obits,
                                      int ostoch, std::uint64_t oseed) {
  static_assert(BITS == 8 || BITS == 4, "qspmm: BITS must be 8 or 4");
  static_assert(std::is_integral_v<I> && std::is_signed_v<I>, "index type: int32 or int64");
  const i64 ntiles = (C + kQN - 1) / kQN;
  const i64 i = gid / ntiles, c0 = (gid % ntiles) * kQN;
  if (i >= M) return 0.0f;
  const i64 b = i64(rowptr[i]), e = i64(rowptr[i + 1]);
  const i64 valid = C - c0;
  constexpr int NB = BITS == 8 ? kQN : kQN / 2;
  const bool aligned = row_bytes % 4 == 0 && reinterpret_cast<std::uintptr_t>(X) % 4 == 0 &&
                       (BITS == 8 ? valid : (valid + 1) / 2) >= NB;
  const simd<float, kQN> y =
      aligned ? qspmm_tile<I, BITS, W, true>(col, w, X, scale[0], b, e, c0, C, row_bytes, H, D, ident != 0, mean != 0)
              : qspmm_tile<I, BITS, W, false>(col, w, X, scale[0], b, e, c0, C, row_bytes, H, D, ident != 0, mean != 0);
  if (Q == nullptr) {
    if (valid >= kQN) store_tile<float, kQN, true>(Y + i * C + c0, y, valid);
    else store_tile<float, kQN, false>(Y + i * C + c0, y, valid);
    return 0.0f;
  }
  if (obits == 8)
    return ostoch ? qstore_tile<8, true>(y, i, c0, C, qscale_in, oseed, Q) : qstore_tile<8, false>(y, i, c0, C, qscale_in, oseed, Q);
  return ostoch ? qstore_tile<4, true>(y, i, c0, C, qscale_in, oseed, Q) : qstore_tile<4, false>(y, i, c0, C, qscale_in, oseed, Q);
}

// The work-group's partial absmax: thread `tid` (of kQSpmmLocal) puts its key in SLM (16 bytes
// each: aligned block stores), a barrier, thread 0 folds the group's keys into work[group] (keys
// are >= 0 or +inf: their max in any order is exact).
GNNSPARSE_ESIMD_FN void qspmm_group_absmax(int tid, i64 group, float key, float *work) {
  xe::slm_block_store<float, 4>(std::uint32_t(tid * 16), simd<float, 4>(key));
  xe::barrier();
  if (tid == 0) {
    const simd<float, 4 * kQSpmmLocal> all = xe::slm_block_load<float, 4 * kQSpmmLocal>(0);
    store_tile<float, 1, false>(work + group, simd<float, 1>(xe::hmax<float>(all)), 1);
  }
}

}  // namespace gnnsparse::esimd

#ifndef GNNSPARSE_ESIMD_HOST_SHIM
namespace gnnsparse::esimd {
// nd_range: local = kQSpmmLocal, global >= M * ceil(C / kQN) (a multiple of local). w: A's values
// (H = 1) or W (nnz x H), unused when !W. Q == nullptr: float32 output Y; else Q, qscale_in and
// work (global / local floats) with the quantized output's obits / ostoch / oseed. mean: 0 sum, 1 mean.
template <typename I, int BITS, bool W>
SYCL_EXTERNAL SYCL_ESIMD_KERNEL
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void qspmm(const I *rowptr, const I *col, const float *w, const std::uint8_t *X, const float *scale, float *Y,
           std::int64_t M, std::int64_t C, std::int64_t row_bytes, std::int64_t H, std::int64_t D, int ident, int mean,
           std::uint8_t *Q, const float *qscale_in, float *work, int obits, int ostoch, std::uint64_t oseed) {
  xe::slm_init<4 * sizeof(float) * kQSpmmLocal>();
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  const float key = qspmm_thread<I, BITS, W>(i64(it.get_global_id(0)), rowptr, col, w, X, scale, Y, M, C, row_bytes,
                                             H, D, ident, mean, Q, qscale_in, obits, ostoch, oseed);
  if (Q != nullptr) qspmm_group_absmax(int(it.get_local_id(0)), i64(it.get_group(0)), key, work);
}
}  // namespace gnnsparse::esimd
#endif
