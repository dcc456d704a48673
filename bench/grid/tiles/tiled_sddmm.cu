// Tensor-core SDDMM (op dot) for dense-ish A: E[k, h] = <X[i, h, :], Y[j, h, :]> for every stored
// (i, j = col[k]).
//
// Block = BM = 128 rows of A for one head, over a range of 32-column chunks of A. The block's X
// rows (BM x F) are staged once; Y's 32 x F chunk tiles stream through a cp.async pipeline. Each
// warp computes a 32 x 32 score tile per chunk with mma.sync (fp32: 3xTF32, each 32-wide group
// of F summed from zero and added to the running sum in fp32, in order) and writes only the
// sampled entries: entry (r, j) of the tile goes to CSR position o_r + popc(mask_r below j).
// Blocks of a row panel split its columns (no reduction, so no split-K combine).
#include <algorithm>

#include "mma.cuh"
#include "tile_host.cuh"
#include "tiled.hpp"

namespace gnnsparse::tiles {

struct SddmmTileParams {
  const void* rowptr;
  int idx64;  // rowptr holds int64 (else int32)
  const float* X;
  const float* Y;
  float* E;
  const uint32_t* mask;
  const uint32_t* segoff;
  int64_t M, K, Mp, H, F;
  int KW;
  int chunks_per_slice;
};

template <int BM, int FT, int STAGES> struct SddmmSmem {
  static constexpr int LD = FT + 8;  // = 8 (mod 32): conflict-free 64-bit fragment loads
  static constexpr size_t kX = sizeof(float) * BM * LD;
  static constexpr size_t kY = sizeof(float) * STAGES * 32 * LD;
  static constexpr size_t bytes() { return kX + kY + sizeof(RowChunk) * 2 * BM; }
};

template <Precision P, int FT, int STAGES>
__global__ void __launch_bounds__(128) sddmm_tile_kernel(const SddmmTileParams p) {
  constexpr int NT = 128, BM = 128;
  using SM = SddmmSmem<BM, FT, STAGES>;
  constexpr int LD = SM::LD;
  constexpr int KSTEP = Prec<P>::kStep;
  constexpr bool FOLD = (P == Precision::fp32) && FT > 32;
  constexpr int VPR = FT / 4;  // 16-byte vectors per row
  using FragA = typename Prec<P>::FragA;
  using FragB = typename Prec<P>::FragB;

  extern __shared__ float4 smem4[];
  float* Xs = reinterpret_cast<float*>(smem4);
  float* Ys = Xs + BM * LD;
  RowChunk* ring = reinterpret_cast<RowChunk*>(Ys + STAGES * 32 * LD);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int64_t row0 = int64_t(blockIdx.x) * BM;
  const int cb = blockIdx.y * p.chunks_per_slice;
  const int ce = min(p.KW, cb + p.chunks_per_slice);
  const int64_t h = blockIdx.z;
  const int64_t ldf = p.H * p.F;  // row stride of X and Y

  const bool owner = tid < BM;
  long long o_run = 0;
  uint32_t m_next = 0, m_next2 = 0;  // masks of the next two chunks to publish
  if (owner && row0 + tid < p.M)
    o_run = load_index(p.rowptr, p.idx64, row0 + tid) +
            static_cast<long long>(p.segoff[int64_t(cb / 4) * p.Mp + row0 + tid]);
  auto mask_at = [&](int c) -> uint32_t {
    return (owner && c < ce) ? __ldg(p.mask + int64_t(c) * p.Mp + row0 + tid) : 0u;
  };
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

  // X rows of the panel (one cp.async group).
#pragma unroll
  for (int i = 0; i < (BM * VPR + NT - 1) / NT; ++i) {
    const int v = tid + i * NT;
    if (v >= BM * VPR) break;
    const int r = v / VPR, f = (v % VPR) * 4;
    const bool ok = row0 + r < p.M && f < p.F;
    cp_async16(Xs + r * LD + f, ok ? p.X + (row0 + r) * ldf + h * p.F + f : p.X, ok);
  }
  cp_async_commit();

  auto issue = [&](int c, int st) {
    if (c < ce) {
      float* Yd = Ys + st * 32 * LD;
#pragma unroll
      for (int i = 0; i < (32 * VPR + NT - 1) / NT; ++i) {
        const int v = tid + i * NT;
        if (v >= 32 * VPR) break;
        const int jr = v / VPR, f = (v % VPR) * 4;
        const int64_t j = int64_t(c) * 32 + jr;
        const bool ok = j < p.K && f < p.F;
        cp_async16(Yd + jr * LD + f, ok ? p.Y + j * ldf + h * p.F + f : p.Y, ok);
      }
    }
    cp_async_commit();
  };

  m_next = mask_at(cb);
  m_next2 = mask_at(cb + 1);
  prep(cb);
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) issue(cb + i, i);

  const int nchunks = ce - cb;
  for (int it = 0; it < nchunks; ++it) {
    const int c = cb + it;
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    issue(c + STAGES - 1, (it + STAGES - 1) % STAGES);
    prep(c + 1);
    const float* Yd = Ys + (it % STAGES) * 32 * LD;
    float acc[2][4][4];
#pragma unroll
    for (int grp = 0; grp < FT / 32; ++grp) {
      float tmp[2][4][4];
#pragma unroll
      for (int kk = 0; kk < 32 / KSTEP; ++kk) {
        const int k0 = grp * 32 + kk * KSTEP;
        FragA a[2];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) load_a<P>(a[mt], Xs, LD, warp * 32 + mt * 16, k0, g, t);
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          FragB b;
          load_b_nk<P>(b, Yd, LD, k0, nt * 8, g, t);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            float(&d)[4] = (FOLD || grp == 0) ? tmp[mt][nt] : acc[mt][nt];
            if (kk == 0 && (FOLD || grp == 0)) Prec<P>::mma_zero(d, a[mt], b);
            else Prec<P>::mma(d, a[mt], b);
          }
        }
      }
      if (grp == 0) {
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = tmp[i][j][e];
      } else if (FOLD) {
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] += tmp[i][j][e];
      }
    }
    // sampled entries only
    const RowChunk* rc = ring + (c & 1) * BM;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const RowChunk e = rc[warp * 32 + mt * 16 + g + 8 * hh];
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int e2 = 0; e2 < 2; ++e2) {
            const int j = nt * 8 + 2 * t + e2;
            if ((e.m >> j) & 1u) {
              const long long k = e.o + __popc(e.m & ((1u << j) - 1u));
              p.E[k * p.H + h] = acc[mt][nt][2 * hh + e2];
            }
          }
      }
  }
  cp_async_wait<0>();
}

template <Precision P, int FT, int STAGES>
void launch_sddmm(const SddmmArgs& a, const cuda::TileCache& tc, cudaStream_t stream,
                  const cuda::TileOverrides* ov) {
  constexpr int BM = 128, NT = 128;
  const size_t smem = SddmmSmem<BM, FT, STAGES>::bytes();
  auto kernel = sddmm_tile_kernel<P, FT, STAGES>;
  const DeviceInfo dev = device_info();
  const KernelInfo ki = kernel_info(kernel, NT, smem);
  const int64_t panels = (a.A.M + BM - 1) / BM;
  const int64_t segs = tc.KS;
  const int64_t resident = int64_t(dev.sms) * ki.blocks_per_sm;
  // Enough column slices for ~2 waves (no combine cost, so finer is nearly free).
  int64_t S = std::max<int64_t>(1, (2 * resident + panels * a.H - 1) / (panels * a.H));
  if (ov && ov->slices > 0) S = ov->slices;
  S = std::min<int64_t>(S, segs);
  const int64_t segs_per_slice = (segs + S - 1) / S;
  S = (segs + segs_per_slice - 1) / segs_per_slice;
  SddmmTileParams p;
  p.rowptr = a.A.rowptr;
  p.idx64 = a.A.itype == IType::i64;
  p.X = static_cast<const float*>(a.X);
  p.Y = static_cast<const float*>(a.Y);
  p.E = static_cast<float*>(a.E);
  p.mask = tc.mask;
  p.segoff = tc.segoff;
  p.M = a.A.M;
  p.K = a.A.K;
  p.Mp = tc.Mp;
  p.H = a.H;
  p.F = a.F;
  p.KW = static_cast<int>(tc.KW);
  p.chunks_per_slice = static_cast<int>(segs_per_slice * 4);
  dim3 grid(static_cast<unsigned>(panels), static_cast<unsigned>(S), static_cast<unsigned>(a.H));
  launch_tile_kernel(kernel, grid, NT, smem, 1, stream, p);
}

template <Precision P>
void dispatch_sddmm(const SddmmArgs& a, const cuda::TileCache& tc, cudaStream_t stream,
                    const cuda::TileOverrides* ov) {
  if (a.F <= 32) launch_sddmm<P, 32, 4>(a, tc, stream, ov);
  else if (a.F <= 64) launch_sddmm<P, 64, 3>(a, tc, stream, ov);
  else launch_sddmm<P, 128, 2>(a, tc, stream, ov);
}

}  // namespace gnnsparse::tiles

namespace gnnsparse::cuda {

bool tiled_sddmm(const SddmmArgs& a, const TileCache* tc, cudaStream_t stream,
                 const TileOverrides* ov) {
  using namespace gnnsparse::tiles;
  if (tc == nullptr || !tc->eligible || tc->M != a.A.M || tc->K != a.A.K || tc->nnz != a.A.nnz)
    return false;
  if (a.dtype != DType::f32 || a.op != SddmmOp::dot) return false;
  if (a.F <= 0 || a.F % 4 != 0 || a.F > 128 || a.H <= 0 || a.H > 65535) return false;
  if ((reinterpret_cast<std::uintptr_t>(a.X) | reinterpret_cast<std::uintptr_t>(a.Y)) & 15u)
    return false;
  if (a.A.M <= 0 || a.A.K <= 0 || a.A.nnz == 0) return true;
  switch (a.precision) {
    case Precision::fp32:
      dispatch_sddmm<Precision::fp32>(a, *tc, stream, ov);
      break;
    case Precision::tf32:
      dispatch_sddmm<Precision::tf32>(a, *tc, stream, ov);
      break;
    case Precision::bf16:
      dispatch_sddmm<Precision::bf16>(a, *tc, stream, ov);
      break;
  }
  return true;
}

}  // namespace gnnsparse::cuda
