// gnnsparse CUDA backend: C++ entry points over raw device pointers, in the manner of
// cuSPARSE's generic API. They take the argument structs of gnnsparse/args.hpp; semantics are
// those of gnnsparse/ops.hpp.
//
// Conventions
// - All arrays are device pointers, row-major and contiguous. Sizes are int64.
// - rowptr has M+1 entries and col nnz entries, both of A.itype; rowptr[M] must equal nnz.
// - A.val is optional (nullptr = every value 1). Its type is the feature type, except float32
//   when the features are float16 / bfloat16.
// - A.max_degree: the longest row if the caller knows it (lets the launch policy skip the hub
//   pass on matrices without hubs), or -1.
// - A.sorted_cols: 1 when every row's columns are known non-decreasing; only then may fp32 sum /
//   mean SpMM take the dense-ish row-panel kernels (cuda/panel.cu on CUDA cores, cuda/panel_tc.cu
//   on tensor cores). The environment variable GNNSPARSE_CUDA_SPMM (auto | row | panel | tc, read
//   at every call) forces the method; GNNSPARSE_CUDA_PANEL_BN (32 | 64 | 128) and
//   GNNSPARSE_CUDA_PANEL_SPLIT (1..8) force the panel kernels' column block and K split,
//   GNNSPARSE_CUDA_TC_BN / GNNSPARSE_CUDA_TC_SPLIT the tensor-core panels' (bench and tests). A
//   bad value: std::invalid_argument.
// - SDDMM dot with fp32 features, one head, F % 4 == 0 and F <= 128, 16-byte aligned X and Y and
//   A.sorted_cols == 1 may take the dense-ish tensor-core kernel (cuda/sddmm_tc.cu; automatic from
//   the crossover density of cuda/policy.cuh, SddmmTcTuning). GNNSPARSE_CUDA_SDDMM (auto | row |
//   tc, read at every call) forces the method, GNNSPARSE_CUDA_SDDMM_TC_SPLIT (1..64) its K split
//   (bench and tests). A bad value: std::invalid_argument.
// - precision: checked to be a code of the table. Only the tensor-core kernels use it (SpMM
//   panels, SDDMM dot): fp32 (and bf16) run 3xTF32 products, fp32-accurate; tf32 runs TF32
//   products. Every other kernel
//   accumulates in float32 (float64 for float64 features) and uses no tensor cores.
// - Work is enqueued on `stream`; calls do not synchronize. Hub rows are split into fixed
//   segments whose partial results go to a workspace taken with cudaMallocAsync on `stream`
//   and released with cudaFreeAsync on the same stream (stream-ordered, so no sync either).
// - Errors: std::invalid_argument for bad arguments (an unknown code names its axis and value),
//   std::runtime_error (with the CUDA error string) for any failing CUDA call or kernel launch.
// - No atomics anywhere: results are bitwise reproducible run to run on the same device.
#pragma once
#include <string>

#include <cuda_runtime_api.h>

#include "gnnsparse/args.hpp"

namespace gnnsparse::cuda {

// Y (M x C) = A (M x K CSR) (*) X (K x C), (*) = a.reduce. a.arg (M x C int64, may be nullptr)
// is written for max / min only.
void spmm(const SpmmArgs& a, cudaStream_t stream);

// out (M x H x D) = sum_k W[k, h] Z[col k, h, :]: W (nnz x H, the edge-value type), Z (K x H x D);
// A.val is unused.
void spmm_heads(const SpmmHeadsArgs& a, cudaStream_t stream);

// GATv2 scores S (nnz x H) from X, Y, att (gatv2_scores in ops.hpp); and their backward pass:
// dX and, when a.dAtt is not null, dAtt's per-row partials, from dS.
void gatv2_scores(const Gatv2Args& a, cudaStream_t stream);
void gatv2_grad(const Gatv2Args& a, cudaStream_t stream);

// dot: X (M x H x F), Y (K x H x F) -> E (nnz x H).  add: X (M x H), Y (K x H) -> E (nnz x H)
// (F is ignored for add).
void sddmm(const SddmmArgs& a, cudaStream_t stream);

// out (M x H x D) = sum_k w[k,h] Z[col k, h, :], w = edge_fn(sddmm(X, Y)) * val.
// E (nnz x H, may be nullptr) receives w. F is ignored for op add.
void fusedmm(const FusedArgs& a, cudaStream_t stream);

// Number of CUDA devices; 0 (never an exception) when there is no driver or no GPU.
int device_count() noexcept;
std::string device_name(int device);

}  // namespace gnnsparse::cuda
