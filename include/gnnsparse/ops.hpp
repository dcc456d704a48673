// gnnsparse: the contract every backend implements. No backend headers here.
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
// then w *= val[k] when A has values, and Out[i, h, :] = sum_k w[k, h] * Z[j, h, :]
// (Z is K x H x D, Out is M x H x D). E itself is not written unless the caller passes an
// edge buffer, which then receives w (after the edge function and the value scaling).
#pragma once
#include <cstdint>

namespace gnnsparse {

enum class Reduce : int { sum = 0, mean = 1, max = 2, min = 3 };
enum class SddmmOp : int { dot = 0, add = 1 };
enum class EdgeFn : int { none = 0, leaky_relu = 1, exp = 2, softmax = 3 };
enum class DType : int { f32 = 0, f64 = 1, f16 = 2, bf16 = 3 };
enum class IType : int { i32 = 0, i64 = 1 };

}  // namespace gnnsparse
