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

__device__ __forceinline__ float block_absmax(float v, float* smem) {
  for (int o = 16; o > 0; o >>= 1) v = quant::absmax_combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < nw ? smem[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v = quant::absmax_combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;  // valid in thread 0
}

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

}  // namespace gnnsparse::cuda
