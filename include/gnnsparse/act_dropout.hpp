// gnnsparse: an activation and dropout in one pass each way, the mask kept as bits (contract and
// argument struct; host code, plain C++17). The quantized layers' ReLU / ELU + dropout
// (gnnsparse.quant.autograd relu_dropout, elu_dropout_): torch's way is five to eight elementwise
// launches per direction (the activation, a boolean mask, the masked scale, the bit packing; the
// unpacking and masked scale back), this is one.
//
// Element e of the flat float32 tensor h (n elements, contiguous):
//   keep_e = w_e >= threshold,   w_e = word e % 4 of Philox4x32-10 at counter e / 4 with `seed`
//            (the quantizer's generator, sycl/kernels/quant_math.hpp element_words: the mask
//            depends only on (seed, e, threshold), not on the launch geometry);
//            threshold = round(p * 2^32) (p = 0: every element kept)
//   RELU: bit_e = keep_e && h_e > 0;      out_e = h_e * float(bit_e) * scale
//         backward: dh_e = g_e * float(bit_e) * scale
//   ELU:  bit_e = keep_e;                 out_e = v_e * float(bit_e),
//         v_e = h_e > 0 ? h_e * scale : expm1(h_e) * scale          (torch's elu with alpha 1)
//         backward (from the output, y = out_e / scale): dh_e = (g_e * float(bit_e) * scale) *
//         (y <= 0 ? y + 1 : 1)   (torch's elu_backward on the result: a NaN y takes the 1)
// (each product rounded on its own, left to right; a NaN or inf in h or g reaches its element as
// in torch's masked scale, x * 0 = NaN). bits: element e in bit e % 32 of 32-bit word e / 32
// (little-endian: bit e % 8 of byte e / 8), words = ceil(n / 32), the bits past n zero. out may be
// h (in place). Every element is one fixed sequence of operations: bitwise reproducible.
#pragma once
#include <cstdint>

namespace gnnsparse {

enum class Act : int { relu = 0, elu = 1 };

struct ActDropoutArgs {
  Act act = Act::relu;
  std::int64_t n = 0;                // elements
  const float* h = nullptr;          // forward input (n)
  float* out = nullptr;              // forward output (n; may equal h)
  std::uint32_t* bits = nullptr;     // forward: written; backward: read (ceil(n / 32) words)
  const float* g = nullptr;          // backward: the incoming gradient (n)
  const float* y = nullptr;          // backward, ELU: the forward's output (n)
  float* dh = nullptr;               // backward output (n; may equal g)
  std::uint32_t threshold = 0;       // keep_e = w_e >= threshold
  float scale = 1.0f;                // 1 / (1 - p)
  std::uint64_t seed = 0;
};

// round(p * 2^32), p in [0, 1) (a value of p that would round to 2^32 keeps nothing: 2^32 - 1).
inline std::uint32_t dropout_threshold(double p) {
  const double t = p * 4294967296.0 + 0.5;
  return t >= 4294967295.0 ? 0xFFFFFFFFu : (t <= 0.0 ? 0u : static_cast<std::uint32_t>(t));
}

}  // namespace gnnsparse
