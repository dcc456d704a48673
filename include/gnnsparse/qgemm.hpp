// gnnsparse int8 "TN" GEMM: the contract and the argument struct (host code, plain C++17).
//
// C = scale * A^T B, the weight gradient of a quantized linear layer (dW = q(dh)^T q(x)):
//   A: K x M int8, row-major (row stride lda >= M bytes): K long (a graph's nodes), M small;
//   B: K x N int8, row-major (row stride ldb >= N bytes);
//   C: M x N float32, row-major, written: C[m, n] = fl32(fl32(acc[m, n]) * scale[0]) with
//      acc[m, n] = sum_k A[k, m] B[k, n] the exact integer (any int8 values, -128 included):
//      the K range is cut into segments of at most kQGemmMaxSegment rows, each segment's products
//      summed in int32 (128 * 128 * kQGemmMaxSegment <= 2^31 - 1: no overflow), the segments'
//      partial sums added in int64 in segment order. fl32(acc) rounds to nearest even, as a
//      conversion of the int64 (or int32) accumulator to float32 does; so C equals, bit for bit,
//      the float32 product of torch's exact integer matmul and the scale.
//   scale: one float32 on the device (the product of the operands' scales); never read on the host.
// K = 0 gives C = 0 * scale. M or N = 0: nothing is written. No atomics: every C element comes
// from one fixed sequence of integer additions, so the result is bitwise reproducible (and, being
// exact, independent of the segmentation).
// Work: qgemm_tn_work(K, M, N) int32 elements of scratch (one M x N partial per segment).
#pragma once
#include <cstdint>

namespace gnnsparse {

// Rows of K one int32 partial sum covers at most: floor((2^31 - 1) / (128 * 128)).
inline constexpr std::int64_t kQGemmMaxSegment = 131071;

struct QGemmTnArgs {
  const std::int8_t *A = nullptr;  // K x M, row stride lda
  const std::int8_t *B = nullptr;  // K x N, row stride ldb
  std::int64_t K = 0, M = 0, N = 0, lda = 0, ldb = 0;
  const float *scale = nullptr;    // 1 float32 (device)
  float *C = nullptr;              // M x N, written
  std::int32_t *work = nullptr;    // work_size int32 of scratch
  std::int64_t work_size = 0;      // checked against qgemm_tn_work(K, M, N)
};

}  // namespace gnnsparse
