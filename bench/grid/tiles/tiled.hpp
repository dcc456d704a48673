// gnnsparse CUDA tile kernels for dense-ish sparse matrices (density ~1e-2 .. 1): host API.
//
// At 10-30 % density every 16 x 8 tile of a random matrix holds nonzeros, so SpMM / SDDMM /
// FusedMM are dense work with a sparse description. These kernels run that work on tensor cores
// (mma.sync, sm_80+): A's tiles are densified on the fly in shared memory from a bitmask built
// once per matrix (TileCache) plus the CSR's own value array; the feature tiles are staged with
// cp.async; products use 3xTF32 (precision fp32: fp32-class accuracy), 1xTF32 (tf32) or bf16.
// Reductions run in a fixed order (per-chunk partial sums folded in order, split-K partials
// combined in slice order inside a thread-block cluster), so results are bitwise reproducible.
//
// Contract (semantics of gnnsparse/ops.hpp; only what the tiles support, else the entry points
// return false and the caller runs the sparse kernels):
// - float32 features and values, int32 or int64 indices; CSR rows sorted by column, no duplicate
//   column in a row (checked by tile_cache_build: TileCache::eligible);
// - SpMM: reduce sum or mean, C % 4 == 0, X and Y 16-byte aligned;
// - SDDMM: op dot, F % 4 == 0, F <= 128, any H;
// - FusedMM: op dot, edge none / leaky_relu / exp / softmax (E not requested for softmax),
//   F % 4 == 0, D % 4 == 0, F <= 128, D <= 128, any H;
// - the TileCache of the same CSR (M, K, nnz must match).
// Stream-ordered like gnnsparse/cuda.hpp: no synchronization, no allocation, no atomics.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "gnnsparse/args.hpp"
#include "gnnsparse/ops.hpp"

namespace gnnsparse::cuda {

// The per-matrix structure the tile kernels read instead of the column indices (built once, kept
// with the CSR; 5/32 byte per dense entry, e.g. 42 MB for a 32768 x 8192 matrix):
//   mask  [KW][Mp] uint32: bit j of mask[c][i] set <=> column 32c + j is stored in row i;
//   segoff[KS][Mp] uint32: number of stored entries of row i in columns < 128 s
//                          (lets a split-K slice start at any 128-column segment).
// Column-chunk-major, so the rows of one tile are contiguous (coalesced loads); rows padded to
// Mp = M rounded up to kTileRowPad with zero masks.
struct TileCache {
  std::int64_t M = 0, K = 0, nnz = 0;
  std::int64_t Mp = 0;   // padded rows
  std::int64_t KW = 0;   // 32-column chunks, ceil(K / 32)
  std::int64_t KS = 0;   // 128-column segments, ceil(K / 128)
  const std::uint32_t* mask = nullptr;
  const std::uint32_t* segoff = nullptr;
  bool eligible = false;  // rows sorted, no duplicates, columns in range
};

inline constexpr std::int64_t kTileRowPad = 128;
inline constexpr std::int64_t kTileChunk = 32;     // columns per mask word
inline constexpr std::int64_t kTileSegment = 128;  // columns per segoff entry

// Device bytes tile_cache_build needs for an M x K matrix.
std::size_t tile_cache_bytes(std::int64_t M, std::int64_t K);

// Builds the cache of A into `storage` (tile_cache_bytes(M, K) bytes of device memory, 16-byte
// aligned, owned by the caller, e.g. a torch uint8 tensor kept on the Python CSR object) and
// fills *out. Enqueued on `stream`; synchronizes that stream once to read the eligibility flag
// (a build happens once per matrix). Returns out->eligible.
bool tile_cache_build(const CsrView& A, void* storage, TileCache* out, cudaStream_t stream);

// Knobs for the benchmark harness; production calls pass nullptr (automatic choices).
struct TileOverrides {
  int slices = 0;          // split-K / column slices; 0 = automatic
  bool no_cluster = false; // never split through a thread-block cluster (forces slices = 1 for
                           // SpMM / FusedMM)
};

// Each returns false, having enqueued nothing, when the call is outside the contract above
// (the caller then runs the sparse kernels); throws std::runtime_error on a CUDA error.
bool tiled_spmm(const SpmmArgs& a, const TileCache* cache, cudaStream_t stream,
                const TileOverrides* ov = nullptr);
bool tiled_sddmm(const SddmmArgs& a, const TileCache* cache, cudaStream_t stream,
                 const TileOverrides* ov = nullptr);
bool tiled_fusedmm(const FusedArgs& a, const TileCache* cache, cudaStream_t stream,
                   const TileOverrides* ov = nullptr);

// ---- policy -------------------------------------------------------------------------------------
// Which method an op should use for a matrix of this shape and density. The tile kernels cost
// ~ M*K (every dense entry is touched) and the sparse kernels ~ nnz * width, so the rule is a
// crossover density per (op, width, precision): tiles when nnz / (M K) >= the crossover and the
// matrix is not tiny (K >= kTileMinK). Graphs (density ~1e-5) always stay sparse. The crossover
// table lives in tiled_policy.cpp and is set from the density sweep of bench/grid (H200).
enum class TileOp { spmm, sddmm, fusedmm };
double tile_crossover_density(TileOp op, std::int64_t width, Precision precision);
bool prefer_tiles(TileOp op, std::int64_t M, std::int64_t K, std::int64_t nnz, std::int64_t width,
                  Precision precision);
inline constexpr std::int64_t kTileMinK = 256;

}  // namespace gnnsparse::cuda
