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

// Row-parallel SpMM (one group of G lanes per row, lanes split the feature columns, every lane
// walks the row's edges in ascending order), plus a hub pass: rows longer than `seg` entries are
// cut into fixed segments of `seg` nonzeros (aligned to multiples of seg in the nnz space), each
// reduced by its own group into a workspace slot, then combined in segment order by the row
// kernel. Fixed segments and a fixed combine order keep the result bitwise reproducible.
struct SpmmTuning {
  static constexpr int kBlockThreads = 256;        // 8 warps per block
  static constexpr int kRowMinBlocks = 3;          // fp32 sum/mean: >= 24 resident warps per SM
  static constexpr int kColVecsPerLane = 2;        // vectors of V columns each lane owns
  static constexpr int kLoadBudget = 32;           // elements a lane keeps in flight -> edge unroll
  static constexpr int kMaxUnroll = 4;
  static constexpr int64_t kMinSegment = 256;      // rows up to this length stay in one group
  static constexpr int64_t kWorkspaceElems = int64_t(1) << 23;  // cap on partial-slot elements
  static constexpr int64_t kMinEdgesPerLane = 16;  // edge split only when each part keeps this many
  static constexpr int kCombineThreads = 512;      // hub combine: one block per hub row
  static constexpr int64_t kHubFactor = 16;        // hub = row longer than 16x the average
  static constexpr int64_t kWarpRowMin = 32;       // longer rows get a whole warp (when P == 1)
};

template <int V> constexpr int spmm_unroll() {
  constexpr int u = SpmmTuning::kLoadBudget / (V * SpmmTuning::kColVecsPerLane);
  return u < 1 ? 1 : (u > SpmmTuning::kMaxUnroll ? SpmmTuning::kMaxUnroll : u);
}

struct SpmmPlan {
  int vec = 1;             // V: columns per vector load (16 bytes when C and alignment allow)
  int group = 32;          // G = Gc * P: lanes per row (power of two <= 32)
  int col_lanes = 32;      // Gc: lanes that split the columns
  int edge_parts = 1;      // P: contiguous parts of the row's edges, merged by a fixed shuffle tree
  int64_t col_blocks = 1;  // grid.y: column tiles of G * V * kColVecsPerLane
  int64_t seg = 0;         // hub segment length in nonzeros (0 = no hub pass)
  int64_t nchunks = 0;     // ceil(nnz / seg)
  int64_t row_blocks = 0;  // grid.x of the row kernel
  int64_t chunk_blocks = 0;
  int64_t combine_blocks = 0;
};

inline SpmmPlan plan_spmm(int64_t M, int64_t nnz, int64_t C, int64_t max_deg, int elem_bytes,
                          bool aligned) {
  SpmmPlan p;
  const int vfull = 16 / elem_bytes;
  p.vec = (aligned && C % vfull == 0) ? vfull : 1;
  const int64_t avg = M > 0 ? nnz / M : 0;
  const int64_t vecs = (C + p.vec - 1) / p.vec;
  const int64_t per_lane = SpmmTuning::kColVecsPerLane;
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
  // Segment length: as short as kMinSegment, longer only to cap the workspace
  // (2 slots per segment: the row that holds its first and the row that holds its last entry).
  // A hub is a row longer than kHubFactor times the average row (and than kMinSegment); the
  // segment length is that threshold, raised further only to cap the workspace.
  int64_t seg = std::max<int64_t>(SpmmTuning::kMinSegment, pow2ceil(avg * SpmmTuning::kHubFactor));
  while (nnz / seg * 2 * C > SpmmTuning::kWorkspaceElems) seg <<= 1;
  const bool hubs = max_deg < 0 ? nnz > seg : max_deg > seg;
  p.seg = hubs ? seg : 0;
  p.nchunks = hubs ? (nnz + seg - 1) / seg : 0;
  const int64_t groups_per_block = SpmmTuning::kBlockThreads / p.group;
  p.row_blocks = (M + groups_per_block - 1) / groups_per_block;
  // Hub pass: one warp per segment (Gc column lanes x 32/Gc edge parts); then one combine block
  // per 16 segments (a block merges the hub rows that start in its segments).
  p.chunk_blocks = (p.nchunks * 32 + SpmmTuning::kBlockThreads - 1) / SpmmTuning::kBlockThreads;
  p.combine_blocks = (p.nchunks + SpmmTuning::kCombineThreads / 32 - 1) / (SpmmTuning::kCombineThreads / 32);
  return p;
}

// SDDMM: a group of G lanes per edge (lanes split F, butterfly sum), each group walks a fixed
// run of consecutive edges, finding its first row by binary search (hubs cost nothing extra).
struct SddmmTuning {
  static constexpr int kBlockThreads = 256;
  static constexpr int kEdgesPerGroup = 32;
  static constexpr int kUnroll = 4;  // edges in flight per group
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
    p.group = static_cast<int>(std::min<int64_t>(32, pow2ceil((F + p.vec - 1) / p.vec)));
  }
  const int64_t groups = (nnz + SddmmTuning::kEdgesPerGroup - 1) / SddmmTuning::kEdgesPerGroup;
  const int64_t groups_per_block = SddmmTuning::kBlockThreads / p.group;
  p.blocks = (groups + groups_per_block - 1) / groups_per_block;
  return p;
}

// FusedMM: one group per (row, head); lanes split F for the dot and D for the aggregation;
// online softmax (running max and sum, rescaled accumulator). Hub rows use the same fixed
// segments as SpMM, with partial states (max, sum, acc[D]) combined in segment order.
struct FusedTuning {
  static constexpr int kBlockThreads = 256;
  static constexpr int kColVecsPerLane = 2;   // D columns per lane: kColVecsPerLane * V
  static constexpr int kCombineThreads = 256; // hub combine: one block per hub row
  static constexpr int64_t kMinSegment = 256;
  static constexpr int64_t kWorkspaceElems = int64_t(1) << 23;
};
struct FusedPlan {
  int vec = 1;
  int group = 1;
  int64_t col_blocks = 1;
  int64_t seg = 0;
  int64_t thr = 0;  // hub rows: deg > thr (thr >= seg)
  int64_t nchunks = 0;
  int64_t row_blocks = 0;
  int64_t chunk_blocks = 0;
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
  // Hub threshold as SpMM's; segments may be shorter than the threshold (a row that fits inside
  // one segment is then never a hub, so a segment still meets at most two hub rows), which gives
  // the one-group-per-(segment, head) hub pass more parallelism.
  const int64_t avg = M > 0 ? nnz / M : 0;
  p.thr = std::max<int64_t>(SpmmTuning::kMinSegment, pow2ceil(avg * SpmmTuning::kHubFactor));
  int64_t seg = FusedTuning::kMinSegment;
  while (nnz / seg * 2 * H * (D + 2) > FusedTuning::kWorkspaceElems) seg <<= 1;
  p.thr = std::max(p.thr, seg);
  const bool hubs = max_deg < 0 ? nnz > p.thr : max_deg > p.thr;
  p.seg = hubs ? seg : 0;
  p.nchunks = hubs ? (nnz + seg - 1) / seg : 0;
  const int64_t groups_per_block = FusedTuning::kBlockThreads / p.group;
  p.row_blocks = (M * H + groups_per_block - 1) / groups_per_block;
  p.chunk_blocks = (p.nchunks * H + groups_per_block - 1) / groups_per_block;
  p.combine_blocks = (p.nchunks + FusedTuning::kCombineThreads / 32 - 1) / (FusedTuning::kCombineThreads / 32);
  return p;
}

}  // namespace gnnsparse::cuda_detail
