// Method choice for dense-ish inputs: tensor-core tiles or the sparse (row-parallel) kernels.
//
// Cost model: the tile kernels touch every dense entry (time ~ M K / R_tile(width, precision));
// the sparse kernels touch every stored entry (time ~ nnz / R_sparse(width)). Tiles win above the
// crossover density R_sparse-per-entry / R_tile-per-entry, one number per (op, width, precision).
// The table holds the crossover at widths 32 and 128 (interpolated in log2(width) between them,
// held constant outside); its values come from the density sweep of bench/grid on an H200
// (bench/grid/run.sh prints the measured crossovers in this table's format).
#include <algorithm>
#include <cmath>

#include "tiled.hpp"

namespace gnnsparse::cuda {

namespace {
struct Crossover {
  double at32, at128;
};
// [op][precision], measured by the density sweep on an H200 (2026-11-30, docs/grid.md): the worst
// of three shapes; "never" (the tiles lost at every density up to 0.3) is written as 2.0.
constexpr double kNever = 2.0;
constexpr Crossover kCrossover[3][3] = {
    // spmm:    fp32               tf32               bf16
    {{kNever, 0.2895}, {kNever, 0.2566}, {kNever, 0.1941}},
    // sddmm
    {{kNever, 0.1887}, {kNever, 0.1113}, {kNever, 0.1019}},
    // fusedmm
    {{0.0779, 0.0858}, {0.0541, 0.0477}, {0.0444, 0.0379}},
};
}  // namespace

double tile_crossover_density(TileOp op, std::int64_t width, Precision precision) {
  const Crossover c = kCrossover[static_cast<int>(op)][static_cast<int>(precision)];
  const double x = std::clamp(std::log2(static_cast<double>(std::max<std::int64_t>(width, 1))),
                              5.0, 7.0);
  const double f = (x - 5.0) / 2.0;
  return c.at32 + f * (c.at128 - c.at32);
}

bool prefer_tiles(TileOp op, std::int64_t M, std::int64_t K, std::int64_t nnz, std::int64_t width,
                  Precision precision) {
  if (M <= 0 || K < kTileMinK || nnz <= 0) return false;
  const double density = static_cast<double>(nnz) / (static_cast<double>(M) * static_cast<double>(K));
  return density >= tile_crossover_density(op, width, precision);
}

}  // namespace gnnsparse::cuda
