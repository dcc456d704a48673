// The dense-ish SpMM path (panel.cu): what spmm.cu needs to reach it.
#pragma once
#include <cuda_runtime_api.h>

#include "gnnsparse/args.hpp"

namespace gnnsparse::cuda_detail {

// Y = A X (sum, or mean when `mean`) for fp32 features with the row-panel kernels, when the method
// (GNNSPARSE_CUDA_SPMM: auto | row | panel; auto asks prefer_panel in policy.cuh) takes them and
// the call is eligible (A.sorted_cols == 1, nnz > 0, K < 2^31 - 2^10). Returns false, having
// enqueued nothing, otherwise. Arguments are already checked (spmm_has_work).
template <class I>
bool spmm_panel(const SpmmArgs& a, bool mean, cudaStream_t stream);

}  // namespace gnnsparse::cuda_detail
