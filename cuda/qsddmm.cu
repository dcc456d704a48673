// Quantized SDDMM (contract: gnnsparse/quant.hpp).
//   dot: E[k, h] = fl32(s_X s_Y) * acc, acc = sum_f qx[i, h, f] qy[j, h, f] as an exact integer
//        (dp4a on packed int8 -- int4 unpacked to bytes first -- int32, or int64 for very long F);
//   add: E[k, h] = s_X qx[i, h] + s_Y qy[j, h], each side dequantized first (the scales differ).
// Schedule (policy.cuh's plan_qsddmm): a group of G lanes per edge, LH lanes per head splitting
// its F features into vectors of CPL quantized features (16 int8 = 16 bytes, 16 int4 = 8 bytes
// when shapes and alignment allow), the heads side by side (G = LH x heads, at most 32: H = 4, F =
// 32 int8 is 8 lanes loading an edge's 128-byte rows in one step, where a loop over the heads took
// 4 dependent rounds: 12.96 ms for 122M edges on an H100, 2026-12-07), butterfly sum over a
// head's lanes; each group owns a fixed run
// of kEdgesPerGroup consecutive edges (one binary search for its first row, so hub rows cost
// nothing extra), U edges in flight. The int8 gathers of Y rows move a quarter of float32's bytes.
#include "quant_common.cuh"
#include "policy.cuh"
#include "gnnsparse/cuda_quant.hpp"

namespace gnnsparse::cuda_detail {

struct QSddmmParams {
  const void* rowptr;
  const void* col;
  const std::uint8_t* __restrict__ X;
  const std::uint8_t* __restrict__ Y;
  const float* __restrict__ sx;
  const float* __restrict__ sy;
  float* __restrict__ E;
  int64_t M, nnz, H, F, rbx, rby;
};

template <class Acc> __device__ __forceinline__ Acc group_sum_any(Acc v, int G, unsigned mask) {
  for (int o = G >> 1; o > 0; o >>= 1) {
    if constexpr (sizeof(Acc) == 8) v += static_cast<Acc>(__shfl_xor_sync(mask, static_cast<long long>(v), o));
    else v += __shfl_xor_sync(mask, v, o);
  }
  return v;
}

// The rows i[u] and columns j[u] of edges k .. k + U - 1 (< k1), walking the row pointer forward.
template <class I, int U>
__device__ __forceinline__ void edge_ends(const I* __restrict__ rowptr, const I* __restrict__ col, int64_t k,
                                          int64_t k1, int64_t& r, int64_t& rend, int64_t (&i)[U], int64_t (&j)[U]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t kk = k + u;
    if (kk < k1) {
      while (kk >= rend) { ++r; rend = static_cast<int64_t>(__ldg(rowptr + r + 1)); }
      j[u] = static_cast<int64_t>(__ldg(col + kk));
    } else {
      j[u] = 0;
    }
    i[u] = r;
  }
}

// dot: a group of G lanes per edge, LH lanes per head (G / LH heads side by side, all of an edge's
// heads in one step when they fit), each lane over its head's CPL-vectors f = fl CPL, fl CPL + LH
// CPL, ...; the head's sum over its LH lanes (xor offsets < LH: exact integers, any order).
// Registers: the 16-byte vectors (CPL 16) take 2 edges in flight instead of 4, so every instance
// fits kDotMinBlocks blocks per SM (ncu, H100, 2026-12-07: at U = 4 the int8 H = 4, F = 32 kernel
// held 94 registers, 2 blocks, 25 % occupancy, 10.5 ms for 122M edges at 35 % of DRAM bandwidth).
template <int BX, int BY, class I, class Acc, int CPL>
__global__ void __launch_bounds__(QSddmmTuning::kBlockThreads, QSddmmTuning::kDotMinBlocks)
qsddmm_dot_kernel(QSddmmParams p, int G, int LH) {
  constexpr int EPG = QSddmmTuning::kEdgesPerGroup;
  constexpr int U = CPL >= 16 ? QSddmmTuning::kUnrollWide : QSddmmTuning::kUnroll;
  const auto* rowptr = static_cast<const I*>(p.rowptr);
  const auto* col = static_cast<const I*>(p.col);
  const int64_t g = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G;
  const int64_t k0 = g * EPG;
  if (k0 >= p.nnz) return;  // the whole group leaves together
  const unsigned mask = group_mask(G);
  const int64_t k1 = min(p.nnz, k0 + EPG);
  const float sxy = __ldg(p.sx) * __ldg(p.sy);
  int64_t r = row_of(rowptr, p.M, k0);
  int64_t rend = static_cast<int64_t>(__ldg(rowptr + r + 1));
  // LH a power of two; the int64 accumulators (very long F) keep one head per step (LH = G)
  constexpr bool kOneHead = sizeof(Acc) == 8;
  const int hl = kOneHead ? 0 : sub / LH, fl = kOneHead ? sub : sub & (LH - 1), HS = kOneHead ? 1 : G / LH;
  for (int64_t k = k0; k < k1; k += U) {
    int64_t i[U], j[U];
    edge_ends<I, U>(rowptr, col, k, k1, r, rend, i, j);
    for (int64_t h0 = 0; h0 < p.H; h0 += HS) {
      const int64_t h = h0 + hl;
      const int64_t fend = h < p.H ? p.F : int64_t(0);  // a head slot past H: no loads, sums zeros
      Acc acc[U];
#pragma unroll
      for (int u = 0; u < U; ++u) acc[u] = Acc(0);
      for (int64_t f = int64_t(fl) * CPL; f < fend; f += int64_t(LH) * CPL) {
        const int64_t c = h * p.F + f;
        QVec<BX, CPL> xv[U];
        QVec<BY, CPL> yv[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (k + u < k1) {
            xv[u].load(p.X + i[u] * p.rbx, c);
            yv[u].load(p.Y + j[u] * p.rby, c);
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (k + u < k1) acc[u] += Acc(qdot_any<BX, BY, CPL>(xv[u], yv[u]));
      }
#pragma unroll
      for (int u = 0; u < U; ++u) acc[u] = group_sum_any(acc[u], LH, mask);
      if (fl == 0 && h < p.H) {
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (k + u < k1) p.E[(k + u) * p.H + h] = sxy * float(acc[u]);
      }
    }
  }
}

template <int BX, int BY, class I>
__global__ void __launch_bounds__(QSddmmTuning::kBlockThreads)
qsddmm_add_kernel(QSddmmParams p, int G) {
  constexpr int EPG = QSddmmTuning::kEdgesPerGroup;
  constexpr int U = QSddmmTuning::kUnroll;
  const auto* rowptr = static_cast<const I*>(p.rowptr);
  const auto* col = static_cast<const I*>(p.col);
  const int64_t g = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G;
  const int64_t k0 = g * EPG;
  if (k0 >= p.nnz) return;
  const int64_t k1 = min(p.nnz, k0 + EPG);
  const float sx = __ldg(p.sx), sy = __ldg(p.sy);
  int64_t r = row_of(rowptr, p.M, k0);
  int64_t rend = static_cast<int64_t>(__ldg(rowptr + r + 1));
  for (int64_t k = k0; k < k1; k += U) {
    int64_t i[U], j[U];
    edge_ends<I, U>(rowptr, col, k, k1, r, rend, i, j);
    for (int64_t h = sub; h < p.H; h += G) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (k + u >= k1) break;
        QVec<BX, 1> xv;
        QVec<BY, 1> yv;
        xv.load(p.X + i[u] * p.rbx, h);
        yv.load(p.Y + j[u] * p.rby, h);
        p.E[(k + u) * p.H + h] = __fmul_rn(sx, float(xv.get(0))) + __fmul_rn(sy, float(yv.get(0)));
      }
    }
  }
}

inline bool qsddmm_has_work(const QSddmmArgs& a) {
  const CsrView& A = a.A;
  check_qview("qsddmm", "X", a.X, false);
  check_qview("qsddmm", "Y", a.Y, false);
  if (A.M < 0 || A.K < 0 || A.nnz < 0 || a.H < 0 || a.F < 0)
    throw std::invalid_argument("gnnsparse cuda qsddmm: negative size");
  if (A.nnz == 0 || a.H == 0) return false;
  if (a.E == nullptr || a.X.scale == nullptr || a.Y.scale == nullptr)
    throw std::invalid_argument("gnnsparse cuda qsddmm: null pointer");
  return true;
}

template <int BX, int BY, class I>
void run_qsddmm(const QSddmmArgs& a, cudaStream_t stream) {
  constexpr int B = QSddmmTuning::kBlockThreads;
  const int64_t nnz = a.A.nnz, H = a.H;
  const bool add = a.op == SddmmOp::add;
  const int64_t F = add ? 1 : a.F;
  if (!add && F == 0) {  // empty dot products: E = 0
    GS_CUDA_CHECK(cudaMemsetAsync(a.E, 0, static_cast<size_t>(nnz * H) * sizeof(float), stream));
    return;
  }
  if (a.A.rowptr == nullptr || a.A.col == nullptr || a.X.data == nullptr || a.Y.data == nullptr)
    throw std::invalid_argument("gnnsparse cuda qsddmm: null pointer");
  const QSddmmParams p{a.A.rowptr, a.A.col, static_cast<const std::uint8_t*>(a.X.data),
                       static_cast<const std::uint8_t*>(a.Y.data), a.X.scale, a.Y.scale, a.E,
                       a.A.M, nnz, H, F, a.X.row_bytes(), a.Y.row_bytes()};
  const int cpl = add ? 1 : std::min(plan_cpl(BX, a.X.data, H * F, F), plan_cpl(BY, a.Y.data, H * F, F));
  const QSddmmPlan plan = plan_qsddmm(nnz, H, F, add, cpl, !add && !dot_fits_int32(F, BX, BY));
  const int G = plan.group;
  check_grid("qsddmm", {plan.blocks}, 1);
  const dim3 grid(static_cast<unsigned>(plan.blocks));
  if (add) {
    qsddmm_add_kernel<BX, BY, I><<<grid, B, 0, stream>>>(p, G);
    GS_LAUNCH_CHECK("qsddmm_add_kernel");
    return;
  }
  const bool wide = !dot_fits_int32(F, BX, BY);
  if (wide && plan.head_lanes != G)
    throw std::logic_error("gnnsparse cuda qsddmm: int64 accumulators take one head per step");
  dispatch_cpl(cpl, [&](auto c) {
    constexpr int CPL = decltype(c)::value;
    if (wide) qsddmm_dot_kernel<BX, BY, I, int64_t, CPL><<<grid, B, 0, stream>>>(p, G, plan.head_lanes);
    else qsddmm_dot_kernel<BX, BY, I, int32_t, CPL><<<grid, B, 0, stream>>>(p, G, plan.head_lanes);
  });
  GS_LAUNCH_CHECK("qsddmm_dot_kernel");
}

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

void qsddmm(const QSddmmArgs& a, cudaStream_t stream) {
  using namespace cuda_detail;
  if (a.op != SddmmOp::dot && a.op != SddmmOp::add)
    throw std::invalid_argument("gnnsparse cuda qsddmm: unknown sddmm op code " + std::to_string(int(a.op)));
  if (!qsddmm_has_work(a)) return;
  dispatch_bits(a.X.bits, [&](auto bx) {
    dispatch_bits(a.Y.bits, [&](auto by) {
      dispatch_itype(a.A.itype, [&](auto it) {
        run_qsddmm<decltype(bx)::value, decltype(by)::value, typename decltype(it)::type>(a, stream);
      });
    });
  });
}

}  // namespace gnnsparse::cuda
