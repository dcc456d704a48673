// The dense-ish SpMM path (panel.cu): what spmm.cu needs to reach it.
#pragma once
#include <cuda_runtime_api.h>

#include "gnnsparse/args.hpp"

namespace gnnsparse::cuda_detail {

// Y = A X (sum, or mean when `mean`) for fp32 features with the row-panel kernels (CUDA cores, or
// tensor cores: panel_tc.cu), when the method (GNNSPARSE_CUDA_SPMM: auto | row | panel | tc; auto
// asks prefer_panel_tc, then prefer_panel in policy.cuh) takes them and the call is eligible
// (A.sorted_cols == 1, nnz > 0, K < 2^31 - 2^10). Returns false, having enqueued nothing, otherwise. Arguments are already checked (spmm_has_work).
template <class I>
bool spmm_panel(const SpmmArgs& a, bool mean, cudaStream_t stream);

// The tensor-core row panels (panel_tc.cu): whether a call is eligible (fp32, A.sorted_cols == 1,
// nnz > 0, C % 4 == 0, X and Y 16-byte aligned), and the launch (precision tf32: TF32 products;
// otherwise 3xTF32, fp32-accurate). spmm_panel decides between them and the other kernels.
bool panel_tc_eligible(const SpmmArgs& a);
template <class I>
void spmm_panel_tc(const SpmmArgs& a, bool mean, cudaStream_t stream);

}  // namespace gnnsparse::cuda_detail
