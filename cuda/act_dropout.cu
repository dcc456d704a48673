// ReLU / ELU + dropout in one pass each way, the mask as bits (contract: gnnsparse/act_dropout.hpp).
//
// A lane takes one quad of elements (4 consecutive: one 16-byte load, one Philox call whose four
// words are exactly those elements' words), a warp 32 consecutive quads = 128 elements = four
// 32-bit mask words: lane l's 4-bit nibble goes to bits 4 (l % 8) .. of word l / 8, gathered by an
// xor tree over the 8 lanes of a word (three shuffles) and stored by the first of them. The
// backward reads the same word and nibble. Grid-stride over warps; shapes that are not 16-byte
// aligned, and the last partial quad, take scalar loads. No shared memory, no atomics.
#include <cmath>

#include "../sycl/kernels/quant_math.hpp"
#include "common.cuh"
#include "gnnsparse/cuda_quant.hpp"

namespace gnnsparse::cuda_detail {

struct ActDropoutTuning {
  static constexpr int kThreads = 256;
  static constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride beyond (8 quads per thread at 2^29 elements)
};

__device__ __forceinline__ void load_quad(const float* __restrict__ p, int64_t g, int64_t n, bool vec, float x[4]) {
  const int64_t e = 4 * g;
  if (vec && e + 3 < n) {
    const float4 v = __ldcs(reinterpret_cast<const float4*>(p) + g);  // read once: streaming
    x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) x[j] = e + j < n ? p[e + j] : 0.0f;
  }
}

__device__ __forceinline__ void store_quad(float* __restrict__ p, int64_t g, int64_t n, bool vec, const float x[4]) {
  const int64_t e = 4 * g;
  if (vec && e + 3 < n) {
    reinterpret_cast<float4*>(p)[g] = make_float4(x[0], x[1], x[2], x[3]);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (e + j < n) p[e + j] = x[j];
  }
}

template <Act ACT>
__global__ void __launch_bounds__(ActDropoutTuning::kThreads) act_dropout_kernel(ActDropoutArgs a, bool vec) {
  const int64_t nq = (a.n + 3) / 4, nwords = (a.n + 31) / 32;
  const int lane = threadIdx.x & 31;
  const int64_t stride = (int64_t(gridDim.x) * blockDim.x) & ~int64_t(31);  // quads per grid step
  for (int64_t wb = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) & ~int64_t(31); wb < nq; wb += stride) {
    const int64_t g = wb + lane;  // wb: warp-uniform
    unsigned nib = 0;
    if (g < nq) {
      float x[4], o[4];
      load_quad(a.h, g, a.n, vec, x);
      const quant::Words4 w = quant::element_words(a.seed, std::uint64_t(g));
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        bool bit = w.w[j] >= a.threshold && 4 * g + j < a.n;
        if constexpr (ACT == Act::relu) {
          bit = bit && x[j] > 0.0f;
          o[j] = __fmul_rn(__fmul_rn(x[j], bit ? 1.0f : 0.0f), a.scale);
        } else {
          const float v = x[j] > 0.0f ? __fmul_rn(x[j], a.scale) : __fmul_rn(expm1f(x[j]), a.scale);
          o[j] = __fmul_rn(v, bit ? 1.0f : 0.0f);
        }
        nib |= unsigned(bit) << j;
      }
      store_quad(a.out, g, a.n, vec, o);
    }
    unsigned word = nib << (4 * (lane & 7));
    word |= __shfl_xor_sync(0xffffffffu, word, 1);
    word |= __shfl_xor_sync(0xffffffffu, word, 2);
    word |= __shfl_xor_sync(0xffffffffu, word, 4);
    const int64_t wi = wb / 8 + lane / 8;
    if ((lane & 7) == 0 && wi < nwords) a.bits[wi] = word;
  }
}

template <Act ACT>
__global__ void __launch_bounds__(ActDropoutTuning::kThreads) act_dropout_backward_kernel(ActDropoutArgs a, bool vec) {
  const int64_t nq = (a.n + 3) / 4;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < nq; g += int64_t(gridDim.x) * blockDim.x) {
    const unsigned nib = (__ldg(a.bits + g / 8) >> (4 * (g % 8))) & 0xFu;
    float x[4], y[4], d[4];
    load_quad(a.g, g, a.n, vec, x);
    if constexpr (ACT == Act::elu) load_quad(a.y, g, a.n, vec, y);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      d[j] = __fmul_rn(__fmul_rn(x[j], (nib >> j) & 1u ? 1.0f : 0.0f), a.scale);
      if constexpr (ACT == Act::elu) {
        const float r = __fdiv_rn(y[j], a.scale);
        d[j] = r <= 0.0f ? __fmul_rn(d[j], __fadd_rn(r, 1.0f)) : d[j];  // torch's test: a NaN y gives d
      }
    }
    store_quad(a.dh, g, a.n, vec, d);
  }
}

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

inline unsigned act_blocks(int64_t n) {
  const int64_t nq = (n + 3) / 4;
  return static_cast<unsigned>(std::min<int64_t>((nq + ActDropoutTuning::kThreads - 1) / ActDropoutTuning::kThreads,
                                                 ActDropoutTuning::kMaxBlocks));
}

inline void check_act(const ActDropoutArgs& a, const char* op) {
  if (a.n < 0) throw std::invalid_argument(std::string("gnnsparse cuda ") + op + ": negative size");
  if (a.act != Act::relu && a.act != Act::elu)
    throw std::invalid_argument(std::string("gnnsparse cuda ") + op + ": unknown activation");
}

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

void act_dropout(const ActDropoutArgs& a, cudaStream_t stream) {
  using namespace cuda_detail;
  check_act(a, "act_dropout");
  if (a.n == 0) return;
  if (a.h == nullptr || a.out == nullptr || a.bits == nullptr)
    throw std::invalid_argument("gnnsparse cuda act_dropout: null pointer");
  const bool vec = aligned16(a.h) && aligned16(a.out);
  if (a.act == Act::relu)
    act_dropout_kernel<Act::relu><<<act_blocks(a.n), ActDropoutTuning::kThreads, 0, stream>>>(a, vec);
  else
    act_dropout_kernel<Act::elu><<<act_blocks(a.n), ActDropoutTuning::kThreads, 0, stream>>>(a, vec);
  GS_LAUNCH_CHECK("act_dropout_kernel");
}

void act_dropout_backward(const ActDropoutArgs& a, cudaStream_t stream) {
  using namespace cuda_detail;
  check_act(a, "act_dropout_backward");
  if (a.n == 0) return;
  if (a.g == nullptr || a.dh == nullptr || a.bits == nullptr || (a.act == Act::elu && a.y == nullptr))
    throw std::invalid_argument("gnnsparse cuda act_dropout_backward: null pointer");
  const bool vec = aligned16(a.g) && aligned16(a.dh) && (a.act != Act::elu || aligned16(a.y));
  if (a.act == Act::relu)
    act_dropout_backward_kernel<Act::relu><<<act_blocks(a.n), ActDropoutTuning::kThreads, 0, stream>>>(a, vec);
  else
    act_dropout_backward_kernel<Act::elu><<<act_blocks(a.n), ActDropoutTuning::kThreads, 0, stream>>>(a, vec);
  GS_LAUNCH_CHECK("act_dropout_backward_kernel");
}

}  // namespace gnnsparse::cuda
