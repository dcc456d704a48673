// Tensor-core FusedMM (op dot) for dense-ish A:
//   e = <X[i,h,:], Y[j,h,:]>,  w = edge(e) * val[k],  Out[i,h,:] = sum_k w Z[j,h,:]
// with edge none / leaky_relu / exp / softmax (online: running row max and sum, rescaled
// accumulator, as in flash attention).
//
// Block = BM = 64 rows of A, one head, a range of 32-column chunks. X's rows are staged once; Y's
// and Z's 32-row chunk tiles stream through a cp.async pipeline. Per chunk each warp (16 rows)
// computes its 16 x 32 score tile with mma.sync, masks it with A's pattern, applies the edge
// function in registers, and feeds the scores straight into the aggregation mma as its A operand
// (the C fragment of a score tile is the A fragment of the next product: see cuda/mma.cuh), so
// scores never leave the SM. Split-K over chunks goes through a cluster like SpMM; softmax
// partial states (max, sum, accumulator) are combined in slice order.
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>

#include "mma.cuh"
#include "tile_host.cuh"
#include "tiled.hpp"

namespace gnnsparse::tiles {

namespace cg = cooperative_groups;

struct FusedTileParams {
  const void* rowptr;
  int idx64;
  const float* val;
  const float* X;
  const float* Y;
  const float* Z;
  float* out;
  float* E;
  const uint32_t* mask;
  const uint32_t* segoff;
  int64_t M, K, Mp, H, F, D;
  int KW;
  int chunks_per_slice;
  int edge;  // EdgeFn code
  float slope;
  int cluster;
};

template <int BM, int T, int STAGES> struct FusedSmem {
  static constexpr int LDY = T + 8;  // X and Y tiles (A / B^T operands): = 8 (mod 32)
  static constexpr int LDZ = T + 4;  // Z tile (k x n B operand): = 4 (mod 32)
  static constexpr size_t kPipe =
      sizeof(float) * (BM * LDY + STAGES * 32 * LDY + STAGES * 32 * LDZ);
  static constexpr size_t kRed = sizeof(float) * (BM * LDZ + 2 * BM);
  static constexpr size_t kMain = kPipe > kRed ? kPipe : kRed;
  static constexpr size_t bytes() { return kMain + sizeof(RowChunk) * 2 * BM; }
};

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

template <Precision P, int T, int STAGES>
__global__ void __launch_bounds__(128) fused_tile_kernel(const FusedTileParams p) {
  constexpr int NT = 128, BM = 64;
  using SM = FusedSmem<BM, T, STAGES>;
  constexpr int LDY = SM::LDY, LDZ = SM::LDZ;
  constexpr int KSTEP = Prec<P>::kStep;
  constexpr bool FOLD = (P == Precision::fp32);
  constexpr int VPR = T / 4;
  constexpr int DTILE = T / 8;
  using FragA = typename Prec<P>::FragA;
  using FragB = typename Prec<P>::FragB;

  extern __shared__ float4 smem4[];
  float* Xs = reinterpret_cast<float*>(smem4);
  float* Ys = Xs + BM * LDY;
  float* Zs = Ys + STAGES * 32 * LDY;
  RowChunk* ring = reinterpret_cast<RowChunk*>(reinterpret_cast<char*>(smem4) + SM::kMain);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int64_t row0 = int64_t(blockIdx.x) * BM;
  const int64_t h = blockIdx.y;
  const int cb = blockIdx.z * p.chunks_per_slice;
  const int ce = min(p.KW, cb + p.chunks_per_slice);
  const int64_t ldf = p.H * p.F, ldd = p.H * p.D;
  const bool softmax = p.edge == static_cast<int>(EdgeFn::softmax);

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

#pragma unroll
  for (int i = 0; i < (BM * VPR + NT - 1) / NT; ++i) {
    const int v = tid + i * NT;
    if (v >= BM * VPR) break;
    const int r = v / VPR, f = (v % VPR) * 4;
    const bool ok = row0 + r < p.M && f < p.F;
    cp_async16(Xs + r * LDY + f, ok ? p.X + (row0 + r) * ldf + h * p.F + f : p.X, ok);
  }
  cp_async_commit();

  auto issue = [&](int c, int st) {
    if (c < ce) {
      float* Yd = Ys + st * 32 * LDY;
      float* Zd = Zs + st * 32 * LDZ;
#pragma unroll
      for (int i = 0; i < (32 * VPR + NT - 1) / NT; ++i) {
        const int v = tid + i * NT;
        if (v >= 32 * VPR) break;
        const int jr = v / VPR, f = (v % VPR) * 4;
        const int64_t j = int64_t(c) * 32 + jr;
        const bool oky = j < p.K && f < p.F;
        cp_async16(Yd + jr * LDY + f, oky ? p.Y + j * ldf + h * p.F + f : p.Y, oky);
        const bool okz = j < p.K && f < p.D;
        cp_async16(Zd + jr * LDZ + f, okz ? p.Z + j * ldd + h * p.D + f : p.Z, okz);
      }
    }
    cp_async_commit();
  };

  float acc[DTILE][4];
#pragma unroll
  for (int j = 0; j < DTILE; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};  // softmax: rows g, g + 8
  float l_run[2] = {0.f, 0.f};              // softmax: this thread's part of the row sums

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
    const float* Yd = Ys + (it % STAGES) * 32 * LDY;
    const float* Zd = Zs + (it % STAGES) * 32 * LDZ;

    // 1. scores s (16 x 32) of this warp's rows
    float s[4][4];
#pragma unroll
    for (int grp = 0; grp < T / 32; ++grp) {
      float tmp[4][4];
#pragma unroll
      for (int kk = 0; kk < 32 / KSTEP; ++kk) {
        const int k0 = grp * 32 + kk * KSTEP;
        FragA a;
        load_a<P>(a, Xs, LDY, warp * 16, k0, g, t);
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          FragB b;
          load_b_nk<P>(b, Yd, LDY, k0, nt * 8, g, t);
          float(&d)[4] = (FOLD || grp == 0) ? tmp[nt] : s[nt];
          if (kk == 0 && (FOLD || grp == 0)) Prec<P>::mma_zero(d, a, b);
          else Prec<P>::mma(d, a, b);
        }
      }
      if (grp == 0) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[j][e] = tmp[j][e];
      } else if (FOLD) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[j][e] += tmp[j][e];
      }
    }

    // 2. mask, edge function, values; w overwrites s (C layout: s[nt][2*hh + e2] is row
    //    g + 8 hh, column nt * 8 + 2t + e2)
    const RowChunk* rc = ring + (c & 1) * BM;
    const RowChunk er[2] = {rc[warp * 16 + g], rc[warp * 16 + g + 8]};
    float scale[2] = {1.f, 1.f};
    if (softmax) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int e2 = 0; e2 < 2; ++e2)
            if ((er[hh].m >> (nt * 8 + 2 * t + e2)) & 1u) mx = fmaxf(mx, s[nt][2 * hh + e2]);
        const float mnew = fmaxf(m_run[hh], quad_max(mx));
        scale[hh] = (mnew == m_run[hh]) ? 1.f : expf(m_run[hh] - mnew);
        m_run[hh] = mnew;
        l_run[hh] *= scale[hh];
      }
    }
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e2 = 0; e2 < 2; ++e2) {
          const int j = nt * 8 + 2 * t + e2;
          const bool bit = (er[hh].m >> j) & 1u;
          const long long k = er[hh].o + __popc(er[hh].m & ((1u << j) - 1u));
          float x = s[nt][2 * hh + e2];
          float w;
          if (softmax) {
            w = bit ? expf(x - m_run[hh]) : 0.f;
            l_run[hh] += w;
          } else if (p.edge == static_cast<int>(EdgeFn::leaky_relu)) {
            w = x > 0.f ? x : p.slope * x;
          } else if (p.edge == static_cast<int>(EdgeFn::exp)) {
            w = expf(x);
          } else {
            w = x;
          }
          if (p.val != nullptr && bit) w *= __ldg(p.val + k);
          if (!bit) w = 0.f;
          if (p.E != nullptr && bit) p.E[k * p.H + h] = w;
          s[nt][2 * hh + e2] = w;
        }

    // 3. aggregation: acc (16 x T) = acc * scale + W (16 x 32) Z (32 x T)
    if (softmax) {
#pragma unroll
      for (int j = 0; j < DTILE; ++j) {
        acc[j][0] *= scale[0];
        acc[j][1] *= scale[0];
        acc[j][2] *= scale[1];
        acc[j][3] *= scale[1];
      }
    }
    float tmpd[DTILE][4];
#pragma unroll
    for (int ks = 0; ks < 32 / KSTEP; ++ks) {
      FragA a;
      a_from_c<P>(a, s, ks);
#pragma unroll
      for (int nt = 0; nt < DTILE; ++nt) {
        FragB b;
        load_b_kn<P>(b, Zd, LDZ, ks * KSTEP, nt * 8, g, t);
        if constexpr (FOLD) {
          if (ks == 0) Prec<P>::mma_zero(tmpd[nt], a, b);
          else Prec<P>::mma(tmpd[nt], a, b);
        } else {
          Prec<P>::mma(acc[nt], a, b);
        }
      }
    }
    if constexpr (FOLD) {
#pragma unroll
      for (int j = 0; j < DTILE; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] += tmpd[j][e];
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  // ---- epilogue --------------------------------------------------------------------------------
  float l_row[2] = {quad_sum(l_run[0]), quad_sum(l_run[1])};
  if (!p.cluster) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int64_t row = row0 + warp * 16 + g + 8 * hh;
      if (row >= p.M) continue;
      const float inv = softmax ? (l_row[hh] > 0.f ? 1.f / l_row[hh] : 0.f) : 1.f;
#pragma unroll
      for (int nt = 0; nt < DTILE; ++nt) {
        const int64_t col = nt * 8 + 2 * t;
        if (col < p.D)
          *reinterpret_cast<float2*>(p.out + row * ldd + h * p.D + col) =
              make_float2(acc[nt][2 * hh] * inv, acc[nt][2 * hh + 1] * inv);
      }
    }
    return;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  float* red = reinterpret_cast<float*>(smem4);  // [BM][LDZ] partial accumulators
  float* red_m = red + BM * LDZ;                 // [BM] running max (softmax)
  float* red_l = red_m + BM;                     // [BM] row sum (softmax)
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = warp * 16 + g + 8 * hh;
#pragma unroll
    for (int nt = 0; nt < DTILE; ++nt)
      *reinterpret_cast<float2*>(red + r * LDZ + nt * 8 + 2 * t) =
          make_float2(acc[nt][2 * hh], acc[nt][2 * hh + 1]);
    if (t == 0) {
      red_m[r] = m_run[hh];
      red_l[r] = l_row[hh];
    }
  }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int S = static_cast<int>(gridDim.z);
  const int q = static_cast<int>(cluster.block_rank());
  const int rb = q * BM / S, re = (q + 1) * BM / S;
  for (int v = tid; v < (re - rb) * VPR; v += NT) {
    const int r = rb + v / VPR, c4 = (v % VPR) * 4;
    float mx = -INFINITY;
    if (softmax)
      for (int z = 0; z < S; ++z) mx = fmaxf(mx, cluster.map_shared_rank(red_m, z)[r]);
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
    float l = 0.f;
    for (int z = 0; z < S; ++z) {
      float f = 1.f;
      if (softmax) {
        const float mz = cluster.map_shared_rank(red_m, z)[r];
        f = (mz == -INFINITY) ? 0.f : expf(mz - mx);
        l += cluster.map_shared_rank(red_l, z)[r] * f;
      }
      const float4 x = *reinterpret_cast<const float4*>(cluster.map_shared_rank(red, z) + r * LDZ + c4);
      sum.x += x.x * f;
      sum.y += x.y * f;
      sum.z += x.z * f;
      sum.w += x.w * f;
    }
    const int64_t row = row0 + r;
    if (row < p.M && c4 < p.D) {
      if (softmax) {
        const float inv = l > 0.f ? 1.f / l : 0.f;
        sum.x *= inv;
        sum.y *= inv;
        sum.z *= inv;
        sum.w *= inv;
      }
      *reinterpret_cast<float4*>(p.out + row * ldd + h * p.D + c4) = sum;
    }
  }
  cluster.sync();
#endif
}

template <Precision P, int T, int STAGES>
void launch_fused(const FusedArgs& a, const cuda::TileCache& tc, cudaStream_t stream,
                  const cuda::TileOverrides* ov) {
  constexpr int BM = 64, NT = 128;
  const size_t smem = FusedSmem<BM, T, STAGES>::bytes();
  auto kernel = fused_tile_kernel<P, T, STAGES>;
  const DeviceInfo dev = device_info();
  const KernelInfo ki = kernel_info(kernel, NT, smem);
  const int64_t panels = (a.A.M + BM - 1) / BM;
  const int64_t segs = tc.KS;
  int S = 1;
  const bool can_cluster = dev.major >= 9 && ki.binary_version >= 90 && !(ov && ov->no_cluster);
  if (can_cluster) {
    const int64_t resident = int64_t(dev.sms) * ki.blocks_per_sm;
    const int64_t want = (resident + panels * a.H - 1) / (panels * a.H);
    S = static_cast<int>(std::min<int64_t>({8, segs, std::max<int64_t>(1, want)}));
    if (ov && ov->slices > 0) S = static_cast<int>(std::min<int64_t>({8, segs, ov->slices}));
  }
  const int64_t segs_per_slice = (segs + S - 1) / S;
  S = static_cast<int>((segs + segs_per_slice - 1) / segs_per_slice);
  FusedTileParams p;
  p.rowptr = a.A.rowptr;
  p.idx64 = a.A.itype == IType::i64;
  p.val = static_cast<const float*>(a.A.val);
  p.X = static_cast<const float*>(a.X);
  p.Y = static_cast<const float*>(a.Y);
  p.Z = static_cast<const float*>(a.Z);
  p.out = static_cast<float*>(a.out);
  p.E = static_cast<float*>(a.E);
  p.mask = tc.mask;
  p.segoff = tc.segoff;
  p.M = a.A.M;
  p.K = a.A.K;
  p.Mp = tc.Mp;
  p.H = a.H;
  p.F = a.F;
  p.D = a.D;
  p.KW = static_cast<int>(tc.KW);
  p.chunks_per_slice = static_cast<int>(segs_per_slice * 4);
  p.edge = static_cast<int>(a.edge);
  p.slope = static_cast<float>(a.slope);
  p.cluster = S > 1;
  dim3 grid(static_cast<unsigned>(panels), static_cast<unsigned>(a.H), static_cast<unsigned>(S));
  launch_tile_kernel(kernel, grid, NT, smem, S, stream, p);
}

template <Precision P>
void dispatch_fused(const FusedArgs& a, const cuda::TileCache& tc, cudaStream_t stream,
                    const cuda::TileOverrides* ov) {
  const int64_t w = std::max(a.F, a.D);
  if (w <= 32) launch_fused<P, 32, 3>(a, tc, stream, ov);
  else if (w <= 64) launch_fused<P, 64, 3>(a, tc, stream, ov);
  else launch_fused<P, 128, 2>(a, tc, stream, ov);
}

}  // namespace gnnsparse::tiles

namespace gnnsparse::cuda {

bool tiled_fusedmm(const FusedArgs& a, const TileCache* tc, cudaStream_t stream,
                   const TileOverrides* ov) {
  using namespace gnnsparse::tiles;
  if (tc == nullptr || !tc->eligible || tc->M != a.A.M || tc->K != a.A.K || tc->nnz != a.A.nnz)
    return false;
  if (a.dtype != DType::f32 || a.op != SddmmOp::dot) return false;
  if (a.edge == EdgeFn::softmax && a.E != nullptr) return false;
  if (a.edge == EdgeFn::leaky_relu_softmax) return false;  // the CUDA-core kernel has it
  if (a.F <= 0 || a.D <= 0 || a.F % 4 || a.D % 4 || a.F > 128 || a.D > 128) return false;
  if (a.H <= 0 || a.H > 65535) return false;
  if ((reinterpret_cast<std::uintptr_t>(a.X) | reinterpret_cast<std::uintptr_t>(a.Y) |
       reinterpret_cast<std::uintptr_t>(a.Z) | reinterpret_cast<std::uintptr_t>(a.out)) & 15u)
    return false;
  if (a.A.M <= 0) return true;
  if (a.A.K <= 0 || a.A.nnz == 0) {
    GS_TILE_CHECK(cudaMemsetAsync(a.out, 0, sizeof(float) * a.A.M * a.H * a.D, stream));
    return true;
  }
  switch (a.precision) {
    case Precision::fp32: dispatch_fused<Precision::fp32>(a, *tc, stream, ov); break;
    case Precision::tf32: dispatch_fused<Precision::tf32>(a, *tc, stream, ov); break;
    case Precision::bf16: dispatch_fused<Precision::bf16>(a, *tc, stream, ov); break;
  }
  return true;
}

}  // namespace gnnsparse::cuda
