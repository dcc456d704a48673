// gnnsparse quantized ops: the contract and the argument structs (host code, plain C++17).
//
// Symmetric, per-tensor, dynamic quantization for GNN training (after Tango, Chen et al., SC'23):
// a float32 tensor becomes B-bit integers (B = 8 or 4) and one scale s, found on the device (the
// scale never visits the host). The element-level arithmetic (scale, rounding, the counter-based
// generator of stochastic rounding) is defined once, in sycl/kernels/quant_math.hpp, and every
// backend computes it bit for bit.
//
// QUANTIZED TENSOR. A tensor of logical shape (R, ...) is R rows of C = prod(shape[1:]) features
// (C = 1 for a 1-D tensor). Storage: row-major, R x row_bytes bytes where
//   int8: row_bytes = C, one int8 per element, values in [-127, 127];
//   int4: row_bytes = (C + 1) / 2, element c in byte c / 2 (low nibble for even c, high nibble for
//         odd c), 4-bit two's complement in [-7, 7]; the spare high nibble of an odd row is 0.
// The scale buffer holds two float32 on the device: scale[0] = s = absmax / qmax (the value of one
// integer step), scale[1] = inv = qmax / absmax (0 when absmax is 0 or not finite). The
// dequantized value of q is s * q. An all-zero tensor has s = 0 and q = 0 (no division by zero);
// a tensor holding NaN or +-inf has s = NaN and q = 0, so everything computed from it is NaN
// (the Python layer raises instead unless asked not to check).
//
// QUANTIZE: scale + rounding as quant_math.hpp states; nearest (rint) or stochastic rounding
// whose random word of element e depends only on (seed, e): bitwise reproducible across runs,
// launch geometries and backends. Three launches: per-block absmax partials (into `work`), the
// scale from the partials (one block), the quantization (reading the scale on the device).
// DEQUANTIZE: Y = s * q in float32.
//
// QUANTIZED OPS read integers and dequantize on the fly; outputs are float32. Indices, CSR
// semantics, empty rows, ties and NaN rules are those of gnnsparse/ops.hpp. Accumulation:
//   SpMM, no edge weights: the integers are summed exactly, in int32 while the longest row times
//     qmax fits (deg <= 16,909,320 for int8, 306,783,378 for int4), else in int64 (chosen from
//     CsrView::max_degree, or from nnz when it is unknown); then
//       sum:  Y = fl32(s * fl32(acc))   -- the correctly rounded s * sum(q) while |acc| < 2^24
//       mean: Y = fl32(fl32(s * fl32(acc)) / deg)
//       max / min: the largest / smallest q (ties: smallest edge index), Y = fl32(s * q)
//     (s >= 0, so max of s q is s times max of q); the result equals the reference computed on the
//     dequantized inputs exactly for sum / max / min (within one rounding for mean).
//   SpMM with edge weights (A's values, or per-head weights W): messages w_k * q (float32), summed
//     in a fixed order (edge order within a lane's part of the row, parts merged by a fixed tree)
//     or their max / min, Y = s * acc (mean: / deg).
//   SDDMM dot: E = fl32(fl32(s_X * s_Y) * fl32(acc)), acc = sum_f qx * qy in int32 while
//     F * qmax_X * qmax_Y fits (F <= 133,143 for int8 x int8), else int64 -- the integer dot is
//     exact; E is the reference on dequantized inputs within two roundings.
//   SDDMM add: E = fl32(fl32(s_X * qx) + fl32(s_Y * qy)) (the scales differ, so each side is
//     dequantized before the addition).
//   FusedMM: scores as SDDMM (dot or add), then the edge function (none, leaky_relu, exp,
//     softmax, leaky_relu_softmax; another code is rejected), A's values and the
//     aggregation of Z as in ops.hpp with w * q_Z accumulated in float32 and scaled by s_Z.
//   Incidence SpMM (edge -> node aggregation, Tango's gradient of node features from edge
//     features): Y[v, :] = reduce over the edges k of row v of X[k, :], X having one row per edge
//     in CSR order (identity_col: the V x E incidence matrix needs no index array and no all-ones
//     matrix), or, for the other endpoint, over the transpose's rows with col = its perm.
//   Multi-head aggregation: Y[i, h, d] = reduce_k W[k, h] * s * q[col_k, h, d], every head in one
//     launch (W: nnz x H float32, X: K x H x D quantized).
// Every op: no atomics, every output element from one fixed sequence of operations, so results
// are bitwise reproducible run to run.
#pragma once
#include <cstdint>

#include "gnnsparse/args.hpp"

namespace gnnsparse {

// Rounding codes (cross the Python boundary: gnnsparse._core.ROUNDING is this table).
#define GNNSPARSE_ROUNDING_TABLE(X) X(nearest, 0) X(stochastic, 1)
#define GNNSPARSE_ROUNDING_ENUMERATOR_(name, code) name = code,
enum class Rounding : int { GNNSPARSE_ROUNDING_TABLE(GNNSPARSE_ROUNDING_ENUMERATOR_) };
#undef GNNSPARSE_ROUNDING_ENUMERATOR_

// Scratch floats `work` must hold for one quantize call (per-block absmax partials).
inline constexpr std::int64_t kQuantizeWork = 1024;

// Largest row length / feature count with int32 accumulation (see the contract above).
inline constexpr std::int64_t qmax_for_bits(int bits) { return bits == 4 ? 7 : 127; }
inline constexpr bool spmm_fits_int32(std::int64_t deg, int bits) {
  return deg <= std::int64_t(0x7fffffff) / qmax_for_bits(bits);
}
inline constexpr bool dot_fits_int32(std::int64_t F, int bits_x, int bits_y) {
  return F <= std::int64_t(0x7fffffff) / (qmax_for_bits(bits_x) * qmax_for_bits(bits_y));
}

// A quantized matrix on one device (rows x C logical; see QUANTIZED TENSOR).
struct QView {
  const void *data = nullptr;    // rows x row_bytes() bytes
  const float *scale = nullptr;  // 2 floats: s, inv
  int bits = 8;
  std::int64_t C = 0;            // features per row
  std::int64_t row_bytes() const { return bits == 4 ? (C + 1) / 2 : C; }
};

struct QuantizeArgs {
  const float *X = nullptr;  // n float32 values (rows x C, row-major)
  std::int64_t rows = 0, C = 0;
  int bits = 8;
  Rounding rounding = Rounding::stochastic;
  std::uint64_t seed = 0;
  void *Q = nullptr;         // rows x row_bytes, written
  float *scale = nullptr;    // 2 floats, written
  float *work = nullptr;     // kQuantizeWork floats of scratch
};

struct DequantizeArgs {
  QView X;
  std::int64_t rows = 0;
  float *Y = nullptr;  // rows x C
};

struct QSpmmArgs {
  CsrView A;                 // val: float32 edge weights or nullptr
  QView X;                   // K x C (identity_col: nnz x C)
  Reduce reduce = Reduce::sum;
  const float *W = nullptr;  // nnz x H per-head edge weights (then A.val is ignored), or nullptr
  std::int64_t H = 1;        // heads: column c belongs to head c / (C / H); C % H == 0
  bool identity_col = false; // col[k] = k (incidence SpMM; A.col unused)
  float *Y = nullptr;        // M x C
  std::int64_t *arg = nullptr;  // M x C, or nullptr; max / min only
};

struct QSddmmArgs {
  CsrView A;  // val unused
  SddmmOp op = SddmmOp::dot;
  QView X;    // dot: M x (H F); add: M x H
  QView Y;    // dot: K x (H F); add: K x H
  std::int64_t H = 1, F = 1;
  float *E = nullptr;  // nnz x H
};

struct QFusedArgs {
  CsrView A;  // val: float32 or nullptr
  SddmmOp op = SddmmOp::dot;
  EdgeFn edge = EdgeFn::none;
  double slope = 0.2;
  QView X, Y;          // as QSddmmArgs
  QView Z;             // K x (H D)
  std::int64_t H = 1, F = 1, D = 1;
  float *out = nullptr;  // M x H x D
  float *E = nullptr;    // nnz x H edge weights (after edge function and values), or nullptr
};

}  // namespace gnnsparse
