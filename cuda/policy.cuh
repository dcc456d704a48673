// Launch policy for every CUDA kernel of the package, in one place (CUB-style: named constexpr
// tuning fields plus one plan function per op). Kernels read only the plan they are given; the
// numbers below were measured on the H200 (sm_90): docs/cuda_results.md says how.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "gnnsparse/ops.hpp"

namespace gnnsparse::cuda_detail {

inline int64_t pow2ceil(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

// ---- register caps per architecture ----------------------------------------------------------
// The row kernels ask __launch_bounds__ for the most resident blocks that compile without spilling,
// values found on sm_90 builds. nvcc 13.0's sm_80 code of a few instances needs more registers at
// the same cap and spilled 8-104 bytes (ptxas -v, 2026-12-07: fp32 SpMM max / min with int64
// indices, SDDMM dot, the fp32 one-vector FusedMM walk, ...); those instances ask for one block
// fewer in the device passes below sm_90, so the sm_90 code stays as measured. kBelowSm90: a device
// pass for sm_80 .. sm_89 (the host pass, which ignores launch bounds, sees false).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
inline constexpr bool kBelowSm90 = true;
#else
inline constexpr bool kBelowSm90 = false;
#endif

// The min-blocks argument of __launch_bounds__: `blocks` (the sm_90 value; 0: none, the bound on
// threads alone), one fewer below sm_90 where the instance spilled there (`sm80_spills`), and an
// explicit 1 for a kernel without one: with the bound on threads alone ptxas keeps such a kernel at
// 64 registers and spills rather than give up a resident block.
constexpr int arch_min_blocks(int blocks, bool sm80_spills) {
  return kBelowSm90 && sm80_spills ? (blocks > 1 ? blocks - 1 : 1) : blocks;
}

// ---- the hub pass (segments.cuh) ------------------------------------------------------------
// Rows longer than `thr` nonzeros (hubs) are not walked by one group. The nnz range is cut into
// fixed segments of `seg` entries; a map kernel finds each segment's first and last row once (so
// no later kernel searches rowptr); a segment kernel reduces each (segment, hub row) piece into a
// workspace slot; a combine kernel folds the slots of each hub row in a fixed order. SDDMM, whose
// pieces need no combining, writes its hub pieces directly. Fixed segments and a fixed fold order
// keep results bitwise reproducible.
struct SegmentTuning {
  static constexpr int64_t kMinSegment = 256;  // rows up to this length are never hubs
  static constexpr int64_t kHubFactor = 16;    // hub = row longer than 16x the average row
  static constexpr int64_t kMaxHub = int64_t(1) << 30;  // cap on the hub threshold
  static constexpr int64_t kWorkspaceElems = int64_t(1) << 23;  // cap on partial-slot elements
  static constexpr int64_t kMaxSegments = int64_t(1) << 22;    // segments per pass (32-bit counts in the combine)
  static constexpr int kMapThreads = 256;          // map kernel: one thread per segment
  static constexpr int kFlagThreads = 256;         // hub flag kernel (max degree unknown)
  static constexpr int64_t kFlagMaxBlocks = 1024;  // and its grid cap (grid-stride loop)
  static constexpr int kCombineThreads = 512;      // combine: one warp per segment looks for a row
  static constexpr int kCombineMinBlocks = 2;      // <= 64 registers: most combine blocks find no
                                                   // row, so waves of them must be cheap (1 block
                                                   // per SM at 87 registers: 18.5 waves, 112 us)
                                                   // (Cmb::kLoads slots per thread in flight)
  static constexpr int kCombineRowThreads = 512;    // the combine by rows: a thread per segment,
                                                   // a block for the rows too long for a warp
  static constexpr int64_t kCombineWarpElems = 2048;  // a warp folds rows of up to this many slot
                                                      // elements (<= 8 rounds of 8 loads a lane)
  static constexpr int64_t kCombineRowsSumWidth = 16;  // GNNSPARSE_CUDA_HUB_COMBINE=auto: SpMM sums up
                                                       // to this width combine by rows (measured
                                                       // faster there only; segments.cuh)
};

struct SegmentPlan {
  int64_t seg = 0;        // segment length in nonzeros; 0 = no hub pass
  int64_t thr = 0;        // hub rows: deg > thr, thr >= seg (set even when there is no pass)
  int64_t nsegments = 0;  // ceil(nnz / seg) when there is a pass
  // What the row kernels take: they leave rows longer than this to the hub pass (0 = none).
  int64_t row_limit() const { return seg > 0 ? thr : 0; }
  int64_t map_blocks() const {
    return (nsegments + SegmentTuning::kMapThreads - 1) / SegmentTuning::kMapThreads;
  }
  int64_t combine_row_blocks() const {
    constexpr int NT = SegmentTuning::kCombineRowThreads;
    return (nsegments + NT - 1) / NT;
  }
  int64_t combine_blocks() const {
    constexpr int NW = SegmentTuning::kCombineThreads / 32;
    return (nsegments + NW - 1) / NW;
  }
};

// Tuning overrides for the bench (read at every plan): GNNSPARSE_CUDA_HUB_FACTOR replaces
// kHubFactor, GNNSPARSE_CUDA_HUB_WORKSPACE kWorkspaceElems; unset or "" keeps the default.
inline int64_t hub_override(const char* name, int64_t dflt) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return dflt;
  char* stop = nullptr;
  const long long v = std::strtoll(e, &stop, 10);
  if (*stop != '\0' || v < 1 || v > (int64_t(1) << 40))
    throw std::invalid_argument(std::string("gnnsparse cuda: ") + name + " must be a positive integer, got '" + e + "'");
  return v;
}

// Hub threshold: kHubFactor times the average row, at least kMinSegment, a power of two.
// At most kMaxHub (2^30), so every row piece one group reduces has int32 edge offsets.
inline int64_t hub_threshold(int64_t M, int64_t nnz) {
  const int64_t avg = M > 0 ? nnz / M : 0;
  const int64_t factor = hub_override("GNNSPARSE_CUDA_HUB_FACTOR", SegmentTuning::kHubFactor);
  return std::min<int64_t>(SegmentTuning::kMaxHub,
                           std::max<int64_t>(SegmentTuning::kMinSegment, pow2ceil(avg * factor)));
}

// Segments start at `min_seg` nonzeros and double until the workspace fits under
// kWorkspaceElems (2 slots of `slot_elems` elements per segment: the row that holds its first and
// the row that holds its last entry; slot_elems 0: no workspace). The threshold is raised to the
// segment length if needed, so a hub is longer than a segment and a segment meets at most two hub
// rows. max_deg is the longest row if known, else -1 (then every matrix with more than thr
// nonzeros runs the pass, whose flag kernel lets the hub kernels return at once when no row is a
// hub).
inline SegmentPlan plan_segments(int64_t M, int64_t nnz, int64_t max_deg, int64_t min_seg,
                                 int64_t slot_elems) {
  SegmentPlan p;
  int64_t seg = min_seg;
  const int64_t cap = slot_elems > 0 ? hub_override("GNNSPARSE_CUDA_HUB_WORKSPACE", SegmentTuning::kWorkspaceElems) : 0;
  while (slot_elems > 0 && nnz / seg * 2 * slot_elems > cap) seg <<= 1;
  while ((nnz + seg - 1) / seg > SegmentTuning::kMaxSegments) seg <<= 1;  // nnz > 2^30 only
  p.thr = std::max(hub_threshold(M, nnz), seg);
  const bool hubs = max_deg < 0 ? nnz > p.thr : max_deg > p.thr;
  p.seg = hubs ? seg : 0;
  p.nsegments = hubs ? (nnz + seg - 1) / seg : 0;
  return p;
}

// ---- SpMM (spmm.cu) -------------------------------------------------------------------------
// Row-parallel SpMM: one group of G = Gc * P lanes per row; Gc lanes split the columns, each lane
// owning TL vectors of V columns (16 bytes when C and alignment allow; TL = 2 on the vector path
// for sum / mean, 1 for max / min); P lane sets split a long row's edges; every lane walks its
// edges in ascending order with U edges' loads in flight, the next batch's column indices (and
// values) loaded while the current batch's rows are gathered. Measured on the H200 (2026-12-01,
// ncu): one vector per lane with twice the edges in flight (so that one load instruction covers a
// whole row) was slower at C = 32 / 128 (396 / 1565 us against 322 / 1345): with ~10 entries per
// row the second batch of 8 is mostly empty, so fewer bytes are in flight on average.
struct SpmmTuning {
  static constexpr int kBlockThreads = 256;        // 8 warps per block (the register budget below)
  // The row kernel's launches: a block stays resident until its longest row is done, so on a
  // skewed graph small blocks hold fewer idle warps (H100, 2026-12-06, 64 vs 256: power-law
  // C = 16 / 32 / 128 60 / 79 / 97 -> 64 / 86 / 103 % of the floor, arxiv-sized C = 32 80 -> 86 %,
  // uniform within 1 % or better (C = 47: 71 -> 74 %); GNNSPARSE_CUDA_ROW_BLOCK=64|128|256
  // overrides it)
  static constexpr int kRowBlockThreads = 64;
  static constexpr int kRowMinBlocks = 3;          // sum / mean: >= 24 resident warps per SM
  static constexpr int kRowMinBlocksArg = 4;       // 4-byte max / min, vector path: >= 32
  static constexpr int kRowMinBlocksWide = 2;      // 4-byte max / min, scalar path: >= 16
  static constexpr int kVecsPerLane = 2;           // TL on the vector path (sum / mean)
  static constexpr int kScalarColsPerLane = 5;     // scalar path: the most columns a lane owns
  static constexpr int kScalarMinCols = 3;         // and the fewest (TL in {3, 4, 5}, chosen from C)
  static constexpr int kLoadBytes = 128;           // bytes a lane keeps in flight -> U
  static constexpr int kLoadBytes16 = 160;         // the same for 16-bit features (sum / mean)
                                                   // in the row kernel: U = 5 at TL = 2, <= 124
                                                   // registers, still 2 resident blocks (U = 4:
                                                   // 108; U = 6 spilled 8-24 bytes on sm_80)
  static constexpr int kArgLoadBytes = 64;         // the same for max / min (register cap)
  static constexpr int kMaxUnroll = 8;
  static constexpr int kScalarLoadElems = 20;      // spmm_heads' scalar path: elements in flight
  static constexpr int kScalarFlightElems = 24;    // SpMM's scalar path, sum / mean: elements in
                                                   // flight per lane (U = 8 / 6 / 4 at TL = 3 /
                                                   // 4 / 5; <= 80 registers: with 32 the fp32
                                                   // row kernel spilled 16-164 bytes on sm_90,
                                                   // its segment kernel took 139 on sm_80)
  static constexpr int kScalarFlightElems16 = 20;  // the same for 16-bit features (U = 6 / 5 / 4;
                                                   // with 24, fp16 spilled 4-12 bytes)
  static constexpr int kScalarFlightElemsArg = 32;  // and for max / min (<= 128 registers:
                                                   // U = 10 / 8 / 6)
  static constexpr int64_t kMinEdgesPerLane = 16;  // edge split only when each part keeps this many
  static constexpr int64_t kWarpRowMin = 32;       // longer rows get a whole warp (when P == 1)
};

// Edges in flight per lane: the byte budget over the bytes a lane loads per edge. Row: the row
// kernel (the hub pass's segment kernel keeps kLoadBytes: it has no register cap, and at U = 5
// its fp16 instance rose from 100 to 133 registers, one resident block instead of two).
// Scalar path (V = 1): all of a lane's TL columns are real but the last lane's few, so U = the
// elements budget over TL (the row and the segment kernel alike); fp64 (no register cap): 128
// bytes, at least the U = 4 it had with TL = 5 (U = 5 / 4 / 4; at TL = 3, U = 6 took 130
// registers for max / min with 64-bit indices, sm_90: one resident block instead of two).
template <int TL, int V, int ElemBytes, bool Arg, bool Row>
constexpr int spmm_unroll() {
  constexpr int per_edge = TL * V * ElemBytes;
  constexpr int bytes = Arg ? SpmmTuning::kArgLoadBytes
                            : (Row && ElemBytes == 2 ? SpmmTuning::kLoadBytes16 : SpmmTuning::kLoadBytes);
  if constexpr (V == 1) {
    static_assert(TL >= SpmmTuning::kScalarMinCols, "spmm_unroll: scalar TL below kScalarMinCols");
    if constexpr (ElemBytes == 8) {  // kLoadBytes, and at least the U = 4 of TL = 5
      constexpr int u = SpmmTuning::kLoadBytes / (TL * ElemBytes);
      constexpr int u5 = SpmmTuning::kScalarLoadElems / SpmmTuning::kScalarColsPerLane;
      return u > u5 ? u : u5;
    }
    constexpr int elems = Arg              ? SpmmTuning::kScalarFlightElemsArg
                          : ElemBytes == 2 ? SpmmTuning::kScalarFlightElems16
                                           : SpmmTuning::kScalarFlightElems;
    return elems / TL;
  } else {
    constexpr int u = bytes / per_edge;
    return u < 1 ? 1 : (u > SpmmTuning::kMaxUnroll ? SpmmTuning::kMaxUnroll : u);
  }
}
// 16-byte vectors for every dtype. 2-byte features: a 16-byte vector needs 8 fp32 accumulators,
// so the row kernel keeps 2 blocks (16 warps) resident: at 3 (<= 80 registers) it spilled 128-204
// bytes. Until 2026-12-02 their gathers were held as VecT of 16-bit elements, and each predicated
// load was merged into half registers right after it was issued, so a lane waited for each
// gather in turn (bf16 at C = 128: 32 % of DRAM bandwidth, 13.7 cycles of long-scoreboard stall
// per issue, 0.76x our fp32, ncu 2026-12-02); they are held as whole words now (RawVec,
// common.cuh), all U x TL in flight, and the spare registers of the 2 blocks go to U (kLoadBytes16).
constexpr int spmm_vec(int elem_bytes) { return 16 / elem_bytes; }

struct SpmmPlan {
  int vec = 1;             // V: columns per vector load (16 bytes when C and alignment allow)
  int per_lane = 1;        // TL: vectors (scalar path: columns) each lane owns
  int group = 32;          // G = Gc * P: lanes per row (power of two <= 32)
  int col_lanes = 32;      // Gc: lanes that split the columns
  int edge_parts = 1;      // P: contiguous parts of the row's edges, merged by a fixed shuffle tree
  int64_t col_blocks = 1;  // grid.y: column tiles of Gc * V * TL
  SegmentPlan hub;         // hub pass (hub.seg == 0: none); here hub.thr == hub.seg
  int64_t row_blocks = 0;  // grid.x of the row kernel
  int64_t segment_blocks = 0;
};

// The scalar path (V = 1: C not a multiple of the 16-byte vector, or X / Y not 16-byte aligned)
// takes Gc = pow2ceil(ceil(C / 5)) column lanes (at most 32), as it did with TL = 5 for every C;
// with fit_scalar each lane then owns TL = ceil(C / Gc) columns, clamped to [3, 5], instead of 5,
// so that all of a lane's columns but the last lane's few are real (C = 47: Gc = 16, TL = 3, 47 of
// 48 columns; with TL = 5 only 47 of 80 were, ~3 per lane) and U edges (spmm_unroll: a budget of
// 20-32 elements over TL) keep that many real loads in flight. Gc, P and the edge parts are those
// of TL = 5, so every output
// element is reduced in the same order as before: the results are bitwise the same.
inline int spmm_scalar_cols(int64_t C, int Gc) {
  const int64_t tl = (C + Gc - 1) / Gc;
  return static_cast<int>(std::clamp<int64_t>(tl, SpmmTuning::kScalarMinCols, SpmmTuning::kScalarColsPerLane));
}

inline SpmmPlan plan_spmm(int64_t M, int64_t nnz, int64_t C, int64_t max_deg, int elem_bytes,
                          bool aligned, bool arg, bool fit_scalar) {
  SpmmPlan p;
  const int vfull = spmm_vec(elem_bytes);
  p.vec = (aligned && C % vfull == 0) ? vfull : 1;
  const int64_t avg = M > 0 ? nnz / M : 0;
  const int64_t vecs = (C + p.vec - 1) / p.vec;
  if (p.vec == 1) p.per_lane = SpmmTuning::kScalarColsPerLane;
  else p.per_lane = (arg || vecs < 2) ? 1 : SpmmTuning::kVecsPerLane;
  p.col_lanes = static_cast<int>(std::min<int64_t>(32, pow2ceil((vecs + p.per_lane - 1) / p.per_lane)));
  if (p.vec == 1 && fit_scalar) p.per_lane = spmm_scalar_cols(C, p.col_lanes);
  const int64_t cols_per_group = int64_t(p.col_lanes) * p.vec * p.per_lane;
  // Long average rows (dense-ish matrices): split each row's edges over P lane sets, so more
  // gathers are in flight per row and short matrices still fill the GPU.
  p.edge_parts = 1;
  while (p.col_lanes * p.edge_parts * 2 <= 32 &&
         avg >= int64_t(p.edge_parts) * 2 * SpmmTuning::kMinEdgesPerLane)
    p.edge_parts *= 2;
  p.group = p.col_lanes * p.edge_parts;
  p.col_blocks = (C + cols_per_group - 1) / cols_per_group;
  p.hub = plan_segments(M, nnz, max_deg, hub_threshold(M, nnz), C);
  const int64_t groups_per_block = SpmmTuning::kBlockThreads / p.group;
  p.row_blocks = (M + groups_per_block - 1) / groups_per_block;
  // Hub pass: one warp per segment (Gc column lanes x 32 / Gc edge parts).
  p.segment_blocks = (p.hub.nsegments * 32 + SpmmTuning::kBlockThreads - 1) / SpmmTuning::kBlockThreads;
  return p;
}

// ---- SpMM with per-(edge, head) weights (spmm_heads.cu) ---------------------------------------
// The float SpMM's schedule over the C = H * D columns of a row of Z (sum: TL = 2 on the vector
// path), with 16-byte vectors only when D is a multiple of their width, so that every vector lies
// inside one head and takes one weight per edge.
// Edges in flight per lane: the float SpMM's budgets with the weights counted, as each of a lane's
// TL vectors loads its own weight per edge (with the float SpMM's U the row kernel spilled 200-480
// bytes at its register caps on sm_90; with these, at most 8).
template <int TL, int V, int ElemBytes, int ValBytes>
constexpr int spmm_heads_unroll() {
  constexpr int u = V == 1 ? SpmmTuning::kScalarLoadElems / (2 * TL)
                           : SpmmTuning::kLoadBytes / (TL * (V * ElemBytes + ValBytes));
  return u < 1 ? 1 : (u > SpmmTuning::kMaxUnroll ? SpmmTuning::kMaxUnroll : u);
}
inline SpmmPlan plan_spmm_heads(int64_t M, int64_t nnz, int64_t H, int64_t D, int64_t max_deg, int elem_bytes,
                                bool aligned) {
  return plan_spmm(M, nnz, H * D, max_deg, elem_bytes, aligned && D % spmm_vec(elem_bytes) == 0, false,
                   false);  // scalar path: TL = kScalarColsPerLane
}

// ---- dense-ish SpMM: row panels (panel.cu) --------------------------------------------------
// fp32 sum / mean over a CSR with sorted columns: a block owns a panel of BM rows and BN output
// columns and walks K in chunks of BK rows of X, each chunk staged once in shared memory
// (cp.async, double-buffered) and read by every row of the panel (Hong et al., "Adaptive sparse
// tiling for sparse matrix multiplication", PPoPP 2019). A group of G lanes per row, each lane
// owning VW x NV columns. When rows x column blocks give too few blocks, K is split into S slices
// whose partial sums are added in slice order by a second kernel. GNNSPARSE_CUDA_SPMM forces a
// method. Taken automatically only where it measured faster than the row kernels (H200,
// 2026-12-02, docs/grid.md: two runs of the 72-case grid): C = 128, density >= 0.25, M >= 16384
// (1.21x / 1.27x at M = 16384 / 32768, d = 0.3; 0.96-1.09x at 24576). Everywhere else on the grid
// (every N = 32 case, smaller M, lower density) the row kernels were faster.
struct PanelTuning {
  static constexpr int kBlockThreads = 256;
  static constexpr int kBatch = 32;             // CSR entries a group holds per row at a time
  static constexpr int kStageRow = 34;          // float2 slots per staged row (padded: banks)
  static constexpr int kChunkBytes = 32768;     // one X chunk buffer (two are in flight)
  static constexpr int kMaxChunkRows = 256;     // BK cap
  static constexpr int64_t kTargetBlocks = 264; // split K until rows x columns x S reach this
  static constexpr int kMaxSplit = 8;
  static constexpr double kMinDensity = 0.25;   // auto: density nnz / (M K) at least this,
  static constexpr int64_t kMinRows = 16384;    // at least this many rows,
  static constexpr int64_t kWidth = 128;        // and exactly this many columns (the one measured)
};
// Shapes: a group of g lanes per row, each lane owning nv vectors of vw columns (bn = g vw nv
// columns per block), r rows per group (bm = 256 / g * r rows per panel), bk chunk rows. The
// vector shapes (vw = 4, nv = 2) need C % 4 == 0 and 16-byte aligned X and Y; scalar takes the rest.
enum class PanelShape : int { w32 = 32, w64 = 64, w128 = 128, scalar = 1 };
struct PanelGeom {
  int vw, nv, g, r;
  constexpr int bn() const { return g * vw * nv; }
  constexpr int bm() const { return PanelTuning::kBlockThreads / g * r; }
  constexpr int bk() const {
    return PanelTuning::kChunkBytes / (bn() * 4) < PanelTuning::kMaxChunkRows
               ? PanelTuning::kChunkBytes / (bn() * 4) : PanelTuning::kMaxChunkRows;
  }
};
constexpr PanelGeom panel_geom(PanelShape s) {
  switch (s) {
    case PanelShape::w32: return {4, 2, 4, 2};    // 128 rows x 32 columns, chunks of 256
    case PanelShape::w64: return {4, 2, 8, 2};    // 64 x 64, chunks of 128
    case PanelShape::w128: return {4, 2, 16, 4};  // 64 x 128, chunks of 64
    default: return {1, 1, 32, 8};                // scalar: 64 x 32, chunks of 256
  }
}
struct PanelPlan {
  PanelShape shape = PanelShape::scalar;
  int64_t col_blocks = 1, panels = 0, split = 1;
  int64_t blocks() const { return col_blocks * panels * split; }
};
// Auto choice: vector shapes only, dense-ish matrices only (graphs never qualify).
inline bool prefer_panel(int64_t M, int64_t K, int64_t nnz, int64_t C, bool vec) {
  if (!vec || C != PanelTuning::kWidth || M < PanelTuning::kMinRows || K <= 0) return false;
  return double(nnz) >= PanelTuning::kMinDensity * double(M) * double(K);
}
// force_bn: 0, or 32 / 64 / 128 (a vector shape); force_split: 0, or the number of K slices.
inline PanelPlan plan_panel(int64_t M, int64_t K, int64_t C, bool vec, int force_bn, int force_split) {
  PanelPlan p;
  if (!vec) p.shape = PanelShape::scalar;
  else if (force_bn > 0) p.shape = PanelShape(force_bn);
  else p.shape = C <= 32 ? PanelShape::w32 : (C <= 64 ? PanelShape::w64 : PanelShape::w128);
  const PanelGeom g = panel_geom(p.shape);
  p.col_blocks = (C + g.bn() - 1) / g.bn();
  p.panels = (M + g.bm() - 1) / g.bm();
  const int64_t chunks = (K + g.bk() - 1) / g.bk();
  const int64_t base = p.col_blocks * p.panels;
  const int64_t s = force_split > 0 ? force_split : (PanelTuning::kTargetBlocks + base - 1) / base;
  p.split = std::max<int64_t>(1, std::min<int64_t>({s, int64_t(PanelTuning::kMaxSplit), chunks}));
  return p;
}

// ---- dense-ish SpMM on tensor cores: row panels densified by scatter (panel_tc.cu) -----------
// fp32 sum / mean over a CSR with sorted columns (repeats allowed), C % 4 == 0, X and Y 16-byte
// aligned. A block owns BM x BN of Y and walks K in chunks of BK = 64: per chunk it zeroes a BM x BK
// tile of A in shared memory and scatters the panel's entries of the chunk into it (per batch of 8
// rows of a warp, 16 in 128-thread blocks: each row's next 32 entries by one coalesced load, all in
// flight, one ballot per row; runs of equal columns and rows with > 32 entries in a chunk in a second
// pass), stages X's BK x BN chunk with 16-byte cp.async, and multiplies on the tensor cores
// (mma.sync m16n8k8: 3xTF32 for precision fp32, each k step's products from zero and added to the
// fp32 sum; plain TF32 for precision tf32). Warps own 32 x 32 tiles (2 x 4 mma tiles, 32
// accumulators): 121-128 registers a thread at 256 threads, 145-168 at 128 (sm_90, no spills), two
// blocks per SM. Shapes (BM x BN, threads):
//   N <= 32: 128 x 32 (4 warps: one 32-column warp per row strip; a wider block would compute
//            zeros), N <= 64: 128 x 64 (8 warps), else 64 x 128 (8 warps; 128 x 128 would need
//            16 warps of 128 registers or 64 x 32 warp tiles: more registers than two blocks allow).
// Too few blocks (small M): K split into S <= 8 slices, partial tiles added in slice order
// (panel_combine_kernel, as for panel.cu). GNNSPARSE_CUDA_TC_BN / _SPLIT force the shape / split.
struct TcTuning {
  static constexpr int kBK = 64;          // K chunk: 8 k steps per barrier and scatter
  static constexpr int kScatterRows = 8;  // rows of a warp whose next 32 entries are loaded together
  static constexpr int kLdA = 72;         // A tile row stride (floats): = 8 (mod 32), load_a conflict-free
  static constexpr int64_t kTargetBlocks = 264;  // split K until blocks reach this (2 per SM)
  static constexpr int kMaxSplit = 8;
  // Auto choice: off (kPanelTcAuto below). The first model, kept for when a measurement sets the
  // policy (docs/grid.md, "Tensor-core row panels"; the kernel of 2026-12-02 measured 5-8x below
  // it): dense-equivalent rate ~50 TFLOP/s at N = 128 and ~25 at N = 32 for 3xTF32 (issue-bound:
  // operand splits, the scatter), ~90 / ~30 for TF32; useful rate = density x that, against ~6 TFLOP/s for the
  // row kernels. Crossover density per (precision, N), interpolated in log2 N between 32 and 128:
  // fp32 0.25 at N <= 32, 0.12 at N >= 128; tf32 0.19 / 0.065. Graphs (density < 1 %) never
  // qualify; at least kMinRows rows and kMinK columns.
  static constexpr double kDensityFp32N32 = 0.25;
  static constexpr double kDensityFp32N128 = 0.12;
  static constexpr double kDensityTf32N32 = 0.19;
  static constexpr double kDensityTf32N128 = 0.065;
  static constexpr double kFloorDensity = 0.01;
  static constexpr int64_t kMinRows = 1024;
  static constexpr int64_t kMinK = 256;
};
enum class TcShape : int { w32 = 32, w64 = 64, w128 = 128 };
struct TcGeom {
  int bn, wm;  // BN columns, wm warps along M (32 rows each); BN / 32 warps along N
  constexpr int wn() const { return bn / 32; }
  constexpr int bm() const { return wm * 32; }
  constexpr int threads() const { return wm * wn() * 32; }
};
constexpr TcGeom tc_geom(TcShape s) {
  switch (s) {
    case TcShape::w32: return {32, 4};   // 128 x 32, 128 threads
    case TcShape::w64: return {64, 4};   // 128 x 64, 256 threads
    default: return {128, 2};            // 64 x 128, 256 threads
  }
}
struct TcPlan {
  TcShape shape = TcShape::w128;
  int64_t col_blocks = 1, panels = 0, split = 1;
  int64_t blocks() const { return col_blocks * panels * split; }
};
// Eligible calls only (fp32, sorted columns, C % 4 == 0, aligned): whether auto takes the tensor
// cores. tf32 requests use the tf32 crossover; fp32 and bf16 the 3xTF32 one (bf16 runs as fp32).
// Off: measured slower than the row kernels in every grid cell, 2026-12-02 (H200, 72 cells:
// vs cuSPARSE 0.13x at N = 32 and 0.45x at N = 128, tf32 0.14x / 0.52x; time independent of density,
// e.g. M 32768 K 8192 N 128: 3291 / 3383 / 3383 us at d = 0.1 / 0.2 / 0.3 against row kernels
// 1201 / 2264 / 3275 us): a per-(row, chunk) cost bounds it (docs/grid.md). The crossover below is
// kept for when a measurement justifies it; GNNSPARSE_CUDA_SPMM=tc still forces the kernels.
inline constexpr bool kPanelTcAuto = false;
inline bool prefer_panel_tc(int64_t M, int64_t K, int64_t nnz, int64_t C, Precision precision) {
  if (!kPanelTcAuto) return false;
  if (M < TcTuning::kMinRows || K < TcTuning::kMinK || C < 4) return false;
  const double d = double(nnz) / (double(M) * double(K));
  const double w = std::min(1.0, std::max(0.0, (std::log2(double(C)) - 5.0) / 2.0));  // 0 at 32, 1 at 128
  const bool tf32 = precision == Precision::tf32;
  const double lo = tf32 ? TcTuning::kDensityTf32N32 : TcTuning::kDensityFp32N32;
  const double hi = tf32 ? TcTuning::kDensityTf32N128 : TcTuning::kDensityFp32N128;
  const double need = lo + w * (hi - lo);
  return d >= std::max(need, TcTuning::kFloorDensity);
}
// force_bn: 0, or 32 / 64 / 128; force_split: 0, or the number of K slices.
inline TcPlan plan_panel_tc(int64_t M, int64_t K, int64_t C, int force_bn, int force_split) {
  TcPlan p;
  if (force_bn > 0) p.shape = TcShape(force_bn);
  else p.shape = C <= 32 ? TcShape::w32 : (C <= 64 ? TcShape::w64 : TcShape::w128);
  const TcGeom g = tc_geom(p.shape);
  p.col_blocks = (C + g.bn - 1) / g.bn;
  p.panels = (M + g.bm() - 1) / g.bm();
  const int64_t chunks = (K + TcTuning::kBK - 1) / TcTuning::kBK;
  const int64_t base = p.col_blocks * p.panels;
  // Too few blocks: the split with the least time in block units, waves / S (waves of kTargetBlocks
  // blocks; the smaller S on a tie). Rounding up to kTargetBlocks took 288 blocks for 96 panels:
  // two waves, the second of 24 blocks (2026-12-02 grid, M 12288 N 32).
  int64_t s = 1;
  if (force_split > 0) {
    s = force_split;
  } else if (base < TcTuning::kTargetBlocks) {
    const int64_t smax = std::min<int64_t>(TcTuning::kMaxSplit, chunks);
    for (int64_t c = 2; c <= smax; ++c) {
      const int64_t wc = (base * c + TcTuning::kTargetBlocks - 1) / TcTuning::kTargetBlocks;
      const int64_t ws = (base * s + TcTuning::kTargetBlocks - 1) / TcTuning::kTargetBlocks;
      if (wc * s < ws * c) s = c;  // wc / c < ws / s
    }
  }
  p.split = std::max<int64_t>(1, std::min<int64_t>({s, int64_t(TcTuning::kMaxSplit), chunks}));
  return p;
}

// ---- GATv2 scores and their backward pass (gatv2.cu) ------------------------------------------
// A group of G lanes per (row, head), lanes over C in vectors of V (16 bytes when C % V == 0 and
// the operands are aligned): G the smallest power of two with G * V >= C, at most 32 (one: the
// row operand X[i, h] and att[h] are then held in registers; wider heads loop over C in steps of
// G * V). The group walks its row's edges U at a time (U gathered Y rows in flight); scores end
// each edge with a butterfly over the group, the backward pass keeps per-lane sums. Rows longer
// than kWarpRowMin (when G < 32) are taken by the whole warp, its 32 / G groups on contiguous
// slices of the row; the backward pass merges the slices by a fixed shuffle tree. Hub rows take
// the hub pass (segments.cuh): a warp per (segment, head) on each hub piece (scores: written
// directly, as SDDMM's; grad: pieces into workspace slots of H * C (x2 with dAtt) sums, folded
// by the combine).
struct Gatv2Tuning {
  static constexpr int kBlockThreads = 256;
  static constexpr int kUnroll = 4;             // edges whose gathered rows are in flight
  static constexpr int64_t kWarpRowMin = 32;    // longer rows get a whole warp
};
struct Gatv2Plan {
  int vec = 1;
  int group = 1;
  bool one = false;            // C <= G * V
  int64_t blocks = 0;          // (row, head) groups
  SegmentPlan hub;             // grad: slots of slot_width accumulators
  int64_t slot_width = 0;      // grad: H * C, 2 H * C with dAtt
  int64_t segment_blocks = 0;  // one warp per (segment, head)
};
inline Gatv2Plan plan_gatv2(int64_t M, int64_t nnz, int64_t H, int64_t C, int64_t max_deg, int elem_bytes,
                            bool aligned, bool grad, bool with_att) {
  Gatv2Plan p;
  const int vfull = 16 / elem_bytes;
  p.vec = (aligned && C % vfull == 0) ? vfull : 1;
  const int64_t cv = (C + p.vec - 1) / p.vec;
  p.one = cv <= 32;
  p.group = static_cast<int>(std::min<int64_t>(32, pow2ceil(cv)));
  const int64_t groups_per_block = Gatv2Tuning::kBlockThreads / p.group;
  p.blocks = (M * H + groups_per_block - 1) / groups_per_block;
  p.slot_width = grad ? H * C * (with_att ? 2 : 1) : 0;
  p.hub = plan_segments(M, nnz, max_deg, hub_threshold(M, nnz), p.slot_width);
  p.segment_blocks = (p.hub.nsegments * H * 32 + Gatv2Tuning::kBlockThreads - 1) / Gatv2Tuning::kBlockThreads;
  return p;
}

// EdgesAdd (edges_add.cuh: op add's edge values, FusedMM with D = 0 and SDDMM add): the hub pass's
// segments start at the hub threshold, not kMinSegment (a warp per segment takes all heads; on the
// products-sized graph 256-entry segments made the combine alone 1.5 ms of 9, H100 2026-12-06);
// a softmax keeps (max, sum) per head in each slot, a map no workspace.
inline SegmentPlan plan_edges_add(int64_t M, int64_t nnz, int64_t H, int64_t max_deg, bool softmax) {
  return plan_segments(M, nnz, max_deg, hub_threshold(M, nnz), softmax ? 2 * H : 0);
}

// ---- SDDMM (sddmm.cu) -----------------------------------------------------------------------
// dot: one group of G lanes per (row, head), lanes split F into vectors; the row operand X[i]
// is loaded once per batch of U edges, the U gathered Y rows are the traffic, and a transposed
// butterfly finishes the U dot products (U - 1 shuffles, then log2(G / U) levels), each lane set
// writing one edge. Rows longer than kWarpRowMin go to a kernel of their own that splits each over
// a warp's groups (a power-law graph's rows of 33..256 entries otherwise keep one group busy while
// the rest of its warp waits: 0.78x the old edge-parallel kernel there, 2026-12-01). Hub rows take
// the hub pass (a warp per (segment, head), pieces written
// directly: SDDMM needs no combine). add: a group per run of kEdgesPerGroup consecutive edges
// (one binary search), lanes over heads. ONE with short average rows (<= kRowsMaxAvg): a group
// walks kMaxRows consecutive rows as one edge sequence (the rows kernel), so its batches of U are
// full across row ends; the row operands are kept in shared memory.
struct SddmmTuning {
  static constexpr int kBlockThreads = 256;
  static constexpr int kEdgesPerGroup = 32;  // add: edges per group
  static constexpr int kUnrollAdd = 4;       // add: edges whose loads are in flight together
  static constexpr int kUnroll = 8;          // dot: edges in flight per group (G >= U)
  static constexpr int kUnrollWide = 4;      // the same for fp64, and when F needs a loop
  static constexpr int kMinBlocksDot = 3;    // fp32 dot: >= 24 resident warps per SM
  static constexpr int kMinBlocksDot16 = 2;  // 16-bit dot: >= 16
  static constexpr int64_t kWarpRowMin = 32; // dot: longer rows get a whole warp
  static constexpr int kMaxRows = 4;         // dot (ONE): rows a group walks as one edge sequence
  static constexpr int64_t kRowsMaxAvg = 16; // ... when the average row is at most this long
};
struct SddmmPlan {
  int vec = 1;
  int group = 1;
  bool one = false;            // dot: F <= G * V (one vector per lane, the row operand held)
  int64_t blocks = 0;          // add: edge groups; dot: (row, head) groups
  SegmentPlan hub;             // dot: hub pass (no workspace)
  int64_t segment_blocks = 0;  // dot: one warp per (segment, head)
  int64_t long_blocks = 0;     // dot: one warp per 32 (row, head) items (rows longer than kWarpRowMin)
  int rows = 1;                // dot (ONE): rows per group in the row kernel (1, 2 or kMaxRows)
  int64_t rows_blocks = 0;     // dot: grid of the multi-row kernel (rows > 1)
};
inline SddmmPlan plan_sddmm(int64_t M, int64_t nnz, int64_t H, int64_t F, int64_t max_deg, bool add,
                            int elem_bytes, bool aligned, int force_rows = 0) {
  SddmmPlan p;
  const int vfull = 16 / elem_bytes;
  if (add) {
    p.vec = 1;
    p.group = static_cast<int>(std::min<int64_t>(32, pow2ceil(H)));
    const int64_t groups = (nnz + SddmmTuning::kEdgesPerGroup - 1) / SddmmTuning::kEdgesPerGroup;
    const int64_t groups_per_block = SddmmTuning::kBlockThreads / p.group;
    p.blocks = (groups + groups_per_block - 1) / groups_per_block;
    // EdgesAdd (H <= 8): its hub rows' pieces by a warp per segment; force_rows == 1 keeps the
    // edge-chunk kernel (p.rows == 1)
    p.hub = plan_edges_add(M, nnz, H, max_deg, false);
    p.rows = force_rows == 1 ? 1 : 0;
    return p;
  }
  p.vec = (aligned && F % vfull == 0) ? vfull : 1;
  const int64_t fv = (F + p.vec - 1) / p.vec;
  p.one = fv <= 32;
  const int U = elem_bytes == 8 || !p.one ? SddmmTuning::kUnrollWide : SddmmTuning::kUnroll;
  // at least U lanes: the transposed butterfly hands one edge to each lane set
  p.group = static_cast<int>(std::min<int64_t>(32, std::max<int64_t>(U, pow2ceil(fv))));
  const int64_t groups_per_block = SddmmTuning::kBlockThreads / p.group;
  p.blocks = (M * H + groups_per_block - 1) / groups_per_block;
  p.hub = plan_segments(M, nnz, max_deg, hub_threshold(M, nnz), 0);
  p.segment_blocks = (p.hub.nsegments * H * 32 + SddmmTuning::kBlockThreads - 1) / SddmmTuning::kBlockThreads;
  p.long_blocks = (M * H + SddmmTuning::kBlockThreads - 1) / SddmmTuning::kBlockThreads;  // 32 items a warp
  // Short average rows: a group walks kMaxRows rows as one edge sequence, so its batches of U are
  // full across row ends.
  const int64_t avg = M > 0 ? nnz / M : 0;
  p.rows = force_rows > 0 ? force_rows : (avg <= SddmmTuning::kRowsMaxAvg ? SddmmTuning::kMaxRows : 1);
  if (!p.one || nnz > INT32_MAX) p.rows = 1;  // the walk counts a group's edges in 32 bits
  const int64_t row_groups = (M + p.rows - 1) / p.rows * H;
  p.rows_blocks = (row_groups + groups_per_block - 1) / groups_per_block;
  return p;
}

// ---- FusedMM (fusedmm.cu) -------------------------------------------------------------------
// One group per (row, head); lanes split F for the dot and D for the aggregation (TL vectors of D
// per lane); online softmax (running max and sum, rescaled accumulator). Rows longer than
// kWarpRowMin are taken by the whole warp: its 32 / G groups each run a contiguous part of the
// row and the parts' states are merged by a fixed shuffle tree. Hub rows take the hub pass with
// partial states (max, sum, acc[D]) per (segment, head), a warp per (segment, head). When Y is Z
// (and F == D), one gathered row feeds both the score and the aggregation. A dot whose F is one
// vector per lane with TL = 1 (and G >= kUnroll) takes the one-vector walk (`one`): the row
// operand held, the next batch's columns prefetched, the batch's kUnroll dots finished by one
// transposed reduce-scatter and the weights broadcast, so that it compiles to 80 registers (24
// warps; the generic walk: 112, 16 warps); its long rows go to a kernel of their own. With Y is Z
// and G >= kUnrollSame the same walk gathers each row once for both products and holds 8 edges
// per batch (`one_same`).
struct FusedTuning {
  static constexpr int kBlockThreads = 256;
  static constexpr int kMaxVecsPerLane = 2;  // TL: D columns per lane, kMaxVecsPerLane * V at most
  static constexpr int kScalarColsAdd = 6;   // TL of the scalar path (V = 1) with op add: 8 lanes per
                                             // row at D = 47 (the vector path's G at D = 48)
  static constexpr int kUnroll = 4;          // edges in flight per group
  static constexpr int kUnrollSame = 8;      // the same, one-vector walk with Y is Z (one gather per edge)
  static constexpr int kMinBlocks = 3;       // fp32, TL = 1, add or Y is Z: >= 24 warps per SM
  static constexpr int kMinBlocksWide = 2;   // fp32 dot, 16-bit, TL = 1: >= 16
  static constexpr int64_t kWarpRowMin = 32; // longer rows get a whole warp
};
struct FusedPlan {
  int vec = 1;
  int group = 1;
  int per_lane = 1;  // TL
  bool same = false; // Y is Z: one gather per edge
  bool one = false;  // dot, Y != Z, TL = 1, F in one vector per lane (G >= kUnroll): the one-vector path
  bool one_same = false;  // same, with F in one vector per lane (G >= kUnrollSame): the one-vector path
                          // whose gathered row feeds both products
  int64_t col_blocks = 1;
  SegmentPlan hub;  // hub pass (hub.seg == 0: none)
  int64_t row_blocks = 0;
  int64_t segment_blocks = 0;
  int64_t long_blocks = 0;  // one path: one warp per 32 (row, head) items (rows longer than kWarpRowMin)
};
// Columns of D per lane in the generic walk: kMaxVecsPerLane vectors, or on the scalar path with op
// add (GAT: a scalar score, so lanes only split D) kScalarColsAdd columns, so that an odd D keeps
// the vector path's lanes per row and loads per lane (D = 47: 8 lanes x 6 instead of 32 x 2).
constexpr int fused_scalar_tl(int vec, bool add) {
  return vec == 1 && add ? FusedTuning::kScalarColsAdd : FusedTuning::kMaxVecsPerLane;
}
inline FusedPlan plan_fused(int64_t M, int64_t nnz, int64_t H, int64_t F, int64_t D, bool add,
                            int64_t max_deg, int elem_bytes, bool aligned, bool y_is_z, bool allow_one = true) {
  FusedPlan p;
  const int vfull = 16 / elem_bytes;
  p.vec = (aligned && D % vfull == 0 && (add || F % vfull == 0)) ? vfull : 1;
  const int64_t fv = add ? 1 : (F + p.vec - 1) / p.vec;
  const int64_t dv = (D + p.vec - 1) / p.vec;
  const int64_t per_lane = fused_scalar_tl(p.vec, add);
  p.group = static_cast<int>(std::min<int64_t>(
      32, pow2ceil(std::max<int64_t>(fv, (dv + per_lane - 1) / per_lane))));
  // TL = 1 when a lane's share of D is one vector; the scalar path (V = 1) always has TL =
  // fused_scalar_tl (2, or kScalarColsAdd with op add)
  p.per_lane = p.vec > 1 && (dv + p.group - 1) / p.group <= 1 ? 1 : static_cast<int>(per_lane);
  const int64_t cols_per_group = int64_t(p.group) * p.vec * p.per_lane;
  p.col_blocks = std::max<int64_t>(1, (D + cols_per_group - 1) / cols_per_group);
  // Y is Z: the dot's F chunks are exactly the lane's D vectors (one column block, F == D).
  p.same = y_is_z && !add && F == D && p.col_blocks == 1 && fv <= int64_t(p.group) * p.per_lane;
  p.one = allow_one && !add && !p.same && p.vec > 1 && p.per_lane == 1 && fv <= p.group &&
          p.group >= FusedTuning::kUnroll;
  p.one_same = allow_one && p.same && p.vec > 1 && p.per_lane == 1 && p.group >= FusedTuning::kUnrollSame;
  p.hub = plan_segments(M, nnz, max_deg, SegmentTuning::kMinSegment, H * (D + 2));
  const int64_t groups_per_block = FusedTuning::kBlockThreads / p.group;
  p.row_blocks = (M * H + groups_per_block - 1) / groups_per_block;
  p.segment_blocks = (p.hub.nsegments * H * 32 + FusedTuning::kBlockThreads - 1) / FusedTuning::kBlockThreads;
  p.long_blocks = (M * H + FusedTuning::kBlockThreads - 1) / FusedTuning::kBlockThreads;
  return p;
}

// ---- quantized ops (qspmm.cu, qsddmm.cu, qfusedmm.cu, quantize.cu) ----------------------------
// Quantized SpMM: as the float SpMM, with vectors of CPL quantized features per lane (16 int8 =
// 16 bytes, 16 int4 = 8 bytes when shapes and alignment allow; the caller picks CPL).
struct QSpmmTuning {
  static constexpr int kBlockThreads = 256;
  static constexpr int kRowBlockThreads = 64;  // as SpmmTuning's (H100, 2026-12-06: the products-
                                               // sized int8 GCN epoch 67.6 -> 58.6 ms)
  static constexpr int64_t kMinEdgesPerLane = 8;  // edge split only when each part keeps this many
};
template <int CPL> constexpr int qspmm_unroll() { return CPL == 16 ? 4 : 8; }

struct QSpmmPlan {
  int cpl = 1;        // features per vector load
  int col_lanes = 1;  // Gc
  int edge_parts = 1; // P
  int64_t col_blocks = 1;
  int64_t row_blocks = 0;
  bool y_vec = false;  // 16-byte output stores
  SegmentPlan hub;     // hub pass (hub.seg == 0: none), as the float SpMM's
  int64_t segment_blocks = 0;
};

inline QSpmmPlan plan_qspmm(int64_t M, int64_t nnz, int64_t C, int64_t max_deg, int cpl, bool y_aligned) {
  QSpmmPlan p;
  p.cpl = cpl;
  const int64_t vecs = (C + p.cpl - 1) / p.cpl;
  p.col_lanes = static_cast<int>(std::min<int64_t>(32, pow2ceil(vecs)));
  p.col_blocks = (vecs + p.col_lanes - 1) / p.col_lanes;
  const int64_t avg = M > 0 ? nnz / M : 0;
  while (p.col_lanes * p.edge_parts * 2 <= 32 && avg >= int64_t(p.edge_parts) * 2 * QSpmmTuning::kMinEdgesPerLane)
    p.edge_parts *= 2;
  const int G = p.col_lanes * p.edge_parts;
  const int64_t groups_per_block = QSpmmTuning::kBlockThreads / G;
  p.row_blocks = (M + groups_per_block - 1) / groups_per_block;
  p.y_vec = p.cpl >= 4 && y_aligned;
  p.hub = plan_segments(M, nnz, max_deg, hub_threshold(M, nnz), C);
  p.segment_blocks = (p.hub.nsegments * 32 + QSpmmTuning::kBlockThreads - 1) / QSpmmTuning::kBlockThreads;
  return p;
}

// Quantized SDDMM: a group of G lanes per edge (lanes over the F / CPL vectors for dot, over heads
// for add) owns a run of kEdgesPerGroup edges (one binary search each), U edges in flight.
struct QSddmmTuning {
  static constexpr int kBlockThreads = 256;
  static constexpr int kEdgesPerGroup = 32;
  static constexpr int kUnroll = 4;      // edges in flight per lane
  static constexpr int kUnrollWide = 2;  // dot with 16-feature vectors (64 registers, no spills)
  static constexpr int kDotMinBlocks = 4;
};
struct QSddmmPlan {
  int group = 1;
  int head_lanes = 1;  // dot: lanes per head (group / head_lanes heads side by side)
  int64_t blocks = 0;
};
// dot: LH = pow2ceil(F / cpl) lanes per head (at most 32), the heads side by side up to
// GNNSPARSE_CUDA_QSDDMM_LANES lanes per edge (default 32; LH gives the loop over heads of before;
// one_head: always that, for the int64-accumulator kernels)
inline QSddmmPlan plan_qsddmm(int64_t nnz, int64_t H, int64_t F, bool add, int cpl, bool one_head = false) {
  QSddmmPlan p;
  if (add) {
    p.group = static_cast<int>(std::min<int64_t>(32, pow2ceil(H)));
  } else {
    p.head_lanes = static_cast<int>(std::min<int64_t>(32, pow2ceil((F + cpl - 1) / cpl)));
    const int64_t most = std::max<int64_t>(p.head_lanes, std::min<int64_t>(32, pow2ceil(
        hub_override("GNNSPARSE_CUDA_QSDDMM_LANES", 32))));
    p.group = one_head ? p.head_lanes : static_cast<int>(std::min<int64_t>(most, p.head_lanes * pow2ceil(H)));
  }
  const int64_t groups = (nnz + QSddmmTuning::kEdgesPerGroup - 1) / QSddmmTuning::kEdgesPerGroup;
  const int64_t per_block = QSddmmTuning::kBlockThreads / p.group;
  p.blocks = (groups + per_block - 1) / per_block;
  return p;
}

// Quantized FusedMM: one group per (row, head), lanes over the CPL-vectors of F and D (more column
// blocks when D needs more than 32), U edges in flight.
struct QFusedTuning {
  static constexpr int kBlockThreads = 256;
  static constexpr int kUnroll = 4;
};
struct QFusedPlan {
  int group = 1;
  int64_t row_blocks = 0, col_blocks = 1;
};
inline QFusedPlan plan_qfused(int64_t M, int64_t H, int64_t F, int64_t D, bool add, int cpl) {
  QFusedPlan p;
  const int64_t fv = add ? 1 : (F + cpl - 1) / cpl;
  const int64_t dv = (D + cpl - 1) / cpl;
  p.group = static_cast<int>(std::min<int64_t>(32, pow2ceil(std::max<int64_t>(1, std::max(fv, dv)))));
  p.col_blocks = std::max<int64_t>(1, (dv + p.group - 1) / p.group);
  const int64_t per_block = QFusedTuning::kBlockThreads / p.group;
  p.row_blocks = (M * H + per_block - 1) / per_block;
  return p;
}

// Quantize: P <= kQuantizeWork blocks of kThreads for the absmax partials and the quantization
// (fewer for small tensors), one block of kScaleThreads folds the partials.
struct QuantizeTuning {
  static constexpr int kThreads = 256;
  static constexpr int64_t kMinQuadsPerThread = 8;  // fewer blocks for small tensors
  static constexpr int kScaleThreads = 1024;        // >= kQuantizeWork
};

// ---- dense-ish SDDMM dot on tensor cores (sddmm_tc.cu) --------------------------------------
// fp32 dot, one head, F % 4 == 0 and F <= 128, 16-byte aligned X and Y, a CSR with sorted columns:
// a block (kBlockThreads) owns BM rows of A, stages their X rows once in shared memory and walks K
// in chunks of BK columns; each chunk's BK rows of Y are staged (cp.async, kStages(FT) buffers), the
// BM x BK score tile is computed with mma.sync (3xTF32 for fp32: fp32-accurate) into shared
// memory, and every entry of the panel whose column lies in the chunk reads its score there and is
// written to E at its CSR position. Each row's entries of a chunk are contiguous from a per-row
// cursor; the first kWindow column indices from the cursor are copied ahead (cp.async, while the
// chunk's products run), so the write-out reads no global memory in a dependent chain. Few panels
// (small M): K is split into S slices of chunks, each a block of its own (each entry is written
// once: no combine). GNNSPARSE_CUDA_SDDMM=auto|row|tc forces a method; GNNSPARSE_CUDA_SDDMM_TC_SPLIT
// forces S (bench, tests).
struct SddmmTcTuning {
  static constexpr int kBlockThreads = 256;    // 8 warps: 4 x 2 warp tiles of 32 x 32 scores
  static constexpr int kBM = 128;              // rows of A per block
  static constexpr int kBK = 64;               // columns of A (rows of Y) per chunk
  static constexpr int kWindow = 32;           // column indices per row copied ahead (one per lane)
  static constexpr int kMaxFeatures = 128;     // F up to this in one staged panel
  static constexpr int64_t kTargetBlocks = 264;  // split K until panels x S reach this
  static constexpr int kMaxSplit = 64;
  // auto: density nnz / (M K) at least the crossover for F (interpolated in log2 F between
  // kMinDensityF32 at F <= 32 and kMinDensityF128 at F >= 128) and K >= kMinK. Set from the grid
  // (H200, 2026-12-02, docs/grid.md "SDDMM dot on tensor cores"): at F = 32 the tensor cores beat
  // the row kernels in 36 of 36 cells (1.3-29x; the lowest density there is 0.1); at F = 128 in
  // 12 of 12 cells at d = 0.2 and 0.3 (1.2-3.2x) but only 3 of 12 at d = 0.1 (0.70-1.65x).
  // The grid's "0.1" rows hold floor(0.1 K) entries (d = 0.0996 at K = 1024): at a 0.1 threshold
  // they fell to the row kernels, 1213 vs 320 us at M = K = 8192, F = 32 (H200, 2026-12-06,
  // bench/grid_dense.py), hence 0.09.
  // Graphs (d < 1 %) never qualify, nor does anything whose sortedness was not checked.
  static constexpr double kMinDensityF32 = 0.09;
  static constexpr double kMinDensityF128 = 0.15;
  static constexpr int64_t kMinK = 256;
};
// Y-chunk buffers in flight per feature width (shared memory: 104 KB at FT = 32, two blocks per
// SM; 127 / 192 KB at 64 / 128, one).
constexpr int sddmm_tc_stages(int ft) { return ft <= 32 ? 3 : 2; }
constexpr int sddmm_tc_min_blocks(int ft) { return ft <= 32 ? 2 : 1; }
struct SddmmTcPlan {
  int ft = 32;  // staged feature width: 32, 64 or 128 (F rounded up; the tail zero-filled)
  int64_t panels = 0, split = 1;
  int64_t blocks() const { return panels * split; }
};
inline bool prefer_sddmm_tc(int64_t M, int64_t K, int64_t nnz, int64_t F) {
  if (M <= 0 || K < SddmmTcTuning::kMinK || F <= 0) return false;
  const double w = std::min(1.0, std::max(0.0, (std::log2(double(F)) - 5.0) / 2.0));  // 0 at 32, 1 at 128
  const double need = SddmmTcTuning::kMinDensityF32 + w * (SddmmTcTuning::kMinDensityF128 - SddmmTcTuning::kMinDensityF32);
  return double(nnz) >= need * double(M) * double(K);
}
// force_split: 0, or the number of K slices (capped by the number of chunks).
inline SddmmTcPlan plan_sddmm_tc(int64_t M, int64_t K, int64_t F, int force_split) {
  SddmmTcPlan p;
  p.ft = F <= 32 ? 32 : (F <= 64 ? 64 : 128);
  p.panels = (M + SddmmTcTuning::kBM - 1) / SddmmTcTuning::kBM;
  const int64_t chunks = (K + SddmmTcTuning::kBK - 1) / SddmmTcTuning::kBK;
  const int64_t s = force_split > 0 ? force_split : (SddmmTcTuning::kTargetBlocks + p.panels - 1) / p.panels;
  p.split = std::max<int64_t>(1, std::min<int64_t>({s, int64_t(SddmmTcTuning::kMaxSplit), chunks}));
  return p;
}

}  // namespace gnnsparse::cuda_detail
