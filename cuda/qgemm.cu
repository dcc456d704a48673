// The int8 TN GEMM C = scale * A^T B with A (K x M) and B (K x N) row-major int8, K long, M and N
// small: the weight gradient dW = q(dh)^T q(x) of a quantized layer (contract: gnnsparse/qgemm.hpp).
//
// Two launches, no atomics, no host round trip, no copy of an operand:
//   1. qgemm_tn_partial_kernel: block (segment s, tile) accumulates the BM x BN tile of
//      sum_{k in segment s} A[k, :]^T B[k, :] in int32 registers (at most kQGemmMaxSegment rows:
//      exact) and writes it to work[s] (M x N int32). Per stage of BK rows, each thread loads 4 x 4
//      byte blocks (4 rows x 4 consecutive columns: 32-bit loads, a warp reads whole 128-byte rows,
//      coalesced, no transposed copy in memory), turns each into 4 words that pack 4 consecutive k
//      of one column (a 4 x 4 byte transpose, 8 __byte_perm) and stores them to shared memory as
//      As[k / 4][m] / Bs[k / 4][n]. A 16 x 16 grid of threads owns TM x TN outputs each
//      (TM = BM / 16): per packed k, TM + TN words from shared memory, TM * TN __dp4a. Two shared
//      buffers: the next stage's global loads are in registers while this stage is computed.
//      Shapes the 32-bit loads cannot take (M or N not a multiple of 4, rows not 4-byte aligned)
//      load bytes and pack them with shifts (VEC = false), same schedule.
//   2. qgemm_tn_combine_kernel: C[e] = fl32(fl32(sum_s work[s][e]) * scale), the sum in int64:
//      a block per 32 consecutive elements (coalesced), warp w adds segments w, w + 8, ... and
//      warp 0 adds the 8 warps' sums in order.
// Launch plan (plan_qgemm_tn): tile BM, BN in {32, 64, 128} from M, N; BK = 4096 / min(BM, BN)
// rows (>= 32), so every thread moves whole 4 x 4 blocks; segments long enough to stay exact and
// to keep the fixed per-block costs small (kMinStages stages), otherwise as many as fill the GPU
// once (kTargetBlocks: 2 resident 256-thread blocks on each of the H200's 132 SMs).
// Bytes: K (M + N) read once per tile column / row (once when M, N <= 128), work written and read
// once: nseg M N 4 bytes each way. Arithmetic: 2 K M N int8 operations = K M N / 4 dp4a.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "common.cuh"
#include "dispatch.cuh"
#include "gnnsparse/cuda_quant.hpp"

namespace gnnsparse::cuda_detail {

// ---- launch plan ------------------------------------------------------------------------------
struct QGemmTuning {
  static constexpr int kThreads = 256;             // a 16 x 16 grid of threads per tile
  static constexpr int kMinBlocksPerSM = 2;        // <= 128 registers (the 128 x 128 tile: 64 accumulators)
  static constexpr int64_t kTargetBlocks = 264;    // one wave: 2 blocks on each of the H200's 132 SMs
  static constexpr int64_t kMinStages = 8;         // a segment has at least 8 stages of BK rows
  static constexpr int kCombineThreads = 256;      // 8 warps over the segments of 32 elements
};

struct QGemmPlan {
  int bm = 32, bn = 32, bk = 128;       // tile and rows per stage
  int64_t tiles_m = 0, tiles_n = 0;
  int64_t seg = 0, nseg = 0;            // rows per segment, segments (0 when K, M or N is 0)
  int64_t tiles() const { return tiles_m * tiles_n; }
  int64_t blocks() const { return tiles() * nseg; }
};

inline int qgemm_tile(int64_t d) { return d <= 32 ? 32 : (d <= 64 ? 64 : 128); }
// Rows per stage: 4096 / min(BM, BN), at least 32 (so each of the 256 threads moves whole 4 x 4
// blocks of both operands; QGemmShape checks it).
constexpr int qgemm_bk(int bm, int bn) { return 4096 / (bm < bn ? bm : bn) < 32 ? 32 : 4096 / (bm < bn ? bm : bn); }

inline QGemmPlan plan_qgemm_tn(int64_t K, int64_t M, int64_t N) {
  QGemmPlan p;
  p.bm = qgemm_tile(M);
  p.bn = qgemm_tile(N);
  p.bk = qgemm_bk(p.bm, p.bn);
  p.tiles_m = (M + p.bm - 1) / p.bm;
  p.tiles_n = (N + p.bn - 1) / p.bn;
  if (K <= 0 || M <= 0 || N <= 0) return p;
  const int64_t max_seg = kQGemmMaxSegment / p.bk * p.bk;
  const int64_t need = (K + max_seg - 1) / max_seg;                          // exactness
  const int64_t fill = (QGemmTuning::kTargetBlocks + p.tiles() - 1) / p.tiles();  // one wave
  const int64_t most = std::max<int64_t>(1, K / (QGemmTuning::kMinStages * p.bk));
  const int64_t S = std::max(need, std::min(fill, most));
  p.seg = ((K + S - 1) / S + p.bk - 1) / p.bk * p.bk;  // <= max_seg (S >= need, max_seg % bk == 0)
  p.nseg = (K + p.seg - 1) / p.seg;
  return p;
}

// ---- the partial-sum kernel ---------------------------------------------------------------------
template <int BM, int BN>
struct QGemmShape {
  static constexpr int kThreads = QGemmTuning::kThreads;
  static constexpr int TM = BM / 16, TN = BN / 16;            // outputs per thread
  static constexpr int VA = TM < 4 ? TM : 4, VB = TN < 4 ? TN : 4;  // words per shared-memory load
  static constexpr int BK = qgemm_bk(BM, BN);
  static constexpr int KQ = BK / 4;                           // packed words per column per stage
  static constexpr int LA = KQ * (BM / 4) / kThreads;         // 4 x 4 blocks of A per thread per stage
  static constexpr int LB = KQ * (BN / 4) / kThreads;
  static_assert(BM % 32 == 0 && BN % 32 == 0 && BM <= 128 && BN <= 128, "tiles: 32, 64, 128");
  static_assert(LA >= 1 && LA * kThreads == KQ * (BM / 4), "whole 4 x 4 blocks of A per thread");
  static_assert(LB >= 1 && LB * kThreads == KQ * (BN / 4), "whole 4 x 4 blocks of B per thread");
  static_assert(TM % VA == 0 && TN % VB == 0, "vector loads cover the thread's outputs");
  static_assert(2 * KQ * (BM + BN) * 4 <= 48 * 1024, "static shared memory");
  // Output i of a thread at grid position p (0..15) along a tile side with V words per load:
  // vectors of V consecutive outputs, 16 V apart (so a warp's loads are V-word vectors).
  template <int V> __host__ __device__ static constexpr int pos(int i, int p) {
    return (i / V) * (16 * V) + p * V + (i % V);
  }
};

// Rows r[0..3] (4 bytes each: columns c .. c + 3) -> w[j] = column c + j's bytes of rows 0..3.
__device__ __forceinline__ void transpose4x4(const std::uint32_t (&r)[4], std::uint32_t (&w)[4]) {
  const std::uint32_t t0 = __byte_perm(r[0], r[1], 0x5140);  // r0.b0 r1.b0 r0.b1 r1.b1
  const std::uint32_t t1 = __byte_perm(r[0], r[1], 0x7362);  // r0.b2 r1.b2 r0.b3 r1.b3
  const std::uint32_t t2 = __byte_perm(r[2], r[3], 0x5140);  // r2.b0 r3.b0 r2.b1 r3.b1
  const std::uint32_t t3 = __byte_perm(r[2], r[3], 0x7362);  // r2.b2 r3.b2 r2.b3 r3.b3
  w[0] = __byte_perm(t0, t2, 0x5410);
  w[1] = __byte_perm(t0, t2, 0x7632);
  w[2] = __byte_perm(t1, t3, 0x5410);
  w[3] = __byte_perm(t1, t3, 0x7632);
}

// This thread's L blocks of one stage of a W-column tile side, X pointing at the stage's first
// row and the tile's first column: block i = threadIdx.x + j * 256 is packed row kq = i / (W / 4)
// (rows 4 kq .. + 3; those >= rows read as 0) and columns 4 cq .. + 3, cq = i % (W / 4) (those >=
// cols read as 0). VEC: r[j][u] holds row u's 4 bytes (one 32-bit load; cols % 4 == 0, rows 4-byte
// aligned); else r[j][v] holds column v's 4 bytes, already packed by k.
template <int W, int L, bool VEC>
__device__ __forceinline__ void load_blocks(const std::int8_t* __restrict__ X, int ld, int rows, int cols,
                                            std::uint32_t (&r)[L][4]) {
#pragma unroll
  for (int j = 0; j < L; ++j) {
    const int i = int(threadIdx.x) + j * QGemmTuning::kThreads;
    const int k = 4 * (i / (W / 4)), c = 4 * (i % (W / 4));
    const std::int8_t* __restrict__ p = X + k * ld + c;
    if constexpr (VEC) {
#pragma unroll
      for (int u = 0; u < 4; ++u)
        r[j][u] = (c < cols && k + u < rows) ? __ldg(reinterpret_cast<const unsigned int*>(p + u * ld)) : 0u;
    } else {
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        std::uint32_t w = 0;
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const std::uint32_t b =
              (c + v < cols && k + u < rows) ? std::uint32_t(__ldg(reinterpret_cast<const unsigned char*>(p + u * ld + v)))
                                             : 0u;
          w |= b << (8 * u);
        }
        r[j][v] = w;
      }
    }
  }
}

// The blocks of load_blocks into S[kq][4 cq .. + 3] (one 16-byte store each).
template <int W, int L, bool VEC>
__device__ __forceinline__ void store_blocks(const std::uint32_t (&r)[L][4], std::uint32_t (*S)[W]) {
#pragma unroll
  for (int j = 0; j < L; ++j) {
    const int i = int(threadIdx.x) + j * QGemmTuning::kThreads;
    std::uint32_t w[4];
    if constexpr (VEC) {
      transpose4x4(r[j], w);
    } else {
      w[0] = r[j][0]; w[1] = r[j][1]; w[2] = r[j][2]; w[3] = r[j][3];
    }
    *reinterpret_cast<uint4*>(&S[i / (W / 4)][4 * (i % (W / 4))]) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

template <int V>
__device__ __forceinline__ void load_words(const std::uint32_t* p, std::uint32_t* out) {
  if constexpr (V == 4) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
  } else if constexpr (V == 2) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    out[0] = v.x; out[1] = v.y;
  } else {
    out[0] = p[0];
  }
}

// Block b = s * tiles + tile: segment s (rows [s seg, min(K, (s + 1) seg))), tile (tile / tiles_n,
// tile % tiles_n) of BM x BN outputs; writes work[s][m][n] for every m < M, n < N of the tile.
// Row strides and M, N are ints (the host checks lda, ldb < 2^23, so BK rows of a stride are too).
template <int BM, int BN, bool VEC>
__global__ void __launch_bounds__(QGemmTuning::kThreads, QGemmTuning::kMinBlocksPerSM)
qgemm_tn_partial_kernel(const std::int8_t* __restrict__ A, int lda, const std::int8_t* __restrict__ B, int ldb,
                        int64_t K, int M, int N, int64_t seg, int tiles_n, int tiles,
                        std::int32_t* __restrict__ work) {
  using S = QGemmShape<BM, BN>;
  __shared__ __align__(16) std::uint32_t As[2][S::KQ][BM];
  __shared__ __align__(16) std::uint32_t Bs[2][S::KQ][BN];
  const int tx = int(threadIdx.x) % 16, ty = int(threadIdx.x) / 16;
  int m0, n0, colsA, colsB, left;
  const std::int8_t* __restrict__ Ak;  // the next stage's first row, the tile's first column
  const std::int8_t* __restrict__ Bk;
  {
    const int s = int(blockIdx.x) / tiles, tile = int(blockIdx.x) - s * tiles;
    m0 = (tile / tiles_n) * BM;
    n0 = (tile % tiles_n) * BN;
    colsA = min(M - m0, BM);  // columns of the tile inside the matrix
    colsB = min(N - n0, BN);
    const int64_t k0 = int64_t(s) * seg;
    left = int(min(K - k0, seg));  // rows of the segment not loaded yet (<= kQGemmMaxSegment)
    Ak = A + k0 * lda + m0;
    Bk = B + k0 * ldb + n0;
  }

  int acc[S::TM][S::TN];
#pragma unroll
  for (int i = 0; i < S::TM; ++i)
#pragma unroll
    for (int j = 0; j < S::TN; ++j) acc[i][j] = 0;

  std::uint32_t ra[S::LA][4], rb[S::LB][4];
  load_blocks<BM, S::LA, VEC>(Ak, lda, left, colsA, ra);
  load_blocks<BN, S::LB, VEC>(Bk, ldb, left, colsB, rb);
  store_blocks<BM, S::LA, VEC>(ra, As[0]);
  store_blocks<BN, S::LB, VEC>(rb, Bs[0]);
  __syncthreads();

  int cur = 0;
  for (; left > 0; left -= S::BK) {
    const bool more = left > S::BK;
    if (more) {  // the next stage's loads fly while this stage is computed
      Ak += S::BK * lda;
      Bk += S::BK * ldb;
      load_blocks<BM, S::LA, VEC>(Ak, lda, left - S::BK, colsA, ra);
      load_blocks<BN, S::LB, VEC>(Bk, ldb, left - S::BK, colsB, rb);
    }
#pragma unroll
    for (int kq = 0; kq < S::KQ; ++kq) {
      std::uint32_t a[S::TM], b[S::TN];
#pragma unroll
      for (int g = 0; g < S::TM / S::VA; ++g)
        load_words<S::VA>(&As[cur][kq][S::template pos<S::VA>(g * S::VA, ty)], a + g * S::VA);
#pragma unroll
      for (int g = 0; g < S::TN / S::VB; ++g)
        load_words<S::VB>(&Bs[cur][kq][S::template pos<S::VB>(g * S::VB, tx)], b + g * S::VB);
#pragma unroll
      for (int i = 0; i < S::TM; ++i)
#pragma unroll
        for (int j = 0; j < S::TN; ++j) acc[i][j] = __dp4a(int(a[i]), int(b[j]), acc[i][j]);
    }
    if (more) {  // the other buffer: every thread finished reading it before the last barrier
      store_blocks<BM, S::LA, VEC>(ra, As[cur ^ 1]);
      store_blocks<BN, S::LB, VEC>(rb, Bs[cur ^ 1]);
    }
    __syncthreads();
    cur ^= 1;
  }

  const int s = int(blockIdx.x) / tiles;
  std::int32_t* __restrict__ P = work + int64_t(s) * M * N;
#pragma unroll
  for (int i = 0; i < S::TM; ++i) {
    const int m = m0 + S::template pos<S::VA>(i, ty);
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < S::TN; ++j) {
      const int n = n0 + S::template pos<S::VB>(j, tx);
      if (n < N) P[int64_t(m) * N + n] = acc[i][j];
    }
  }
}

// ---- the combine kernel -------------------------------------------------------------------------
// Block b: elements e = 32 b + lane of the M x N output; warp w sums segments w, w + 8, ... in
// int64; warp 0 adds the 8 sums in warp order, converts and scales.
__global__ void __launch_bounds__(QGemmTuning::kCombineThreads)
qgemm_tn_combine_kernel(const std::int32_t* __restrict__ work, int64_t nseg, int64_t MN,
                        const float* __restrict__ scale, float* __restrict__ C) {
  constexpr int NW = QGemmTuning::kCombineThreads / 32;
  constexpr int U = 4;  // loads in flight per lane
  __shared__ long long part[NW][32];
  const int lane = int(threadIdx.x) % 32, w = int(threadIdx.x) / 32;
  const int64_t e = int64_t(blockIdx.x) * 32 + lane;
  long long acc = 0;
  if (e < MN) {
    int64_t s = w;
    for (; s + (U - 1) * NW < nseg; s += U * NW) {
      int v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = __ldg(work + (s + u * NW) * MN + e);
#pragma unroll
      for (int u = 0; u < U; ++u) acc += v[u];
    }
    for (; s < nseg; s += NW) acc += __ldg(work + s * MN + e);
  }
  part[w][lane] = acc;
  __syncthreads();
  if (w == 0 && e < MN) {
    long long total = 0;
#pragma unroll
    for (int q = 0; q < NW; ++q) total += part[q][lane];
    C[e] = __fmul_rn(__ll2float_rn(total), __ldg(scale));
  }
}

template <int BM, int BN, bool VEC>
void launch_qgemm_partial(const QGemmTnArgs& a, const QGemmPlan& p, cudaStream_t stream) {
  qgemm_tn_partial_kernel<BM, BN, VEC><<<static_cast<unsigned>(p.blocks()), QGemmTuning::kThreads, 0, stream>>>(
      a.A, int(a.lda), a.B, int(a.ldb), a.K, int(a.M), int(a.N), p.seg, int(p.tiles_n), int(p.tiles()), a.work);
  GS_LAUNCH_CHECK("qgemm_tn_partial_kernel");
}

template <bool VEC>
void dispatch_qgemm_tile(const QGemmTnArgs& a, const QGemmPlan& p, cudaStream_t stream) {
  auto with_bn = [&](auto bm) {
    constexpr int BM = decltype(bm)::value;
    switch (p.bn) {
      case 32: return launch_qgemm_partial<BM, 32, VEC>(a, p, stream);
      case 64: return launch_qgemm_partial<BM, 64, VEC>(a, p, stream);
      default: return launch_qgemm_partial<BM, 128, VEC>(a, p, stream);
    }
  };
  switch (p.bm) {
    case 32: return with_bn(ValueTag<32>{});
    case 64: return with_bn(ValueTag<64>{});
    default: return with_bn(ValueTag<128>{});
  }
}

inline constexpr int64_t kMaxStride = int64_t(1) << 23;  // BK * stride fits an int
inline bool aligned4(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 4 == 0; }

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

std::int64_t qgemm_tn_work(std::int64_t K, std::int64_t M, std::int64_t N) {
  if (K < 0 || M < 0 || N < 0) throw std::invalid_argument("gnnsparse cuda qgemm_tn: negative size");
  const cuda_detail::QGemmPlan p = cuda_detail::plan_qgemm_tn(K, M, N);
  return p.nseg * M * N;
}

void qgemm_tn(const QGemmTnArgs& a, cudaStream_t stream) {
  using namespace cuda_detail;
  const std::string where = "gnnsparse cuda qgemm_tn: ";
  if (a.K < 0 || a.M < 0 || a.N < 0) throw std::invalid_argument(where + "negative size");
  if (a.lda < a.M || a.ldb < a.N)
    throw std::invalid_argument(where + "row strides lda = " + std::to_string(a.lda) + ", ldb = " +
                                std::to_string(a.ldb) + " are shorter than the rows (M = " + std::to_string(a.M) +
                                ", N = " + std::to_string(a.N) + ")");
  if (a.M == 0 || a.N == 0) return;
  const QGemmPlan p = plan_qgemm_tn(a.K, a.M, a.N);
  const int64_t need = p.nseg * a.M * a.N;
  if (a.scale == nullptr || a.C == nullptr || (a.K > 0 && (a.A == nullptr || a.B == nullptr)) ||
      (need > 0 && a.work == nullptr))
    throw std::invalid_argument(where + "null pointer");
  if (a.work_size < need)
    throw std::invalid_argument(where + "work holds " + std::to_string(a.work_size) + " int32, the launch needs " +
                                std::to_string(need));
  if (a.lda >= kMaxStride || a.ldb >= kMaxStride)
    throw std::invalid_argument(where + "row strides of 2^23 bytes or more are not supported");
  if (p.blocks() > std::numeric_limits<int>::max())
    throw std::invalid_argument(where + "too many blocks (" + std::to_string(p.blocks()) + "): M, N too large");
  if (p.nseg > 0) {
    const bool vec = a.M % 4 == 0 && a.N % 4 == 0 && a.lda % 4 == 0 && a.ldb % 4 == 0 && aligned4(a.A) &&
                     aligned4(a.B);
    if (vec) dispatch_qgemm_tile<true>(a, p, stream);
    else dispatch_qgemm_tile<false>(a, p, stream);
  }
  const int64_t MN = a.M * a.N;
  const int64_t blocks = (MN + 31) / 32;
  if (blocks > std::numeric_limits<int>::max()) throw std::invalid_argument(where + "M x N too large");
  qgemm_tn_combine_kernel<<<static_cast<unsigned>(blocks), QGemmTuning::kCombineThreads, 0, stream>>>(
      a.work, p.nseg, MN, a.scale, a.C);
  GS_LAUNCH_CHECK("qgemm_tn_combine_kernel");
}

}  // namespace gnnsparse::cuda
