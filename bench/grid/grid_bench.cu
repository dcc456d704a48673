// grid_bench: tensor-core tile kernels (bench/grid/tiles) on dense-ish matrices against cuSPARSE, a
// dense cuBLAS product of the densified matrix (fp32 / TF32 / bf16) and gnnsparse's sparse
// kernels, in one process on the same inputs.
//
//   grid_bench [--quick] [--no-grid] [--sweep] [--ceiling] [--reps 20] [--csv out.csv]
//              [--ops spmm,sddmm,fused] [--max-mk N] [--no-flush]
//
// Grid: K in {1024, 2048, 4096, 8192}, M in {K, 3K, 4K}, density in {0.3, 0.2, 0.1}, N in
// {32, 128}; every entry kept with probability `density` (hash of (seed, i, j)), values and
// features uniform in [-1, 1]. --quick: 8 cases. --sweep: densities 0.002 .. 0.3 at three
// shapes, tiles vs the sparse kernels vs cuSPARSE, and the crossover density per (op, width,
// precision) in the format of bench/grid/tiles/tiled_policy.cpp. --ceiling: mma.sync peak.
// Method: every result is checked first (max |err| over 64 sampled rows against an fp64
// reference, relative to the largest |reference| there; tiles also bitwise run to run), then
// timed: median of --reps launches after 2 warm-ups, one cudaEvent pair per launch, L2 flushed
// (128 MB memset) before each. FLOPs: SpMM 2 nnz N, SDDMM nnz (2N - 1), FusedMM 4 nnz N.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cusparse.h>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cuda_bench.cuh"
#include "gnnsparse/args.hpp"
#include "gnnsparse/cuda.hpp"
#include "tiled.hpp"

using gnnsparse::CsrView;
using gnnsparse::DType;
using gnnsparse::EdgeFn;
using gnnsparse::FusedArgs;
using gnnsparse::IType;
using gnnsparse::Precision;
using gnnsparse::Reduce;
using gnnsparse::SddmmArgs;
using gnnsparse::SddmmOp;
using gnnsparse::SpmmArgs;
namespace gc = gnnsparse::cuda;

#define CB(x)                                                                                  \
  do {                                                                                         \
    cublasStatus_t s_ = (x);                                                                   \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      fprintf(stderr, "%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #x, int(s_));        \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

static const Precision kPrecs[3] = {Precision::fp32, Precision::tf32, Precision::bf16};
static const char* kPrecName[3] = {"fp32", "tf32", "bf16"};

// ---- generation -------------------------------------------------------------------------------
__device__ inline bool keep(uint64_t seed, int64_t i, int64_t j, uint32_t thresh) {
  return static_cast<uint32_t>(mix(seed ^ mix(static_cast<uint64_t>(i) * 0x100000001b3ull + j)) >> 32) < thresh;
}
// One warp per row: pass 0 counts, pass 1 writes sorted columns.
__global__ void gen_rows(int* deg, const int* rowptr, int* col, int64_t M, int64_t K,
                         uint32_t thresh, uint64_t seed, int pass) {
  const int lane = threadIdx.x & 31;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (i >= M) return;
  int n = 0;
  int base = pass ? rowptr[i] : 0;
  for (int64_t j0 = 0; j0 < K; j0 += 32) {
    const int64_t j = j0 + lane;
    const bool k = j < K && keep(seed, i, j, thresh);
    const unsigned b = __ballot_sync(0xffffffffu, k);
    if (pass && k) col[base + n + __popc(b & ((1u << lane) - 1u))] = static_cast<int>(j);
    n += __popc(b);
  }
  if (!pass && lane == 0) deg[i] = n;
}
__global__ void densify(const int* rowptr, const int* col, const float* val, float* D, int64_t M,
                        int64_t K) {
  const int lane = threadIdx.x & 31;
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (i >= M) return;
  for (int k = rowptr[i] + lane; k < rowptr[i + 1]; k += 32) D[i * K + col[k]] = val[k];
}
__global__ void to_bf16(const float* x, __nv_bfloat16* y, int64_t n) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x)
    y[k] = __float2bfloat16_rn(x[k]);
}


static CsrView no_val(CsrView v) {
  v.val = nullptr;
  return v;
}

static Csr make_matrix(int64_t M, int64_t K, double density, uint64_t seed) {
  Csr A;
  A.M = M;
  A.K = K;
  const uint32_t thresh = static_cast<uint32_t>(std::min(4294967295.0, density * 4294967296.0));
  int* deg;
  CK(cudaMalloc(&deg, (M + 1) * sizeof(int)));
  CK(cudaMemset(deg, 0, (M + 1) * sizeof(int)));
  CK(cudaMalloc(&A.rowptr, (M + 1) * sizeof(int)));
  const unsigned blocks = static_cast<unsigned>((M * 32 + 255) / 256);
  gen_rows<<<blocks, 256>>>(deg, nullptr, nullptr, M, K, thresh, seed, 0);
  CK(cudaGetLastError());
  degrees_to_rowptr(deg, A.rowptr, M + 1);
  cudaFree(deg);
  A.h_rowptr.resize(M + 1);
  CK(cudaMemcpy(A.h_rowptr.data(), A.rowptr, (M + 1) * sizeof(int), cudaMemcpyDeviceToHost));
  A.nnz = A.h_rowptr[M];
  CK(cudaMalloc(&A.col, std::max<int64_t>(1, A.nnz) * sizeof(int)));
  CK(cudaMalloc(&A.val, std::max<int64_t>(1, A.nnz) * sizeof(float)));
  gen_rows<<<blocks, 256>>>(nullptr, A.rowptr, A.col, M, K, thresh, seed, 1);
  CK(cudaGetLastError());
  rand_fill<<<static_cast<unsigned>((A.nnz + 255) / 256), 256>>>(A.val, A.nnz, seed + 1);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  return A;
}

// ---- fp64 references on sampled rows -------------------------------------------------------------
// rows[r] = sampled row ids. SpMM: Y64[r][c].
__global__ void ref_spmm(const int* rowptr, const int* col, const float* val, const float* X,
                         const int* rows, int64_t N, double* out) {
  const int i = rows[blockIdx.x];
  for (int64_t c = threadIdx.x; c < N; c += blockDim.x) {
    double s = 0;
    for (int k = rowptr[i]; k < rowptr[i + 1]; ++k) s += double(val[k]) * double(X[int64_t(col[k]) * N + c]);
    out[blockIdx.x * N + c] = s;
  }
}
// SDDMM: E64[k - rowptr[i] + eoff[r]] for the entries of sampled row r.
__global__ void ref_sddmm(const int* rowptr, const int* col, const float* X, const float* Y,
                          const int* rows, const int64_t* eoff, int64_t F, double* out) {
  const int i = rows[blockIdx.x];
  for (int k = rowptr[i] + threadIdx.x; k < rowptr[i + 1]; k += blockDim.x) {
    double s = 0;
    const int64_t j = col[k];
    for (int64_t f = 0; f < F; ++f) s += double(X[int64_t(i) * F + f]) * double(Y[j * F + f]);
    out[eoff[blockIdx.x] + k - rowptr[i]] = s;
  }
}
// FusedMM (dot, edge none or softmax, weighted by val unless null): Out64[r][c]; w scratch.
__global__ void ref_fused(const int* rowptr, const int* col, const float* val, const float* X,
                          const float* Y, const float* Z, const int* rows, const int64_t* eoff,
                          int64_t F, int64_t D, int softmax, double* w, double* out) {
  const int i = rows[blockIdx.x];
  const int b = rowptr[i], e = rowptr[i + 1];
  double* wr = w + eoff[blockIdx.x];
  for (int k = b + threadIdx.x; k < e; k += blockDim.x) {
    double s = 0;
    const int64_t j = col[k];
    for (int64_t f = 0; f < F; ++f) s += double(X[int64_t(i) * F + f]) * double(Y[j * F + f]);
    wr[k - b] = s;
  }
  __syncthreads();
  __shared__ double mx, sum;
  if (threadIdx.x == 0) {
    mx = -INFINITY;
    sum = 0;
    if (softmax) {
      for (int k = b; k < e; ++k) mx = fmax(mx, wr[k - b]);
      for (int k = b; k < e; ++k) sum += exp(wr[k - b] - mx);
    }
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
    double s = 0;
    for (int k = b; k < e; ++k) {
      const double x = softmax ? exp(wr[k - b] - mx) / sum : wr[k - b];
      s += x * (val ? double(val[k]) : 1.0) * double(Z[int64_t(col[k]) * D + c]);
    }
    out[blockIdx.x * D + c] = s;
  }
}

struct Sample {
  std::vector<int> rows;
  std::vector<int64_t> eoff;  // offset of each sampled row's entries in the compact entry list
  int64_t nent = 0;
  int* d_rows = nullptr;
  int64_t* d_eoff = nullptr;
  void make(const Csr& A) {
    rows.clear();
    const int n = static_cast<int>(std::min<int64_t>(64, A.M));
    for (int r = 0; r < n; ++r) rows.push_back(static_cast<int>((A.M - 1) * r / std::max(1, n - 1)));
    eoff.clear();
    nent = 0;
    for (int i : rows) {
      eoff.push_back(nent);
      nent += A.h_rowptr[i + 1] - A.h_rowptr[i];
    }
    cudaFree(d_rows);
    cudaFree(d_eoff);
    CK(cudaMalloc(&d_rows, rows.size() * sizeof(int)));
    CK(cudaMalloc(&d_eoff, eoff.size() * sizeof(int64_t)));
    CK(cudaMemcpy(d_rows, rows.data(), rows.size() * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_eoff, eoff.data(), eoff.size() * sizeof(int64_t), cudaMemcpyHostToDevice));
  }
};

static std::vector<double> to_host_d(const double* d, int64_t n) {
  std::vector<double> h(n);
  CK(cudaMemcpy(h.data(), d, n * sizeof(double), cudaMemcpyDeviceToHost));
  return h;
}
// max |got - ref| / max |ref| over the sampled rows of a dense (M x N) fp32 output
static double err_rows(const float* Y, int64_t N, const Sample& s, const std::vector<double>& ref) {
  std::vector<float> row(N);
  double d = 0, m = 0;
  for (size_t r = 0; r < s.rows.size(); ++r) {
    CK(cudaMemcpy(row.data(), Y + int64_t(s.rows[r]) * N, N * sizeof(float), cudaMemcpyDeviceToHost));
    for (int64_t c = 0; c < N; ++c) {
      const double x = row[c], y = ref[r * N + c];
      d = std::max(d, std::isfinite(x) ? std::fabs(x - y) : INFINITY);
      m = std::max(m, std::fabs(y));
    }
  }
  return d / std::max(m, 1e-30);
}
static double err_rows_bf16(const __nv_bfloat16* Y, int64_t N, const Sample& s, const std::vector<double>& ref) {
  std::vector<__nv_bfloat16> row(N);
  double d = 0, m = 0;
  for (size_t r = 0; r < s.rows.size(); ++r) {
    CK(cudaMemcpy(row.data(), Y + int64_t(s.rows[r]) * N, N * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
    for (int64_t c = 0; c < N; ++c) {
      const double x = __bfloat162float(row[c]), y = ref[r * N + c];
      d = std::max(d, std::isfinite(x) ? std::fabs(x - y) : INFINITY);
      m = std::max(m, std::fabs(y));
    }
  }
  return d / std::max(m, 1e-30);
}
// the same over the sampled rows' entries of an nnz-long output in CSR order
static double err_entries(const float* E, const Csr& A, const Sample& s, const std::vector<double>& ref) {
  double d = 0, m = 0;
  for (size_t r = 0; r < s.rows.size(); ++r) {
    const int b = A.h_rowptr[s.rows[r]], e = A.h_rowptr[s.rows[r] + 1];
    if (e == b) continue;
    std::vector<float> v(e - b);
    CK(cudaMemcpy(v.data(), E + b, (e - b) * sizeof(float), cudaMemcpyDeviceToHost));
    for (int k = 0; k < e - b; ++k) {
      const double x = v[k], y = ref[s.eoff[r] + k];
      d = std::max(d, std::isfinite(x) ? std::fabs(x - y) : INFINITY);
      m = std::max(m, std::fabs(y));
    }
  }
  return d / std::max(m, 1e-30);
}
// ---- references: cuSPARSE, cuBLAS, gnnsparse sparse kernels ------------------------------------------
// (the timer, the generator of values and the cuSPARSE calls: bench/cuda_bench.cuh)
struct Libs {
  CuSparse sp;
  cublasHandle_t bl;
  Libs() { CB(cublasCreate(&bl)); }
};

// Row-major C (m x n) = A (m x k) * B (k x n) through column-major cuBLAS: C^T = B^T A^T.
// prec 0: fp32 SGEMM, 1: TF32 tensor cores, 2: bf16 inputs (A16, B16), bf16 output.
static void gemm_rm(Libs& L, int prec, bool transB, int64_t m, int64_t n, int64_t k, const void* A,
                    const void* B, void* C) {
  const float one = 1.f, zero = 0.f;
  const cudaDataType_t in = prec == 2 ? CUDA_R_16BF : CUDA_R_32F;
  const cudaDataType_t out = prec == 2 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t ct = prec == 1 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  // column-major: C^T (n x m) = op(B^T) (n x k) * A^T (k x m)
  CB(cublasGemmEx(L.bl, transB ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n),
                  static_cast<int>(m), static_cast<int>(k), &one, B, in,
                  static_cast<int>(transB ? k : n), A, in, static_cast<int>(k), &zero, C, out,
                  static_cast<int>(n), ct, CUBLAS_GEMM_DEFAULT));
}

// ---- results ---------------------------------------------------------------------------------------
struct Geo {
  double s = 0;
  int n = 0;
  void add(double r) {
    if (r > 0 && std::isfinite(r)) { s += std::log(r); ++n; }
  }
  double get() const { return n ? std::exp(s / n) : 0.0; }
};
static std::map<std::string, Geo> g_geo;
static std::map<std::string, double> g_maxerr;
static FILE* g_csv = nullptr;
static int g_fail = 0;
static void maxerr(const std::string& k, double e) { g_maxerr[k] = std::max(g_maxerr[k], e); }
static void csv_row(const char* op, int64_t M, int64_t K, double d, int64_t N, int64_t nnz,
                    const char* who, double us, double err) {
  if (g_csv)
    fprintf(g_csv, "%s,%lld,%lld,%.4f,%lld,%lld,%s,%.2f,%.3e\n", op, (long long)M, (long long)K, d,
            (long long)N, (long long)nnz, who, us, err);
}
static void check(bool ok, const char* what, const char* op, int64_t M, int64_t K, int64_t N) {
  if (!ok) {
    ++g_fail;
    printf("CHECK FAILED: %s (%s M=%lld K=%lld N=%lld)\n", what, op, (long long)M, (long long)K, (long long)N);
  }
}
// Tolerances (relative to max |ref| on the sampled rows): fp32 must be fp32-class; tf32 / bf16 as
// their rounding allows. Reported errors are the measured ones; these only flag broken kernels.
static const double kTol[3] = {2e-5, 5e-3, 4e-2};

// ---- one matrix: SpMM / SDDMM / FusedMM at one width --------------------------------------------------
struct Opts {
  bool spmm = true, sddmm = true, fused = true, dense = true, cusparse = true, sparse_ours = false;
  bool fused_variants = false;
};

struct CaseResult {
  double tile_us[3] = {0, 0, 0};
  double sparse_us = 0, cusp_us = 0;
};

static CaseResult run_spmm(Libs& L, Timer& tm, const Csr& A, const gc::TileCache& tc, const Sample& smp,
                           int64_t N, double dens, const float* Adense, const __nv_bfloat16* Adense16,
                           const Opts& o, bool print) {
  CaseResult cr;
  float* X = drand(A.K * N, 11 + N);
  float* Y = dalloc(A.M * N);
  float* Y2 = dalloc(A.M * N);
  double* d_ref;
  CK(cudaMalloc(&d_ref, smp.rows.size() * N * sizeof(double)));
  ref_spmm<<<static_cast<unsigned>(smp.rows.size()), 128>>>(A.rowptr, A.col, A.val, X, smp.d_rows, N, d_ref);
  CK(cudaGetLastError());
  const std::vector<double> ref = to_host_d(d_ref, smp.rows.size() * N);
  const double flops = 2.0 * A.nnz * N;
  double err[3] = {0, 0, 0};
  for (int pi = 0; pi < 3; ++pi) {
    SpmmArgs a;
    a.A = A.view();
    a.X = X;
    a.Y = Y;
    a.C = N;
    a.precision = kPrecs[pi];
    CK(cudaMemset(Y, 0xff, A.M * N * 4));  // poison: NaN
    bool ok = gc::tiled_spmm(a, &tc, 0);
    check(ok, "tiled_spmm accepted", "spmm", A.M, A.K, N);
    CK(cudaDeviceSynchronize());
    err[pi] = err_rows(Y, N, smp, ref);
    a.Y = Y2;
    gc::tiled_spmm(a, &tc, 0);
    CK(cudaDeviceSynchronize());
    const bool bitwise = same_bits(Y, Y2, A.M * N * 4);
    check(bitwise, "tiled spmm bitwise run to run", kPrecName[pi], A.M, A.K, N);
    check(err[pi] <= kTol[pi], "tiled spmm error", kPrecName[pi], A.M, A.K, N);
    if (pi == 0) {  // the unsplit path (what sm_80 runs) must agree too
      gc::TileOverrides ov;
      ov.no_cluster = true;
      gc::tiled_spmm(a, &tc, 0, &ov);
      CK(cudaDeviceSynchronize());
      const double e1 = err_rows(Y2, N, smp, ref);
      check(e1 <= kTol[0], "tiled spmm unsplit error", "fp32", A.M, A.K, N);
      maxerr("spmm tiles fp32 (unsplit path)", e1);
    }
    a.Y = Y;
    cr.tile_us[pi] = tm.median_us([&] { gc::tiled_spmm(a, &tc, 0); });
    maxerr(std::string("spmm tiles ") + kPrecName[pi], err[pi]);
    csv_row("spmm", A.M, A.K, dens, N, A.nnz, (std::string("tiles_") + kPrecName[pi]).c_str(), cr.tile_us[pi], err[pi]);
  }
  double cusp_err = 0;
  std::string alg = "-";
  if (o.cusparse) {
    int ai = -1;
    cr.cusp_us = cusparse_spmm(L.sp, tm, A, X, Y, N, &ai);
    alg = ai >= 0 ? kCusparseSpmmAlg[ai] + 4 : "none";  // ALG1 ...
    cusp_err = err_rows(Y, N, smp, ref);
    maxerr("spmm cuSPARSE fp32", cusp_err);
    csv_row("spmm", A.M, A.K, dens, N, A.nnz, ("cusparse_" + alg).c_str(), cr.cusp_us, cusp_err);
  }
  if (o.sparse_ours) {
    auto f = [&] {
      gc::spmm(SpmmArgs{A.view(), DType::f32, Reduce::sum, X, Y, nullptr, N}, 0);
    };
    f();
    CK(cudaDeviceSynchronize());
    const double e = err_rows(Y, N, smp, ref);
    check(e <= kTol[0], "sparse spmm error", "fp32", A.M, A.K, N);
    cr.sparse_us = tm.median_us(f);
    csv_row("spmm", A.M, A.K, dens, N, A.nnz, "sparse_ours", cr.sparse_us, e);
  }
  double dense_us[3] = {0, 0, 0}, dense_err[3] = {0, 0, 0};
  if (o.dense && Adense) {
    __nv_bfloat16 *X16 = nullptr, *Y16 = nullptr;
    CK(cudaMalloc(&X16, A.K * N * 2));
    CK(cudaMalloc(&Y16, A.M * N * 2));
    to_bf16<<<1024, 256>>>(X, X16, A.K * N);
    for (int pi = 0; pi < 3; ++pi) {
      auto f = [&] {
        if (pi < 2) gemm_rm(L, pi, false, A.M, N, A.K, Adense, X, Y);
        else gemm_rm(L, 2, false, A.M, N, A.K, Adense16, X16, Y16);
      };
      f();
      CK(cudaDeviceSynchronize());
      dense_err[pi] = pi < 2 ? err_rows(Y, N, smp, ref) : err_rows_bf16(Y16, N, smp, ref);
      dense_us[pi] = tm.median_us(f);
      maxerr(std::string("spmm dense cuBLAS ") + kPrecName[pi], dense_err[pi]);
      csv_row("spmm", A.M, A.K, dens, N, A.nnz, (std::string("dense_") + kPrecName[pi]).c_str(), dense_us[pi], dense_err[pi]);
    }
    cudaFree(X16);
    cudaFree(Y16);
    for (int pi = 0; pi < 3; ++pi) {
      g_geo[std::string("spmm tiles ") + kPrecName[pi] + " / dense " + kPrecName[pi]].add(dense_us[pi] / cr.tile_us[pi]);
    }
    g_geo["spmm tiles fp32 / dense fp32 (N=" + std::to_string(N) + ")"].add(dense_us[0] / cr.tile_us[0]);
  }
  if (o.cusparse && print) {
    for (int pi = 0; pi < 3; ++pi)
      g_geo[std::string("spmm tiles ") + kPrecName[pi] + " / cuSPARSE"].add(cr.cusp_us / cr.tile_us[pi]);
    g_geo["spmm dense fp32 / cuSPARSE"].add(dense_us[0] > 0 ? cr.cusp_us / dense_us[0] : 0);
  }
  if (print)
    printf("SPMM  %6lld %5lld %.3f %4lld | tiles %8.1f %8.1f %8.1f | cuSP %8.1f %s | dense %8.1f %8.1f %8.1f | "
           "x/d32 %5.2f x/cuSP %5.2f | %6.0f GF/s | err %.1e %.1e %.1e cuSP %.1e d32 %.1e\n",
           (long long)A.M, (long long)A.K, dens, (long long)N, cr.tile_us[0], cr.tile_us[1], cr.tile_us[2],
           cr.cusp_us, alg.c_str(), dense_us[0], dense_us[1], dense_us[2],
           dense_us[0] > 0 ? dense_us[0] / cr.tile_us[0] : 0.0, cr.cusp_us > 0 ? cr.cusp_us / cr.tile_us[0] : 0.0,
           flops / (cr.tile_us[0] * 1e3), err[0], err[1], err[2], cusp_err, dense_err[0]);
  fflush(stdout);
  cudaFree(d_ref);
  cudaFree(X);
  cudaFree(Y);
  cudaFree(Y2);
  return cr;
}

static CaseResult run_sddmm(Libs& L, Timer& tm, const Csr& A, const gc::TileCache& tc, const Sample& smp,
                            int64_t F, double dens, const Opts& o, bool print) {
  CaseResult cr;
  float* X = drand(A.M * F, 21 + F);
  float* Yd = drand(A.K * F, 22 + F);
  float* E = dalloc(A.nnz);
  float* E2 = dalloc(A.nnz);
  double* d_ref;
  CK(cudaMalloc(&d_ref, std::max<int64_t>(1, smp.nent) * sizeof(double)));
  ref_sddmm<<<static_cast<unsigned>(smp.rows.size()), 128>>>(A.rowptr, A.col, X, Yd, smp.d_rows, smp.d_eoff, F, d_ref);
  CK(cudaGetLastError());
  const std::vector<double> ref = to_host_d(d_ref, std::max<int64_t>(1, smp.nent));
  const double flops = double(A.nnz) * (2.0 * F - 1.0);
  double err[3] = {0, 0, 0};
  for (int pi = 0; pi < 3; ++pi) {
    SddmmArgs a;
    a.A = A.view();
    a.X = X;
    a.Y = Yd;
    a.E = E;
    a.F = F;
    a.precision = kPrecs[pi];
    CK(cudaMemset(E, 0xff, A.nnz * 4));
    const bool ok = gc::tiled_sddmm(a, &tc, 0);
    check(ok, "tiled_sddmm accepted", "sddmm", A.M, A.K, F);
    CK(cudaDeviceSynchronize());
    err[pi] = err_entries(E, A, smp, ref);
    a.E = E2;
    gc::tiled_sddmm(a, &tc, 0);
    CK(cudaDeviceSynchronize());
    check(same_bits(E, E2, A.nnz * 4), "tiled sddmm bitwise run to run", kPrecName[pi], A.M, A.K, F);
    check(err[pi] <= kTol[pi], "tiled sddmm error", kPrecName[pi], A.M, A.K, F);
    a.E = E;
    cr.tile_us[pi] = tm.median_us([&] { gc::tiled_sddmm(a, &tc, 0); });
    maxerr(std::string("sddmm tiles ") + kPrecName[pi], err[pi]);
    csv_row("sddmm", A.M, A.K, dens, F, A.nnz, (std::string("tiles_") + kPrecName[pi]).c_str(), cr.tile_us[pi], err[pi]);
  }
  double cusp_err = 0;
  if (o.cusparse) {
    cr.cusp_us = cusparse_sddmm(L.sp, tm, A, X, Yd, E, F);
    cusp_err = err_entries(E, A, smp, ref);
    maxerr("sddmm cuSPARSE fp32", cusp_err);
    csv_row("sddmm", A.M, A.K, dens, F, A.nnz, "cusparse", cr.cusp_us, cusp_err);
  }
  if (o.sparse_ours) {
    auto f = [&] {
      gc::sddmm(SddmmArgs{no_val(A.view()), DType::f32, SddmmOp::dot, X, Yd, E, 1, F}, 0);
    };
    f();
    CK(cudaDeviceSynchronize());
    const double e = err_entries(E, A, smp, ref);
    check(e <= kTol[0], "sparse sddmm error", "fp32", A.M, A.K, F);
    cr.sparse_us = tm.median_us(f);
    csv_row("sddmm", A.M, A.K, dens, F, A.nnz, "sparse_ours", cr.sparse_us, e);
  }
  double dense_us[3] = {0, 0, 0};
  if (o.dense) {
    // the dense M x K product X Y^T (fp32 / TF32 / bf16), what a dense SDDMM costs
    const size_t out_bytes = size_t(A.M) * A.K * 4;
    void* S = nullptr;
    if (cudaMalloc(&S, out_bytes) == cudaSuccess) {
      __nv_bfloat16 *X16, *Y16;
      CK(cudaMalloc(&X16, A.M * F * 2));
      CK(cudaMalloc(&Y16, A.K * F * 2));
      to_bf16<<<1024, 256>>>(X, X16, A.M * F);
      to_bf16<<<1024, 256>>>(Yd, Y16, A.K * F);
      for (int pi = 0; pi < 3; ++pi) {
        dense_us[pi] = tm.median_us([&] {
          if (pi < 2) gemm_rm(L, pi, true, A.M, A.K, F, X, Yd, S);
          else gemm_rm(L, 2, true, A.M, A.K, F, X16, Y16, S);
        });
        csv_row("sddmm", A.M, A.K, dens, F, A.nnz, (std::string("dense_MxK_") + kPrecName[pi]).c_str(), dense_us[pi], 0);
        g_geo[std::string("sddmm tiles ") + kPrecName[pi] + " / dense MxK " + kPrecName[pi]].add(dense_us[pi] / cr.tile_us[pi]);
      }
      cudaFree(X16);
      cudaFree(Y16);
      cudaFree(S);
    } else {
      cudaGetLastError();
    }
  }
  if (o.cusparse && print)
    for (int pi = 0; pi < 3; ++pi)
      g_geo[std::string("sddmm tiles ") + kPrecName[pi] + " / cuSPARSE"].add(cr.cusp_us / cr.tile_us[pi]);
  if (print)
    printf("SDDMM %6lld %5lld %.3f %4lld | tiles %8.1f %8.1f %8.1f | cuSP %8.1f | dense MxK %8.1f %8.1f %8.1f | "
           "x/dMK %5.2f x/cuSP %5.2f | %6.0f GF/s | err %.1e %.1e %.1e cuSP %.1e\n",
           (long long)A.M, (long long)A.K, dens, (long long)F, cr.tile_us[0], cr.tile_us[1], cr.tile_us[2],
           cr.cusp_us, dense_us[0], dense_us[1], dense_us[2], dense_us[0] > 0 ? dense_us[0] / cr.tile_us[0] : 0.0,
           cr.cusp_us > 0 ? cr.cusp_us / cr.tile_us[0] : 0.0, flops / (cr.tile_us[0] * 1e3), err[0], err[1],
           err[2], cusp_err);
  fflush(stdout);
  cudaFree(d_ref);
  cudaFree(X);
  cudaFree(Yd);
  cudaFree(E);
  cudaFree(E2);
  return cr;
}

static CaseResult run_fused(Libs& L, Timer& tm, const Csr& A, const gc::TileCache& tc, const Sample& smp,
                            int64_t N, double dens, const Opts& o, bool print) {
  (void)L;
  CaseResult cr;
  float* X = drand(A.M * N, 31 + N);
  float* Yd = drand(A.K * N, 32 + N);
  float* Z = drand(A.K * N, 33 + N);
  float* O = dalloc(A.M * N);
  float* O2 = dalloc(A.M * N);
  float* E = dalloc(A.nnz);
  double *d_ref, *d_w;
  CK(cudaMalloc(&d_ref, smp.rows.size() * N * sizeof(double)));
  CK(cudaMalloc(&d_w, std::max<int64_t>(1, smp.nent) * sizeof(double)));
  double err[3] = {0, 0, 0}, unf_us[3] = {0, 0, 0};
  for (int sm = 0; sm < 2; ++sm) {  // edge none (timed), softmax (checked; timed in fp32)
    if (sm == 1 && !o.fused_variants) break;
    // edge none: unweighted (as our unfused pair computes it); softmax: weighted (value path)
    const float* wval = sm ? A.val : nullptr;
    ref_fused<<<static_cast<unsigned>(smp.rows.size()), 128>>>(A.rowptr, A.col, wval, X, Yd, Z, smp.d_rows,
                                                               smp.d_eoff, N, N, sm, d_w, d_ref);
    CK(cudaGetLastError());
    const std::vector<double> ref = to_host_d(d_ref, smp.rows.size() * N);
    for (int pi = 0; pi < 3; ++pi) {
      FusedArgs a;
      a.A = A.view();
      a.A.val = wval;
      a.edge = sm ? EdgeFn::softmax : EdgeFn::none;
      a.X = X;
      a.Y = Yd;
      a.Z = Z;
      a.out = O;
      a.F = N;
      a.D = N;
      a.precision = kPrecs[pi];
      CK(cudaMemset(O, 0xff, A.M * N * 4));
      const bool ok = gc::tiled_fusedmm(a, &tc, 0);
      check(ok, "tiled_fusedmm accepted", "fused", A.M, A.K, N);
      CK(cudaDeviceSynchronize());
      const double e = err_rows(O, N, smp, ref);
      a.out = O2;
      gc::tiled_fusedmm(a, &tc, 0);
      CK(cudaDeviceSynchronize());
      check(same_bits(O, O2, A.M * N * 4), "tiled fused bitwise run to run", kPrecName[pi], A.M, A.K, N);
      check(e <= (sm ? 4 : 1) * kTol[pi] * (pi == 0 ? 4 : 1), sm ? "tiled fused softmax error" : "tiled fused error",
            kPrecName[pi], A.M, A.K, N);
      maxerr(std::string(sm ? "fused softmax tiles " : "fused tiles ") + kPrecName[pi], e);
      if (pi == 0 && sm == 0) {
        gc::TileOverrides ov;
        ov.no_cluster = true;
        a.out = O2;
        gc::tiled_fusedmm(a, &tc, 0, &ov);
        CK(cudaDeviceSynchronize());
        const double e1 = err_rows(O2, N, smp, ref);
        check(e1 <= 4 * kTol[0], "tiled fused unsplit error", "fp32", A.M, A.K, N);
        maxerr("fused tiles fp32 (unsplit path)", e1);
      }
      if (sm == 1) {
        if (pi == 0) {
          a.out = O;
          const double t = tm.median_us([&] { gc::tiled_fusedmm(a, &tc, 0); });
          csv_row("fused_softmax", A.M, A.K, dens, N, A.nnz, "tiles_fp32", t, e);
        }
        continue;
      }
      err[pi] = e;
      a.out = O;
      cr.tile_us[pi] = tm.median_us([&] { gc::tiled_fusedmm(a, &tc, 0); });
      csv_row("fused", A.M, A.K, dens, N, A.nnz, (std::string("tiles_") + kPrecName[pi]).c_str(), cr.tile_us[pi], e);
      // our own unfused pair in the same precision: tiled SDDMM (E) then tiled SpMM weighted by E
      SddmmArgs sa;
      sa.A = A.view();
      sa.X = X;
      sa.Y = Yd;
      sa.E = E;
      sa.F = N;
      sa.precision = kPrecs[pi];
      SpmmArgs pa;
      pa.A = A.view();
      pa.X = Z;
      pa.Y = O2;
      pa.C = N;
      pa.precision = kPrecs[pi];
      CsrView wv = A.view();
      wv.val = E;
      pa.A = wv;
      unf_us[pi] = tm.median_us([&] {
        gc::tiled_sddmm(sa, &tc, 0);
        gc::tiled_spmm(pa, &tc, 0);
      });
      csv_row("fused", A.M, A.K, dens, N, A.nnz, (std::string("unfused_tiles_") + kPrecName[pi]).c_str(), unf_us[pi], 0);
      if (print) g_geo[std::string("fused tiles ") + kPrecName[pi] + " / our tiled sddmm+spmm"].add(unf_us[pi] / cr.tile_us[pi]);
    }
  }
  if (o.sparse_ours) {
    auto f = [&] {
      gc::fusedmm(FusedArgs{no_val(A.view()), DType::f32, SddmmOp::dot, EdgeFn::none, 0.2, X, Yd, Z, O, nullptr,
                            1, N, N}, 0);
    };
    cr.sparse_us = tm.median_us(f);
    csv_row("fused", A.M, A.K, dens, N, A.nnz, "sparse_ours", cr.sparse_us, 0);
  }
  if (print)
    printf("FUSED %6lld %5lld %.3f %4lld | tiles %8.1f %8.1f %8.1f | unfused tiles %8.1f %8.1f %8.1f | "
           "x/unf %5.2f %5.2f %5.2f | %6.0f GF/s | err %.1e %.1e %.1e\n",
           (long long)A.M, (long long)A.K, dens, (long long)N, cr.tile_us[0], cr.tile_us[1], cr.tile_us[2],
           unf_us[0], unf_us[1], unf_us[2], unf_us[0] / cr.tile_us[0], unf_us[1] / cr.tile_us[1],
           unf_us[2] / cr.tile_us[2], 4.0 * A.nnz * N / (cr.tile_us[0] * 1e3), err[0], err[1], err[2]);
  fflush(stdout);
  cudaFree(d_ref);
  cudaFree(d_w);
  cudaFree(X);
  cudaFree(Yd);
  cudaFree(Z);
  cudaFree(O);
  cudaFree(O2);
  cudaFree(E);
  return cr;
}

// ---- one matrix, all ops ----------------------------------------------------------------------------
struct Built {
  Csr A;
  gc::TileCache tc;
  void* storage = nullptr;
  double build_us = 0;
  Sample smp;
};
static void build(Built& b, int64_t M, int64_t K, double d, uint64_t seed, Timer& tm) {
  b.A = make_matrix(M, K, d, seed);
  const size_t bytes = gc::tile_cache_bytes(M, K);
  CK(cudaMalloc(&b.storage, bytes));
  const bool ok = gc::tile_cache_build(b.A.view(), b.storage, &b.tc, 0);
  check(ok, "tile cache eligible", "build", M, K, 0);
  // build cost (the synchronizing flag read included): median of a few builds
  std::vector<double> ts;
  for (int r = 0; r < 5; ++r) {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventRecord(e0);
    gc::TileCache t2;
    gc::tile_cache_build(b.A.view(), b.storage, &t2, 0);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    ts.push_back(ms * 1000.0);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
  std::sort(ts.begin(), ts.end());
  b.build_us = ts[ts.size() / 2];
  (void)tm;
  b.smp.make(b.A);
}
static void release(Built& b) {
  b.A.free_all();
  cudaFree(b.storage);
}

static void run_grid(Libs& L, Timer& tm, const Opts& o, bool quick, double max_mk) {
  struct C { int64_t M, K; double d; };
  std::vector<C> cases;
  const int64_t Ks[] = {1024, 2048, 4096, 8192};
  const int mult[] = {1, 3, 4};
  const double dens[] = {0.3, 0.2, 0.1};
  if (quick) {
    cases = {{1024, 1024, 0.3}, {4096, 1024, 0.1}, {6144, 2048, 0.2}, {4096, 4096, 0.1},
             {16384, 4096, 0.3}, {8192, 8192, 0.2}, {24576, 8192, 0.1}, {32768, 8192, 0.3}};
  } else {
    for (int64_t K : Ks)
      for (int mm : mult)
        for (double d : dens) cases.push_back({K * mm, K, d});
  }
  printf("\n== grid (%zu matrices x N in {32, 128}); times in us: tiles fp32 / tf32 / bf16 | cuSPARSE best CSR alg | dense cuBLAS fp32 / TF32 / bf16 ==\n",
         cases.size());
  Geo build_ratio;
  for (const C& c : cases) {
    if (double(c.M) * c.K > max_mk) continue;
    Built b;
    build(b, c.M, c.K, c.d, 1000 + c.K * 7 + c.M * 3 + int(c.d * 10), tm);
    float* Ad = nullptr;
    __nv_bfloat16* Ad16 = nullptr;
    if (o.dense && o.spmm) {
      CK(cudaMalloc(&Ad, size_t(c.M) * c.K * 4));
      CK(cudaMemset(Ad, 0, size_t(c.M) * c.K * 4));
      densify<<<static_cast<unsigned>((c.M * 32 + 255) / 256), 256>>>(b.A.rowptr, b.A.col, b.A.val, Ad, c.M, c.K);
      CK(cudaMalloc(&Ad16, size_t(c.M) * c.K * 2));
      to_bf16<<<4096, 256>>>(Ad, Ad16, c.M * c.K);
      CK(cudaDeviceSynchronize());
    }
    printf("matrix M=%lld K=%lld d=%.2f nnz=%lld: cache %.1f MB (CSR %.1f MB), build %.1f us\n", (long long)c.M,
           (long long)c.K, c.d, (long long)b.A.nnz, gc::tile_cache_bytes(c.M, c.K) / 1e6,
           (b.A.nnz * 8.0 + (c.M + 1) * 4.0) / 1e6, b.build_us);
    for (int64_t N : {32, 128}) {
      // one failing case is reported and counted; the run goes on with the next
      auto guarded = [&](const char* op, auto&& fn) {
        try {
          fn();
        } catch (const std::exception& e) {
          ++g_fail;
          printf("CHECK FAILED %s M=%lld K=%lld N=%lld: exception: %s\n", op, (long long)c.M, (long long)c.K,
                 (long long)N, e.what());
          cudaGetLastError();
        }
      };
      if (o.spmm) guarded("spmm", [&] {
        const CaseResult r = run_spmm(L, tm, b.A, b.tc, b.smp, N, c.d, Ad, Ad16, o, true);
        build_ratio.add(b.build_us / r.tile_us[0]);
      });
      if (o.sddmm) guarded("sddmm", [&] { run_sddmm(L, tm, b.A, b.tc, b.smp, N, c.d, o, true); });
      if (o.fused) guarded("fused", [&] { run_fused(L, tm, b.A, b.tc, b.smp, N, c.d, o, true); });
    }
    cudaFree(Ad);
    cudaFree(Ad16);
    release(b);
  }
  if (build_ratio.n)
    printf("cache build cost: geomean %.2f x one fp32 tiled SpMM call\n", build_ratio.get());
}

// ---- density sweep: crossover tiles vs sparse ---------------------------------------------------------
static void run_sweep(Libs& L, Timer& tm) {
  struct Shape { int64_t M, K; };
  const Shape shapes[] = {{4096, 4096}, {16384, 4096}, {32768, 2048}};
  const double dens[] = {0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3};
  Opts o;
  o.dense = false;
  o.cusparse = true;
  o.sparse_ours = true;
  printf("\n== density sweep: tiles (fp32 / tf32 / bf16) vs gnnsparse sparse kernels vs cuSPARSE, us ==\n");
  // crossover[op][w][p]: smallest density where tiles beat the better sparse method, per shape
  std::map<std::string, std::vector<double>> cross;
  for (const Shape& s : shapes)
    for (int64_t N : {32, 128}) {
      double prev_r[3][3] = {{0}}, prev_d = 0;
      double found[3][3];
      for (auto& a : found) for (auto& x : a) x = -1;
      for (double d : dens) {
        Built b;
        build(b, s.M, s.K, d, 77 + s.M + int(d * 1000), tm);
        const CaseResult r[3] = {run_spmm(L, tm, b.A, b.tc, b.smp, N, d, nullptr, nullptr, o, false),
                                 run_sddmm(L, tm, b.A, b.tc, b.smp, N, d, o, false),
                                 run_fused(L, tm, b.A, b.tc, b.smp, N, d, o, false)};
        const char* on[3] = {"spmm", "sddmm", "fused"};
        for (int op = 0; op < 3; ++op) {
          const double sparse = op == 2 ? r[op].sparse_us : std::min(r[op].sparse_us, r[op].cusp_us);
          printf("SWEEP %-5s M=%6lld K=%5lld N=%4lld d=%.3f | tiles %8.1f %8.1f %8.1f | sparse(ours) %8.1f cuSP %8.1f | policy %s\n",
                 on[op], (long long)s.M, (long long)s.K, (long long)N, d, r[op].tile_us[0], r[op].tile_us[1],
                 r[op].tile_us[2], r[op].sparse_us, r[op].cusp_us,
                 gc::prefer_tiles(static_cast<gc::TileOp>(op), s.M, s.K, b.A.nnz, N, Precision::fp32) ? "tiles" : "sparse");
          for (int p = 0; p < 3; ++p) {
            const double ratio = sparse / r[op].tile_us[p];  // > 1: tiles faster
            if (found[op][p] < 0 && ratio >= 1.0) {
              // interpolate in log(d) between the previous and this density
              if (prev_d > 0 && prev_r[op][p] < 1.0) {
                const double a = std::log(prev_r[op][p]), bb = std::log(ratio);
                const double f = (0 - a) / (bb - a);
                found[op][p] = std::exp(std::log(prev_d) + f * (std::log(d) - std::log(prev_d)));
              } else {
                found[op][p] = d;
              }
            }
            prev_r[op][p] = ratio;
          }
        }
        prev_d = d;
        release(b);
      }
      for (int op = 0; op < 3; ++op)
        for (int p = 0; p < 3; ++p) {
          char key[64];
          snprintf(key, sizeof key, "%d/%lld/%d", op, (long long)N, p);
          cross[key].push_back(found[op][p]);
        }
    }
  printf("\nmeasured crossover densities (tiles faster above; max over the shapes; -1 = tiles never faster in the sweep):\n");
  printf("  // [op][precision] {at32, at128}, for bench/grid/tiles/tiled_policy.cpp\n");
  const char* on[3] = {"spmm", "sddmm", "fusedmm"};
  for (int op = 0; op < 3; ++op) {
    printf("  // %s:", on[op]);
    for (int p = 0; p < 3; ++p) {
      double v[2];
      for (int wi = 0; wi < 2; ++wi) {
        char key[64];
        snprintf(key, sizeof key, "%d/%d/%d", op, wi ? 128 : 32, p);
        double m = 0;
        for (double x : cross[key]) m = (x < 0 || m < 0) ? -1 : std::max(m, x);
        v[wi] = m;
      }
      printf(" {%.4f, %.4f}%s", v[0], v[1], p < 2 ? "," : "\n");
    }
  }
}

// ---- mma.sync ceiling -------------------------------------------------------------------------------
template <int KIND>
__global__ void mma_peak(float* out, int iters) {
  uint32_t a[4] = {threadIdx.x, threadIdx.x * 3u, threadIdx.x * 5u, threadIdx.x * 7u};
  uint32_t b[2] = {threadIdx.x * 11u, threadIdx.x * 13u};
  float d[8][4] = {};
  for (int i = 0; i < iters; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (KIND == 0)
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
  float s = 0;
  for (int j = 0; j < 8; ++j) s += d[j][0] + d[j][1] + d[j][2] + d[j][3];
  if (s == 1234.5f) out[0] = s;
}
static void run_ceiling(Timer& tm) {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float* out = dalloc(1);
  const int iters = 4096, blocks = sms * 4, threads = 256;
  const double warps = double(blocks) * threads / 32;
  const double t0 = tm.median_us([&] { mma_peak<0><<<blocks, threads>>>(out, iters); });
  const double t1 = tm.median_us([&] { mma_peak<1><<<blocks, threads>>>(out, iters); });
  const double f0 = warps * iters * 8 * 16 * 8 * 8 * 2.0, f1 = warps * iters * 8 * 16 * 8 * 16 * 2.0;
  printf("mma.sync ceiling: tf32 m16n8k8 %.0f TFLOP/s, bf16 m16n8k16 %.0f TFLOP/s\n", f0 / (t0 * 1e6),
         f1 / (t1 * 1e6));
  cudaFree(out);
}

int main(int argc, char** argv) {
  bool quick = false, grid = true, sweep = false, ceiling = false;
  double max_mk = 1e18;
  std::string csv, ops = "spmm,sddmm,fused";
  Timer tm;
  tm.reps = 20;
  tm.warmup = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--quick") quick = true;
    else if (a == "--no-grid") grid = false;
    else if (a == "--sweep") sweep = true;
    else if (a == "--ceiling") ceiling = true;
    else if (a == "--reps") tm.reps = std::max(3, std::atoi(next().c_str()));
    else if (a == "--csv") csv = next();
    else if (a == "--ops") ops = next();
    else if (a == "--max-mk") max_mk = std::atof(next().c_str());
    else if (a == "--no-flush") tm.flush = false;
    else { fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("device: %s, %d SMs, L2 %d MB; median of %d launches after 2 warm-ups, L2 %s\n", p.name,
         p.multiProcessorCount, p.l2CacheSize >> 20, tm.reps, tm.flush ? "flushed before each" : "not flushed");
  if (!csv.empty()) {
    g_csv = fopen(csv.c_str(), "w");
    if (g_csv) fprintf(g_csv, "op,M,K,density,N,nnz,method,us,rel_err\n");
  }
  Libs L;
  Opts o;
  o.spmm = ops.find("spmm") != std::string::npos;
  o.sddmm = ops.find("sddmm") != std::string::npos;
  o.fused = ops.find("fused") != std::string::npos;
  o.fused_variants = quick;
  printf("policy: graph n=1M e=10M C=32 -> %s; grid 4096x4096 d=0.1 N=128 -> %s (crossover spmm fp32 N=32 %.4f, N=128 %.4f)\n",
         gc::prefer_tiles(gc::TileOp::spmm, 1000000, 1000000, 10000000, 32, Precision::fp32) ? "tiles" : "sparse",
         gc::prefer_tiles(gc::TileOp::spmm, 4096, 4096, 1677722, 128, Precision::fp32) ? "tiles" : "sparse",
         gc::tile_crossover_density(gc::TileOp::spmm, 32, Precision::fp32),
         gc::tile_crossover_density(gc::TileOp::spmm, 128, Precision::fp32));
  auto guarded = [&](const char* what, auto&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      ++g_fail;
      printf("CHECK FAILED %s: exception: %s\n", what, e.what());
      cudaGetLastError();
    }
  };
  if (ceiling) guarded("ceiling", [&] { run_ceiling(tm); });
  if (grid) guarded("grid", [&] { run_grid(L, tm, o, quick, max_mk); });
  if (sweep) guarded("sweep", [&] { run_sweep(L, tm); });
  printf("\ngeomean ratios (reference time / tiles time; > 1 = tiles faster):\n");
  for (auto& kv : g_geo) printf("  %-52s x%6.2f over %d cases\n", kv.first.c_str(), kv.second.get(), kv.second.n);
  printf("max error relative to max|fp64 reference| on sampled rows:\n");
  for (auto& kv : g_maxerr) printf("  %-52s %.2e\n", kv.first.c_str(), kv.second);
  printf("%s: %d check(s) failed\n", g_fail ? "FAIL" : "OK", g_fail);
  if (g_csv) fclose(g_csv);
  return g_fail ? 1 : 0;
}
