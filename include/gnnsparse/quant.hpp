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
// DELAYED SCALING (a producer that writes its output quantized: QOut). A per-tensor scale needs
// max|Y| before the first element is written, which a producer (an SpMM writing Y row by row, the
// scale pass of an int8 GEMM) does not have. It quantizes with the scale of the previous step
// instead, `scale_in` = {s, inv} (as FP8 training does), and finds this output's absmax as a
// by-product for the next step:
//   q = quantize_value_sat(y, inv_in, ...) at flat index e = row * C + c (the element index a
//       quantize of the float32 Y would use: the same Philox words, so with scale_in equal to Y's
//       own scale the bits equal quantize(Y) exactly); v = y * inv_in saturates at +-(qmax + 1)
//       (elements beyond the old absmax are clamped to +-qmax), NaN gives 0;
//   absmax of Y: per-block partial maxima in `work` (no atomics), folded by one more launch that
//       writes scale[0..1] = the QTensor's scale (scale_in's values; {NaN, 0} when Y held NaN or
//       +-inf), scale[2..3] = {s, inv} of max(Y's absmax, decay times scale_in's absmax) (the next
//       step's scale_in: a peak hold, so a fluctuating absmax saturates less often), and, when
//       `stats` is given, stats[0] = max(stats[0], growth), stats[1] += (growth > 1), growth =
//       s_next / s_in (> 1: some elements were clamped; see quant_math.hpp delayed_scales).
// y itself is the op's float32 output bit for bit (the same accumulation), so the quantized
// output equals the model's quantize_sat of the float32 output. Work sizes: qspmm_out_work (the
// SpMM's blocks and hub segments), kQuantizeWork for requantize.
// REQUANTIZE (the int8 GEMM's scale pass, producing the next op's input): y = fl32(fl32(sa[0] *
//   sb[0]) * fl32(acc)) from int32 accumulators (rows x ld, C columns used), then as above.
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

// A producer's quantized output with a delayed scale (DELAYED SCALING above).
struct QOut {
  void *Q = nullptr;                // rows x row_bytes, written (nullptr allowed only when that is 0 bytes)
  int bits = 8;
  Rounding rounding = Rounding::stochastic;
  std::uint64_t seed = 0;
  const float *scale_in = nullptr;  // {s, inv} to quantize with (the previous step's scale[2..3])
  float *scale = nullptr;           // 4 floats, written: the QTensor's {s, inv}, then the next {s, inv}
  float *stats = nullptr;           // 2 floats, updated (max growth, saturated steps), or nullptr
  float decay = 0.0f;               // peak hold of the next scale (quant_math.hpp delayed_scales)
  float *work = nullptr;            // partial maxima
  std::int64_t work_size = 0;       // floats in work (checked against what the launch needs)
  // A quantized output is marked by its scales (always written), not by Q: an output of no rows
  // is an empty allocation, whose pointer may be null (torch, CuPy).
  bool active() const { return scale != nullptr; }
};

struct RequantizeArgs {
  const std::int32_t *acc = nullptr;  // rows x ld int32 accumulators, columns [0, C) used
  std::int64_t rows = 0, C = 0, ld = 0;
  const float *sa = nullptr, *sb = nullptr;  // y = fl32(fl32(sa[0] * sb[0]) * fl32(acc))
  QOut out;                                  // work: kQuantizeWork floats
};

struct QSpmmArgs {
  CsrView A;                 // val: float32 edge weights or nullptr
  QView X;                   // K x C (identity_col: nnz x C)
  Reduce reduce = Reduce::sum;
  const float *W = nullptr;  // nnz x H per-head edge weights (then A.val is ignored), or nullptr
  std::int64_t H = 1;        // heads: column c belongs to head c / (C / H); C % H == 0
  bool identity_col = false; // col[k] = k (incidence SpMM; A.col unused)
  float *Y = nullptr;        // M x C (unused when out is active)
  std::int64_t *arg = nullptr;  // M x C, or nullptr; max / min only (not with out)
  QOut out;                  // active: Y is written quantized with a delayed scale instead
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
