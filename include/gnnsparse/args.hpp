// gnnsparse: the argument structs every backend's C++ entry points take (host code only).
//
// Like cuSPARSE's generic API: raw pointers, sizes and codes from gnnsparse/ops.hpp, never a
// framework object. The Python layer builds a CsrView once per (graph, device, value dtype) and
// keeps it; each call then fills one op struct. The same structs serve the CUDA entry points
// (gnnsparse/cuda.hpp), the SYCL ones (sycl/ops.hpp) and the C++ bench executables.
#pragma once
#include <cstdint>

#include "gnnsparse/ops.hpp"

namespace gnnsparse {

// A CSR matrix on one device. rowptr / col hold `itype` indices; val is nullptr (every value 1)
// or nnz values of the feature dtype (float32 for float16 / bfloat16 features).
struct CsrView {
  IType itype = IType::i32;
  const void *rowptr = nullptr;  // M + 1 entries, rowptr[0] = 0, rowptr[M] = nnz, non-decreasing
  const void *col = nullptr;     // nnz entries in [0, K)
  const void *val = nullptr;     // nnz entries, or nullptr
  std::int64_t M = 0, K = 0, nnz = 0;
  // The longest row if known (lets a launch policy skip its hub pass), else -1.
  std::int64_t max_degree = -1;
  // 1 when every row's columns are known to be non-decreasing (what the dense-ish kernels
  // need), 0 when known not to be, -1 unknown (then those kernels are never taken).
  int sorted_cols = -1;
};

struct SpmmArgs {
  CsrView A;
  DType dtype = DType::f32;
  Reduce reduce = Reduce::sum;
  const void *X = nullptr;  // K x C
  void *Y = nullptr;        // M x C
  std::int64_t *arg = nullptr;  // M x C, or nullptr; written for max / min only
  std::int64_t C = 0;
  Precision precision = Precision::fp32;
  // CUDA only (the SYCL backends take nullptr): a device flag read by every kernel of the call
  // before any work; when it holds true, the call writes nothing (its kernels return at once and
  // Y keeps what it held). The dense-ish route (gnnsparse._dense) launches its GEMM into Y, then
  // this SpMM gated by "X is finite", so the kernels' result replaces the GEMM's only for an X
  // holding inf or NaN -- decided on the device, with no read-back.
  const bool *skip = nullptr;
};

// SpMM with per-(edge, head) weights (ops.hpp, spmm_heads).
struct SpmmHeadsArgs {
  CsrView A;  // val unused
  DType dtype = DType::f32;
  const void *W = nullptr;  // nnz x H, edge-value dtype (float32 for float16 / bfloat16 features)
  const void *Z = nullptr;  // K x H x D
  void *out = nullptr;      // M x H x D
  std::int64_t H = 1, D = 1;
  Precision precision = Precision::fp32;
};

// GATv2 scores and their backward pass (ops.hpp, gatv2_scores). scores: S = f(X, Y, att); grad:
// dX (and dAtt's per-row partials when dAtt is not null) from dS.
struct Gatv2Args {
  CsrView A;  // val unused
  DType dtype = DType::f32;
  const void *X = nullptr;    // M x H x C, indexed by row
  const void *Y = nullptr;    // K x H x C, gathered by col
  const void *att = nullptr;  // H x C
  double slope = 0.2;         // leaky_relu's negative slope
  void *S = nullptr;          // scores: nnz x H, edge-value dtype (written)
  const void *dS = nullptr;   // grad: nnz x H, edge-value dtype (read)
  void *dX = nullptr;         // grad: M x H x C (written)
  void *dAtt = nullptr;       // grad: M x H x C, edge-value dtype, or nullptr (not computed)
  std::int64_t H = 1, C = 1;
};

struct SddmmArgs {
  CsrView A;  // val unused
  DType dtype = DType::f32;
  SddmmOp op = SddmmOp::dot;
  const void *X = nullptr;  // dot: M x H x F; add: M x H
  const void *Y = nullptr;  // dot: K x H x F; add: K x H
  void *E = nullptr;        // nnz x H
  std::int64_t H = 1, F = 1;  // F is 1 for add
  Precision precision = Precision::fp32;
};

struct FusedArgs {
  CsrView A;
  DType dtype = DType::f32;
  SddmmOp op = SddmmOp::dot;
  EdgeFn edge = EdgeFn::none;
  double slope = 0.2;                      // leaky_relu's negative slope
  const void *X = nullptr, *Y = nullptr;   // as SddmmArgs
  const void *Z = nullptr;                 // K x H x D
  void *out = nullptr;                     // M x H x D
  void *E = nullptr;                       // nnz x H, or nullptr (edge weights not written)
  std::int64_t H = 1, F = 1, D = 1;
  Precision precision = Precision::fp32;
};

}  // namespace gnnsparse
