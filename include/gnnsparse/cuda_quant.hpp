// gnnsparse CUDA backend, quantized ops: C++ entry points over raw device pointers. Arguments are
// the structs of gnnsparse/quant.hpp, semantics its contract; conventions (streams, errors, no
// synchronization, no atomics) those of gnnsparse/cuda.hpp.
#pragma once
#include <cuda_runtime_api.h>

#include "gnnsparse/act_dropout.hpp"
#include "gnnsparse/gat_softmax.hpp"
#include "gnnsparse/qgemm.hpp"
#include "gnnsparse/quant.hpp"

namespace gnnsparse::cuda {

// Q, scale from X (three launches: absmax partials into a.work, the scale, the quantization).
void quantize(const QuantizeArgs& a, cudaStream_t stream);
// Y = s * q (float32).
void dequantize(const DequantizeArgs& a, cudaStream_t stream);
// Quantized SpMM, incidence SpMM (identity_col) and multi-head aggregation (W); with a.out active
// the output is written quantized with a delayed scale (a.out.work: qspmm_out_work(a) floats).
void qspmm(const QSpmmArgs& a, cudaStream_t stream);
std::int64_t qspmm_out_work(const QSpmmArgs& a);
// The int8 GEMM's scale pass writing its output quantized with a delayed scale (work: kQuantizeWork).
void requantize(const RequantizeArgs& a, cudaStream_t stream);
// Quantized SDDMM dot / add.
void qsddmm(const QSddmmArgs& a, cudaStream_t stream);
// Quantized FusedMM.
void qfusedmm(const QFusedArgs& a, cudaStream_t stream);
// C = scale * A^T B for row-major int8 A (K x M), B (K x N) (gnnsparse/qgemm.hpp): int32 partial
// sums per K segment into a.work (qgemm_tn_work(K, M, N) int32), summed in int64 by a second launch.
void qgemm_tn(const QGemmTnArgs& a, cudaStream_t stream);
std::int64_t qgemm_tn_work(std::int64_t K, std::int64_t M, std::int64_t N);
// GAT's edge softmax in pieces (gnnsparse/gat_softmax.hpp), for the quantized GAT backward: the
// per-row (max, 1 / sum) of the logits; alpha in transpose order; the softmax and leaky_relu
// gradient written over dP in place.
void gat_softmax_stats(const GatSoftmaxArgs& a, cudaStream_t stream);
void gat_softmax_weights_t(const GatSoftmaxArgs& a, cudaStream_t stream);
void gat_softmax_grad(const GatSoftmaxArgs& a, cudaStream_t stream);
// ReLU / ELU + dropout with the mask as bits (gnnsparse/act_dropout.hpp): one launch each way.
void act_dropout(const ActDropoutArgs& a, cudaStream_t stream);
void act_dropout_backward(const ActDropoutArgs& a, cudaStream_t stream);

}  // namespace gnnsparse::cuda
