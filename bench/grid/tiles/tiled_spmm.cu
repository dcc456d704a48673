// Tensor-core SpMM for dense-ish A: Y (M x C) = A (M x K, CSR + TileCache) X (K x C), sum / mean.
//
// Block = BM rows x BN columns of Y; it walks its K range in chunks of 32 columns (one mask word
// per row). Per chunk, through a STAGES-deep cp.async pipeline:
//   - A's BM x 32 tile is densified in shared memory: lane j of a warp copies row r's entry at
//     column j (CSR position o_r + popc(mask_r below j)) with a 4-byte cp.async, or zero-fills it
//     when the bit is clear. Row bookkeeping (mask word, running CSR offset) is kept by one
//     thread per row, one chunk ahead, in a 2-slot shared ring.
//   - X's 32 x BN tile arrives by 16-byte cp.async.
//   - warps (WM_ x WN_, each 32 x BN/WN_) run mma.sync over the chunk. For fp32 precision the
//     chunk's product is accumulated from zero (3xTF32 on the tensor cores, whose accumulation
//     truncates) and then added to the running sum with one fp32 add per element: the long sum
//     over K is rounded to nearest, in chunk order.
// Split-K (small M): S blocks of one thread-block cluster (sm_90) take consecutive 128-column
// segment ranges; partial tiles meet in distributed shared memory and each block sums a slice of
// rows over the S partials in slice order. Deterministic throughout.
#include <cooperative_groups.h>

#include <algorithm>

#include "mma.cuh"
#include "tile_host.cuh"
#include "tiled.hpp"

namespace gnnsparse::tiles {

namespace cg = cooperative_groups;

struct SpmmTileParams {
  const void* rowptr;
  int idx64;  // rowptr holds int64 (else int32)
  const float* val;
  const float* X;
  float* Y;
  const uint32_t* mask;
  const uint32_t* segoff;
  int64_t M, K, C, Mp;
  int KW;
  int chunks_per_slice;  // multiple of 4 (whole 128-column segments)
  int mean;
  int cluster;           // gridDim.z > 1 and the slices meet in a cluster
};

template <int BM, int BN, int STAGES> struct SpmmSmem {
  static constexpr int LDA = 40;      // = 8 (mod 32): conflict-free 64-bit A fragment loads
  static constexpr int LDX = BN + 4;  // = 4 (mod 32): conflict-free B fragment loads
  static constexpr int LDR = BN + 4;  // reduction tile
  static constexpr size_t kPipe = sizeof(float) * STAGES * (BM * LDA + 32 * LDX);
  static constexpr size_t kRing = sizeof(RowChunk) * 2 * BM;
  static constexpr size_t kRed = sizeof(float) * BM * LDR;
  static constexpr size_t bytes() { return (kPipe > kRed ? kPipe : kRed) + kRing; }
};

template <Precision P, int BN, int WM_, int WN_, int STAGES>
__global__ void __launch_bounds__(WM_ * WN_ * 32)
    spmm_tile_kernel(const SpmmTileParams p) {
  constexpr int NW = WM_ * WN_, NT = NW * 32, BM = WM_ * 32;
  constexpr int WNC = BN / WN_, NTILE = WNC / 8;
  using SM = SpmmSmem<BM, BN, STAGES>;
  constexpr int LDA = SM::LDA, LDX = SM::LDX;
  [[maybe_unused]] constexpr int LDR = SM::LDR;
  constexpr int KSTEP = Prec<P>::kStep;
  constexpr bool FOLD = (P == Precision::fp32);
  using FragA = typename Prec<P>::FragA;
  using FragB = typename Prec<P>::FragB;

  extern __shared__ float4 smem4[];
  float* As = reinterpret_cast<float*>(smem4);
  float* Xs = As + STAGES * BM * LDA;
  RowChunk* ring = reinterpret_cast<RowChunk*>(reinterpret_cast<char*>(smem4) +
                                               (SM::kPipe > SM::kRed ? SM::kPipe : SM::kRed));

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int wm = warp / WN_, wn = warp % WN_;
  const int64_t row0 = int64_t(blockIdx.x) * BM;
  const int64_t col0 = int64_t(blockIdx.y) * BN;
  const int slice = blockIdx.z;
  const int cb = slice * p.chunks_per_slice;
  const int ce = min(p.KW, cb + p.chunks_per_slice);
  const unsigned lt_mask = (1u << lane) - 1u;

  // ---- row bookkeeping: thread tid < BM owns row row0 + tid ------------------------------------
  const bool owner = tid < BM;
  long long o_run = 0;
  uint32_t m_next = 0, m_next2 = 0;  // masks of the next two chunks to publish
  if (owner && row0 + tid < p.M)
    o_run = load_index(p.rowptr, p.idx64, row0 + tid) +
            static_cast<long long>(p.segoff[int64_t(cb / 4) * p.Mp + row0 + tid]);
  auto mask_at = [&](int c) -> uint32_t {
    return (owner && c < ce) ? __ldg(p.mask + int64_t(c) * p.Mp + row0 + tid) : 0u;
  };
  // Publishes chunk c's (mask, offset) of the owned row in ring slot c & 1 (m_next holds the
  // mask of chunk c on entry) and prefetches the mask of chunk c + 2.
  auto prep = [&](int c) {
    if (owner) {
      RowChunk e;
      e.m = m_next;
      e.pad = 0;
      e.o = o_run;
      ring[(c & 1) * BM + tid] = e;
      o_run += __popc(m_next);
      m_next = m_next2;
      m_next2 = mask_at(c + 2);
    }
  };
  // Enqueues chunk c into pipeline stage st (one cp.async group, possibly empty).
  auto issue = [&](int c, int st) {
    if (c < ce) {
      const RowChunk* rc = ring + (c & 1) * BM;
      float* Ad = As + st * BM * LDA;
#pragma unroll 4
      for (int i = 0; i < BM / NW; ++i) {
        const int r = warp + i * NW;
        const RowChunk e = rc[r];
        const bool bit = (e.m >> lane) & 1u;
        if (p.val != nullptr) {
          const long long k = bit ? e.o + __popc(e.m & lt_mask) : 0;
          cp_async4(Ad + r * LDA + lane, p.val + k, bit);
        } else {
          Ad[r * LDA + lane] = bit ? 1.f : 0.f;
        }
      }
      float* Xd = Xs + st * 32 * LDX;
      constexpr int VPR = BN / 4;  // 16-byte vectors per X row
#pragma unroll
      for (int i = 0; i < (32 * VPR + NT - 1) / NT; ++i) {
        const int v = tid + i * NT;
        if (v >= 32 * VPR) break;
        const int kr = v / VPR, cv = v % VPR;
        const int64_t k = int64_t(c) * 32 + kr;
        const int64_t cc = col0 + cv * 4;
        const bool ok = k < p.K && cc < p.C;
        cp_async16(Xd + kr * LDX + cv * 4, ok ? p.X + k * p.C + cc : p.X, ok);
      }
    }
    cp_async_commit();
  };

  float acc[2][NTILE][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < NTILE; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  auto compute = [&](int st) {
    const float* Ad = As + st * BM * LDA;
    const float* Xd = Xs + st * 32 * LDX;
    float tmp[2][NTILE][4];
#pragma unroll
    for (int ks = 0; ks < 32 / KSTEP; ++ks) {
      FragA a[2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) load_a<P>(a[mt], Ad, LDA, wm * 32 + mt * 16, ks * KSTEP, g, t);
#pragma unroll
      for (int nt = 0; nt < NTILE; ++nt) {
        FragB b;
        load_b_kn<P>(b, Xd, LDX, ks * KSTEP, wn * WNC + nt * 8, g, t);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          if constexpr (FOLD) {
            if (ks == 0) Prec<P>::mma_zero(tmp[mt][nt], a[mt], b);
            else Prec<P>::mma(tmp[mt][nt], a[mt], b);
          } else {
            Prec<P>::mma(acc[mt][nt], a[mt], b);
          }
        }
      }
    }
    if constexpr (FOLD) {
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < NTILE; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] += tmp[i][j][e];
    }
  };

  // ---- pipeline ----------------------------------------------------------------------------------
  m_next = mask_at(cb);
  m_next2 = mask_at(cb + 1);
  prep(cb);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) {
    issue(cb + i, i);
    prep(cb + i + 1);
    __syncthreads();
  }
  const int nchunks = ce - cb;
  for (int it = 0; it < nchunks; ++it) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int ci = cb + it + STAGES - 1;
    issue(ci, (it + STAGES - 1) % STAGES);
    prep(ci + 1);
    compute(it % STAGES);
  }
  cp_async_wait<0>();
  __syncthreads();

  // ---- epilogue --------------------------------------------------------------------------------
  auto row_scale = [&](int64_t row) -> float {
    if (!p.mean || row >= p.M) return 1.f;
    const int64_t deg = load_index(p.rowptr, p.idx64, row + 1) - load_index(p.rowptr, p.idx64, row);
    return deg > 0 ? 1.f / static_cast<float>(deg) : 0.f;
  };
  if (!p.cluster) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = row0 + wm * 32 + mt * 16 + g + 8 * h;
        if (row >= p.M) continue;
        const float sc = row_scale(row);
#pragma unroll
        for (int nt = 0; nt < NTILE; ++nt) {
          const int64_t col = col0 + wn * WNC + nt * 8 + 2 * t;
          if (col < p.C)
            *reinterpret_cast<float2*>(p.Y + row * p.C + col) =
                make_float2(acc[mt][nt][2 * h] * sc, acc[mt][nt][2 * h + 1] * sc);
        }
      }
    return;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Split-K: partial tile -> own shared memory; block q of the cluster reduces rows
  // [q BM / S, (q+1) BM / S) over the S partials in slice order.
  float* red = reinterpret_cast<float*>(smem4);
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wm * 32 + mt * 16 + g + 8 * h;
#pragma unroll
      for (int nt = 0; nt < NTILE; ++nt)
        *reinterpret_cast<float2*>(red + r * LDR + wn * WNC + nt * 8 + 2 * t) =
            make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
    }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int S = static_cast<int>(gridDim.z);
  const int q = static_cast<int>(cluster.block_rank());
  const int rb = q * BM / S, re = (q + 1) * BM / S;
  constexpr int VPR = BN / 4;
  for (int v = tid; v < (re - rb) * VPR; v += NT) {
    const int r = rb + v / VPR, c4 = (v % VPR) * 4;
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int z = 0; z < S; ++z) {
      const float* peer = cluster.map_shared_rank(red, z);
      const float4 x = *reinterpret_cast<const float4*>(peer + r * LDR + c4);
      s.x += x.x;
      s.y += x.y;
      s.z += x.z;
      s.w += x.w;
    }
    const int64_t row = row0 + r, col = col0 + c4;
    if (row < p.M && col < p.C) {
      const float sc = row_scale(row);
      s.x *= sc;
      s.y *= sc;
      s.z *= sc;
      s.w *= sc;
      *reinterpret_cast<float4*>(p.Y + row * p.C + col) = s;
    }
  }
  cluster.sync();  // peers' shared memory stays alive until every block has read it
#endif
}

template <Precision P, int BN, int WM_, int WN_, int STAGES>
void launch_spmm(const SpmmArgs& a, const cuda::TileCache& tc, cudaStream_t stream,
                 const cuda::TileOverrides* ov) {
  constexpr int BM = WM_ * 32, NT = WM_ * WN_ * 32;
  const size_t smem = SpmmSmem<BM, BN, STAGES>::bytes();
  auto kernel = spmm_tile_kernel<P, BN, WM_, WN_, STAGES>;
  const DeviceInfo dev = device_info();
  const KernelInfo ki = kernel_info(kernel, NT, smem);
  const int64_t panels = (a.A.M + BM - 1) / BM;
  const int64_t cblocks = (a.C + BN - 1) / BN;
  const int64_t segs = tc.KS;
  // Split K only as far as needed to fill the GPU once, and only through a cluster (sm_90).
  int S = 1;
  const bool can_cluster = dev.major >= 9 && ki.binary_version >= 90 && !(ov && ov->no_cluster);
  if (can_cluster) {
    const int64_t resident = int64_t(dev.sms) * ki.blocks_per_sm;
    const int64_t want = (resident + panels * cblocks - 1) / (panels * cblocks);
    S = static_cast<int>(std::min<int64_t>({8, segs, std::max<int64_t>(1, want)}));
    if (ov && ov->slices > 0) S = static_cast<int>(std::min<int64_t>({8, segs, ov->slices}));
  }
  const int64_t segs_per_slice = (segs + S - 1) / S;
  S = static_cast<int>((segs + segs_per_slice - 1) / segs_per_slice);
  SpmmTileParams p;
  p.rowptr = a.A.rowptr;
  p.idx64 = a.A.itype == IType::i64;
  p.val = static_cast<const float*>(a.A.val);
  p.X = static_cast<const float*>(a.X);
  p.Y = static_cast<float*>(a.Y);
  p.mask = tc.mask;
  p.segoff = tc.segoff;
  p.M = a.A.M;
  p.K = a.A.K;
  p.C = a.C;
  p.Mp = tc.Mp;
  p.KW = static_cast<int>(tc.KW);
  p.chunks_per_slice = static_cast<int>(segs_per_slice * 4);
  p.mean = a.reduce == Reduce::mean;
  p.cluster = S > 1;
  dim3 grid(static_cast<unsigned>(panels), static_cast<unsigned>(cblocks), static_cast<unsigned>(S));
  launch_tile_kernel(kernel, grid, NT, smem, S, stream, p);
}

template <Precision P>
void dispatch_spmm(const SpmmArgs& a, const cuda::TileCache& tc, cudaStream_t stream,
                   const cuda::TileOverrides* ov) {
  if (a.C <= 32) launch_spmm<P, 32, 4, 1, 3>(a, tc, stream, ov);
  else if (a.C <= 64) launch_spmm<P, 64, 4, 1, 3>(a, tc, stream, ov);
  else launch_spmm<P, 128, 2, 2, 3>(a, tc, stream, ov);
}

}  // namespace gnnsparse::tiles

namespace gnnsparse::cuda {

namespace {
bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }
}  // namespace

bool tiled_spmm(const SpmmArgs& a, const TileCache* tc, cudaStream_t stream,
                const TileOverrides* ov) {
  using namespace gnnsparse::tiles;
  if (tc == nullptr || !tc->eligible || tc->M != a.A.M || tc->K != a.A.K || tc->nnz != a.A.nnz)
    return false;
  if (a.dtype != DType::f32) return false;
  if (a.reduce != Reduce::sum && a.reduce != Reduce::mean) return false;
  if (a.C <= 0 || a.C % 4 != 0 || !aligned16(a.X) || !aligned16(a.Y)) return false;
  if (a.A.M <= 0) return true;
  if (a.A.K <= 0 || a.A.nnz == 0) {
    GS_TILE_CHECK(cudaMemsetAsync(a.Y, 0, sizeof(float) * a.A.M * a.C, stream));
    return true;
  }
  switch (a.precision) {
    case Precision::fp32:
      dispatch_spmm<Precision::fp32>(a, *tc, stream, ov);
      break;
    case Precision::tf32:
      dispatch_spmm<Precision::tf32>(a, *tc, stream, ov);
      break;
    case Precision::bf16:
      dispatch_spmm<Precision::bf16>(a, *tc, stream, ov);
      break;
  }
  return true;
}

}  // namespace gnnsparse::cuda
