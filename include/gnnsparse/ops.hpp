// gnnsparse: the contract every backend implements, and the one table of op and type codes.
//
// Plain C++17, no backend headers. Read by every layer: the CUDA kernels (template parameters),
// the SYCL and ESIMD kernels (embedded with their sources and compiled by the run-time compiler or
// icpx), the host dispatchers, and Python (the _core module exports the tables below, so Python
// never spells a code itself). To add a reduction, an edge function or a dtype, add one row to its
// table here; docs/architecture.md lists what else each layer then needs.
//
// A is an M x K CSR matrix: rowptr[M+1], col[nnz] (0 <= col < K, rows need not be sorted,
// duplicates allowed: they are separate edges), optional val[nnz]. Dense matrices are
// row-major and contiguous. Index type I is int32 or int64; feature type T is float or double
// (CUDA adds half and bfloat16 features with float accumulation).
//
// SpMM  Y[i, c] = (+)_{k in row i} m_k(c),   m_k(c) = val[k] * X[col[k], c]   (val == 1 when absent)
//   sum : sum of m_k in edge order (k ascending within a row's traversal order of the backend;
//         every backend is bitwise reproducible run to run, never uses atomics).
//   mean: sum / deg(i), deg = number of stored entries of row i.
//   max / min: the largest / smallest m_k. NaN counts as larger (max) / smaller (min) than any
//         number, so a NaN message wins and propagates, as numpy.max/numpy.argmax do.
//         Ties go to the smallest edge index k. arg[i, c] = the winning k (an index into col/val),
//         written only when the caller passes an arg buffer.
//   Empty row: Y = 0 for every reduction, arg = -1.
//
// SDDMM, per stored entry k = (i, j = col[k]); X is M x H x F, Y is K x H x F (H = 1 for 2-D):
//   dot: E[k, h] = sum_f X[i, h, f] * Y[j, h, f]              (E is nnz x H; values of A unused)
//   add: E[k, h] = X[i, h] + Y[j, h]      (X: M x H, Y: K x H; GAT's attention logits)
//
// FusedMM: E as SDDMM (dot or add), then an edge function per (k, h):
//   none: w = e;  leaky_relu: w = e > 0 ? e : slope * e;  exp: w = exp(e);
//   softmax: w = exp(e - max_row(e)) / sum_row(exp(e - max_row(e))) over the entries of row i
//            (per head); an empty row produces nothing.
//   leaky_relu_softmax: the softmax of leaky_relu(e) (GAT attention in one pass, no edge array).
// then w *= val[k] when A has values, and Out[i, h, :] = sum_k w[k, h] * Z[j, h, :]
// (Z is K x H x D, Out is M x H x D). E itself is not written unless the caller passes an
// edge buffer, which then receives w (after the edge function and the value scaling).
//
// SpMM with per-(edge, head) weights (spmm_heads: attention weights after dropout, the backward of
// SDDMM dot and FusedMM):
//   Out[i, h, :] = sum_{k in row i} W[k, h] * Z[col[k], h, :]
// W is nnz x H in CSR order, in the edge-value dtype (the features', float32 for float16 / bfloat16
// features); Z is K x H x D, Out is M x H x D; the values of A are unused. Summed in the backend's
// fixed edge order (as SpMM sum: bitwise reproducible, no atomics), float32 accumulation for 16-bit
// features; an empty row gives 0.
//
// GATv2 scores (gatv2_scores: the score of torch_geometric's GATv2Conv without the (nnz, H, C)
// tensor), per stored entry k = (i, j = col[k]) and head h:
//   S[k, h] = sum_c att[h, c] * lrelu(X[i, h, c] + Y[j, h, c]),  lrelu(z) = z > 0 ? z : slope * z
// X is M x H x C (the targets' W_r x_i), Y is K x H x C (the sources' W_l x_j), att is H x C in the
// feature dtype; S is nnz x H in CSR order, in the edge-value dtype (float32 for 16-bit features,
// which are summed in float32). Its backward pass given dS (nnz x H, edge-value dtype):
//   dX[i, h, c]   = sum_{k in row i} dS[k, h] * att[h, c] * lrelu'(z),  lrelu'(z) = z > 0 ? 1 : slope
//   dAtt_i[h, c]  = sum_{k in row i} dS[k, h] * lrelu(z)    (optional: the per-row partial sums of
//                   dAtt, M x H x C in the edge-value dtype; the caller sums them over i)
// with z = X[i, h, c] + Y[j, h, c]; an empty row gives 0. dY is the same pass over A^T with X and Y
// swapped and dS in transpose order. Each output is one fixed sequence of operations (no atomics).
//
// Gradients (gnnsparse.torch; each deterministic, composed of the ops above, no atomics):
//   SpMM sum   dX = A^T dY (A^T built once and cached, values val[perm]); dval[k] = <dY[i], X[j]>
//              (an SDDMM dot over A's pattern).
//   SpMM mean  the same with dY[i] / deg(i).
//   SpMM max / min: each (i, c) sends val[k] dY[i, c] to X[j, c] and dY[i, c] X[j, c] to val[k] for
//              the winning edge k = arg[i, c] only (ties: the smallest k; empty rows: nothing), as
//              torch_scatter's scatter_max; summed per target by a stable key sort and an SpMM.
//   SDDMM dot  dX[i, h] = sum_k dE[k, h] Y[j, h], dY[j, h] = sum_k dE[k, h] X[i, h] (spmm_heads
//              over A and A^T).
//   spmm_heads dW = SDDMM-dot(dOut, Z), dZ = spmm_heads over A^T with weights W[perm] and dOut.
//   SDDMM add  dX[i, h] = sum of dE over row i, dY[j, h] = sum of dE over column j (SpMM over the
//              pattern whose columns are the edge ids).
//   FusedMM    with p = edge_fn(e) and w = p * val: dZ = A^T-SpMM of dOut with weights w,
//              dw = SDDMM-dot(dOut, Z), dval[k] = sum_h dw p, dp = dw * val, then de = dp (none),
//              dp * (e > 0 ? 1 : slope) (leaky_relu), dp * p (exp), p * (dp - sum_row(p dp))
//              (softmax; leaky_relu_softmax also multiplies by leaky_relu's slope factor), and
//              dX, dY from de as SDDMM above. p is recomputed by one more pass without the
//              aggregation (or kept from the forward pass); nothing of size nnz x H x D is formed.
#pragma once
#include <cstdint>

// ---------------------------------------------------------------------------------------------
// The tables. Each row: X(name, code[, extra columns]). Codes are stable (they cross the Python
// boundary and name kernel instances); names are what users write (reduce="mean").
#define GNNSPARSE_REDUCE_TABLE(X) X(sum, 0) X(mean, 1) X(max, 2) X(min, 3)
#define GNNSPARSE_SDDMM_OP_TABLE(X) X(dot, 0) X(add, 1)
#define GNNSPARSE_EDGE_FN_TABLE(X) X(none, 0) X(leaky_relu, 1) X(exp, 2) X(softmax, 3) X(leaky_relu_softmax, 4)
// Arithmetic the caller allows for float32 features on dense-ish inputs (tensor-core tiles):
// fp32 = float32 accuracy (the default), tf32 / bf16 = faster, with those formats' rounding.
// Kernels that do not use tensor cores compute in float32 whatever the request.
#define GNNSPARSE_PRECISION_TABLE(X) X(fp32, 0) X(tf32, 1) X(bf16, 2)
// X(enumerator, code, dtype name as NumPy / torch spell it, bytes per element)
#define GNNSPARSE_DTYPE_TABLE(X) \
  X(f32, 0, float32, 4) X(f64, 1, float64, 8) X(f16, 2, float16, 2) X(bf16, 3, bfloat16, 2)
// X(enumerator, code, dtype name, bytes)
#define GNNSPARSE_ITYPE_TABLE(X) X(i32, 0, int32, 4) X(i64, 1, int64, 8)

namespace gnnsparse {

#define GNNSPARSE_ENUMERATOR_(name, code, ...) name = code,
enum class Reduce : int { GNNSPARSE_REDUCE_TABLE(GNNSPARSE_ENUMERATOR_) };
enum class SddmmOp : int { GNNSPARSE_SDDMM_OP_TABLE(GNNSPARSE_ENUMERATOR_) };
enum class EdgeFn : int { GNNSPARSE_EDGE_FN_TABLE(GNNSPARSE_ENUMERATOR_) };
enum class Precision : int { GNNSPARSE_PRECISION_TABLE(GNNSPARSE_ENUMERATOR_) };
enum class DType : int { GNNSPARSE_DTYPE_TABLE(GNNSPARSE_ENUMERATOR_) };
enum class IType : int { GNNSPARSE_ITYPE_TABLE(GNNSPARSE_ENUMERATOR_) };
#undef GNNSPARSE_ENUMERATOR_

// Names as C++ spells the enumerators in a template argument list ("gnnsparse::Reduce::mean"):
// what the SYCL launchers put into kernel instance names for the run-time compiler.
#define GNNSPARSE_CPP_NAME_(Enum, name, ...) \
  case Enum::name:                         \
    return "gnnsparse::" #Enum "::" #name;
#define GNNSPARSE_CPP_REDUCE_(name, ...) GNNSPARSE_CPP_NAME_(Reduce, name)
#define GNNSPARSE_CPP_OP_(name, ...) GNNSPARSE_CPP_NAME_(SddmmOp, name)
#define GNNSPARSE_CPP_EDGE_(name, ...) GNNSPARSE_CPP_NAME_(EdgeFn, name)
inline constexpr const char *cpp_name(Reduce v) {
  switch (v) { GNNSPARSE_REDUCE_TABLE(GNNSPARSE_CPP_REDUCE_) }
  return "";
}
inline constexpr const char *cpp_name(SddmmOp v) {
  switch (v) { GNNSPARSE_SDDMM_OP_TABLE(GNNSPARSE_CPP_OP_) }
  return "";
}
inline constexpr const char *cpp_name(EdgeFn v) {
  switch (v) { GNNSPARSE_EDGE_FN_TABLE(GNNSPARSE_CPP_EDGE_) }
  return "";
}
#undef GNNSPARSE_CPP_REDUCE_
#undef GNNSPARSE_CPP_OP_
#undef GNNSPARSE_CPP_EDGE_
#undef GNNSPARSE_CPP_NAME_

#define GNNSPARSE_BYTES_(name, code, np_name, bytes) \
  case DType::name:                                  \
    return bytes;
inline constexpr int element_bytes(DType t) {
  switch (t) { GNNSPARSE_DTYPE_TABLE(GNNSPARSE_BYTES_) }
  return 0;
}
#undef GNNSPARSE_BYTES_

// Edge functions normalized over the row by the online softmax (leaky_relu_softmax applies
// leaky_relu to the score first).
inline constexpr bool row_softmax(EdgeFn e) { return e == EdgeFn::softmax || e == EdgeFn::leaky_relu_softmax; }

// max and min track a winning edge (the arg output); sum and mean do not.
inline constexpr bool has_arg(Reduce r) { return r == Reduce::max || r == Reduce::min; }

}  // namespace gnnsparse
