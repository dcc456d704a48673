// Launch policy for every kernel, in one place (CUB-style: named constexpr tuning fields plus
// one plan function per op). Kernels read only the plan they are given.
#pragma once
#include <algorithm>
#include <cstdint>

namespace gnnsparse::cuda_detail {

inline int64_t pow2ceil(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

// The hub pass of SpMM and FusedMM (kernels in segments.cuh): rows longer than `thr` nonzeros
// (hubs) are not walked by one group. The nnz range is cut into fixed segments of `seg` entries
// (aligned to multiples of seg), each (segment, hub row) piece is reduced into a workspace slot,
// and a combine kernel folds the slots of each hub row in segment order. Fixed segments and a
// fixed combine order keep results bitwise reproducible.
struct SegmentTuning {
  static constexpr int64_t kMinSegment = 256;  // rows up to this length are never hubs
  static constexpr int64_t kHubFactor = 16;    // hub = row longer than 16x the average row
  static constexpr int64_t kMaxHub = int64_t(1) << 30;  // cap on the hub threshold
  static constexpr int64_t kWorkspaceElems = int64_t(1) << 23;  // cap on partial-slot elements
  static constexpr int kFlagThreads = 256;         // hub flag kernel: block size
  static constexpr int64_t kFlagMaxBlocks = 1024;  // and grid cap (grid-stride loop)
};

struct SegmentPlan {
  int64_t seg = 0;        // segment length in nonzeros; 0 = no hub pass
  int64_t thr = 0;        // hub rows: deg > thr, thr >= seg (set even when there is no pass)
  int64_t nsegments = 0;  // ceil(nnz / seg) when there is a pass
  // What the row kernels take: they leave rows longer than this to the hub pass (0 = none).
  int64_t row_limit() const { return seg > 0 ? thr : 0; }
};

// Hub threshold: kHubFactor times the average row, at least kMinSegment, a power of two.
// At most kMaxHub (2^30), so every row piece one group reduces has int32 edge offsets.
inline int64_t hub_threshold(int64_t M, int64_t nnz) {
  const int64_t avg = M > 0 ? nnz / M : 0;
  return std::min<int64_t>(SegmentTuning::kMaxHub,
                           std::max<int64_t>(SegmentTuning::kMinSegment,
                                             pow2ceil(avg * SegmentTuning::kHubFactor)));
}

// Segments start at `min_seg` nonzeros and double until the workspace fits under
// kWorkspaceElems (2 slots of `slot_elems` elements per segment: the row that holds its first and
// the row that holds its last entry). The threshold is raised to the segment length if needed, so
// a hub is longer than a segment and a segment meets at most two hub rows. max_deg is the longest
// row if known, else -1 (then every matrix with more than thr nonzeros runs the pass, whose flag
// kernel lets the hub kernels return at once when no row is a hub).
inline SegmentPlan plan_segments(int64_t M, int64_t nnz, int64_t max_deg, int64_t min_seg,
                                 int64_t slot_elems) {
  SegmentPlan p;
  int64_t seg = min_seg;
  while (nnz / seg * 2 * slot_elems > SegmentTuning::kWorkspaceElems) seg <<= 1;
  p.thr = std::max(hub_threshold(M, nnz), seg);
  const bool hubs = max_deg < 0 ? nnz > p.thr : max_deg > p.thr;
  p.seg = hubs ? seg : 0;
  p.nsegments = hubs ? (nnz + seg - 1) / seg : 0;
  return p;
}

// Blocks of the combine kernels: one warp per segment looks for a hub row starting in it.
inline int64_t combine_blocks(int64_t nsegments, int combine_threads) {
  return (nsegments + combine_threads / 32 - 1) / (combine_threads / 32);
}

// Row-parallel SpMM (one group of G lanes per row, lanes split the feature columns, every lane
// walks the row's edges in ascending order), plus the hub pass. Segments are as long as the hub
// threshold (longer only to cap the workspace); the segment kernel gives each a whole warp.
struct SpmmTuning {
  static constexpr int kBlockThreads = 256;        // 8 warps per block
  static constexpr int kRowMinBlocks = 3;          // fp32 sum/mean: >= 24 resident warps per SM
  static constexpr int kRowMinBlocksArg = 4;       // fp32 max/min, vector path: >= 32
  static constexpr int kRowMinBlocksWide = 2;      // fp32 max/min, scalar path: >= 16
  static constexpr int kColVecsPerLane = 2;        // vectors of V columns each lane owns (V > 1)
  static constexpr int kScalarColsPerLane = 5;     // columns each lane owns on the scalar path
  static constexpr int kArgVecsPerLane = 1;        // vectors per lane for max / min (vector path)
  static constexpr int kLoadBudget = 32;           // elements a lane keeps in flight -> edge unroll
  static constexpr int kMaxUnroll = 4;
  static constexpr int64_t kMinEdgesPerLane = 16;  // edge split only when each part keeps this many
  static constexpr int kCombineThreads = 512;      // hub combine: one warp per segment
  static constexpr int64_t kWarpRowMin = 32;       // longer rows get a whole warp (when P == 1)
};

// Vectors each lane owns. Vector path (V > 1, 16-byte loads): two per lane for sum / mean; one
// for max / min (value + int32 arg registers stay few, so kRowMinBlocksArg blocks stay resident
// without spilling; the group doubles instead). Scalar path (V = 1: C is not a multiple of the
// vector width, so X rows are only element-aligned and 16-byte loads would fault): five columns
// per lane at stride Gc, so a row's group stays narrow (C = 33: 8 lanes and 4 rows per warp, not a
// warp per row; C = 65 / 129: one column tile, not a second one for the last column) and the
// kernel fits kRowMinBlocks blocks.
template <int V, bool Arg = false> constexpr int spmm_cols_per_lane() {
  return V == 1 ? SpmmTuning::kScalarColsPerLane
                : (Arg ? SpmmTuning::kArgVecsPerLane : SpmmTuning::kColVecsPerLane);
}
template <int V, bool Arg = false> constexpr int spmm_unroll() {
  constexpr int u = SpmmTuning::kLoadBudget / (V * spmm_cols_per_lane<V, Arg>());
  return u < 1 ? 1 : (u > SpmmTuning::kMaxUnroll ? SpmmTuning::kMaxUnroll : u);
}

struct SpmmPlan {
  int vec = 1;             // V: columns per vector load (16 bytes when C and alignment allow)
  int group = 32;          // G = Gc * P: lanes per row (power of two <= 32)
  int col_lanes = 32;      // Gc: lanes that split the columns
  int edge_parts = 1;      // P: contiguous parts of the row's edges, merged by a fixed shuffle tree
  int64_t col_blocks = 1;  // grid.y: column tiles of G * V * kColVecsPerLane
  SegmentPlan hub;         // hub pass (hub.seg == 0: none); here hub.thr == hub.seg
  int64_t row_blocks = 0;  // grid.x of the row kernel
  int64_t segment_blocks = 0;
  int64_t combine_blocks = 0;
};

inline SpmmPlan plan_spmm(int64_t M, int64_t nnz, int64_t C, int64_t max_deg, int elem_bytes,
                          bool aligned, bool arg) {
  SpmmPlan p;
  const int vfull = 16 / elem_bytes;
  p.vec = (aligned && C % vfull == 0) ? vfull : 1;
  const int64_t avg = M > 0 ? nnz / M : 0;
  const int64_t vecs = (C + p.vec - 1) / p.vec;
  const int64_t per_lane = p.vec == 1 ? spmm_cols_per_lane<1>()
                                       : (arg ? SpmmTuning::kArgVecsPerLane : SpmmTuning::kColVecsPerLane);
  p.col_lanes = static_cast<int>(std::min<int64_t>(32, pow2ceil((vecs + per_lane - 1) / per_lane)));
  const int64_t cols_per_group = int64_t(p.col_lanes) * p.vec * per_lane;
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
  // Hub pass: one warp per segment (Gc column lanes x 32/Gc edge parts); then one combine block
  // per kCombineThreads / 32 segments (a block merges the hub rows that start in its segments).
  p.segment_blocks = (p.hub.nsegments * 32 + SpmmTuning::kBlockThreads - 1) / SpmmTuning::kBlockThreads;
  p.combine_blocks = combine_blocks(p.hub.nsegments, SpmmTuning::kCombineThreads);
  return p;
}

// SDDMM: a group of G lanes per edge (lanes split F, butterfly sum), each group walks a fixed
// run of consecutive edges, finding its first row by binary search (hubs cost nothing extra).
struct SddmmTuning {
  static constexpr int kBlockThreads = 256;
  static constexpr int kEdgesPerGroup = 32;
  static constexpr int kUnroll = 8;  // edges in flight per group; dot groups have >= kUnroll lanes
  static constexpr int kUnrollWide = 4;  // the same for fp64 / fp16 / bf16 (register pressure)
  static constexpr int kMinBlocksDot = 2;  // dot: >= 16 resident warps per SM (<= 128 registers)
};
struct SddmmPlan {
  int vec = 1;
  int group = 1;
  int64_t blocks = 0;
};
inline SddmmPlan plan_sddmm(int64_t nnz, int64_t H, int64_t F, bool add, int elem_bytes,
                            bool aligned) {
  SddmmPlan p;
  const int vfull = 16 / elem_bytes;
  if (add) {
    p.vec = 1;
    p.group = static_cast<int>(std::min<int64_t>(32, pow2ceil(H)));
  } else {
    p.vec = (aligned && F % vfull == 0) ? vfull : 1;
    // at least kUnroll lanes: the transposed butterfly hands one edge to each lane set
    p.group = static_cast<int>(std::min<int64_t>(
        32, std::max<int64_t>(SddmmTuning::kUnroll, pow2ceil((F + p.vec - 1) / p.vec))));
  }
  const int64_t groups = (nnz + SddmmTuning::kEdgesPerGroup - 1) / SddmmTuning::kEdgesPerGroup;
  const int64_t groups_per_block = SddmmTuning::kBlockThreads / p.group;
  p.blocks = (groups + groups_per_block - 1) / groups_per_block;
  return p;
}

// FusedMM: one group per (row, head); lanes split F for the dot and D for the aggregation;
// online softmax (running max and sum, rescaled accumulator). Hub rows take the hub pass with
// partial states (max, sum, acc[D]) per (segment, head). Segments start at kMinSegment, shorter
// than SpMM's (a row that fits inside one segment is never a hub, so a segment still meets at
// most two hub rows), which gives the one-group-per-(segment, head) segment kernel more
// parallelism.
struct FusedTuning {
  static constexpr int kBlockThreads = 256;
  static constexpr int kColVecsPerLane = 2;   // D columns per lane: kColVecsPerLane * V
  static constexpr int kUnroll = 4;           // edges in flight per group
  static constexpr int kCombineThreads = 256; // hub combine: one warp per segment
};
struct FusedPlan {
  int vec = 1;
  int group = 1;
  int64_t col_blocks = 1;
  SegmentPlan hub;  // hub pass (hub.seg == 0: none)
  int64_t row_blocks = 0;
  int64_t segment_blocks = 0;
  int64_t combine_blocks = 0;
};
inline FusedPlan plan_fused(int64_t M, int64_t nnz, int64_t H, int64_t F, int64_t D, bool add,
                            int64_t max_deg, int elem_bytes, bool aligned) {
  FusedPlan p;
  const int vfull = 16 / elem_bytes;
  p.vec = (aligned && D % vfull == 0 && (add || F % vfull == 0)) ? vfull : 1;
  const int64_t fv = add ? 1 : (F + p.vec - 1) / p.vec;
  const int64_t dv = (D + p.vec - 1) / p.vec;
  const int64_t per_lane = FusedTuning::kColVecsPerLane;
  p.group = static_cast<int>(std::min<int64_t>(
      32, pow2ceil(std::max<int64_t>(fv, (dv + per_lane - 1) / per_lane))));
  const int64_t cols_per_group = int64_t(p.group) * p.vec * per_lane;
  p.col_blocks = std::max<int64_t>(1, (D + cols_per_group - 1) / cols_per_group);
  p.hub = plan_segments(M, nnz, max_deg, SegmentTuning::kMinSegment, H * (D + 2));
  const int64_t groups_per_block = FusedTuning::kBlockThreads / p.group;
  p.row_blocks = (M * H + groups_per_block - 1) / groups_per_block;
  p.segment_blocks = (p.hub.nsegments * H + groups_per_block - 1) / groups_per_block;
  p.combine_blocks = combine_blocks(p.hub.nsegments, FusedTuning::kCombineThreads);
  return p;
}

}  // namespace gnnsparse::cuda_detail
