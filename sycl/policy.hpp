// Launch policy of the portable SYCL kernels (host code only, plain C++17): which kernel instance
// and which nd_range a call gets, and the list of every instance these choices can produce.
//
// Kernels (sycl/kernels/*.hpp), a sub-group per row (or per row and head) except the SDDMM ones:
//   spmm_csr_sg     C >= SG: lanes over features, V features per lane, ntiles tiles of SG * V
//                   (one tile: `rows` consecutive rows per sub-group)
//   spmm_csr_narrow C <  SG: lanes over edges, a lane keeps all C <= V features
//   sddmm_dot_sg    dot: a run of (edge, head) pairs per sub-group, lanes over F, one
//                   transpose-reduce per SG pairs (NF > 0: F = NF * SG, the pairs walked one
//                   at a time with the X slice in registers; ONE_HEAD: kept across a row)
//   sddmm_csr       add: a work-item per row; dot only where sub-groups are 1 wide: a work-item
//                   per (edge, head)
//   fusedmm_csr_sg  lanes over D, V features per lane, ntiles tiles of SG * V
//   fusedmm_dot_rows_sg  dot, F = NF * SG (CPU devices): runs of `rows` rows, the
//                   run's scores into E by sddmm_dot_sg's run schedule, then per row the edge
//                   function in place and the aggregation as spmm_csr_sg walks a row
//   spmm_heads_sg / spmm_heads_narrow  spmm_csr_sg / spmm_csr_narrow's schedules over the H * D
//                   columns of a row, each column weighted by its head's W[k, h]
//   gatv2_scores_sg / gatv2_grad_sg  a sub-group per (row, head), lanes over the head's channels
//                   (scores: a butterfly per edge; grad: V channels per lane, tiles of SG * V)
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

#include "gnnsparse/args.hpp"
#include "instances.hpp"

namespace gnnsparse::sycl_rt {

// What the policy needs to know about a device (sycl/runtime.cpp queries it once per device).
struct DeviceCaps {
  bool esimd = false;  // aspect::ext_intel_esimd
  bool fp64 = false;
  bool cpu = false;    // info::device_type::cpu
  std::size_t max_wg = 1;
  std::size_t compute_units = 1;
  std::vector<std::size_t> sg_sizes;
  std::size_t preferred_sg = 1;  // 16 if supported, else the largest supported <= 32
  std::size_t cache_bytes = 0;   // info::device::global_mem_cache_size (CPU devices: one core's L2)
};

// One submission: the instance and a 1-D nd_range (global a multiple of local).
struct Launch {
  Instance inst;
  std::size_t global = 0, local = 1;
  long ntiles = 1;  // feature tiles per row (spmm_csr_sg, fusedmm_csr_sg)
  long chunk = 1;   // (edge, head) pairs per sub-group (sddmm_dot_sg)
  long rows = 1;    // rows per sub-group (spmm_csr_sg with ntiles == 1)
};

inline constexpr int kMaxV = 8;  // features per lane of the sub-group kernels

inline std::size_t round_up(std::size_t x, std::size_t m) { return (x + m - 1) / m * m; }

// Work-group size for `global` work-items. GPUs: four sub-groups. The OpenCL CPU runtime runs each
// work-group as one task of its thread pool, and per-group scheduling dominated small launches
// (a Cora-sized SpMM: 64 us with 64-wide groups, 33 us with 1024): there, the largest power of
// two <= 1024 that still leaves four groups per compute unit, never below four sub-groups.
inline std::size_t work_group_size(const DeviceCaps &c, std::size_t global) {
  std::size_t wg = c.preferred_sg * 4;
  if (c.cpu) {
    const std::size_t cap = std::min<std::size_t>(c.max_wg, 1024);
    const std::size_t want = global / (4 * std::max<std::size_t>(c.compute_units, 1));
    while (wg * 2 <= cap && wg * 2 <= want) wg *= 2;
  }
  return std::min(wg, c.max_wg);
}

inline void finish(const DeviceCaps &c, Launch &l) {
  l.local = work_group_size(c, l.global);
  l.global = round_up(std::max<std::size_t>(l.global, 1), l.local);
}

// Lanes over features: V is the smallest power of two (at most kMaxV) with SG * V covering the row;
// wider rows take ntiles tiles (each tile's sub-group walks the row's edges again).
inline void feature_tiles(long sg, long width, int &V, long &ntiles) {
  V = 1;
  while (V < kMaxV && long(V) * sg < width) V *= 2;
  ntiles = std::max(1L, (width + sg * V - 1) / (sg * V));
}

// The smallest power of two >= C (narrow SpMM: C < SG, so at most SG).
inline int narrow_width(long C) {
  int V = 1;
  while (V < C) V *= 2;
  return V;
}

// Rows per sub-group of spmm_csr_sg when a row is one feature tile. CPU devices: 8, fewer when
// that would leave under 64 sub-groups per compute unit. Measured on the OpenCL CPU device (2 cores,
// 2026-12-01, docs/performance.md): a Cora-sized graph (2,708 rows, C = 16) 17.7 -> 13.9 us a
// launch, 50k rows / 500k edges 1.01 -> 0.80 ms (C = 16) and 1.51 -> 1.16 ms (C = 32). GPUs: 1.
inline long spmm_rows_per_subgroup(const DeviceCaps &c, long M) {
  if (!c.cpu) return 1;
  const long want = 64 * long(std::max<std::size_t>(c.compute_units, 1));
  long r = 8;
  while (r > 1 && M / r < want) r /= 2;
  return r;
}

// Preconditions (checked by the dispatchers): M > 0, C > 0, dtype float32 or float64.
inline Launch spmm_launch(const DeviceCaps &c, const SpmmArgs &a) {
  const int sg = int(c.preferred_sg);
  const bool W = a.A.val != nullptr, ARG = a.arg != nullptr && has_arg(a.reduce);
  Launch l;
  if (a.C < sg) {
    l.inst = Instance::of(Kernel::spmm_narrow, a.dtype, a.A.itype, a.reduce, W, ARG, sg, narrow_width(a.C));
    l.global = std::size_t(a.A.M) * sg;
  } else {
    int V;
    feature_tiles(sg, a.C, V, l.ntiles);
    l.inst = Instance::of(Kernel::spmm_sg, a.dtype, a.A.itype, a.reduce, W, ARG, sg, V);
    l.rows = l.ntiles == 1 ? spmm_rows_per_subgroup(c, a.A.M) : 1;
    l.global = std::size_t((a.A.M + l.rows - 1) / l.rows * l.ntiles) * sg;
  }
  finish(c, l);
  return l;
}

// Preconditions: M > 0, H * D > 0, dtype float32 or float64. SpMM's choices over C = H * D columns.
inline Launch spmm_heads_launch(const DeviceCaps &c, const SpmmHeadsArgs &a) {
  const int sg = int(c.preferred_sg);
  const long C = long(a.H * a.D);
  Launch l;
  if (C < sg) {
    l.inst = Instance::of(Kernel::spmm_heads_narrow, a.dtype, a.A.itype, sg, narrow_width(C));
    l.global = std::size_t(a.A.M) * sg;
  } else {
    int V;
    feature_tiles(sg, C, V, l.ntiles);
    l.inst = Instance::of(Kernel::spmm_heads_sg, a.dtype, a.A.itype, sg, V);
    l.rows = l.ntiles == 1 ? spmm_rows_per_subgroup(c, a.A.M) : 1;
    l.global = std::size_t((a.A.M + l.rows - 1) / l.rows * l.ntiles) * sg;
  }
  finish(c, l);
  return l;
}

// Preconditions: M * H > 0, C > 0, dtype float32 or float64. One sub-group per (row, head).
inline Launch gatv2_launch(const DeviceCaps &c, const Gatv2Args &a, bool grad) {
  const int sg = int(c.preferred_sg);
  Launch l;
  if (grad) {
    int V;
    feature_tiles(sg, long(a.C), V, l.ntiles);
    l.inst = Instance::of(Kernel::gatv2_grad_sg, a.dtype, a.A.itype, sg, V);
  } else {
    l.inst = Instance::of(Kernel::gatv2_scores_sg, a.dtype, a.A.itype, sg);
  }
  l.global = std::size_t(a.A.M * a.H) * sg;
  finish(c, l);
  return l;
}

// (edge, head) pairs per sub-group of sddmm_dot_sg: batches of SG pairs, up to `batches` of them
// so the binary search that finds the first pair's row (and, for NF > 0, the first load of the
// row's X slice) is paid once per run, fewer when that would leave less than 64 sub-groups per
// compute unit (load balance over the cores).
inline long sddmm_chunk(const DeviceCaps &c, long pairs, long batches = 8) {
  const long sg = long(c.preferred_sg), want = 64 * long(std::max<std::size_t>(c.compute_units, 1));
  long b = batches;
  while (b > 1 && pairs / (sg * b) < want) b /= 2;
  return sg * b;
}

// Widths with a register-resident X slice in sddmm_dot_sg: F = NF * SG for NF = 1, 2, 4, 8 (else 0).
inline constexpr int kMaxSddmmNF = 8;
inline int sddmm_dot_nf(long sg, long F) {
  if (F % sg != 0) return 0;
  const long nf = F / sg;
  return (nf & (nf - 1)) == 0 && nf <= kMaxSddmmNF ? int(nf) : 0;
}

// Preconditions: nnz > 0, H > 0.
inline Launch sddmm_launch(const DeviceCaps &c, const SddmmArgs &a) {
  const int sg = int(c.preferred_sg);
  Launch l;
  // dot: the sub-group kernel at every F (on the CPU device it beat the work-item-per-pair kernel
  // 2.6-6.7x even at F = 1, 4, 8, where most lanes of a chunk of features idle: docs/performance.md).
  // F = 16, 32, 64, 128 (SG = 16): the instances that walk the pairs one at a time with X in
  // registers (NF > 0; ONE_HEAD for one head), in runs of up to 16 batches; on the CPU device they
  // were 1.4-2.5x faster than NF = 0 at every such F, one head or four (docs/performance.md,
  // 2026-12-02), and they give the same bits.
  if (a.op == SddmmOp::dot && sg >= 2) {
    const int nf = sddmm_dot_nf(sg, long(a.F));
    l.inst = Instance::of(Kernel::sddmm_dot_sg, a.dtype, a.A.itype, sg, nf, nf > 0 && a.H == 1);
    const long pairs = a.A.nnz * a.H;
    l.chunk = sddmm_chunk(c, pairs, nf > 0 ? 16 : 8);
    l.global = std::size_t((pairs + l.chunk - 1) / l.chunk) * sg;
  } else {
    // add: a work-item per row, all its entries and heads (a work-item per (edge, head) with a
    // binary search each took 58 ms for 1.1M edges x 4 heads on the CPU device, 2026-12-06)
    l.inst = Instance::of(Kernel::sddmm_csr, a.dtype, a.A.itype, a.op);
    l.global = std::size_t(a.op == SddmmOp::add ? a.A.M : a.A.nnz * a.H);
  }
  finish(c, l);
  return l;
}

// Widths of fusedmm_dot_rows_sg: F = NF * SG for NF = 1, 2, 4 (else 0).
inline constexpr int kMaxFusedNF = 4;
inline int fused_dot_nf(long sg, long F) {
  const int nf = sddmm_dot_nf(sg, F);
  return nf <= kMaxFusedNF ? nf : 0;
}

// Rows per sub-group of fusedmm_dot_rows_sg: about 32 batches of SG (edge, head) pairs per run, at
// most 64 rows, fewer when that would leave under 64 sub-groups per compute unit (as
// spmm_rows_per_subgroup). Measured on the OpenCL CPU device (2 cores, 2026-12-07, one head, F = D
// = 32, uniform graphs of 177k and 1M edges): 32 batches instead of 8 took 8-10 % off the scores
// (each run ends in a partial batch) and 5-8 % off the call; 16-64 alike.
inline long fused_rows_per_subgroup(const DeviceCaps &c, long M, long nnz, long sg) {
  const long want = 64 * long(std::max<std::size_t>(c.compute_units, 1));
  const long mean = std::max(1L, nnz / std::max(1L, M));
  long r = 1;
  while (r < 64 && r * 2 * mean <= 32 * sg) r *= 2;
  while (r > 1 && M / r < want) r /= 2;
  return r;
}

// Preconditions: M > 0, H > 0. CPU devices, dot with F = NF * SG (any number of heads):
// fusedmm_dot_rows_sg (whatever D, so the edge values of D = 0 and D > 0 are the same bits; one
// sub-group per run of rows takes all heads and D columns); else, or without rows_walk
// (GNNSPARSE_SYCL_FUSEDMM=sg, sycl/fusedmm.cpp), fusedmm_csr_sg. Measured on the OpenCL CPU
// device (2 cores, 2026-12-07, docs/performance.md): 1.1-3.6x fusedmm_csr_sg.
inline Launch fusedmm_launch(const DeviceCaps &c, const FusedArgs &a, bool rows_walk = true) {
  const int sg = int(c.preferred_sg);
  Launch l;
  int V;
  feature_tiles(sg, a.D, V, l.ntiles);
  const int nf = rows_walk && c.cpu && sg >= 2 && a.op == SddmmOp::dot ? fused_dot_nf(sg, long(a.F)) : 0;
  if (nf > 0) {
    l.inst = Instance::of(Kernel::fusedmm_dot_rows, a.dtype, a.A.itype, sg, nf, V, a.H == 1);
    l.rows = fused_rows_per_subgroup(c, long(a.A.M), long(a.A.nnz) * long(a.H), sg);  // pairs
    l.ntiles = 1;  // the kernel walks all D columns in chunks of SG * V
    l.global = std::size_t((a.A.M + l.rows - 1) / l.rows) * sg;
  } else {
    l.inst = Instance::of(Kernel::fusedmm_sg, a.dtype, a.A.itype, a.op, a.edge, a.A.val != nullptr, sg, V);
    // op add's edge values alone (D = 0): a (row, head) per lane (fusedmm_csr_sg's per-lane mode)
    l.global = a.op == SddmmOp::add && a.D == 0 ? std::size_t((a.A.M * a.H + sg - 1) / sg) * sg
                                                : std::size_t(a.A.M * a.H * l.ntiles) * sg;
  }
  finish(c, l);
  return l;
}

// ---- tiled SpMM for dense-ish inputs (sycl/kernels/tiles.hpp) ---------------------------------
// Which calls the tiled kernel covers: float32 features, sum or mean, no arg output, K > 0.
inline bool tiles_cover(const SpmmArgs &a) {
  return a.dtype == DType::f32 && (a.reduce == Reduce::sum || a.reduce == Reduce::mean) && a.A.M > 0 && a.A.K > 0 &&
         a.C > 0;
}

// Columns per lane of the tiled kernel: one sub-group covers SG * V output columns.
inline int tiles_v(long sg, long C) { return C <= sg ? 1 : C <= 2 * sg ? 2 : 4; }

// The method choice on CPU devices: the tiles cost ~ M K C (dense work), the sparse kernel
// ~ nnz C, so the rule is a density threshold. Measured on the OpenCL CPU device (2 cores,
// AVX-512, 2026-11-30; docs/tiles_sycl.md): the tiled kernel was slower than the sparse kernel at
// every measured density up to 1.0 (M, K in 1024..4096, C = 32 and 128): on a CPU the sparse
// kernel's X rows stay in cache, so it spends only ~1.4x more per multiply-add than the tiled
// kernel and does d times fewer of them (NumPy's BLAS product, ~3x the tiles' throughput, beat the
// sparse kernel from d ~ 0.3: a faster tiled kernel could cross there). No crossover was measured,
// so the threshold lies above every possible density: the policy never picks these tiles on a
// CPU (GNNSPARSE_SYCL_TILES=on forces them).
inline constexpr double kTilesCpuDensity = 2.0;  // > 1: never; set from a measured crossover
inline bool prefer_tiles_cpu(long M, long K, long nnz, long C) {
  if (M < 256 || K < 512 || C < 1) return false;
  return double(nnz) >= kTilesCpuDensity * double(M) * double(K);
}

inline Launch spmm_tiles_launch(const DeviceCaps &c, const SpmmArgs &a) {
  const long sg = long(c.preferred_sg);
  const int V = tiles_v(sg, a.C);
  const long RB = 16 / V, BM = RB * 4, WG = sg * 4, CW = sg * V;
  Launch l;
  l.inst = Instance::of(Kernel::spmm_tiles, DType::f32, a.A.itype, a.reduce, a.A.val != nullptr, int(sg), V);
  l.local = std::size_t(WG);
  l.global = std::size_t(((a.A.M + BM - 1) / BM) * ((a.C + CW - 1) / CW) * WG);
  return l;
}

// Tiled SDDMM (dot, float32, any H and F): a work-group of 16 sub-groups per (64 rows, head).
inline bool sddmm_tiles_cover(const SddmmArgs &a) {
  return a.dtype == DType::f32 && a.op == SddmmOp::dot && a.A.M > 0 && a.A.K > 0 && a.A.nnz > 0 && a.H > 0 &&
         a.F > 0;
}
// Measured on the OpenCL CPU device (2 cores, AVX-512, 2026-11-30; docs/tiles_sycl.md): in the
// density sweep (1024 x 1024, 2048 x 2048, 4096 x 1024; F = 32 and 128) the tiles became faster
// than the sparse SDDMM kernel between d = 0.1 and 0.2 on every shape (1.13x - 1.42x at 0.2), and
// on the grid's cases with d >= 0.2 they were 1.52x faster (geomean, 23 of 24 cases). The sparse
// kernel reduces every edge's dot product across a sub-group, the tiles reuse each staged slice
// of Y for 64 rows.
inline constexpr double kSddmmTilesCpuDensity = 0.2;
inline bool prefer_sddmm_tiles_cpu(long M, long K, long nnz, long F) {
  if (M < 256 || K < 512 || F < 1) return false;
  return double(nnz) >= kSddmmTilesCpuDensity * double(M) * double(K);
}
inline Launch sddmm_tiles_launch(const DeviceCaps &c, const SddmmArgs &a) {
  const long sg = long(c.preferred_sg), WG = sg * 16;
  Launch l;
  l.inst = Instance::of(Kernel::sddmm_tiles, DType::f32, a.A.itype, int(sg));
  l.local = std::size_t(WG);
  l.global = std::size_t(((a.A.M + 63) / 64) * a.H * WG);
  return l;
}

// ---- row-panel SpMM for dense-ish inputs (sycl/kernels/panel.hpp) ----------------------------
// Which calls the panel kernel covers: float32 features, sum or mean, no arg output, a stored entry.
inline bool panel_cover(const SpmmArgs &a) {
  return a.dtype == DType::f32 && (a.reduce == Reduce::sum || a.reduce == Reduce::mean) && a.A.M > 0 &&
         a.A.K > 0 && a.A.nnz > 0 && a.C > 0;
}

// Columns per lane: the smallest power of two (at most 8) with SG * V >= C; wider C in tiles of 8 SG.
inline int panel_v(long sg, long C) {
  int V = 1;
  while (V < 8 && long(V) * sg < C) V *= 2;
  return V;
}

// Chunk height of the cache schedule (rows of X per chunk): about kPanelVisitEntries entries of a row
// per chunk (each visit of a row costs a reload of its accumulators and a mispredicted loop exit),
// the chunk at most a quarter of the device cache, at least 16 rows. Measured on the OpenCL CPU
// device (docs/tiles_sycl.md, 2026-12-02): 64 - 256 KB chunks beat 16 - 32 KB ones at d = 0.1 - 0.3.
inline constexpr double kPanelVisitEntries = 32.0;
inline long panel_chunk_rows(const DeviceCaps &c, long M, long K, long nnz, long BN) {
  const double d = double(nnz) / (double(M) * double(K));
  const long cache = long(c.cache_bytes ? c.cache_bytes : (std::size_t(1) << 20));
  const long cap = std::max(16L, cache / 4 / (BN * long(sizeof(float))));
  const long want = d > 0 ? long(kPanelVisitEntries / d) : K;
  return std::max(16L, std::min({want, cap, K}));
}

// The method choice on CPU devices (GNNSPARSE_SYCL_PANEL unset or "auto"). The panel saves reads of X
// from beyond the core's cache and pays per visit of a row per chunk, so it can only win when X's
// column tile (K x BN floats) is well beyond the device cache, the rows are dense enough to share
// each chunk, the tile is a full 8 SG columns (the masked tail path is slow) and the columns are known
// sorted. Measured on the OpenCL CPU device (2 cores, 1 MB L2 per core, 2026-12-02, process CPU
// time, docs/tiles_sycl.md): with a 2 MB tile (K = 4096, N = 128) the panel was 1.18 - 1.36x the
// sparse kernel at density 0.3 (six measurements), 0.94 - 1.25x at 0.2, 0.9 - 1.2x at 0.1; at
// N = 32 or with the tile within 1 MB it was 0.2 - 1.0x (no traffic to save, only the visits to
// pay). So: tile >= 2 x cache and density >= 0.25, the cells where it won every time.
inline constexpr double kPanelCpuDensity = 0.25;
inline constexpr double kPanelCpuTileOverCache = 2.0;
inline bool prefer_panel_cpu(const DeviceCaps &c, long M, long K, long nnz, long C, int sorted_cols) {
  const long sg = long(c.preferred_sg), BN = 8 * sg;
  if (sorted_cols != 1 || M < 256 || C < BN || C % BN != 0) return false;
  const double cache = double(c.cache_bytes ? c.cache_bytes : (std::size_t(1) << 20));
  if (double(K) * double(BN) * sizeof(float) < kPanelCpuTileOverCache * cache) return false;
  return double(nnz) >= kPanelCpuDensity * double(M) * double(K);
}

// staged: the local-memory schedule (work-groups of 8 sub-groups x 4 rows); else the cache schedule
// (a sub-group of 32 rows per work-group), whose chunk height goes in Launch::chunk.
inline Launch spmm_panel_launch(const DeviceCaps &c, const SpmmArgs &a, bool staged) {
  const long sg = long(c.preferred_sg);
  const int V = panel_v(sg, a.C);
  const long BN = sg * V, RB = staged ? 4 : 32, RG = staged ? 8 : 1, BM = RB * RG, WG = sg * RG;
  Launch l;
  l.inst = Instance::of(Kernel::spmm_panel, DType::f32, a.A.itype, a.reduce, a.A.val != nullptr, int(sg), V, staged);
  l.local = std::size_t(WG);
  l.global = std::size_t(((a.A.M + BM - 1) / BM) * ((a.C + BN - 1) / BN) * WG);
  l.chunk = staged ? 8192 / BN : panel_chunk_rows(c, a.A.M, a.A.K, a.A.nnz, BN);
  return l;
}

// Every value of the code tables of gnnsparse/ops.hpp.
#define GNNSPARSE_REDUCE_(name, ...) Reduce::name,
#define GNNSPARSE_OP_(name, ...) SddmmOp::name,
#define GNNSPARSE_EDGE_(name, ...) EdgeFn::name,
inline constexpr Reduce kReduces[] = {GNNSPARSE_REDUCE_TABLE(GNNSPARSE_REDUCE_)};
inline constexpr SddmmOp kSddmmOps[] = {GNNSPARSE_SDDMM_OP_TABLE(GNNSPARSE_OP_)};
inline constexpr EdgeFn kEdgeFns[] = {GNNSPARSE_EDGE_FN_TABLE(GNNSPARSE_EDGE_)};
#undef GNNSPARSE_REDUCE_
#undef GNNSPARSE_OP_
#undef GNNSPARSE_EDGE_

// Every instance the launch functions above can return on a device of sub-group size sg (the
// ahead-of-time build compiles this list; a test checks the launch functions never leave it).
template <typename F>
void for_each_portable_instance(int sg, F &&f) {
  for (DType t : {DType::f32, DType::f64})
    for (IType i : {IType::i32, IType::i64}) {
      for (Reduce r : kReduces)
        for (bool arg : {false, true}) {
          if (arg && !has_arg(r)) continue;
          for (bool w : {false, true}) {
            for (int V = 1; V <= kMaxV; V *= 2) f(Instance::of(Kernel::spmm_sg, t, i, r, w, arg, sg, V));
            if (sg > 1)
              for (int V = 1; V <= narrow_width(sg - 1); V *= 2)
                f(Instance::of(Kernel::spmm_narrow, t, i, r, w, arg, sg, V));
          }
        }
      for (int V = 1; V <= kMaxV; V *= 2) f(Instance::of(Kernel::spmm_heads_sg, t, i, sg, V));
      if (sg > 1)
        for (int V = 1; V <= narrow_width(sg - 1); V *= 2) f(Instance::of(Kernel::spmm_heads_narrow, t, i, sg, V));
      f(Instance::of(Kernel::gatv2_scores_sg, t, i, sg));
      for (int V = 1; V <= kMaxV; V *= 2) f(Instance::of(Kernel::gatv2_grad_sg, t, i, sg, V));
      if (sg >= 2) {
        f(Instance::of(Kernel::sddmm_dot_sg, t, i, sg, 0, false));
        for (int nf = 1; nf <= kMaxSddmmNF; nf *= 2)
          for (bool one_head : {false, true}) f(Instance::of(Kernel::sddmm_dot_sg, t, i, sg, nf, one_head));
      }
      if (t == DType::f32)  // the tiled SpMM (spmm_tiles_launch)
        for (Reduce r : {Reduce::sum, Reduce::mean})
          for (bool w : {false, true})
            for (int V : {1, 2, 4}) f(Instance::of(Kernel::spmm_tiles, t, i, r, w, sg, V));
      if (t == DType::f32) f(Instance::of(Kernel::sddmm_tiles, t, i, sg));  // sddmm_tiles_launch
      if (t == DType::f32)  // the row-panel SpMM (spmm_panel_launch)
        for (Reduce r : {Reduce::sum, Reduce::mean})
          for (bool w : {false, true})
            for (int V : {1, 2, 4, 8})
              for (bool staged : {false, true}) f(Instance::of(Kernel::spmm_panel, t, i, r, w, sg, V, staged));
      for (SddmmOp op : kSddmmOps) f(Instance::of(Kernel::sddmm_csr, t, i, op));
      for (SddmmOp op : kSddmmOps)
        for (EdgeFn e : kEdgeFns)
          for (bool w : {false, true})
            for (int V = 1; V <= kMaxV; V *= 2) f(Instance::of(Kernel::fusedmm_sg, t, i, op, e, w, sg, V));
      if (sg >= 2)
        for (int nf = 1; nf <= kMaxFusedNF; nf *= 2)
          for (int V = 1; V <= kMaxV; V *= 2)
            for (bool one : {false, true}) f(Instance::of(Kernel::fusedmm_dot_rows, t, i, sg, nf, V, one));
    }
}

}  // namespace gnnsparse::sycl_rt
