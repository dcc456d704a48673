// The dense-ish SDDMM dot path on tensor cores (sddmm_tc.cu): what sddmm.cu needs to reach it.
#pragma once
#include <cuda_runtime_api.h>

#include "gnnsparse/args.hpp"

namespace gnnsparse::cuda_detail {

// E = (X Y^T) at A's entries for fp32 features, one head, with the tensor-core panel kernel, when
// the method (GNNSPARSE_CUDA_SDDMM: auto | row | tc; auto asks prefer_sddmm_tc in policy.cuh) takes
// it and the call is eligible (op dot, H == 1, A.sorted_cols == 1, nnz > 0, F % 4 == 0,
// 4 <= F <= 128, 16-byte aligned X and Y, K < 2^31 - 2^10, precision fp32 or tf32). Returns false,
// having enqueued nothing, otherwise. Reads the knob at every call (a bad value raises even when
// the call is not eligible). Arguments are already checked (sddmm_has_work, pointers).
template <class I>
bool sddmm_tc(const SddmmArgs& a, cudaStream_t stream);

}  // namespace gnnsparse::cuda_detail
