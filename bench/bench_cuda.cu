// bench_cuda: gnnsparse CUDA kernels against cuSPARSE, same process, same inputs.
//
//   bench_cuda [--suite grid|graphs|issue|all] [--csv out.csv] [--json out.json] [--reps 50]
//              [--max-grid-nnz N] [--products] [--no-grid-fused] [--copy-gbs G] [--repeats 10]
//
// --suite issue: the rows of the kernel targets (uniform n=1M e=10M: SpMM sum at C = 16, 32, 33,
// 64, 65, 96, 128, 129, 160 against cuSPARSE; max with arg at C = 16, 32, 128 against our sum;
// SDDMM dot K = 32, 128; the arxiv-sized graph), then a summary of the ratios the targets name
// (odd width / next multiple of 32, max / sum). Ours is run --repeats times and compared bitwise.
//
// Method: every result is verified (ours against cuSPARSE, or FusedMM against our SDDMM followed
// by our SpMM; max error relative to the output's magnitude) before it is timed; each timing is
// the median of --reps launches, each between two cudaEvents, after 3 warm-up launches; L2 is
// flushed (128 MB memset) before every timed launch, for ours and the reference alike. Ours is
// run twice and compared bitwise. Inputs are generated on the GPU (hash-based, seeded): the grid
// suite places each nonzero with probability `density` (sorted rows); graphs have uniformly
// random columns sorted within rows (cub segmented sort); the power-law graph has Zipf(1) row
// degrees (largest > 10^5) with rows shuffled.
//
// What each row prints:
//   ratio  = reference time / ours (> 1: ours is faster); the reference is cuSPARSE (SpMM: the
//            fastest of CSR_ALG1/2/3, named) or, for FusedMM, our SDDMM followed by our SpMM.
//   floor  = the time to move the bytes the op must move at this device's copy bandwidth, and
//            ours as % of it (100 % = at the floor). Bytes: CSR read once (rowptr + col [+ val])
//            + gathered rows (each nonzero's row of X from DRAM, or X once when it fits in L2)
//            + output written once. The copy bandwidth is measured at start (device-to-device
//            cudaMemcpy of 1 GiB, read + write bytes, median of 20), or given with --copy-gbs.
#include <cuda_runtime.h>
#include <cusparse.h>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_bench.cuh"
#include "gnnsparse/cuda.hpp"

using gnnsparse::CsrView;
using gnnsparse::DType;
using gnnsparse::EdgeFn;
using gnnsparse::IType;
using gnnsparse::Reduce;
using gnnsparse::SddmmOp;

static double g_copy_gbs = 0;  // device copy bandwidth (read + write), GB/s
static int g_repeats = 2;      // runs of ours compared bitwise (first against each later one)
static double g_l2_bytes = 0;  // L2 size of the device

// ---- generation -----------------------------------------------------------------------------

__device__ inline bool keep(uint64_t seed, int64_t i, int64_t j, uint32_t thresh) {
  return static_cast<uint32_t>(mix(seed ^ (static_cast<uint64_t>(i) << 32 | j)) >> 32) < thresh;
}
__global__ void grid_count(int* deg, int64_t M, int64_t K, uint32_t thresh, uint64_t seed) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i > M) return;
  if (i == M) { deg[M] = 0; return; }
  int n = 0;
  for (int64_t j = 0; j < K; ++j) n += keep(seed, i, j, thresh);
  deg[i] = n;
}
__global__ void grid_fill(const int* rowptr, int* col, int64_t M, int64_t K, uint32_t thresh,
                          uint64_t seed) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= M) return;
  int p = rowptr[i];
  for (int64_t j = 0; j < K; ++j)
    if (keep(seed, i, j, thresh)) col[p++] = static_cast<int>(j);
}
__global__ void rand_cols(int* col, int64_t nnz, int64_t K, uint64_t seed) {
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k < nnz) col[k] = static_cast<int>(mix(seed + k) % static_cast<uint64_t>(K));
}
// max |a - b| and max |b| over n floats, as bit patterns of non-negative floats.
__global__ void diff_kernel(const float* a, const float* b, int64_t n, unsigned* out) {
  float d = 0.f, m = 0.f;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n;
       k += int64_t(gridDim.x) * blockDim.x) {
    const float x = a[k], y = b[k];
    const float dd = (x != x || y != y) ? INFINITY : fabsf(x - y);
    d = fmaxf(d, dd);
    m = fmaxf(m, fabsf(y));
  }
  atomicMax(out, __float_as_uint(d));  // bench-only check; kernels never use atomics
  atomicMax(out + 1, __float_as_uint(m));
}

static int64_t max_degree(const Csr& A) {
  std::vector<int> rp(A.M + 1);
  CK(cudaMemcpy(rp.data(), A.rowptr, (A.M + 1) * sizeof(int), cudaMemcpyDeviceToHost));
  int64_t m = 0;
  for (int64_t i = 0; i < A.M; ++i) m = std::max<int64_t>(m, rp[i + 1] - rp[i]);
  return m;
}

static void fill_values(Csr& A, uint64_t seed) {
  CK(cudaMalloc(&A.val, std::max<int64_t>(1, A.nnz) * sizeof(float)));
  rand_fill<<<(A.nnz + 255) / 256, 256>>>(A.val, A.nnz, seed);
  CK(cudaGetLastError());
}

static Csr make_grid(int64_t M, int64_t K, double density, uint64_t seed) {
  Csr A;
  A.M = M;
  A.K = K;
  const uint32_t thresh = static_cast<uint32_t>(density * 4294967296.0);
  CK(cudaMalloc(&A.rowptr, (M + 1) * sizeof(int)));
  int* deg;
  CK(cudaMalloc(&deg, (M + 1) * sizeof(int)));
  grid_count<<<(M + 1 + 127) / 128, 128>>>(deg, M, K, thresh, seed);
  CK(cudaGetLastError());
  degrees_to_rowptr(deg, A.rowptr, M + 1);
  CK(cudaFree(deg));
  int nnz;
  CK(cudaMemcpy(&nnz, A.rowptr + M, sizeof(int), cudaMemcpyDeviceToHost));
  A.nnz = nnz;
  CK(cudaMalloc(&A.col, std::max<int64_t>(1, A.nnz) * sizeof(int)));
  grid_fill<<<(M + 127) / 128, 128>>>(A.rowptr, A.col, M, K, thresh, seed);
  CK(cudaGetLastError());
  fill_values(A, seed + 1);
  A.maxdeg = max_degree(A);
  return A;
}

// Rows with the given degrees, uniformly random columns sorted within each row.
static Csr make_graph_from_degrees(const std::vector<int64_t>& degs, int64_t K, uint64_t seed) {
  Csr A;
  A.M = static_cast<int64_t>(degs.size());
  A.K = K;
  std::vector<int> rp(A.M + 1, 0);
  for (int64_t i = 0; i < A.M; ++i) rp[i + 1] = rp[i] + static_cast<int>(degs[i]);
  A.nnz = rp[A.M];
  CK(cudaMalloc(&A.rowptr, (A.M + 1) * sizeof(int)));
  CK(cudaMemcpy(A.rowptr, rp.data(), (A.M + 1) * sizeof(int), cudaMemcpyHostToDevice));
  int* unsorted;
  CK(cudaMalloc(&unsorted, A.nnz * sizeof(int)));
  CK(cudaMalloc(&A.col, A.nnz * sizeof(int)));
  rand_cols<<<(A.nnz + 255) / 256, 256>>>(unsorted, A.nnz, K, seed);
  CK(cudaGetLastError());
  size_t tb = 0;
  cub::DeviceSegmentedSort::SortKeys(nullptr, tb, unsorted, A.col, A.nnz, A.M, A.rowptr,
                                     A.rowptr + 1);
  void* tmp;
  CK(cudaMalloc(&tmp, tb));
  cub::DeviceSegmentedSort::SortKeys(tmp, tb, unsorted, A.col, A.nnz, A.M, A.rowptr,
                                     A.rowptr + 1);
  CK(cudaDeviceSynchronize());
  CK(cudaFree(tmp));
  CK(cudaFree(unsorted));
  fill_values(A, seed + 7);
  A.maxdeg = *std::max_element(degs.begin(), degs.end());
  return A;
}

static Csr make_uniform(int64_t n, int64_t e, uint64_t seed) {
  std::vector<int64_t> d(n);
  for (int64_t i = 0; i < n; ++i) d[i] = (i + 1) * e / n - i * e / n;
  return make_graph_from_degrees(d, n, seed);
}

static Csr make_powerlaw(int64_t n, int64_t e, uint64_t seed) {
  // Zipf(1) degrees by rank, at least 1, scaled to e entries in total; ranks shuffled over rows.
  std::vector<double> w(n);
  double s = 0;
  for (int64_t r = 0; r < n; ++r) s += (w[r] = 1.0 / double(r + 1));
  std::vector<int64_t> d(n);
  int64_t tot = 0;
  for (int64_t r = 0; r < n; ++r) tot += (d[r] = std::max<int64_t>(1, int64_t(double(e - n) * w[r] / s) + 0));
  d[0] += e - tot;  // exact total
  std::mt19937_64 g(seed);
  std::shuffle(d.begin(), d.end(), g);
  return make_graph_from_degrees(d, n, seed);
}

// ---- checks and the copy bandwidth (timer, generator, cuSPARSE: cuda_bench.cuh) -------------

static double rel_err(const float* a, const float* b, int64_t n) {
  unsigned* d;
  CK(cudaMalloc(&d, 2 * sizeof(unsigned)));
  CK(cudaMemset(d, 0, 2 * sizeof(unsigned)));
  diff_kernel<<<1024, 256>>>(a, b, n, d);
  unsigned h[2];
  CK(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
  CK(cudaFree(d));
  float df, mf;
  memcpy(&df, &h[0], 4);
  memcpy(&mf, &h[1], 4);
  return double(df) / std::max(1.0, double(mf));
}

// Device-to-device copy of 1 GiB, read + write bytes over the median time of 20 copies.
static double copy_bandwidth_gbs() {
  const size_t bytes = size_t(1) << 30;
  void *a, *b;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> t(20);
  for (int w = 0; w < 3; ++w) CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
  for (auto& ms : t) {
    CK(cudaEventRecord(e0));
    CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
  }
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 2.0 * double(bytes) / (t[t.size() / 2] * 1e6);
}

// ---- results --------------------------------------------------------------------------------

struct Row {
  std::string suite, name, op;
  int64_t M, K, N, nnz;
  double ours_us, ref_us;
  std::string ref_name;
  double bytes, flops, err;
  bool ok, bitwise_ours, bitwise_ref;
};
static std::vector<Row> g_rows;

static double floor_us(const Row& r) { return r.bytes / (g_copy_gbs * 1e3); }

static void report(const Row& r) {
  const double gbs = r.bytes / (r.ours_us * 1e3);
  const double gf = r.flops / (r.ours_us * 1e3);
  char ratio[16] = "       -";
  if (r.ref_us > 0) snprintf(ratio, sizeof ratio, "%7.2fx", r.ref_us / r.ours_us);
  printf("%-6s %-28s %-8s nnz=%10lld N=%4lld  ours %10.1f us  ref %10.1f us (%-10s) %s  floor %9.1f us (%4.0f%%)  %7.0f GB/s  %8.0f GFLOP/s  err %.1e %s%s\n",
         r.suite.c_str(), r.name.c_str(), r.op.c_str(), (long long)r.nnz, (long long)r.N,
         r.ours_us, r.ref_us, r.ref_name.c_str(), ratio, floor_us(r), 100.0 * floor_us(r) / r.ours_us,
         gbs, gf, r.err, r.ok ? "ok" : "MISMATCH", r.bitwise_ours ? "" : " NONDETERMINISTIC");
  fflush(stdout);
  g_rows.push_back(r);
}

// ---- ours -----------------------------------------------------------------------------------

static void our_spmm(const Csr& A, const float* val, Reduce reduce, const float* X, float* Y,
                     int64_t* arg, int64_t N) {
  gnnsparse::SpmmArgs a;
  a.A = A.view(val);
  a.dtype = DType::f32;
  a.reduce = reduce;
  a.X = X;
  a.Y = Y;
  a.arg = arg;
  a.C = N;
  gnnsparse::cuda::spmm(a, 0);
}
static void our_sddmm_dot(const Csr& A, const float* X, const float* Y, float* E, int64_t F) {
  gnnsparse::SddmmArgs a;
  a.A = A.view(nullptr);
  a.dtype = DType::f32;
  a.op = SddmmOp::dot;
  a.X = X;
  a.Y = Y;
  a.E = E;
  a.H = 1;
  a.F = F;
  gnnsparse::cuda::sddmm(a, 0);
}
// dot -> edge -> SpMM over Z, unweighted, one head, F = D = N.
static void our_fused_dot(const Csr& A, EdgeFn edge, const float* X, const float* Y,
                          const float* Z, float* out, int64_t N) {
  gnnsparse::FusedArgs a;
  a.A = A.view(nullptr);
  a.dtype = DType::f32;
  a.op = SddmmOp::dot;
  a.edge = edge;
  a.slope = 0.2f;
  a.X = X;
  a.Y = Y;
  a.Z = Z;
  a.out = out;
  a.H = 1;
  a.F = N;
  a.D = N;
  gnnsparse::cuda::fusedmm(a, 0);
}

// ---- cases ----------------------------------------------------------------------------------

static double csr_bytes(const Csr& A, bool val) {
  return (A.M + 1) * 4.0 + A.nnz * 4.0 + (val ? A.nnz * 4.0 : 0.0);
}
static double gather_bytes(int64_t rows, int64_t nnz, int64_t width) {
  const double whole = double(rows) * width * 4.0;
  return whole <= g_l2_bytes ? whole : double(nnz) * width * 4.0;
}

static void bench_spmm(const std::string& suite, const std::string& name, CuSparse& cs, Timer& tm,
                       const Csr& A, int64_t N, bool with_ref = true) {
  float* X = drand(A.K * N, 11 + N);
  float* Y = dalloc(A.M * N);
  float* Y2 = dalloc(A.M * N);
  float* Yr = dalloc(A.M * N);
  auto ours = [&] { our_spmm(A, A.val, Reduce::sum, X, Y, nullptr, N); };
  ours();
  Row r{suite, name, "spmm", A.M, A.K, N, A.nnz, 0, 0, "-", 0, 0, 0, true, true, true};
  for (int rep = 1; rep < g_repeats; ++rep) {
    our_spmm(A, A.val, Reduce::sum, X, Y2, nullptr, N);
    CK(cudaDeviceSynchronize());
    r.bitwise_ours = r.bitwise_ours && same_bits(Y, Y2, A.M * N * 4);
  }
  if (with_ref) {
    int alg = -1;
    r.ref_us = cusparse_spmm(cs, tm, A, X, Yr, N, &alg, &r.bitwise_ref);
    r.ref_name = alg >= 0 ? kCusparseSpmmAlg[alg] : "none";
    r.err = rel_err(Y, Yr, A.M * N);
    r.ok = r.err < 1e-4;
  }
  r.ours_us = tm.median_us(ours);
  r.bytes = csr_bytes(A, true) + gather_bytes(A.K, A.nnz, N) + A.M * N * 4.0;
  r.flops = 2.0 * A.nnz * N;
  report(r);
  // Unweighted and max-with-arg variants (ours only), for the graph suite.
  if (suite == "graphs" || suite == "issue") {
    Row u = r;
    u.op = "spmm_nw";
    u.ref_us = 0;
    u.ref_name = "-";
    u.ours_us = tm.median_us([&] { our_spmm(A, nullptr, Reduce::sum, X, Y, nullptr, N); });
    u.bytes = csr_bytes(A, false) + gather_bytes(A.K, A.nnz, N) + A.M * N * 4.0;
    report(u);
    int64_t *arg, *arg2;
    CK(cudaMalloc(&arg, A.M * N * sizeof(int64_t)));
    CK(cudaMalloc(&arg2, A.M * N * sizeof(int64_t)));
    Row m = u;
    m.op = "spmm_max";
    our_spmm(A, nullptr, Reduce::max, X, Y, arg, N);
    for (int rep = 1; rep < g_repeats; ++rep) {
      our_spmm(A, nullptr, Reduce::max, X, Y2, arg2, N);
      CK(cudaDeviceSynchronize());
      m.bitwise_ours = m.bitwise_ours && same_bits(Y, Y2, A.M * N * 4) &&
                       same_bits(arg, arg2, A.M * N * 8);
    }
    m.ours_us = tm.median_us([&] { our_spmm(A, nullptr, Reduce::max, X, Y, arg, N); });
    m.bytes += A.M * N * 8.0;
    report(m);
    cudaFree(arg);
    cudaFree(arg2);
  }
  cudaFree(X);
  cudaFree(Y);
  cudaFree(Y2);
  cudaFree(Yr);
}

static void bench_sddmm(const std::string& suite, const std::string& name, CuSparse& cs,
                        Timer& tm, const Csr& A, int64_t F, bool with_ref = true) {
  float* X = drand(A.M * F, 21 + F);
  float* Yd = drand(A.K * F, 22 + F);
  float* E = dalloc(A.nnz);
  float* Er = dalloc(A.nnz);
  auto ours = [&] { our_sddmm_dot(A, X, Yd, E, F); };
  ours();
  CK(cudaDeviceSynchronize());
  Row r{suite, name, "sddmm", A.M, A.K, F, A.nnz, 0, 0, "-", 0, 0, 0, true, true, true};
  if (g_repeats > 1) {
    float* E2 = dalloc(A.nnz);
    for (int rep = 1; rep < g_repeats; ++rep) {
      our_sddmm_dot(A, X, Yd, E2, F);
      CK(cudaDeviceSynchronize());
      r.bitwise_ours = r.bitwise_ours && same_bits(E, E2, A.nnz * 4);
    }
    cudaFree(E2);
  }
  if (with_ref) {
    r.ref_us = cusparse_sddmm(cs, tm, A, X, Yd, Er, F);
    r.ref_name = "SDDMM_DEF";
    r.err = rel_err(E, Er, A.nnz);
    r.ok = r.err < 1e-4;
  }
  r.ours_us = tm.median_us(ours);
  r.bytes = csr_bytes(A, false) + A.M * F * 4.0 + gather_bytes(A.K, A.nnz, F) + A.nnz * 4.0;
  r.flops = double(A.nnz) * (2.0 * F - 1.0);
  report(r);
  cudaFree(X);
  cudaFree(Yd);
  cudaFree(E);
  cudaFree(Er);
}

// FusedMM (dot, edge none, unweighted; F = D = N) against our own SDDMM followed by our SpMM
// weighted by the SDDMM output. Verified against that composition.
static void bench_fused(const std::string& suite, const std::string& name, Timer& tm,
                        const Csr& A, int64_t N, EdgeFn edge = EdgeFn::none) {
  float* X = drand(A.M * N, 31 + N);
  float* Yd = drand(A.K * N, 32 + N);
  float* Z = drand(A.K * N, 33 + N);
  float* O = dalloc(A.M * N);
  float* Or = dalloc(A.M * N);
  float* E = dalloc(A.nnz);
  auto fused = [&] { our_fused_dot(A, edge, X, Yd, Z, O, N); };
  auto unfused = [&] {
    our_sddmm_dot(A, X, Yd, E, N);
    our_spmm(A, E, Reduce::sum, Z, Or, nullptr, N);
  };
  fused();
  unfused();
  CK(cudaDeviceSynchronize());
  Row r{suite, name, edge == EdgeFn::none ? "fusedmm" : "fused_sm", A.M, A.K, N, A.nnz, 0, 0,
        "-", 0, 0, 0, true, true, true};
  if (edge == EdgeFn::none) {
    r.err = rel_err(O, Or, A.M * N);
    r.ok = r.err < 1e-3;
    r.ref_us = tm.median_us(unfused);
    r.ref_name = "ours_sd+sp";
  }
  r.ours_us = tm.median_us(fused);
  r.bytes = csr_bytes(A, false) + A.M * N * 4.0 + 2 * gather_bytes(A.K, A.nnz, N) + A.M * N * 4.0;
  r.flops = double(A.nnz) * (4.0 * N);
  report(r);
  cudaFree(X);
  cudaFree(Yd);
  cudaFree(Z);
  cudaFree(O);
  cudaFree(Or);
  cudaFree(E);
}

static void run_grid(CuSparse& cs, Timer& tm, int64_t max_nnz, bool fused) {
  const int64_t Ks[] = {1024, 2048, 4096, 8192};
  const int mult[] = {1, 3, 4};
  const double dens[] = {0.3, 0.2, 0.1};
  const int64_t Ns[] = {32, 128};
  for (int64_t K : Ks)
    for (int mm : mult)
      for (double d : dens) {
        const int64_t M = K * mm;
        if (double(M) * K * d > double(max_nnz)) continue;
        Csr A = make_grid(M, K, d, 1000 + K * 7 + mm * 3 + int(d * 10));
        for (int64_t N : Ns) {
          char nm[96];
          snprintf(nm, sizeof nm, "M%lld_K%lld_d%.1f", (long long)M, (long long)K, d);
          bench_spmm("grid", nm, cs, tm, A, N);
          bench_sddmm("grid", nm, cs, tm, A, N);
          if (fused) bench_fused("grid", nm, tm, A, N);
        }
        A.free_all();
      }
}

static void run_graphs(CuSparse& cs, Timer& tm, bool products) {
  {
    Csr A = make_uniform(1000000, 10000000, 1);
    for (int64_t C : {16, 32, 128}) bench_spmm("graphs", "uniform_1M_10M", cs, tm, A, C);
    for (int64_t F : {32, 128}) bench_sddmm("graphs", "uniform_1M_10M", cs, tm, A, F);
    for (int64_t N : {32, 128}) bench_fused("graphs", "uniform_1M_10M", tm, A, N);
    bench_fused("graphs", "uniform_1M_10M", tm, A, 32, EdgeFn::softmax);
    A.free_all();
  }
  {
    Csr A = make_powerlaw(1000000, 10000000, 2);
    printf("powerlaw: max degree %lld\n", (long long)A.maxdeg);
    for (int64_t C : {16, 32, 128}) bench_spmm("graphs", "powerlaw_1M_10M", cs, tm, A, C);
    for (int64_t F : {32, 128}) bench_sddmm("graphs", "powerlaw_1M_10M", cs, tm, A, F);
    bench_fused("graphs", "powerlaw_1M_10M", tm, A, 32);
    A.free_all();
  }
  {
    Csr A = make_uniform(169343, 2332486, 3);
    bench_spmm("graphs", "arxiv_169k_2.3M", cs, tm, A, 32);
    bench_spmm("graphs", "arxiv_169k_2.3M", cs, tm, A, 128);
    bench_sddmm("graphs", "arxiv_169k_2.3M", cs, tm, A, 32);
    A.free_all();
  }
  if (products) {
    Csr A = make_uniform(2449029, 61859140, 4);
    bench_spmm("graphs", "products_2.4M_62M", cs, tm, A, 128);
    A.free_all();
  }
}

static const Row* find_row(const std::string& name, const std::string& op, int64_t N) {
  for (auto& r : g_rows)
    if (r.name == name && r.op == op && r.N == N) return &r;
  return nullptr;
}

// The rows the kernel targets name, then the ratios they are stated in.
static void run_issue(CuSparse& cs, Timer& tm) {
  {
    Csr A = make_uniform(1000000, 10000000, 1);
    for (int64_t C : {16, 32, 33, 64, 65, 96, 128, 129, 160})
      bench_spmm("issue", "uniform_1M_10M", cs, tm, A, C);
    for (int64_t F : {32, 128}) bench_sddmm("issue", "uniform_1M_10M", cs, tm, A, F);
    A.free_all();
  }
  {
    Csr A = make_uniform(169343, 2332486, 3);
    bench_spmm("issue", "arxiv_169k_2.3M", cs, tm, A, 32);
    bench_sddmm("issue", "arxiv_169k_2.3M", cs, tm, A, 32);
    A.free_all();
  }
  printf("\ntargets (uniform_1M_10M unless named):\n");
  for (int64_t C : {33, 65, 129}) {
    const Row* o = find_row("uniform_1M_10M", "spmm", C);
    const Row* n = find_row("uniform_1M_10M", "spmm", (C + 31) / 32 * 32);
    if (o && n)
      printf("  SpMM C=%-4lld time / C=%lld time   %.2fx   (target <= 1.15x)\n", (long long)C,
             (long long)n->N, o->ours_us / n->ours_us);
  }
  for (int64_t C : {16, 32, 128}) {
    const Row* m = find_row("uniform_1M_10M", "spmm_max", C);
    const Row* s = find_row("uniform_1M_10M", "spmm", C);
    if (m && s)
      printf("  SpMM max+arg / sum C=%-4lld         %.2fx   (target <= 1.3x; the arg output adds %.0f%% bytes)\n",
             (long long)C, m->ours_us / s->ours_us, 100.0 * (m->bytes / s->bytes - 1.0));
  }
  for (int64_t F : {32, 128}) {
    const Row* d = find_row("uniform_1M_10M", "sddmm", F);
    if (d)
      printf("  SDDMM dot K=%-4lld  %.2fx cuSPARSE, %.0f%% of floor   (target >= 90%% of floor)\n",
             (long long)F, d->ref_us / d->ours_us, 100.0 * floor_us(*d) / d->ours_us);
  }
  if (const Row* d = find_row("arxiv_169k_2.3M", "sddmm", 32))
    printf("  SDDMM dot arxiv K=32  %.2fx cuSPARSE   (target >= 1.3x)\n", d->ref_us / d->ours_us);
  if (const Row* d = find_row("arxiv_169k_2.3M", "spmm", 32))
    printf("  SpMM arxiv C=32  %.2fx cuSPARSE   (target >= 1.3x)\n", d->ref_us / d->ours_us);
}

static void write_outputs(const std::string& csv, const std::string& json) {
  if (!csv.empty()) {
    FILE* f = fopen(csv.c_str(), "w");
    if (!f) { perror("csv"); return; }
    fprintf(f, "suite,case,op,M,K,N,nnz,ours_us,ref_us,ref,ratio,ours_GBs,pct_copy_bw,ours_GFLOPs,ref_GFLOPs,rel_err,ok,ours_bitwise,ref_bitwise\n");
    for (auto& r : g_rows) {
      const double gbs = r.bytes / (r.ours_us * 1e3);
      fprintf(f, "%s,%s,%s,%lld,%lld,%lld,%lld,%.2f,%.2f,%s,%.3f,%.1f,%.1f,%.1f,%.1f,%.2e,%d,%d,%d\n",
              r.suite.c_str(), r.name.c_str(), r.op.c_str(), (long long)r.M, (long long)r.K,
              (long long)r.N, (long long)r.nnz, r.ours_us, r.ref_us, r.ref_name.c_str(),
              r.ref_us > 0 ? r.ref_us / r.ours_us : 0.0, gbs, 100 * gbs / g_copy_gbs,
              r.flops / (r.ours_us * 1e3), r.ref_us > 0 ? r.flops / (r.ref_us * 1e3) : 0.0, r.err,
              r.ok, r.bitwise_ours, r.bitwise_ref);
    }
    fclose(f);
  }
  // Geomean ratios per (suite, op, N).
  struct G { std::string key; double s = 0; int n = 0; };
  std::vector<G> gs;
  for (auto& r : g_rows) {
    if (r.ref_us <= 0) continue;
    const std::string key = r.suite + "/" + r.op + "/N" + std::to_string(r.N);
    auto it = std::find_if(gs.begin(), gs.end(), [&](const G& g) { return g.key == key; });
    if (it == gs.end()) { gs.push_back({key}); it = gs.end() - 1; }
    it->s += std::log(r.ref_us / r.ours_us);
    it->n++;
  }
  for (const std::string op : {"spmm", "sddmm", "fusedmm"}) {
    double s = 0;
    int n = 0;
    for (auto& r : g_rows)
      if (r.suite == "grid" && r.op == op && r.ref_us > 0) { s += std::log(r.ref_us / r.ours_us); ++n; }
    if (n) gs.push_back({"grid/" + op + "/all", s, n});
  }
  printf("\ngeomean speedups (reference time / ours):\n");
  for (auto& g : gs) printf("  %-28s x%.2f over %d cases\n", g.key.c_str(), std::exp(g.s / g.n), g.n);
  if (!json.empty()) {
    FILE* f = fopen(json.c_str(), "w");
    if (!f) { perror("json"); return; }
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    fprintf(f, "{\n  \"device\": \"%s\",\n  \"copy_bandwidth_GBs\": %.0f,\n  \"geomean\": {", p.name, g_copy_gbs);
    for (size_t i = 0; i < gs.size(); ++i)
      fprintf(f, "%s\n    \"%s\": {\"speedup\": %.4f, \"cases\": %d}", i ? "," : "", gs[i].key.c_str(),
              std::exp(gs[i].s / gs[i].n), gs[i].n);
    fprintf(f, "\n  },\n  \"rows\": [");
    for (size_t i = 0; i < g_rows.size(); ++i) {
      auto& r = g_rows[i];
      fprintf(f, "%s\n    {\"suite\": \"%s\", \"case\": \"%s\", \"op\": \"%s\", \"M\": %lld, \"K\": %lld, \"N\": %lld, \"nnz\": %lld, \"ours_us\": %.2f, \"ref_us\": %.2f, \"ref\": \"%s\", \"GBs\": %.1f, \"floor_us\": %.2f, \"GFLOPs\": %.1f, \"rel_err\": %.3e, \"ok\": %s, \"ours_bitwise\": %s, \"ref_bitwise\": %s}",
              i ? "," : "", r.suite.c_str(), r.name.c_str(), r.op.c_str(), (long long)r.M, (long long)r.K,
              (long long)r.N, (long long)r.nnz, r.ours_us, r.ref_us, r.ref_name.c_str(),
              r.bytes / (r.ours_us * 1e3), floor_us(r), r.flops / (r.ours_us * 1e3), r.err, r.ok ? "true" : "false",
              r.bitwise_ours ? "true" : "false", r.bitwise_ref ? "true" : "false");
    }
    fprintf(f, "\n  ]\n}\n");
    fclose(f);
  }
}

int main(int argc, char** argv) {
  std::string suite = "all", csv, json;
  int reps = 50;
  int64_t max_grid_nnz = int64_t(1) << 40;
  bool products = false, fused_grid = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--suite") suite = next();
    else if (a == "--csv") csv = next();
    else if (a == "--json") json = next();
    else if (a == "--reps") reps = std::atoi(next().c_str());
    else if (a == "--max-grid-nnz") max_grid_nnz = std::atoll(next().c_str());
    else if (a == "--products") products = true;
    else if (a == "--no-grid-fused") fused_grid = false;
    else if (a == "--copy-gbs") g_copy_gbs = std::atof(next().c_str());
    else if (a == "--repeats") g_repeats = std::max(2, std::atoi(next().c_str()));
    else { fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  const bool copy_given = g_copy_gbs > 0;
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  g_l2_bytes = p.l2CacheSize;
  if (g_copy_gbs <= 0) g_copy_gbs = copy_bandwidth_gbs();
  printf("device: %s, %d SMs, L2 %d MB, copy bandwidth %.0f GB/s (%s); reps %d (median), L2 flushed before each launch\n",
         p.name, p.multiProcessorCount, p.l2CacheSize >> 20, g_copy_gbs,
         copy_given ? "given" : "measured: 1 GiB device-to-device, read + write", reps);
  printf("ratio = reference time / ours (> 1: ours faster); floor = bytes-model time at that bandwidth, "
         "ours as %% of it (100%% = at the floor)\n");
  CuSparse cs;
  Timer tm;
  tm.reps = reps;
  if (suite == "issue") run_issue(cs, tm);
  if (suite == "graphs" || suite == "all") run_graphs(cs, tm, products);
  if (suite == "grid" || suite == "all") run_grid(cs, tm, max_grid_nnz, fused_grid);
  write_outputs(csv, json);
  return 0;
}
