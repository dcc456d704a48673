// bench_cuda: gnnsparse CUDA kernels against cuSPARSE, same process, same inputs.
//
//   bench_cuda [--suite grid|graphs|issue|sweep|check|all] [--csv out.csv] [--json out.json] [--reps 50]
//              [--max-grid-nnz N] [--products] [--no-grid-fused] [--copy-gbs G] [--repeats 10]
//              [--only CASE/OP/N] [--panel-variants]
//
// --only: run only the rows whose "case/op/N" contains the given text (e.g. uniform_1M_10M/sddmm/32,
// or fusedmm_yz): for profiling one kernel (ncu) or re-measuring one row.
//
// --suite issue: the rows of the kernel targets (uniform n=1M e=10M: SpMM sum at C = 16, 32, 33,
// 64, 65, 96, 128, 129, 160 against cuSPARSE; max with arg at C = 16, 32, 128 against our sum;
// SDDMM dot K = 32, 128; the arxiv-sized graph), then a summary of the ratios the targets name
// (odd width / next multiple of 32, max / sum). Ours is run --repeats times and compared bitwise.
//
// Method: every result is verified (ours against cuSPARSE, or FusedMM against our SDDMM followed
// by our SpMM; max error relative to the output's magnitude) before it is timed; each timing is
// the median of --reps launches, each between two cudaEvents, after 3 warm-up launches (and about
// a second of copies at start, so the GPU leaves its idle clocks); L2 is flushed before every
// timed launch, for ours and the reference alike: a 128 MB memset, then a read of another 128 MB
// (so no dirty line of the memset is written back while the timed kernel runs: that write-back
// doubled the time of L2-sized cases). Our kernels are given the longest row, as the Python
// frontend gives it. Ours is run twice and compared bitwise. Inputs are generated on the GPU
// (hash-based, seeded): the grid
// suite places each nonzero with probability `density` (sorted rows); graphs have uniformly
// random columns sorted within rows (cub segmented sort); the power-law graph has Zipf(1) row
// degrees (largest > 10^5) with rows shuffled.
//
// What each row prints:
//   ratio  = reference time / ours (> 1: ours is faster); the reference is cuSPARSE (SpMM: the
//            fastest of CSR_ALG1/2/3, named) or, for FusedMM, our SDDMM followed by our SpMM.
//   floor  = the time to move the bytes the op must move, and ours as % of it (100 % = at the
//            floor): the larger of (a) DRAM bytes at this device's copy bandwidth — CSR read once
//            (rowptr + col [+ val]) + gathered rows (each nonzero's row of X from DRAM, or X once
//            when it fits in L2) + output written once — and (b) the bytes that pass through L2
//            (CSR + every gathered row, hit or miss + output) at the L2 read bandwidth; the row
//            names which (DRAM or L2: graphs whose X fits in L2 are bound by L2). The copy
//            bandwidth is measured at start (device-to-device cudaMemcpy of 1 GiB, read + write
//            bytes, median of 20) or given with --copy-gbs; the L2 bandwidth too (a quarter-L2
//            buffer read 64 times per launch, median of 10).
// --suite grid also prints, per SpMM case: spmm_row (the row kernels forced, GNNSPARSE_CUDA_SPMM=row)
// and spmm_dense (cuBLAS SGEMM, fp32 without TF32, on the densified matrix; the densify is not
// timed), each against cuSPARSE; with --panel-variants also spmm_bn32 / spmm_bn64 / spmm_bn128 (the
// panel kernels forced with that column block); spmm_tc / spmm_tc_tf32 (the tensor-core panels of
// cuda/panel_tc.cu forced, GNNSPARSE_CUDA_SPMM=tc: 3xTF32, and TF32 at precision tf32, the latter
// checked against a 5e-3 bound). Then the grid's SpMM summary: ours against cuSPARSE and against
// the better of cuSPARSE and the dense product (geomean, worst cell), and the same for spmm_tc*.
// --suite sweep: SpMM over densities 0.002 .. 0.3 (auto, spmm_row, spmm_panel and spmm_tc forced,
// cuSPARSE) and the density from which the panel / tensor-core kernels beat the row kernels (what
// cuda/policy.cuh's PanelTuning / TcTuning are set from). --suite check: the panel kernels forced in
// every shape, column block, K split and index type against cuSPARSE (run_check), then the
// tensor-core panels against an fp64 reference on a CSR with repeated columns and empty rows
// (run_check_tc).
// Extra rows of the graph suite: spmm_nw (unweighted), spmm_max (max with an int64 arg output),
// spmm_bf16 / spmm_f16 (bf16 / fp16 features, against our fp32 sum), fusedmm_yz (FusedMM whose SpMM operand is the
// SDDMM's Y: one gathered row feeds both products), fused_sm (dot -> row softmax -> SpMM), fused_sm_h4
// (the same with 4 heads of N columns, the multi-head attention layers' shape).
#include <cublas_v2.h>
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
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_bench.cuh"
#include "gnnsparse/cuda.hpp"

using gnnsparse::CsrView;
using gnnsparse::DType;
using gnnsparse::EdgeFn;
using gnnsparse::IType;
using gnnsparse::Precision;
using gnnsparse::Reduce;
using gnnsparse::SddmmOp;

static double g_copy_gbs = 0;  // device copy bandwidth (read + write), GB/s
static int g_repeats = 2;      // runs of ours compared bitwise (first against each later one)
static double g_l2_bytes = 0;  // L2 size of the device
static double g_l2_gbs = 0;    // L2 read bandwidth (streaming reads of an L2-resident buffer), GB/s
static std::string g_only;     // --only: run the rows whose "case/op/N" contains this
static bool g_variants = false;  // --panel-variants: the panel kernels with each column block
static cublasHandle_t g_blas = nullptr;

// Sets an environment variable for the life of the object (the CUDA entry points read their
// method knobs, GNNSPARSE_CUDA_SPMM and GNNSPARSE_CUDA_PANEL_BN, at every call).
struct EnvSet {
  std::string name, old;
  bool had;
  EnvSet(const char* n, const char* v) : name(n) {
    const char* o = std::getenv(n);
    had = o != nullptr;
    if (had) old = o;
    setenv(n, v, 1);
  }
  ~EnvSet() {
    if (had) setenv(name.c_str(), old.c_str(), 1);
    else unsetenv(name.c_str());
  }
};
static bool wanted(const std::string& name, const std::string& op, int64_t N) {
  return g_only.empty() || (name + "/" + op + "/" + std::to_string(N)).find(g_only) != std::string::npos;
}

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
  A.sorted_cols = 1;  // grid_fill writes each row's columns in ascending order
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
  A.sorted_cols = 1;  // sorted within rows above
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

// About a second of copies before anything is timed: the GPU leaves its idle clocks (the first
// rows of a run on a freshly started machine came out 6-40 % slow without it).
static void warm_up() {
  const size_t bytes = size_t(1) << 30;
  void *a, *b;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemset(a, 1, bytes));
  for (int i = 0; i < 2000; ++i) CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
  CK(cudaDeviceSynchronize());
  CK(cudaFree(a));
  CK(cudaFree(b));
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

// L2 read bandwidth: a buffer of a quarter of the L2 read 64 times per launch (after one warm-up
// pass brings it in), bytes read over the median time of 10 launches.
static double l2_bandwidth_gbs() {
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  const int64_t bytes = (int64_t(p.l2CacheSize) / 4) & ~int64_t(15);
  const int64_t n = bytes / 16;
  const int passes = 64, threads = 256, blocks = p.multiProcessorCount * 8;
  float4* buf;
  float* out;
  CK(cudaMalloc(&buf, bytes));
  CK(cudaMalloc(&out, int64_t(blocks) * threads * sizeof(float)));
  CK(cudaMemset(buf, 0, bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> t(10);
  l2_read_kernel<<<blocks, threads>>>(buf, n, 1, out);
  for (auto& ms : t) {
    CK(cudaEventRecord(e0));
    l2_read_kernel<<<blocks, threads>>>(buf, n, passes, out);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaFree(buf));
  CK(cudaFree(out));
  return double(bytes) * passes / (t[t.size() / 2] * 1e6);
}

// ---- results --------------------------------------------------------------------------------

struct Row {
  std::string suite, name, op;
  int64_t M, K, N, nnz;
  double ours_us, ref_us;
  std::string ref_name;
  double bytes, flops, err;
  bool ok, bitwise_ours, bitwise_ref;
  double l2_bytes = 0;  // bytes through L2: CSR + every gathered row + output
};
static std::vector<Row> g_rows;

// The floor is the larger of two times: DRAM bytes at the copy bandwidth, and the bytes that pass
// through L2 (every gathered row, hit or miss) at the L2 read bandwidth. Graphs whose gathered rows
// fit in L2 (arxiv-sized) are bound by the second.
static double dram_floor_us(const Row& r) { return r.bytes / (g_copy_gbs * 1e3); }
static double l2_floor_us(const Row& r) { return r.l2_bytes / (g_l2_gbs * 1e3); }
static double floor_us(const Row& r) { return std::max(dram_floor_us(r), l2_floor_us(r)); }
static const char* floor_kind(const Row& r) { return l2_floor_us(r) > dram_floor_us(r) ? "L2" : "DRAM"; }

static void report(const Row& r) {
  const double gbs = r.bytes / (r.ours_us * 1e3);
  const double gf = r.flops / (r.ours_us * 1e3);
  char ratio[16] = "       -";
  if (r.ref_us > 0) snprintf(ratio, sizeof ratio, "%7.2fx", r.ref_us / r.ours_us);
  printf("%-6s %-28s %-10s nnz=%10lld N=%4lld  ours %10.1f us  ref %10.1f us (%-10s) %s  floor %9.1f us %-4s (%4.0f%%)  %7.0f GB/s  %8.0f GFLOP/s  err %.1e %s%s\n",
         r.suite.c_str(), r.name.c_str(), r.op.c_str(), (long long)r.nnz, (long long)r.N,
         r.ours_us, r.ref_us, r.ref_name.c_str(), ratio, floor_us(r), floor_kind(r), 100.0 * floor_us(r) / r.ours_us,
         gbs, gf, r.err, r.ok ? "ok" : "MISMATCH", r.bitwise_ours ? "" : " NONDETERMINISTIC");
  fflush(stdout);
  g_rows.push_back(r);
}

// ---- ours -----------------------------------------------------------------------------------

static void our_spmm(const Csr& A, const float* val, Reduce reduce, const void* X, void* Y,
                     int64_t* arg, int64_t N, DType dt = DType::f32, Precision prec = Precision::fp32) {
  gnnsparse::SpmmArgs a;
  a.A = A.view(val);
  a.dtype = dt;
  a.precision = prec;
  a.reduce = reduce;
  a.X = X;
  a.Y = Y;
  a.arg = arg;
  a.C = N;
  gnnsparse::cuda::spmm(a, 0);
}
static void our_sddmm_dot(const Csr& A, const float* X, const float* Y, float* E, int64_t F,
                          gnnsparse::Precision prec = gnnsparse::Precision::fp32) {
  gnnsparse::SddmmArgs a;
  a.A = A.view(nullptr);
  a.dtype = DType::f32;
  a.op = SddmmOp::dot;
  a.X = X;
  a.Y = Y;
  a.E = E;
  a.H = 1;
  a.F = F;
  a.precision = prec;
  gnnsparse::cuda::sddmm(a, 0);
}
// dot -> edge -> SpMM over Z, unweighted, H heads (one unless named), F = D = N per head.
static void our_fused_dot(const Csr& A, EdgeFn edge, const float* X, const float* Y,
                          const float* Z, float* out, int64_t N, int64_t H = 1) {
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
  a.H = H;
  a.F = N;
  a.D = N;
  gnnsparse::cuda::fusedmm(a, 0);
}

__global__ void to_bf16_kernel(const float* x, __nv_bfloat16* y, int64_t n) {
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k < n) y[k] = __float2bfloat16_rn(x[k]);
}
__global__ void from_bf16_kernel(const __nv_bfloat16* x, float* y, int64_t n) {
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k < n) y[k] = __bfloat162float(x[k]);
}
__global__ void to_f16_kernel(const float* x, __half* y, int64_t n) {
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k < n) y[k] = __float2half_rn(x[k]);
}
__global__ void from_f16_kernel(const __half* x, float* y, int64_t n) {
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k < n) y[k] = __half2float(x[k]);
}

// D (M x K, zeroed) = A densified; one block per row (the grid has no repeated columns).
__global__ void densify_kernel(const int* rowptr, const int* col, const float* val, float* D, int64_t M,
                               int64_t K) {
  for (int64_t i = blockIdx.x; i < M; i += gridDim.x)
    for (int p = rowptr[i] + threadIdx.x; p < rowptr[i + 1]; p += blockDim.x) D[i * K + col[p]] = val[p];
}

// ---- cases ----------------------------------------------------------------------------------

static double csr_bytes(const Csr& A, bool val) {
  return (A.M + 1) * 4.0 + A.nnz * 4.0 + (val ? A.nnz * 4.0 : 0.0);
}
// DRAM bytes of the gathered rows: X once when it fits in L2, else one row per nonzero.
static double gather_bytes(int64_t rows, int64_t nnz, int64_t width, int elem = 4) {
  const double whole = double(rows) * width * elem;
  return whole <= g_l2_bytes ? whole : double(nnz) * width * elem;
}
// Bytes through L2: every gathered row (hit or miss) plus what is streamed once.
static double l2_gather_bytes(int64_t nnz, int64_t width, int elem = 4) {
  return double(nnz) * width * elem;
}

// Checked, timed and bitwise-compared run of one variant of ours; fills r.ours_us and
// r.bitwise_ours (out: `bytes` bytes written by each run, compared between repeats).
static void time_ours(Timer& tm, Row& r, const std::function<void(void*)>& run, void* out,
                      int64_t bytes) {
  run(out);
  CK(cudaDeviceSynchronize());
  if (g_repeats > 1) {
    void* out2;
    CK(cudaMalloc(&out2, std::max<int64_t>(bytes, 4)));
    for (int rep = 1; rep < g_repeats; ++rep) {
      run(out2);
      CK(cudaDeviceSynchronize());
      r.bitwise_ours = r.bitwise_ours && same_bits(out, out2, bytes);
    }
    cudaFree(out2);
  }
  r.ours_us = tm.median_us([&] { run(out); });
}

static void bench_spmm(const std::string& suite, const std::string& name, CuSparse& cs, Timer& tm,
                       const Csr& A, int64_t N, bool with_ref = true) {
  const bool extra = suite == "graphs" || suite == "issue";
  const bool w_sum = wanted(name, "spmm", N), w_nw = extra && wanted(name, "spmm_nw", N),
             w_max = extra && wanted(name, "spmm_max", N),
             w_bf = suite == "graphs" && (N == 32 || N == 128) && wanted(name, "spmm_bf16", N),
             w_h = suite == "graphs" && (N == 32 || N == 128) && wanted(name, "spmm_f16", N);
  const bool dense_ish = suite == "grid" || suite == "sweep";
  const bool w_row = dense_ish && wanted(name, "spmm_row", N),
             w_panel = suite == "sweep" && wanted(name, "spmm_panel", N),
             w_dense = suite == "grid" && wanted(name, "spmm_dense", N),
             w_tc = dense_ish && wanted(name, "spmm_tc", N),
             w_tc32 = suite == "grid" && wanted(name, "spmm_tc_tf32", N);
  bool w_var = false;
  for (int bn : {32, 64, 128})
    w_var = w_var || (g_variants && suite == "grid" && N >= bn && wanted(name, "spmm_bn" + std::to_string(bn), N));
  const bool w_extra = w_row || w_panel || w_dense || w_var || w_tc || w_tc32;
  if (!w_sum && !w_nw && !w_max && !w_bf && !w_h && !w_extra) return;
  float* X = drand(A.K * N, 11 + N);
  float* Y = dalloc(A.M * N);
  float* Yr = dalloc(A.M * N);
  const double out_bytes = A.M * N * 4.0;
  Row r{suite, name, "spmm", A.M, A.K, N, A.nnz, 0, 0, "-", 0, 0, 0, true, true, true};
  r.bytes = csr_bytes(A, true) + gather_bytes(A.K, A.nnz, N) + out_bytes;
  r.l2_bytes = csr_bytes(A, true) + l2_gather_bytes(A.nnz, N) + out_bytes;
  r.flops = 2.0 * A.nnz * N;
  if (w_sum || w_bf || w_h || w_extra) {
    time_ours(tm, r, [&](void* y) { our_spmm(A, A.val, Reduce::sum, X, y, nullptr, N); }, Y,
              A.M * N * 4);
    if (with_ref) {
      int alg = -1;
      r.ref_us = cusparse_spmm(cs, tm, A, X, Yr, N, &alg, &r.bitwise_ref);
      r.ref_name = alg >= 0 ? kCusparseSpmmAlg[alg] : "none";
      r.err = rel_err(Y, Yr, A.M * N);
      r.ok = r.err < 1e-4;
    }
    if (w_sum) report(r);
  }
  // Another method on the same inputs, checked against cuSPARSE's result (in Yr) and timed.
  auto method_row = [&](const std::string& op, const std::function<void(void*)>& run, double bound = 1e-4) {
    Row u = r;
    u.op = op;
    u.bitwise_ours = true;
    time_ours(tm, u, run, Y, A.M * N * 4);
    if (with_ref) {
      u.err = rel_err(Y, Yr, A.M * N);
      u.ok = u.err < bound;
    }
    report(u);
  };
  auto sum_into = [&](void* y) { our_spmm(A, A.val, Reduce::sum, X, y, nullptr, N); };
  if (w_row) {
    EnvSet e("GNNSPARSE_CUDA_SPMM", "row");
    method_row("spmm_row", sum_into);
  }
  if (w_panel) {
    EnvSet e("GNNSPARSE_CUDA_SPMM", "panel");
    method_row("spmm_panel", sum_into);
  }
  // the tensor-core panels forced: 3xTF32 (fp32 accuracy: the panel kernels' bound), and TF32
  // products (precision tf32: operands with 10-bit significands, checked against a looser bound)
  if (w_tc) {
    EnvSet e("GNNSPARSE_CUDA_SPMM", "tc");
    method_row("spmm_tc", sum_into);
  }
  if (w_tc32) {
    EnvSet e("GNNSPARSE_CUDA_SPMM", "tc");
    method_row("spmm_tc_tf32", [&](void* y) {
      our_spmm(A, A.val, Reduce::sum, X, y, nullptr, N, DType::f32, Precision::tf32);
    }, 5e-3);
  }
  for (int bn : {32, 64, 128}) {
    const std::string op = "spmm_bn" + std::to_string(bn);
    if (!(g_variants && suite == "grid" && N >= bn && wanted(name, op, N))) continue;
    EnvSet e("GNNSPARSE_CUDA_SPMM", "panel"), f("GNNSPARSE_CUDA_PANEL_BN", std::to_string(bn).c_str());
    method_row(op, sum_into);
  }
  if (w_dense) {
    float* D = dalloc(A.M * A.K);
    CK(cudaMemset(D, 0, A.M * A.K * sizeof(float)));
    densify_kernel<<<static_cast<unsigned>(std::min<int64_t>(A.M, 65535)), 256>>>(A.rowptr, A.col, A.val, D, A.M, A.K);
    CK(cudaGetLastError());
    const float one = 1.f, zero = 0.f;
    // row-major Y (M x N) = D (M x K) X (K x N), as column-major Y^T = X^T D^T
    method_row("spmm_dense", [&](void* y) {
      if (cublasSgemm(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(A.M),
                      static_cast<int>(A.K), &one, X, static_cast<int>(N), D, static_cast<int>(A.K), &zero,
                      static_cast<float*>(y), static_cast<int>(N)) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasSgemm failed\n");
        exit(1);
      }
    });
    cudaFree(D);
  }
  if (w_nw) {
    Row u = r;
    u.op = "spmm_nw";
    u.ref_us = 0;
    u.ref_name = "-";
    u.bitwise_ours = true;
    time_ours(tm, u, [&](void* y) { our_spmm(A, nullptr, Reduce::sum, X, y, nullptr, N); }, Y,
              A.M * N * 4);
    u.bytes = csr_bytes(A, false) + gather_bytes(A.K, A.nnz, N) + out_bytes;
    u.l2_bytes = csr_bytes(A, false) + l2_gather_bytes(A.nnz, N) + out_bytes;
    report(u);
  }
  if (w_max) {
    Row m = r;
    m.op = "spmm_max";
    m.ref_us = 0;
    m.ref_name = "-";
    m.bitwise_ours = true;
    // values and args in one comparison: Y follows the args in a scratch of both (args first, so
    // that they are 8-byte aligned whatever M * N is: at M * N * 4 they were not for odd M * N)
    char* both;
    CK(cudaMalloc(&both, A.M * N * 12));
    time_ours(tm, m, [&](void* o) {
      char* c = static_cast<char*>(o);
      our_spmm(A, nullptr, Reduce::max, X, c + A.M * N * 8, reinterpret_cast<int64_t*>(c), N);
    }, both, A.M * N * 12);
    m.bytes = csr_bytes(A, false) + gather_bytes(A.K, A.nnz, N) + out_bytes + A.M * N * 8.0;
    m.l2_bytes = csr_bytes(A, false) + l2_gather_bytes(A.nnz, N) + out_bytes + A.M * N * 8.0;
    report(m);
    cudaFree(both);
  }
  // 16-bit features (fp32 values, fp32 accumulation, 16-bit output): against our fp32 sum, same run.
  auto half_row = [&](const char* op, DType dt, auto to16, auto from16, double tol) {
    void *X16, *Y16;
    CK(cudaMalloc(&X16, A.K * N * 2));
    CK(cudaMalloc(&Y16, A.M * N * 2));
    to16(X, X16, A.K * N);
    Row b = r;
    b.op = op;
    b.ref_us = r.ours_us;
    b.ref_name = "ours_fp32";
    b.bitwise_ours = true;
    time_ours(tm, b, [&](void* y) { our_spmm(A, A.val, Reduce::sum, X16, y, nullptr, N, dt); }, Y16,
              A.M * N * 2);
    from16(Y16, Yr, A.M * N);
    our_spmm(A, A.val, Reduce::sum, X, Y, nullptr, N);  // the fp32 result (Y may hold another row's)
    CK(cudaDeviceSynchronize());
    b.err = rel_err(Yr, Y, A.M * N);
    b.ok = b.err < tol;
    b.bytes = csr_bytes(A, true) + gather_bytes(A.K, A.nnz, N, 2) + A.M * N * 2.0;
    b.l2_bytes = csr_bytes(A, true) + l2_gather_bytes(A.nnz, N, 2) + A.M * N * 2.0;
    report(b);
    cudaFree(X16);
    cudaFree(Y16);
  };
  const unsigned in_blocks = static_cast<unsigned>((A.K * N + 255) / 256),
                 out_blocks = static_cast<unsigned>((A.M * N + 255) / 256);
  if (w_bf)  // inputs and output rounded to 8 significant bits
    half_row("spmm_bf16", DType::bf16,
             [&](const float* x, void* y, int64_t n) {
               to_bf16_kernel<<<in_blocks, 256>>>(x, static_cast<__nv_bfloat16*>(y), n);
               CK(cudaGetLastError());
             },
             [&](const void* y, float* out, int64_t n) {
               from_bf16_kernel<<<out_blocks, 256>>>(static_cast<const __nv_bfloat16*>(y), out, n);
               CK(cudaGetLastError());
             },
             3e-2);
  if (w_h)  // 11 significant bits
    half_row("spmm_f16", DType::f16,
             [&](const float* x, void* y, int64_t n) {
               to_f16_kernel<<<in_blocks, 256>>>(x, static_cast<__half*>(y), n);
               CK(cudaGetLastError());
             },
             [&](const void* y, float* out, int64_t n) {
               from_f16_kernel<<<out_blocks, 256>>>(static_cast<const __half*>(y), out, n);
               CK(cudaGetLastError());
             },
             4e-3);
  cudaFree(X);
  cudaFree(Y);
  cudaFree(Yr);
}

// --suite grid adds, per SDDMM case: sddmm_tc (the tensor-core kernel forced, GNNSPARSE_CUDA_SDDMM=tc,
// exact fp32 by 3xTF32), sddmm_tc_tf32 (the same at precision tf32) and sddmm_row (sddmm.cu's
// kernels forced, GNNSPARSE_CUDA_SDDMM=row), each checked against cuSPARSE's result before it is
// timed and repeated bitwise; then the grid's SDDMM summary (print_sddmm_summary).
static void bench_sddmm(const std::string& suite, const std::string& name, CuSparse& cs,
                        Timer& tm, const Csr& A, int64_t F, bool with_ref = true) {
  const bool w_auto = wanted(name, "sddmm", F), grid = suite == "grid";
  const bool w_tc = grid && wanted(name, "sddmm_tc", F), w_tf32 = grid && wanted(name, "sddmm_tc_tf32", F),
             w_row = grid && wanted(name, "sddmm_row", F);
  if (!w_auto && !w_tc && !w_tf32 && !w_row) return;
  float* X = drand(A.M * F, 21 + F);
  float* Yd = drand(A.K * F, 22 + F);
  float* E = dalloc(A.nnz);
  float* Er = dalloc(A.nnz);
  Row r{suite, name, "sddmm", A.M, A.K, F, A.nnz, 0, 0, "-", 0, 0, 0, true, true, true};
  time_ours(tm, r, [&](void* e) { our_sddmm_dot(A, X, Yd, static_cast<float*>(e), F); }, E, A.nnz * 4);
  if (with_ref) {
    r.ref_us = cusparse_sddmm(cs, tm, A, X, Yd, Er, F);
    r.ref_name = "SDDMM_DEF";
    r.err = rel_err(E, Er, A.nnz);
    r.ok = r.err < 1e-4;
  }
  r.bytes = csr_bytes(A, false) + A.M * F * 4.0 + gather_bytes(A.K, A.nnz, F) + A.nnz * 4.0;
  r.l2_bytes = csr_bytes(A, false) + A.M * F * 4.0 + l2_gather_bytes(A.nnz, F) + A.nnz * 4.0;
  r.flops = double(A.nnz) * (2.0 * F - 1.0);
  if (w_auto) report(r);
  // A forced method on the same inputs: checked against cuSPARSE's result (in Er), then timed.
  auto method_row = [&](const char* op, const char* method, gnnsparse::Precision prec, double tol) {
    EnvSet e("GNNSPARSE_CUDA_SDDMM", method);
    Row u = r;
    u.op = op;
    u.bitwise_ours = true;
    time_ours(tm, u, [&](void* o) { our_sddmm_dot(A, X, Yd, static_cast<float*>(o), F, prec); }, E, A.nnz * 4);
    if (with_ref) {
      u.err = rel_err(E, Er, A.nnz);
      u.ok = u.err < tol;
    }
    report(u);
  };
  if (w_tc) method_row("sddmm_tc", "tc", gnnsparse::Precision::fp32, 1e-5);
  if (w_tf32) method_row("sddmm_tc_tf32", "tc", gnnsparse::Precision::tf32, 1e-2);
  if (w_row) method_row("sddmm_row", "row", gnnsparse::Precision::fp32, 1e-4);
  cudaFree(X);
  cudaFree(Yd);
  cudaFree(E);
  cudaFree(Er);
}

// FusedMM (dot, unweighted; F = D = N) against our own SDDMM followed by our SpMM weighted by the
// SDDMM output (edge none; for softmax the row is reported without a reference). Verified against
// that composition. With y_is_z the SpMM operand is the SDDMM's Y (one gathered row feeds both
// products: the bytes model counts one gather).
// With H > 1 (softmax only: the multi-head attention layers' shape) each of X, Y, Z holds H heads
// of N columns and the row is reported without a reference (op fused_sm_hH).
static void bench_fused(const std::string& suite, const std::string& name, Timer& tm,
                        const Csr& A, int64_t N, EdgeFn edge = EdgeFn::none, bool y_is_z = false,
                        int64_t H = 1) {
  std::string op = edge == EdgeFn::none ? (y_is_z ? "fusedmm_yz" : "fusedmm") : "fused_sm";
  if (H > 1) op += "_h" + std::to_string(H);
  if (!wanted(name, op, N)) return;
  const int64_t W = H * N;  // columns of X, Y, Z and out
  float* X = drand(A.M * W, 31 + N);
  float* Yd = drand(A.K * W, 32 + N);
  float* Z = y_is_z ? Yd : drand(A.K * W, 33 + N);
  float* O = dalloc(A.M * W);
  float* Or = dalloc(A.M * W);
  float* E = dalloc(A.nnz);
  auto unfused = [&] {
    our_sddmm_dot(A, X, Yd, E, N);
    our_spmm(A, E, Reduce::sum, Z, Or, nullptr, N);
  };
  Row r{suite, name, op, A.M, A.K, N, A.nnz, 0, 0, "-", 0, 0, 0, true, true, true};
  time_ours(tm, r, [&](void* o) { our_fused_dot(A, edge, X, Yd, Z, static_cast<float*>(o), N, H); }, O,
            A.M * W * 4);
  if (edge == EdgeFn::none && H == 1) {
    unfused();
    CK(cudaDeviceSynchronize());
    r.err = rel_err(O, Or, A.M * N);
    r.ok = r.err < 1e-3;
    r.ref_us = tm.median_us(unfused);
    r.ref_name = "ours_sd+sp";
  }
  const int gathers = y_is_z ? 1 : 2;
  r.bytes = csr_bytes(A, false) + A.M * W * 4.0 + gathers * gather_bytes(A.K, A.nnz, W) + A.M * W * 4.0;
  r.l2_bytes = csr_bytes(A, false) + A.M * W * 4.0 + gathers * l2_gather_bytes(A.nnz, W) + A.M * W * 4.0;
  r.flops = double(A.nnz) * (4.0 * W);
  report(r);
  cudaFree(X);
  cudaFree(Yd);
  if (!y_is_z) cudaFree(Z);
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
        char nm[96];
        snprintf(nm, sizeof nm, "M%lld_K%lld_d%.1f", (long long)M, (long long)K, d);
        bool any = false;
        for (int64_t N : Ns)
          for (const char* op : {"spmm", "sddmm", "fusedmm"}) any = any || wanted(nm, op, N);
        if (!any) continue;
        Csr A = make_grid(M, K, d, 1000 + K * 7 + mm * 3 + int(d * 10));
        for (int64_t N : Ns) {
          bench_spmm("grid", nm, cs, tm, A, N);
          bench_sddmm("grid", nm, cs, tm, A, N);
          if (fused) bench_fused("grid", nm, tm, A, N);
        }
        A.free_all();
      }
}

__global__ void widen_kernel(const int* a, int64_t* b, int64_t n) {
  const int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k < n) b[k] = a[k];
}

// --suite check: one SpMM configuration (the knobs set by the caller), int64 indices when rp64 /
// col64 are given, run twice into outputs poisoned with NaN (an unwritten element fails), checked
// against Yr (error bound 1e-5 relative) and for bitwise equality of the two runs.
static bool check_spmm_twice(const Csr& A, const int64_t* rp64, const int64_t* col64, Reduce reduce, const float* X,
                             int64_t N, float* Y, float* Y2, const float* Yr, double* err, bool* same) {
  gnnsparse::SpmmArgs a;
  a.A = A.view();
  if (rp64 != nullptr) {
    a.A.itype = IType::i64;
    a.A.rowptr = rp64;
    a.A.col = col64;
  }
  a.dtype = DType::f32;
  a.reduce = reduce;
  a.X = X;
  a.C = N;
  CK(cudaMemset(Y, 0xff, A.M * N * sizeof(float)));
  CK(cudaMemset(Y2, 0xff, A.M * N * sizeof(float)));
  a.Y = Y;
  gnnsparse::cuda::spmm(a, 0);
  a.Y = Y2;
  gnnsparse::cuda::spmm(a, 0);
  CK(cudaDeviceSynchronize());
  *err = rel_err(Y, Yr, A.M * N);
  *same = same_bits(Y, Y2, A.M * N * 4);
  return *err < 1e-5 && *same;
}

// --suite check, the tensor-core panels (GNNSPARSE_CUDA_SPMM=tc, cuda/panel_tc.cu): a 301 x 777 CSR
// built here (density 0.2, every tenth row empty, two repeated columns in every other row, a run of
// 40 entries of one column in every seventh (more than the kernel's 32-entry window), one row of
// every column twice over), against an fp64 reference computed here: every column block and K
// split, int32 and int64 indices, sum (mean in two configurations), N = 4, 12, 32, 36, 128, 132.
// Outputs poisoned (NaN) before each run; each run twice (bitwise); error bound 1e-5 of max |ref|.
static void run_check_tc() {
  const int64_t M = 301, K = 777;
  std::vector<int> rp(1, 0), cl;
  std::vector<float> vl;
  uint64_t st = 99;
  auto rnd = [&]() { st = mix(st + 0x9e3779b97f4a7c15ull); return double(st >> 11) * (1.0 / 9007199254740992.0); };
  for (int64_t i = 0; i < M; ++i) {
    std::vector<int> c;
    if (i % 10 != 9) {
      for (int64_t j = 0; j < K; ++j)
        if (i == 5 || rnd() < 0.2) c.push_back(static_cast<int>(j));
      if (i == 5) c.insert(c.end(), c.begin(), c.end());
      if (i % 2 == 0 && c.size() > 2) c.push_back(c[c.size() / 3]), c.push_back(c[c.size() / 2]);
      if (i % 7 == 0 && !c.empty()) c.insert(c.end(), 39, c[c.size() / 2]);
      std::sort(c.begin(), c.end());
    }
    for (int x : c) cl.push_back(x), vl.push_back(static_cast<float>(rnd() * 2.0 - 1.0));
    rp.push_back(static_cast<int>(cl.size()));
  }
  const int64_t nnz = static_cast<int64_t>(cl.size());
  Csr A;
  A.M = M;
  A.K = K;
  A.nnz = nnz;
  A.sorted_cols = 1;
  CK(cudaMalloc(&A.rowptr, (M + 1) * sizeof(int)));
  CK(cudaMalloc(&A.col, nnz * sizeof(int)));
  CK(cudaMalloc(&A.val, nnz * sizeof(float)));
  CK(cudaMemcpy(A.rowptr, rp.data(), (M + 1) * sizeof(int), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(A.col, cl.data(), nnz * sizeof(int), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(A.val, vl.data(), nnz * sizeof(float), cudaMemcpyHostToDevice));
  A.maxdeg = max_degree(A);
  int64_t *rp64, *col64;
  CK(cudaMalloc(&rp64, (M + 1) * sizeof(int64_t)));
  CK(cudaMalloc(&col64, nnz * sizeof(int64_t)));
  widen_kernel<<<static_cast<unsigned>((M + 256) / 256), 256>>>(A.rowptr, rp64, M + 1);
  widen_kernel<<<static_cast<unsigned>((nnz + 255) / 256), 256>>>(A.col, col64, nnz);
  CK(cudaGetLastError());
  const char* cfg[][2] = {{"", ""}, {"32", "1"}, {"32", "3"}, {"64", "8"}, {"128", "1"}, {"128", "2"}};
  int failed = 0, total = 0;
  for (int64_t N : {4, 12, 32, 36, 128, 132}) {
    float* X = drand(K * N, 61 + N);
    std::vector<float> hx(K * N);
    CK(cudaMemcpy(hx.data(), X, K * N * sizeof(float), cudaMemcpyDeviceToHost));
    float* Y = dalloc(M * N);
    float* Y2 = dalloc(M * N);
    float* Yr = dalloc(M * N);
    for (int mean = 0; mean < 2; ++mean) {
      std::vector<float> ref(M * N);
      for (int64_t i = 0; i < M; ++i) {
        const int deg = rp[i + 1] - rp[i];
        for (int64_t n = 0; n < N; ++n) {
          double acc = 0;
          for (int p = rp[i]; p < rp[i + 1]; ++p) acc += double(vl[p]) * double(hx[cl[p] * N + n]);
          ref[i * N + n] = static_cast<float>(deg == 0 ? 0.0 : (mean ? acc / deg : acc));
        }
      }
      CK(cudaMemcpy(Yr, ref.data(), M * N * sizeof(float), cudaMemcpyHostToDevice));
      for (int wide = 0; wide < 2; ++wide)
        for (const auto& c : cfg) {
          if (mean && !(c[0][0] == '\0' || std::string(c[1]) == "3")) continue;
          EnvSet e("GNNSPARSE_CUDA_SPMM", "tc"), b("GNNSPARSE_CUDA_TC_BN", c[0]), sp("GNNSPARSE_CUDA_TC_SPLIT", c[1]);
          double err = 0;
          bool same = false;
          const bool ok = check_spmm_twice(A, wide ? rp64 : nullptr, wide ? col64 : nullptr,
                                           mean ? Reduce::mean : Reduce::sum, X, N, Y, Y2, Yr, &err, &same);
          failed += !ok;
          ++total;
          printf("check tc N=%-4lld %s %s bn=%-3s split=%-2s err %.1e %s%s\n", (long long)N, wide ? "int64" : "int32",
                 mean ? "mean" : "sum ", c[0][0] ? c[0] : "-", c[1][0] ? c[1] : "-", err, ok ? "ok" : "FAILED",
                 same ? "" : " (not bitwise)");
        }
    }
    cudaFree(X);
    cudaFree(Y);
    cudaFree(Y2);
    cudaFree(Yr);
  }
  printf("check tc: %d of %d configurations failed (nnz %lld, longest row %lld)\n", failed, total, (long long)nnz,
         (long long)A.maxdeg);
  cudaFree(rp64);
  cudaFree(col64);
  A.free_all();
}

// --suite check: the panel kernels forced in every shape (the scalar one at N = 1, 7, 33), column
// block and K split, int32 and int64 indices, on a 301 x 777 matrix of density 0.2, each against
// cuSPARSE and run twice (bitwise). One line per configuration, then the number that failed.
static void run_check(CuSparse& cs, Timer& tm) {
  Csr A = make_grid(301, 777, 0.2, 4242);
  int64_t *rp64, *col64;
  CK(cudaMalloc(&rp64, (A.M + 1) * sizeof(int64_t)));
  CK(cudaMalloc(&col64, A.nnz * sizeof(int64_t)));
  widen_kernel<<<static_cast<unsigned>((A.M + 256) / 256), 256>>>(A.rowptr, rp64, A.M + 1);
  widen_kernel<<<static_cast<unsigned>((A.nnz + 255) / 256), 256>>>(A.col, col64, A.nnz);
  CK(cudaGetLastError());
  const char* cfg[][2] = {{"", ""}, {"32", "3"}, {"64", "8"}, {"128", "1"}, {"128", "2"}};
  int failed = 0, total = 0;
  for (int64_t N : {1, 7, 33, 4, 12, 32, 64, 96, 128}) {
    float* X = drand(A.K * N, 51 + N);
    float* Y = dalloc(A.M * N);
    float* Y2 = dalloc(A.M * N);
    float* Yr = dalloc(A.M * N);
    int alg = -1;
    tm.reps = 3;
    cusparse_spmm(cs, tm, A, X, Yr, N, &alg);
    for (int wide = 0; wide < 2; ++wide)
      for (const auto& c : cfg) {
        if (N % 4 != 0 && c[0][0] != '\0') continue;  // the scalar shape has no column-block choice
        EnvSet e("GNNSPARSE_CUDA_SPMM", "panel"), b("GNNSPARSE_CUDA_PANEL_BN", c[0]), sp("GNNSPARSE_CUDA_PANEL_SPLIT", c[1]);
        double err = 0;
        bool same = false;
        const bool ok = check_spmm_twice(A, wide ? rp64 : nullptr, wide ? col64 : nullptr, Reduce::sum, X, N, Y, Y2,
                                         Yr, &err, &same);
        failed += !ok;
        ++total;
        printf("check N=%-4lld %s bn=%-3s split=%-2s err %.1e %s%s\n", (long long)N, wide ? "int64" : "int32",
               c[0][0] ? c[0] : "-", c[1][0] ? c[1] : "-", err, ok ? "ok" : "FAILED", same ? "" : " (not bitwise)");
      }
    cudaFree(X);
    cudaFree(Y);
    cudaFree(Y2);
    cudaFree(Yr);
  }
  printf("check: %d of %d configurations failed\n", failed, total);
  cudaFree(rp64);
  cudaFree(col64);
  A.free_all();
  run_check_tc();
}

// --suite check, SDDMM: the tensor-core kernel forced (GNNSPARSE_CUDA_SDDMM=tc) at N = 4 .. 128, K
// splits (the plan's, 1, 3, 8: GNNSPARSE_CUDA_SDDMM_TC_SPLIT), int32 and int64 indices, fp32 (and
// tf32 with the plan's split), on three matrices: 301 x 777 at density 0.2 (partial panels and
// chunks), 40 x 5000 at 0.3 (one panel, many slices), 1000 x 300 at 0.02 (short and empty rows).
// E is poisoned (NaN) before each run; each run is checked against cuSPARSE and repeated bitwise;
// that the tensor-core path ran is seen through an invalid split knob, which only that path reads.
static void run_check_sddmm(CuSparse& cs, Timer& tm) {
  struct Shape { int64_t M, K; double d; uint64_t seed; };
  const Shape shapes[] = {{301, 777, 0.2, 4343}, {40, 5000, 0.3, 4444}, {1000, 300, 0.02, 4545}};
  int failed = 0, total = 0;
  for (const Shape& sh : shapes) {
    Csr A = make_grid(sh.M, sh.K, sh.d, sh.seed);
    int64_t *rp64, *col64;
    CK(cudaMalloc(&rp64, (A.M + 1) * sizeof(int64_t)));
    CK(cudaMalloc(&col64, std::max<int64_t>(1, A.nnz) * sizeof(int64_t)));
    widen_kernel<<<static_cast<unsigned>((A.M + 256) / 256), 256>>>(A.rowptr, rp64, A.M + 1);
    widen_kernel<<<static_cast<unsigned>((A.nnz + 255) / 256), 256>>>(A.col, col64, A.nnz);
    CK(cudaGetLastError());
    for (int64_t N : {4, 12, 32, 36, 64, 128}) {
      float* X = drand(A.M * N, 61 + N);
      float* Y = drand(A.K * N, 62 + N);
      float* E = dalloc(A.nnz);
      float* E2 = dalloc(A.nnz);
      float* Er = dalloc(A.nnz);
      tm.reps = 3;
      cusparse_sddmm(cs, tm, A, X, Y, Er, N);
      for (int wide = 0; wide < 2; ++wide)
        for (const char* split : {"", "1", "3", "8"})
          for (const auto prec : {gnnsparse::Precision::fp32, gnnsparse::Precision::tf32}) {
            if (prec == gnnsparse::Precision::tf32 && split[0] != '\0') continue;
            EnvSet e("GNNSPARSE_CUDA_SDDMM", "tc"), sp("GNNSPARSE_CUDA_SDDMM_TC_SPLIT", split);
            gnnsparse::SddmmArgs a;
            a.A = A.view(nullptr);
            if (wide) {
              a.A.itype = IType::i64;
              a.A.rowptr = rp64;
              a.A.col = col64;
            }
            a.dtype = DType::f32;
            a.op = SddmmOp::dot;
            a.X = X;
            a.Y = Y;
            a.H = 1;
            a.F = N;
            a.precision = prec;
            CK(cudaMemset(E, 0xff, A.nnz * 4));  // NaN: an entry left unwritten fails the check
            CK(cudaMemset(E2, 0xff, A.nnz * 4));
            a.E = E;
            gnnsparse::cuda::sddmm(a, 0);
            a.E = E2;
            gnnsparse::cuda::sddmm(a, 0);
            CK(cudaDeviceSynchronize());
            bool taken = false;
            {
              EnvSet bad("GNNSPARSE_CUDA_SDDMM_TC_SPLIT", "0");
              try {
                gnnsparse::cuda::sddmm(a, 0);
              } catch (const std::invalid_argument&) {
                taken = true;
              }
            }
            CK(cudaDeviceSynchronize());
            const bool tf = prec == gnnsparse::Precision::tf32;
            const double err = rel_err(E, Er, A.nnz);
            const bool same = same_bits(E, E2, A.nnz * 4), ok = err < (tf ? 1e-2 : 1e-5) && same && taken;
            failed += !ok;
            ++total;
            printf("check sddmm_tc M=%-4lld K=%-4lld N=%-4lld %s %s split=%-2s err %.1e %s%s%s\n", (long long)A.M,
                   (long long)A.K, (long long)N, wide ? "int64" : "int32", tf ? "tf32" : "fp32",
                   split[0] ? split : "-", err, ok ? "ok" : "FAILED", same ? "" : " (not bitwise)",
                   taken ? "" : " (tc path not taken)");
          }
      cudaFree(X);
      cudaFree(Y);
      cudaFree(E);
      cudaFree(E2);
      cudaFree(Er);
    }
    cudaFree(rp64);
    cudaFree(col64);
    A.free_all();
  }
  printf("check sddmm_tc: %d of %d configurations failed\n", failed, total);
}

// SpMM over densities at two shapes: where the panel kernels overtake the row kernels.
static void run_sweep(CuSparse& cs, Timer& tm) {
  const int64_t shapes[][2] = {{4096, 4096}, {16384, 4096}};
  const double dens[] = {0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3};
  for (const auto& sh : shapes)
    for (double d : dens) {
      char nm[96];
      snprintf(nm, sizeof nm, "M%lld_K%lld_d%.3f", (long long)sh[0], (long long)sh[1], d);
      bool any = false;
      for (int64_t N : {32, 128})
        for (const char* op : {"spmm", "spmm_row", "spmm_panel", "spmm_tc"}) any = any || wanted(nm, op, N);
      if (!any) continue;
      Csr A = make_grid(sh[0], sh[1], d, 7000 + sh[0] + int(d * 1000));
      for (int64_t N : {32, 128}) bench_spmm("sweep", nm, cs, tm, A, N);
      A.free_all();
    }
}

// The dense-ish summaries: the grid's SpMM (ours = what the dispatch picked) against cuSPARSE, the
// dense product and the better of the two; the sweep's crossover of the panel and row kernels.
static const Row* find_row_in(const std::string& suite, const std::string& name, const std::string& op, int64_t N) {
  for (auto& r : g_rows)
    if (r.suite == suite && r.name == name && r.op == op && r.N == N) return &r;
  return nullptr;
}
static void print_dense_summaries() {
  struct Acc {
    double s = 0;
    int n = 0;
    void add(double x) { s += std::log(x); ++n; }
    double get() const { return n ? std::exp(s / n) : 0.0; }
  };
  bool header = false;
  for (int64_t Nsel : {int64_t(32), int64_t(128), int64_t(0)}) {
    Acc vs_sp, vs_best, dense_sp, row_sp, vs_dense;
    double worst = 1e30, max_err = 0;
    std::string worst_name;
    bool all_ok = true, all_bitwise = true;
    for (auto& r : g_rows) {
      if (r.suite != "grid" || r.op != "spmm" || r.ref_us <= 0 || (Nsel && r.N != Nsel)) continue;
      vs_sp.add(r.ref_us / r.ours_us);
      max_err = std::max(max_err, r.err);
      all_ok = all_ok && r.ok;
      all_bitwise = all_bitwise && r.bitwise_ours;
      double best = r.ref_us;
      if (const Row* d = find_row_in("grid", r.name, "spmm_dense", r.N)) {
        best = std::min(best, d->ours_us);
        dense_sp.add(r.ref_us / d->ours_us);
        vs_dense.add(d->ours_us / r.ours_us);
      }
      if (const Row* w = find_row_in("grid", r.name, "spmm_row", r.N)) row_sp.add(r.ref_us / w->ours_us);
      vs_best.add(best / r.ours_us);
      if (best / r.ours_us < worst) {
        worst = best / r.ours_us;
        worst_name = r.name + "/N" + std::to_string(r.N);
      }
    }
    if (!vs_sp.n) continue;
    if (!header) {
      printf("\ngrid SpMM (ours = the dispatch's choice; ratios = other time / ours, geomeans):\n");
      header = true;
    }
    printf("  N=%-4s %2d cases: vs cuSPARSE x%.2f | vs dense SGEMM x%.2f | vs better of the two x%.2f, worst "
           "x%.2f (%s) | dense/cuSPARSE x%.2f | row kernels/cuSPARSE x%.2f | max err %.1e%s%s\n",
           Nsel ? std::to_string(Nsel).c_str() : "all", vs_sp.n, vs_sp.get(), vs_dense.get(), vs_best.get(), worst,
           worst_name.c_str(), dense_sp.get(), row_sp.get(), max_err, all_ok ? "" : " (MISMATCH)",
           all_bitwise ? "" : " (NONDETERMINISTIC)");
    // the tensor-core panels forced (3xTF32 and TF32), against cuSPARSE, the dense SGEMM and the
    // better of the two
    for (const char* op : {"spmm_tc", "spmm_tc_tf32"}) {
      Acc t_sp, t_dense, t_best;
      double t_worst = 1e30, t_err = 0;
      std::string t_worst_name;
      bool t_ok = true, t_bits = true;
      for (auto& r : g_rows) {
        if (r.suite != "grid" || r.op != op || r.ref_us <= 0 || (Nsel && r.N != Nsel)) continue;
        t_sp.add(r.ref_us / r.ours_us);
        t_err = std::max(t_err, r.err);
        t_ok = t_ok && r.ok;
        t_bits = t_bits && r.bitwise_ours;
        double best = r.ref_us;
        if (const Row* d = find_row_in("grid", r.name, "spmm_dense", r.N)) {
          best = std::min(best, d->ours_us);
          t_dense.add(d->ours_us / r.ours_us);
        }
        t_best.add(best / r.ours_us);
        if (best / r.ours_us < t_worst) {
          t_worst = best / r.ours_us;
          t_worst_name = r.name + "/N" + std::to_string(r.N);
        }
      }
      if (!t_sp.n) continue;
      printf("    %-13s %2d cases: vs cuSPARSE x%.2f | vs dense SGEMM x%.2f | vs better of the two x%.2f, worst "
             "x%.2f (%s) | max err %.1e%s%s\n",
             op, t_sp.n, t_sp.get(), t_dense.get(), t_best.get(), t_worst, t_worst_name.c_str(), t_err,
             t_ok ? "" : " (MISMATCH)", t_bits ? "" : " (NONDETERMINISTIC)");
    }
  }
  // sweep: per (kernel, shape, N), the densities in order and the lowest density from which the
  // kernel (the CUDA-core panels, the tensor-core panels) is faster than the row kernels at every
  // density measured
  for (const char* op : {"spmm_panel", "spmm_tc"}) {
    std::vector<std::string> shapes;
    for (auto& r : g_rows)
      if (r.suite == "sweep" && r.op == op) {
        const std::string sh = r.name.substr(0, r.name.rfind("_d")) + "/N" + std::to_string(r.N);
        if (std::find(shapes.begin(), shapes.end(), sh) == shapes.end()) shapes.push_back(sh);
      }
    if (!shapes.empty())
      printf("\nsweep (%s / row / cuSPARSE us per density; crossover = %s faster from there on):\n", op, op);
    for (auto& sh : shapes) {
      std::vector<std::pair<double, double>> pr;  // (density, row / op)
      printf("  %-22s", sh.c_str());
      for (auto& r : g_rows) {
        if (r.suite != "sweep" || r.op != op) continue;
        if (r.name.substr(0, r.name.rfind("_d")) + "/N" + std::to_string(r.N) != sh) continue;
        const Row* w = find_row_in("sweep", r.name, "spmm_row", r.N);
        if (!w) continue;
        const double d = std::atof(r.name.c_str() + r.name.rfind("_d") + 2);
        pr.push_back({d, w->ours_us / r.ours_us});
        printf(" d=%.3f %.0f/%.0f/%.0f", d, r.ours_us, w->ours_us, r.ref_us);
      }
      std::sort(pr.begin(), pr.end());
      double cross = -1;
      for (size_t i = pr.size(); i-- > 0;) {
        if (pr[i].second > 1.0) cross = pr[i].first;
        else break;
      }
      if (cross > 0) printf("  crossover <= %.3f\n", cross);
      else printf("  crossover: none\n");
    }
  }
}

// The grid's SDDMM per N: each method (auto = the dispatch's choice, tc, tc tf32, row) against
// cuSPARSE (geomeans, worst cell), the tensor-core kernel against the row kernels, errors.
static void print_sddmm_summary() {
  bool header = false;
  for (int64_t Nsel : {int64_t(32), int64_t(128), int64_t(0)}) {
    const char* ops[] = {"sddmm", "sddmm_tc", "sddmm_tc_tf32", "sddmm_row"};
    double s[4] = {0, 0, 0, 0}, worst[4] = {1e30, 1e30, 1e30, 1e30}, err[4] = {0, 0, 0, 0};
    int n[4] = {0, 0, 0, 0};
    bool ok = true, bitwise = true;
    double s_tr = 0;
    int n_tr = 0, tc_wins = 0;
    for (auto& r : g_rows) {
      if (r.suite != "grid" || r.ref_us <= 0 || (Nsel && r.N != Nsel)) continue;
      for (int k = 0; k < 4; ++k) {
        if (r.op != ops[k]) continue;
        s[k] += std::log(r.ref_us / r.ours_us);
        ++n[k];
        worst[k] = std::min(worst[k], r.ref_us / r.ours_us);
        err[k] = std::max(err[k], r.err);
        ok = ok && r.ok;
        bitwise = bitwise && r.bitwise_ours;
      }
      if (r.op == "sddmm_tc")
        if (const Row* w = find_row_in("grid", r.name, "sddmm_row", r.N)) {
          s_tr += std::log(w->ours_us / r.ours_us);
          ++n_tr;
          tc_wins += w->ours_us > r.ours_us;
        }
    }
    if (!n[0] && !n[1]) continue;
    if (!header) {
      printf("\ngrid SDDMM dot (ratios = cuSPARSE time / ours: geomean, worst cell; max error vs cuSPARSE):\n");
      header = true;
    }
    printf("  N=%-4s", Nsel ? std::to_string(Nsel).c_str() : "all");
    for (int k = 0; k < 4; ++k)
      if (n[k]) printf(" | %s x%.2f (worst x%.2f, err %.1e, %d)", ops[k], std::exp(s[k] / n[k]), worst[k], err[k], n[k]);
    if (n_tr) printf(" | tc / row kernels x%.2f, tc faster in %d of %d", std::exp(s_tr / n_tr), tc_wins, n_tr);
    printf("%s%s\n", ok ? "" : " (MISMATCH)", bitwise ? "" : " (NONDETERMINISTIC)");
  }
}

// Can this case hold a wanted row? (--only "case/op/N": the case part must match; a pattern
// without "/" may name an op or a width, so every case is generated.)
static bool case_wanted(const std::string& name) {
  if (g_only.empty()) return true;
  const size_t slash = g_only.find('/');
  return slash == std::string::npos || name.find(g_only.substr(0, slash)) != std::string::npos;
}

static void run_graphs(CuSparse& cs, Timer& tm, bool products) {
  if (case_wanted("uniform_1M_10M")) {
    Csr A = make_uniform(1000000, 10000000, 1);
    for (int64_t C : {16, 32, 47, 128}) bench_spmm("graphs", "uniform_1M_10M", cs, tm, A, C);
    for (int64_t F : {32, 128}) bench_sddmm("graphs", "uniform_1M_10M", cs, tm, A, F);
    for (int64_t N : {32, 128}) bench_fused("graphs", "uniform_1M_10M", tm, A, N);
    for (int64_t N : {32, 128}) bench_fused("graphs", "uniform_1M_10M", tm, A, N, EdgeFn::none, true);
    bench_fused("graphs", "uniform_1M_10M", tm, A, 32, EdgeFn::softmax);
    A.free_all();
  }
  if (case_wanted("powerlaw_1M_10M")) {
    Csr A = make_powerlaw(1000000, 10000000, 2);
    printf("powerlaw: max degree %lld\n", (long long)A.maxdeg);
    for (int64_t C : {16, 32, 128}) bench_spmm("graphs", "powerlaw_1M_10M", cs, tm, A, C);
    for (int64_t F : {32, 128}) bench_sddmm("graphs", "powerlaw_1M_10M", cs, tm, A, F);
    bench_fused("graphs", "powerlaw_1M_10M", tm, A, 32);
    bench_fused("graphs", "powerlaw_1M_10M", tm, A, 32, EdgeFn::none, true);
    A.free_all();
  }
  if (case_wanted("arxiv_169k_2.3M")) {
    Csr A = make_uniform(169343, 2332486, 3);
    bench_spmm("graphs", "arxiv_169k_2.3M", cs, tm, A, 32);
    bench_spmm("graphs", "arxiv_169k_2.3M", cs, tm, A, 128);
    bench_sddmm("graphs", "arxiv_169k_2.3M", cs, tm, A, 32);
    bench_fused("graphs", "arxiv_169k_2.3M", tm, A, 32);
    bench_fused("graphs", "arxiv_169k_2.3M", tm, A, 32, EdgeFn::softmax, false, 4);  // TransformerConv's shape
    A.free_all();
  }
  if (products && case_wanted("products_2.4M_62M")) {
    Csr A = make_uniform(2449029, 61859140, 4);
    bench_spmm("graphs", "products_2.4M_62M", cs, tm, A, 47);  // the GCN's output layer (47 classes)
    bench_spmm("graphs", "products_2.4M_62M", cs, tm, A, 128);
    A.free_all();
  }
}

static const Row* find_row(const std::string& name, const std::string& op, int64_t N) {
  for (auto& r : g_rows)
    if (r.name == name && r.op == op && r.N == N) return &r;
  return nullptr;
}

// The graph suite's targets (each the ratio its row states, then the target), printed after the
// rows; a row the run did not produce is left out.
static void print_graph_targets() {
  printf("\ntargets of the graph suite (measured -> target):\n");
  auto floor_pct = [](const Row* r) { return 100.0 * floor_us(*r) / r->ours_us; };
  const char* uni = "uniform_1M_10M";
  const char* pl = "powerlaw_1M_10M";
  const char* ax = "arxiv_169k_2.3M";
  for (const char* g : {uni, pl})
    for (int64_t C : {16, 32, 128}) {
      if (const Row* r = find_row(g, "spmm", C))
        printf("  SpMM %-16s C=%-4lld %5.0f %% of floor -> >= %s\n", g, (long long)C, floor_pct(r),
               g == uni && C > 16 ? "95 % (keep)" : (g == uni ? "90 %" : "85 %"));
      if (const Row* r = find_row(g, "spmm_max", C))
        printf("  SpMM max+arg %-8s C=%-4lld %5.0f %% of floor -> >= 85 %%\n", g == uni ? "uniform" : "powerlaw",
               (long long)C, floor_pct(r));
    }
  for (int64_t C : {32, 128})
    if (const Row* r = find_row(ax, "spmm", C))
      printf("  SpMM arxiv C=%-4lld              %5.2fx cuSPARSE (%.0f %% of the %s floor) -> >= 1.3x\n", (long long)C,
             r->ref_us / r->ours_us, floor_pct(r), floor_kind(*r));
  if (const Row* r = find_row(ax, "sddmm", 32))
    printf("  SDDMM arxiv K=32               %5.2fx cuSPARSE (%.0f %% of the %s floor) -> >= 1.3x\n",
           r->ref_us / r->ours_us, floor_pct(r), floor_kind(*r));
  for (int64_t F : {32, 128})
    if (const Row* r = find_row(uni, "sddmm", F))
      printf("  SDDMM uniform K=%-4lld          %5.0f %% of floor (%.2fx cuSPARSE) -> >= 90 %%\n", (long long)F,
             floor_pct(r), r->ref_us / r->ours_us);
  for (const char* g : {uni, pl, ax})
    for (int64_t N : {32, 128}) {
      if (const Row* r = find_row(g, "fusedmm", N))
        printf("  FusedMM %-16s N=%-4lld %5.2fx our SDDMM + SpMM, %.0f %% of floor -> >= 1.0x, >= 85 %%\n", g,
               (long long)N, r->ref_us / r->ours_us, floor_pct(r));
      if (const Row* r = find_row(g, "fusedmm_yz", N))
        printf("  FusedMM Y is Z %-9s N=%-4lld %5.2fx our SDDMM + SpMM -> >= 1.7x\n", g, (long long)N,
               r->ref_us / r->ours_us);
    }
  for (const char* g : {uni, ax})
    for (int64_t C : {32, 128})
      for (const char* op : {"spmm_bf16", "spmm_f16"})
        if (const Row* r = find_row(g, op, C))
          printf("  SpMM %-4s %-16s C=%-4lld %5.2fx our fp32 -> >= 1.8x (C = 128)\n", op + 5, g, (long long)C,
                 r->ref_us / r->ours_us);
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
    else if (a == "--only") g_only = next();
    else if (a == "--panel-variants") g_variants = true;
    else { fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  const bool copy_given = g_copy_gbs > 0;
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  g_l2_bytes = p.l2CacheSize;
  warm_up();
  if (g_copy_gbs <= 0) g_copy_gbs = copy_bandwidth_gbs();
  g_l2_gbs = l2_bandwidth_gbs();
  printf("device: %s, %d SMs, L2 %d MB, copy bandwidth %.0f GB/s (%s), L2 read bandwidth %.0f GB/s "
         "(measured: a quarter-L2 buffer read 64 times); reps %d (median), L2 flushed before each launch\n",
         p.name, p.multiProcessorCount, p.l2CacheSize >> 20, g_copy_gbs,
         copy_given ? "given" : "measured: 1 GiB device-to-device, read + write", g_l2_gbs, reps);
  printf("ratio = reference time / ours (> 1: ours faster); floor = the larger of the DRAM bytes at the copy "
         "bandwidth and the L2 bytes (every gathered row) at the L2 bandwidth, named; ours as %% of it\n");
  CuSparse cs;
  if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "cublasCreate failed\n");
    return 1;
  }
  Timer tm;
  tm.reps = reps;
  if (suite == "issue") run_issue(cs, tm);
  if (suite == "graphs" || suite == "all") {
    run_graphs(cs, tm, products);
    print_graph_targets();
  }
  if (suite == "grid" || suite == "all") run_grid(cs, tm, max_grid_nnz, fused_grid);
  if (suite == "sweep") run_sweep(cs, tm);
  if (suite == "check") run_check(cs, tm);
  if (suite == "check") run_check_sddmm(cs, tm);
  write_outputs(csv, json);
  print_dense_summaries();
  print_sddmm_summary();
  return 0;
}
