// gnnsparse CUDA backend: C++ entry points over raw device pointers, in the manner of
// cuSPARSE's generic API. Semantics are those of gnnsparse/ops.hpp.
//
// Conventions
// - All arrays are device pointers, row-major and contiguous. Sizes are int64.
// - rowptr has M+1 entries and col nnz entries, both of IType; rowptr[M] must equal nnz.
// - val is optional (nullptr = every value 1). Its type is the feature type, except float32
//   when the features are float16 / bfloat16.
// - Work is enqueued on `stream`; calls do not synchronize. Hub rows are split into fixed
//   segments whose partial results go to a workspace taken with cudaMallocAsync on `stream`
//   and released with cudaFreeAsync on the same stream (stream-ordered, so no sync either).
// - Errors: std::invalid_argument for bad arguments, std::runtime_error (with the CUDA error
//   string) for any failing CUDA call or kernel launch.
// - No atomics anywhere: results are bitwise reproducible run to run on the same device.
#pragma once
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "gnnsparse/ops.hpp"

namespace gnnsparse::cuda {

// Y (M x C, DType) = A (M x K CSR) (*) X (K x C, DType). arg (M x C int64, may be nullptr) is
// written for max/min only. max_degree_hint: the largest row length if the caller knows it
// (lets the launch policy skip the hub pass), or -1.
void spmm(DType dtype, IType itype, Reduce reduce, const void* rowptr, const void* col,
          const void* val, const void* X, void* Y, int64_t* arg, int64_t M, int64_t K,
          int64_t C, int64_t nnz, cudaStream_t stream, int64_t max_degree_hint = -1);

// dot: X (M x H x F), Y (K x H x F) -> E (nnz x H).  add: X (M x H), Y (K x H) -> E (nnz x H)
// (F is ignored for add).
void sddmm(DType dtype, IType itype, SddmmOp op, const void* rowptr, const void* col,
           const void* X, const void* Y, void* E, int64_t M, int64_t K, int64_t nnz, int64_t H,
           int64_t F, cudaStream_t stream);

// Out (M x H x D) = sum_k w[k,h] Z[col k, h, :], w = edge_fn(sddmm(X, Y)) * val.
// E (nnz x H, may be nullptr) receives w. F is ignored for op add.
void fusedmm(DType dtype, IType itype, SddmmOp op, EdgeFn edge, double slope, const void* rowptr,
             const void* col, const void* val, const void* X, const void* Y, const void* Z,
             void* Out, void* E, int64_t M, int64_t K, int64_t nnz, int64_t H, int64_t F,
             int64_t D, cudaStream_t stream, int64_t max_degree_hint = -1);

// Number of CUDA devices; 0 (never an exception) when there is no driver or no GPU.
int device_count() noexcept;
std::string device_name(int device);

}  // namespace gnnsparse::cuda
