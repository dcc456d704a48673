// What the CUDA bench executables share (bench/bench_cuda.cu, bench/grid/grid_bench.cu): error
// macros, the seeded device generator of values, the bitwise comparison, the event timer and the
// cuSPARSE calls every result is compared with, and the device CSR they take. Header-only: each executable includes it once.
#pragma once

#include <cuda_runtime.h>
#include <cusparse.h>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "gnnsparse/args.hpp"

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)
#define CS(x)                                                                                  \
  do {                                                                                         \
    cusparseStatus_t s_ = (x);                                                                 \
    if (s_ != CUSPARSE_STATUS_SUCCESS) {                                                       \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cusparseGetErrorString(s_));  \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

// ---- generation: a counter-based hash (splitmix64), so inputs depend only on (seed, index) ----
__host__ __device__ inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// x[k] uniform in [-1, 1), 24 random bits each.
__global__ void rand_fill(float* x, int64_t n, uint64_t seed) {
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k < n) x[k] = static_cast<float>((mix(seed * 0x1234567ull + k) >> 40) * (1.0 / 16777216.0) * 2.0 - 1.0);
}
static float* dalloc(int64_t n) {
  float* p;
  CK(cudaMalloc(&p, std::max<int64_t>(1, n) * sizeof(float)));
  return p;
}
static float* drand(int64_t n, uint64_t seed) {
  float* p = dalloc(n);
  rand_fill<<<static_cast<unsigned>((n + 255) / 256), 256>>>(p, n, seed);
  CK(cudaGetLastError());
  return p;
}

// rowptr[0..n) = exclusive prefix sum of deg[0..n) (n = rows + 1: the last entry is nnz).
static void degrees_to_rowptr(const int* deg, int* rowptr, int64_t n) {
  size_t tb = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, tb, deg, rowptr, n);
  void* tmp;
  CK(cudaMalloc(&tmp, tb));
  cub::DeviceScan::ExclusiveSum(tmp, tb, deg, rowptr, n);
  CK(cudaFree(tmp));
}

// ---- bitwise comparison ---------------------------------------------------------------------
__global__ void bits_differ(const unsigned* a, const unsigned* b, int64_t n, unsigned* out) {
  unsigned any = 0;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x)
    any |= a[k] ^ b[k];
  if (any) atomicOr(out, 1u);  // harness-only check; the kernels never use atomics
}
// Whether two device buffers of `bytes` (a multiple of 4) hold the same bits.
static bool same_bits(const void* a, const void* b, int64_t bytes) {
  unsigned* d;
  CK(cudaMalloc(&d, sizeof(unsigned)));
  CK(cudaMemset(d, 0, sizeof(unsigned)));
  bits_differ<<<1024, 256>>>(static_cast<const unsigned*>(a), static_cast<const unsigned*>(b), bytes / 4, d);
  unsigned h;
  CK(cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost));
  CK(cudaFree(d));
  return h == 0;
}

// ---- an int32 CSR with float values on the device ---------------------------------------------
struct Csr {
  int64_t M = 0, K = 0, nnz = 0, maxdeg = -1;  // maxdeg: the longest row, -1 when not computed
  int sorted_cols = -1;  // 1: every row's columns ascending (as gnnsparse.CSR tells the kernels)
  int* rowptr = nullptr;
  int* col = nullptr;
  float* val = nullptr;
  std::vector<int> h_rowptr;  // a host copy, when a bench keeps one
  // fp32 features, int32 indices, the given values (nullptr: unweighted); the longest row given,
  // as the Python frontend gives it (it keeps it per CSR).
  gnnsparse::CsrView view(const float* values) const {
    gnnsparse::CsrView v;
    v.itype = gnnsparse::IType::i32;
    v.rowptr = rowptr;
    v.col = col;
    v.val = values;
    v.M = M;
    v.K = K;
    v.nnz = nnz;
    v.max_degree = maxdeg;
    v.sorted_cols = sorted_cols;
    return v;
  }
  gnnsparse::CsrView view() const { return view(val); }
  void free_all() {
    cudaFree(rowptr);
    cudaFree(col);
    cudaFree(val);
    rowptr = col = nullptr;
    val = nullptr;
  }
};

// ---- timing ---------------------------------------------------------------------------------
// Every thread reads float4s of a buffer, `passes` times over; one word out per thread keeps the
// loads alive. (The L2 flush below, and bench_cuda's L2 bandwidth probe.)
__global__ void l2_read_kernel(const float4* __restrict__ p, int64_t n, int passes, float* out) {
  float a = 0.f;
  for (int r = 0; r < passes; ++r)
    for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
      const float4 v = __ldcg(p + k);
      a += v.x + v.y + v.z + v.w;
    }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}

// Median of `reps` launches, each between two cudaEvents, after `warmup` launches. With `flush`,
// L2 is emptied before every timed launch (for ours and the reference alike): a 128 MB memset,
// then a read of another 128 MB, so that no dirty line of the memset is written back while the
// timed kernel runs (that write-back doubled the time of L2-sized cases, H200 2026-12-01).
struct Timer {
  cudaEvent_t a, b;
  void* flush_buf = nullptr;
  void* flush_read = nullptr;
  float* sink = nullptr;
  size_t flush_bytes = 128u << 20;
  int reps = 50;
  int warmup = 3;
  bool flush = true;
  Timer() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaMalloc(&flush_buf, flush_bytes));
    CK(cudaMalloc(&flush_read, flush_bytes));
    CK(cudaMemset(flush_read, 0, flush_bytes));
    CK(cudaMalloc(&sink, 1024 * 256 * sizeof(float)));
  }
  void flush_l2(int r) {
    CK(cudaMemsetAsync(flush_buf, r & 0xff, flush_bytes));
    l2_read_kernel<<<1024, 256>>>(static_cast<const float4*>(flush_read), int64_t(flush_bytes / 16), 1, sink);
    CK(cudaGetLastError());
  }
  double median_us(const std::function<void()>& f) {
    for (int w = 0; w < warmup; ++w) f();
    CK(cudaDeviceSynchronize());
    std::vector<float> t(reps);
    for (int r = 0; r < reps; ++r) {
      if (flush) flush_l2(r);
      CK(cudaEventRecord(a));
      f();
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      CK(cudaEventElapsedTime(&t[r], a, b));
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return 1000.0 * t[reps / 2];
  }
};

// ---- cuSPARSE: the reference of every SpMM / SDDMM row ----------------------------------------
struct CuSparse {
  cusparseHandle_t h;
  CuSparse() { CS(cusparseCreate(&h)); }
};

static const char* const kCusparseSpmmAlg[3] = {"CSR_ALG1", "CSR_ALG2", "CSR_ALG3"};

// Y = A X (fp32, int32 CSR A with values, row-major dense X: K x N, Y: M x N), timed for each of
// CSR ALG1/2/3; returns the fastest time (-1: none ran) and its index in *alg (-1: none); Y holds
// that algorithm's result. With `bitwise`, also whether two runs of it gave the same bits.
static double cusparse_spmm(CuSparse& cs, Timer& tm, const Csr& A, const float* X, float* Y, int64_t N, int* alg,
                            bool* bitwise = nullptr) {
  cusparseSpMatDescr_t a;
  cusparseDnMatDescr_t x, y;
  CS(cusparseCreateCsr(&a, A.M, A.K, A.nnz, A.rowptr, A.col, A.val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                       CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  CS(cusparseCreateDnMat(&x, A.K, N, N, const_cast<float*>(X), CUDA_R_32F, CUSPARSE_ORDER_ROW));
  CS(cusparseCreateDnMat(&y, A.M, N, N, Y, CUDA_R_32F, CUSPARSE_ORDER_ROW));
  const float one = 1.f, zero = 0.f;
  const cusparseSpMMAlg_t algs[] = {CUSPARSE_SPMM_CSR_ALG1, CUSPARSE_SPMM_CSR_ALG2, CUSPARSE_SPMM_CSR_ALG3};
  const auto NT = CUSPARSE_OPERATION_NON_TRANSPOSE;
  double best = -1;
  int besti = -1;
  for (int ai = 0; ai < 3; ++ai) {
    size_t bytes = 0;
    if (cusparseSpMM_bufferSize(cs.h, NT, NT, &one, a, x, &zero, y, CUDA_R_32F, algs[ai], &bytes) !=
        CUSPARSE_STATUS_SUCCESS)
      continue;
    void* buf = nullptr;
    CK(cudaMalloc(&buf, std::max<size_t>(bytes, 16)));
    if (cusparseSpMM_preprocess(cs.h, NT, NT, &one, a, x, &zero, y, CUDA_R_32F, algs[ai], buf) !=
        CUSPARSE_STATUS_SUCCESS) {
      cudaFree(buf);
      continue;
    }
    bool fine = true;
    auto run = [&] {
      if (cusparseSpMM(cs.h, NT, NT, &one, a, x, &zero, y, CUDA_R_32F, algs[ai], buf) != CUSPARSE_STATUS_SUCCESS)
        fine = false;
    };
    run();
    CK(cudaDeviceSynchronize());
    if (!fine) {
      cudaFree(buf);
      continue;
    }
    const double t = tm.median_us(run);
    if (best < 0 || t < best) {
      best = t;
      besti = ai;
    }
    cudaFree(buf);
  }
  if (bitwise) *bitwise = true;
  if (besti >= 0) {  // leave the fastest algorithm's result in Y (and check its repeatability)
    size_t bytes = 0;
    CS(cusparseSpMM_bufferSize(cs.h, NT, NT, &one, a, x, &zero, y, CUDA_R_32F, algs[besti], &bytes));
    void* buf;
    CK(cudaMalloc(&buf, std::max<size_t>(bytes, 16)));
    CS(cusparseSpMM_preprocess(cs.h, NT, NT, &one, a, x, &zero, y, CUDA_R_32F, algs[besti], buf));
    if (bitwise) {
      float* y2 = dalloc(A.M * N);
      cusparseDnMatDescr_t yd2;
      CS(cusparseCreateDnMat(&yd2, A.M, N, N, y2, CUDA_R_32F, CUSPARSE_ORDER_ROW));
      CS(cusparseSpMM(cs.h, NT, NT, &one, a, x, &zero, yd2, CUDA_R_32F, algs[besti], buf));
      CS(cusparseSpMM(cs.h, NT, NT, &one, a, x, &zero, y, CUDA_R_32F, algs[besti], buf));
      CK(cudaDeviceSynchronize());
      *bitwise = same_bits(Y, y2, A.M * N * 4);
      CS(cusparseDestroyDnMat(yd2));
      cudaFree(y2);
    } else {
      CS(cusparseSpMM(cs.h, NT, NT, &one, a, x, &zero, y, CUDA_R_32F, algs[besti], buf));
      CK(cudaDeviceSynchronize());
    }
    cudaFree(buf);
  }
  *alg = besti;
  CS(cusparseDestroySpMat(a));
  CS(cusparseDestroyDnMat(x));
  CS(cusparseDestroyDnMat(y));
  return best;
}

// E = (X Y^T) o spy(A), X: M x F, Y: K x F row-major; E gets A's sparsity (the values array `E`).
// Returns the time of CUSPARSE_SDDMM_ALG_DEFAULT; E holds its result.
static double cusparse_sddmm(CuSparse& cs, Timer& tm, const Csr& A, const float* X, const float* Y, float* E,
                             int64_t F) {
  cusparseSpMatDescr_t c;
  CS(cusparseCreateCsr(&c, A.M, A.K, A.nnz, A.rowptr, A.col, E, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                       CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  cusparseDnMatDescr_t x, y;
  CS(cusparseCreateDnMat(&x, A.M, F, F, const_cast<float*>(X), CUDA_R_32F, CUSPARSE_ORDER_ROW));
  // Y (K x F row-major) is Y^T as an F x K column-major matrix with leading dimension F.
  CS(cusparseCreateDnMat(&y, F, A.K, F, const_cast<float*>(Y), CUDA_R_32F, CUSPARSE_ORDER_COL));
  const float one = 1.f, zero = 0.f;
  const auto NT = CUSPARSE_OPERATION_NON_TRANSPOSE;
  size_t bytes = 0;
  CS(cusparseSDDMM_bufferSize(cs.h, NT, NT, &one, x, y, &zero, c, CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, &bytes));
  void* buf;
  CK(cudaMalloc(&buf, std::max<size_t>(bytes, 16)));
  CS(cusparseSDDMM_preprocess(cs.h, NT, NT, &one, x, y, &zero, c, CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, buf));
  auto run = [&] { CS(cusparseSDDMM(cs.h, NT, NT, &one, x, y, &zero, c, CUDA_R_32F, CUSPARSE_SDDMM_ALG_DEFAULT, buf)); };
  const double t = tm.median_us(run);
  run();
  CK(cudaDeviceSynchronize());
  cudaFree(buf);
  CS(cusparseDestroySpMat(c));
  CS(cusparseDestroyDnMat(x));
  CS(cusparseDestroyDnMat(y));
  return t;
}
