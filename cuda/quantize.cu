// Quantize / dequantize (contract: gnnsparse/quant.hpp; element arithmetic:
// sycl/kernels/quant_math.hpp, computed here bit for bit with CUDA intrinsics).
//
// Three launches, no host round trip, no atomics:
//   1. absmax_partial_kernel: P <= kQuantizeWork blocks; block b reduces a contiguous chunk of X
//      (16-byte loads) to one partial absmax in work[b];
//   2. absmax_scale_kernel: one block folds the P partials and writes scale = {s, inv};
//   3. quantize_quads_kernel: the same P chunks, each walked from its end back to its start, so
//      the first reads hit what pass 1 left in L2; one thread handles 4 consecutive elements
//      (one 16-byte load, one Philox4x32-10 call -- its 4 words are exactly those 4 elements'
//      words -- one 4-byte int8 or 2-byte int4 store).
//      Shapes the quad path cannot take (X not 16-byte aligned, n % 4 != 0, odd C for int4) run
//      quantize_bytes_kernel: one thread per output byte, one Philox call per element.
// absmax is combined with a commutative, associative operation (NaN and inf win), so the scale
// does not depend on the partition, and each q depends only on (x, inv, seed, element index).
#include "quant_common.cuh"
#include "policy.cuh"
#include "gnnsparse/cuda_quant.hpp"

namespace gnnsparse::cuda_detail {

static_assert(QuantizeTuning::kScaleThreads >= kQuantizeWork, "one partial per scale thread");

// Block b: elements [b * chunk, min(n, (b + 1) * chunk)); chunk is a multiple of 4 when vec.
__global__ void __launch_bounds__(QuantizeTuning::kThreads)
absmax_partial_kernel(const float* __restrict__ X, int64_t n, int64_t chunk, bool vec,
                      float* __restrict__ work) {
  __shared__ float smem[32];
  const int64_t lo = int64_t(blockIdx.x) * chunk, hi = min(n, lo + chunk);
  float acc = 0.0f;
  if (vec) {
    const float4* x4 = reinterpret_cast<const float4*>(X);
    for (int64_t q = lo / 4 + threadIdx.x; q < hi / 4; q += blockDim.x) {
      const float4 v = __ldg(x4 + q);
      acc = quant::absmax_combine(acc, v.x);
      acc = quant::absmax_combine(acc, v.y);
      acc = quant::absmax_combine(acc, v.z);
      acc = quant::absmax_combine(acc, v.w);
    }
  } else {
    for (int64_t e = lo + threadIdx.x; e < hi; e += blockDim.x) acc = quant::absmax_combine(acc, __ldg(X + e));
  }
  acc = block_absmax(acc, smem);
  if (threadIdx.x == 0) work[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(QuantizeTuning::kScaleThreads)
absmax_scale_kernel(const float* __restrict__ work, int P, int qmax, float* __restrict__ scale) {
  __shared__ float smem[32];
  float acc = threadIdx.x < P ? work[threadIdx.x] : 0.0f;
  acc = block_absmax(acc, smem);
  if (threadIdx.x == 0) {
    float s, inv;
    quant::scales_from_absmax(acc, qmax, s, inv);
    scale[0] = s;
    scale[1] = inv;
  }
}

// quant::quantize_value with conversion instructions: floor by __float2int_rd, rint by
// __float2int_rn (exact for |v| <= qmax + 1), the fraction v - floor(v) exact; same result.
template <int QMAX, bool STOCH>
__device__ __forceinline__ int quantize_fast(float x, float inv, std::uint32_t w) {
  float v = __fmul_rn(x, inv);
  constexpr float lim = float(QMAX + 1);
  v = (v >= -lim && v <= lim) ? v : 0.0f;
  int q;
  if constexpr (STOCH) {
    const int fl = __float2int_rd(v);
    const float f = v - __int2float_rn(fl);
    q = quant::uniform24(w) < f ? fl + 1 : fl;
  } else {
    q = __float2int_rn(v);
  }
  return q > QMAX ? QMAX : (q < -QMAX ? -QMAX : q);
}

// One thread per quad (4 consecutive elements = Philox call g = quad index). Block b owns quads
// [b * chunkq, min(nquads, (b + 1) * chunkq)), walked from the end (L2 reuse after pass 1).
template <int BITS, bool STOCH>
__global__ void __launch_bounds__(QuantizeTuning::kThreads)
quantize_quads_kernel(const float* __restrict__ X, int64_t nquads, int64_t chunkq,
                      const float* __restrict__ scale, std::uint64_t seed, std::uint8_t* __restrict__ Q) {
  constexpr int QMAX = quant::qmax_of(BITS);
  const float inv = __ldg(scale + 1);
  const int64_t lo = int64_t(blockIdx.x) * chunkq, hi = min(nquads, lo + chunkq);
  const float4* x4 = reinterpret_cast<const float4*>(X);
  for (int64_t g = hi - 1 - threadIdx.x; g >= lo; g -= blockDim.x) {
    const float4 v = __ldcs(x4 + g);  // read once more: streaming
    quant::Words4 w{{0u, 0u, 0u, 0u}};
    if constexpr (STOCH) w = quant::element_words(seed, std::uint64_t(g));
    const int q0 = quantize_fast<QMAX, STOCH>(v.x, inv, w.w[0]);
    const int q1 = quantize_fast<QMAX, STOCH>(v.y, inv, w.w[1]);
    const int q2 = quantize_fast<QMAX, STOCH>(v.z, inv, w.w[2]);
    const int q3 = quantize_fast<QMAX, STOCH>(v.w, inv, w.w[3]);
    if constexpr (BITS == 8) {
      const std::uint32_t p = (std::uint32_t(q0) & 0xFFu) | ((std::uint32_t(q1) & 0xFFu) << 8) |
                              ((std::uint32_t(q2) & 0xFFu) << 16) | ((std::uint32_t(q3) & 0xFFu) << 24);
      reinterpret_cast<std::uint32_t*>(Q)[g] = p;
    } else {
      const unsigned short p = static_cast<unsigned short>(quant::pack4(q0, q1) | (quant::pack4(q2, q3) << 8));
      reinterpret_cast<unsigned short*>(Q)[g] = p;
    }
  }
}

template <int BITS, bool STOCH>
__device__ __forceinline__ int quantize_element(const float* __restrict__ X, int64_t e, float inv,
                                                std::uint64_t seed) {
  std::uint32_t w = 0;
  if constexpr (STOCH) w = quant::element_words(seed, std::uint64_t(e) >> 2).w[e & 3];
  return quantize_fast<quant::qmax_of(BITS), STOCH>(__ldg(X + e), inv, w);
}

// One thread per output byte (grid-stride): any shape and alignment.
template <int BITS, bool STOCH>
__global__ void __launch_bounds__(QuantizeTuning::kThreads)
quantize_bytes_kernel(const float* __restrict__ X, int64_t rows, int64_t C, int64_t row_bytes,
                      const float* __restrict__ scale, std::uint64_t seed, std::uint8_t* __restrict__ Q) {
  const float inv = __ldg(scale + 1);
  const int64_t total = rows * row_bytes;
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < total; b += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = b / row_bytes, cb = b - r * row_bytes;
    if constexpr (BITS == 8) {
      Q[b] = static_cast<std::uint8_t>(quantize_element<8, STOCH>(X, r * C + cb, inv, seed));
    } else {
      const int64_t c0 = 2 * cb;
      const int q0 = quantize_element<4, STOCH>(X, r * C + c0, inv, seed);
      const int q1 = c0 + 1 < C ? quantize_element<4, STOCH>(X, r * C + c0 + 1, inv, seed) : 0;
      Q[b] = quant::pack4(q0, q1);
    }
  }
}

template <int BITS>
__global__ void __launch_bounds__(QuantizeTuning::kThreads)
dequantize_kernel(const std::uint8_t* __restrict__ Q, const float* __restrict__ scale, int64_t rows,
                  int64_t C, int64_t row_bytes, float* __restrict__ Y) {
  const float s = __ldg(scale);
  const int64_t n = rows * C;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    int q;
    if constexpr (BITS == 8) {
      q = int(std::int8_t(__ldg(Q + e)));
    } else {
      const int64_t r = e / C, c = e - r * C;
      const unsigned b = __ldg(Q + r * row_bytes + (c >> 1));
      q = (c & 1) ? quant::nibble_hi(b) : quant::nibble_lo(b);
    }
    Y[e] = s * float(q);
  }
}

// ---- delayed-scale outputs (gnnsparse/quant.hpp, DELAYED SCALING) ---------------------------------
// One block folds the P partial maxima of a producer and writes the QTensor's scale, the next
// step's scale and the statistics (quant::delayed_scales).
__global__ void __launch_bounds__(QuantizeTuning::kScaleThreads)
delayed_finish_kernel(const float* __restrict__ work, int64_t P, int qmax, const float* __restrict__ scale_in,
                      float decay, float* __restrict__ scale, float* __restrict__ stats) {
  __shared__ float smem[32];
  constexpr int U = 8;  // loads in flight per thread (P is one partial per SpMM block: 10^5 and more)
  float acc = 0.0f;
  for (int64_t i0 = threadIdx.x; i0 < P; i0 += int64_t(U) * blockDim.x) {
    float v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = i0 + int64_t(u) * blockDim.x;
      v[u] = i < P ? __ldg(work + i) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc = quant::absmax_combine(acc, v[u]);
  }
  acc = block_absmax(acc, smem);
  if (threadIdx.x == 0) {
    float cur[2], next[2], growth;
    quant::delayed_scales(acc, qmax, scale_in[0], scale_in[1], decay, cur, next, growth);
    scale[0] = cur[0];
    scale[1] = cur[1];
    scale[2] = next[0];
    scale[3] = next[1];
    if (stats != nullptr) {
      if (growth > stats[0]) stats[0] = growth;  // NaN never wins
      if (growth > 1.0f) stats[1] += 1.0f;
    }
  }
}

// y of element (r, c) of a requantization: the int8 GEMM's scale pass, bit for bit.
__device__ __forceinline__ float requant_value(int acc, float sab) { return __fmul_rn(__int2float_rn(acc), sab); }

// Requantize, quads (C % 4 == 0, ld % 4 == 0, acc 16-byte aligned, Q aligned to a quad's bytes):
// block b owns quads [b * chunkq, ...), one thread a quad (one 16-byte load, one Philox call).
template <int BITS>
__global__ void __launch_bounds__(QuantizeTuning::kThreads)
requant_quads_kernel(const int* __restrict__ acc, int64_t C, int64_t ld, int64_t nquads, int64_t chunkq,
                     const float* __restrict__ sa, const float* __restrict__ sb, QOutParams o,
                     float* __restrict__ work) {
  constexpr int QMAX = quant::qmax_of(BITS);
  __shared__ float smem[32];
  const float sab = __fmul_rn(__ldg(sa), __ldg(sb));
  const float inv = __ldg(o.scale_in + 1);
  const int64_t lo = int64_t(blockIdx.x) * chunkq, hi = min(nquads, lo + chunkq);
  float m = 0.0f;
  for (int64_t g = lo + threadIdx.x; g < hi; g += blockDim.x) {
    const int64_t e = 4 * g, r = e / C, c = e - r * C;
    const int4 a = __ldcs(reinterpret_cast<const int4*>(acc + r * ld + c));
    const float y[4] = {requant_value(a.x, sab), requant_value(a.y, sab), requant_value(a.z, sab),
                        requant_value(a.w, sab)};
    quant::Words4 w{{0u, 0u, 0u, 0u}};
    if (o.stoch) w = quant::element_words(o.seed, std::uint64_t(g));
    int q[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      m = quant::absmax_combine(m, y[u]);
      q[u] = quantize_sat_fast(y[u], inv, QMAX, o.stoch, w.w[u]);
    }
    if constexpr (BITS == 8) {
      reinterpret_cast<std::uint32_t*>(o.Q)[g] =
          (std::uint32_t(q[0]) & 0xFFu) | ((std::uint32_t(q[1]) & 0xFFu) << 8) |
          ((std::uint32_t(q[2]) & 0xFFu) << 16) | ((std::uint32_t(q[3]) & 0xFFu) << 24);
    } else {
      reinterpret_cast<unsigned short*>(o.Q)[g] =
          static_cast<unsigned short>(quant::pack4(q[0], q[1]) | (quant::pack4(q[2], q[3]) << 8));
    }
  }
  m = block_absmax(m, smem);
  if (threadIdx.x == 0) work[blockIdx.x] = m;
}

// Requantize, any shape: block b owns output bytes [b * chunk, ...), one thread a byte.
template <int BITS>
__global__ void __launch_bounds__(QuantizeTuning::kThreads)
requant_bytes_kernel(const int* __restrict__ acc, int64_t rows, int64_t C, int64_t ld, int64_t chunk,
                     const float* __restrict__ sa, const float* __restrict__ sb, QOutParams o,
                     float* __restrict__ work) {
  constexpr int QMAX = quant::qmax_of(BITS);
  __shared__ float smem[32];
  const float sab = __fmul_rn(__ldg(sa), __ldg(sb));
  const float inv = __ldg(o.scale_in + 1);
  const int64_t total = rows * o.row_bytes;
  const int64_t lo = int64_t(blockIdx.x) * chunk, hi = min(total, lo + chunk);
  float m = 0.0f;
  for (int64_t b = lo + threadIdx.x; b < hi; b += blockDim.x) {
    const int64_t r = b / o.row_bytes, cb = b - r * o.row_bytes;
    const int n = BITS == 8 ? 1 : (2 * cb + 1 < C ? 2 : 1);
    const int64_t c0 = BITS == 8 ? cb : 2 * cb;
    int q[2] = {0, 0};
    for (int u = 0; u < n; ++u) {
      const float y = requant_value(__ldg(acc + r * ld + c0 + u), sab);
      const int64_t e = r * C + c0 + u;
      const std::uint32_t w = o.stoch ? quant::element_words(o.seed, std::uint64_t(e) >> 2).w[e & 3] : 0u;
      m = quant::absmax_combine(m, y);
      q[u] = quantize_sat_fast(y, inv, QMAX, o.stoch, w);
    }
    o.Q[b] = BITS == 8 ? std::uint8_t(q[0]) : quant::pack4(q[0], q[1]);
  }
  m = block_absmax(m, smem);
  if (threadIdx.x == 0) work[blockIdx.x] = m;
}

void launch_delayed_finish(const QOut& o, int64_t P, cudaStream_t stream) {
  delayed_finish_kernel<<<1, QuantizeTuning::kScaleThreads, 0, stream>>>(o.work, P, quant::qmax_of(o.bits),
                                                                          o.scale_in, o.decay, o.scale, o.stats);
  GS_LAUNCH_CHECK("delayed_finish_kernel");
}

void check_qout(const char* op, const QOut& o, int64_t need_work) {
  const std::string where = std::string("gnnsparse cuda ") + op + " (quantized output): ";
  if (o.bits != 4 && o.bits != 8) throw std::invalid_argument(where + "bits must be 4 or 8, got " + std::to_string(o.bits));
  if (o.rounding != Rounding::nearest && o.rounding != Rounding::stochastic)
    throw std::invalid_argument(where + "unknown rounding code " + std::to_string(int(o.rounding)));
  if (o.scale_in == nullptr || o.scale == nullptr || (need_work > 0 && o.work == nullptr))
    throw std::invalid_argument(where + "null pointer");
  if (!(o.decay >= 0.0f && o.decay < 1.0f)) throw std::invalid_argument(where + "decay must be in [0, 1)");
  if (o.work_size < need_work)
    throw std::invalid_argument(where + "work holds " + std::to_string(o.work_size) + " floats, the launch needs " +
                                std::to_string(need_work));
}

inline unsigned grid_stride_blocks(int64_t work) {
  const int64_t b = (work + QuantizeTuning::kThreads - 1) / QuantizeTuning::kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(b, int64_t(1) << 16)));
}

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

void quantize(const QuantizeArgs& a, cudaStream_t stream) {
  using namespace cuda_detail;
  if (a.bits != 4 && a.bits != 8)
    throw std::invalid_argument("gnnsparse cuda quantize: bits must be 4 or 8, got " + std::to_string(a.bits));
  if (a.rounding != Rounding::nearest && a.rounding != Rounding::stochastic)
    throw std::invalid_argument("gnnsparse cuda quantize: unknown rounding code " + std::to_string(int(a.rounding)));
  if (a.rows < 0 || a.C < 0) throw std::invalid_argument("gnnsparse cuda quantize: negative size");
  const int64_t n = a.rows * a.C;
  if (a.scale == nullptr || a.work == nullptr || (n > 0 && (a.X == nullptr || a.Q == nullptr)))
    throw std::invalid_argument("gnnsparse cuda quantize: null pointer");
  constexpr int T = QuantizeTuning::kThreads;
  const bool vec = aligned16(a.X) && n % 4 == 0;
  // Partition: P blocks of `chunk` elements (a multiple of 4), P <= kQuantizeWork.
  const int64_t nquads = (n + 3) / 4;
  int64_t P = std::min<int64_t>(kQuantizeWork, (nquads + T * QuantizeTuning::kMinQuadsPerThread - 1) /
                                                   (T * QuantizeTuning::kMinQuadsPerThread));
  P = std::max<int64_t>(P, n > 0 ? 1 : 0);
  const int64_t chunkq = P > 0 ? (nquads + P - 1) / P : 0;
  if (P > 0) {
    absmax_partial_kernel<<<static_cast<unsigned>(P), T, 0, stream>>>(a.X, n, chunkq * 4, vec, a.work);
    GS_LAUNCH_CHECK("absmax_partial_kernel");
  }
  absmax_scale_kernel<<<1, QuantizeTuning::kScaleThreads, 0, stream>>>(a.work, int(P), quant::qmax_of(a.bits),
                                                                        a.scale);
  GS_LAUNCH_CHECK("absmax_scale_kernel");
  if (n == 0) return;
  auto* Q = static_cast<std::uint8_t*>(a.Q);
  const bool quads = vec && (a.bits == 8 || a.C % 2 == 0) &&
                     reinterpret_cast<std::uintptr_t>(Q) % 4 == 0;
  const bool stoch = a.rounding == Rounding::stochastic;
  dispatch_bits(a.bits, [&](auto bt) {
    constexpr int B = decltype(bt)::value;
    auto go = [&](auto st) {
      constexpr bool S = decltype(st)::value;
      if (quads) {
        quantize_quads_kernel<B, S><<<static_cast<unsigned>(P), T, 0, stream>>>(a.X, n / 4, chunkq, a.scale,
                                                                               a.seed, Q);
        GS_LAUNCH_CHECK("quantize_quads_kernel");
      } else {
        const int64_t row_bytes = B == 8 ? a.C : (a.C + 1) / 2;
        quantize_bytes_kernel<B, S><<<grid_stride_blocks(a.rows * row_bytes), T, 0, stream>>>(
            a.X, a.rows, a.C, row_bytes, a.scale, a.seed, Q);
        GS_LAUNCH_CHECK("quantize_bytes_kernel");
      }
    };
    if (stoch) go(ValueTag<true>{}); else go(ValueTag<false>{});
  });
}

void dequantize(const DequantizeArgs& a, cudaStream_t stream) {
  using namespace cuda_detail;
  check_qview("dequantize", "X", a.X, false);
  if (a.rows < 0) throw std::invalid_argument("gnnsparse cuda dequantize: negative size");
  const int64_t n = a.rows * a.X.C;
  if (n == 0) return;
  if (a.X.data == nullptr || a.X.scale == nullptr || a.Y == nullptr)
    throw std::invalid_argument("gnnsparse cuda dequantize: null pointer");
  dispatch_bits(a.X.bits, [&](auto bt) {
    constexpr int B = decltype(bt)::value;
    dequantize_kernel<B><<<grid_stride_blocks(n), QuantizeTuning::kThreads, 0, stream>>>(
        static_cast<const std::uint8_t*>(a.X.data), a.X.scale, a.rows, a.X.C, a.X.row_bytes(), a.Y);
    GS_LAUNCH_CHECK("dequantize_kernel");
  });
}

void requantize(const RequantizeArgs& a, cudaStream_t stream) {
  using namespace cuda_detail;
  if (a.rows < 0 || a.C < 0 || a.ld < a.C) throw std::invalid_argument("gnnsparse cuda requantize: bad sizes");
  check_qout("requantize", a.out, kQuantizeWork);
  const int64_t n = a.rows * a.C;
  if (n > 0 && a.out.Q == nullptr) throw std::invalid_argument("gnnsparse cuda requantize: null pointer for Q");
  if (n > 0 && (a.acc == nullptr || a.sa == nullptr || a.sb == nullptr))
    throw std::invalid_argument("gnnsparse cuda requantize: null pointer");
  constexpr int T = QuantizeTuning::kThreads;
  const QOutParams o = qout_params(a.out, a.C);
  const bool quads = a.C % 4 == 0 && a.ld % 4 == 0 && aligned16(a.acc) &&
                     reinterpret_cast<std::uintptr_t>(a.out.Q) % (a.out.bits == 8 ? 4 : 2) == 0;
  const int64_t units = quads ? n / 4 : a.rows * o.row_bytes;
  int64_t P = std::min<int64_t>(kQuantizeWork, (units + T * QuantizeTuning::kMinQuadsPerThread - 1) /
                                                   (T * QuantizeTuning::kMinQuadsPerThread));
  P = std::max<int64_t>(P, units > 0 ? 1 : 0);
  const int64_t chunk = P > 0 ? (units + P - 1) / P : 0;
  if (P > 0) {
    dispatch_bits(a.out.bits, [&](auto bt) {
      constexpr int B = decltype(bt)::value;
      if (quads) {
        requant_quads_kernel<B><<<static_cast<unsigned>(P), T, 0, stream>>>(a.acc, a.C, a.ld, units, chunk, a.sa,
                                                                           a.sb, o, a.out.work);
        GS_LAUNCH_CHECK("requant_quads_kernel");
      } else {
        requant_bytes_kernel<B><<<static_cast<unsigned>(P), T, 0, stream>>>(a.acc, a.rows, a.C, a.ld, chunk, a.sa,
                                                                           a.sb, o, a.out.work);
        GS_LAUNCH_CHECK("requant_bytes_kernel");
      }
    });
  }
  launch_delayed_finish(a.out, P, stream);
}

}  // namespace gnnsparse::cuda
