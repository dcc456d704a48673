// Quantized FusedMM (contract: gnnsparse/quant.hpp): per edge k = (i, j) and head h,
//   e = dot: fl32(s_X s_Y) * sum_f qx qy (exact integer, int64)   add: s_X qx[i, h] + s_Y qy[j, h]
//   w = edge_fn(e) (softmax, leaky_relu_softmax: over the row, per head) * val[k]
//   out[i, h, :] = s_Z * (sum_k w qz[j, h, :]) (softmax: divided by the row's sum of exponentials)
// without storing w unless E is given (then E receives w).
//
// Schedule: one group of G lanes per (row, head), as the float FusedMM row kernel: lanes split F
// for the score (butterfly, so every lane holds it) and D for the aggregation, in vectors of CPL
// quantized features; softmax in one pass with a running max and sum (the accumulator is rescaled
// when the max grows). Columns beyond G * CPL go to more column blocks (grid.y), each recomputing
// the scores. Rows are walked by their group from start to end (no hub pass), in edge order:
// deterministic, no atomics.
#include "quant_common.cuh"
#include "policy.cuh"
#include "gnnsparse/cuda_quant.hpp"

namespace gnnsparse::cuda_detail {

template <class I>
struct QFusedParams {
  const I* __restrict__ rowptr;
  const I* __restrict__ col;
  const float* __restrict__ val;
  const std::uint8_t* __restrict__ X;
  const std::uint8_t* __restrict__ Y;
  const std::uint8_t* __restrict__ Z;
  const float* __restrict__ sx;
  const float* __restrict__ sy;
  const float* __restrict__ sz;
  float* __restrict__ out;
  float* __restrict__ E;
  int64_t M, H, F, D, rbx, rby, rbz;
  float slope;
  int edge;  // EdgeFn code; the row softmax (softmax, leaky_relu_softmax) is the template flag
};

__device__ __forceinline__ int64_t group_sum64(int64_t v, int G, unsigned mask) {
  for (int o = G >> 1; o > 0; o >>= 1) v += static_cast<int64_t>(__shfl_xor_sync(mask, static_cast<long long>(v), o));
  return v;
}

// BXY: bits of X and Y (equal), BZ: bits of Z.
template <int BXY, int BZ, class I, SddmmOp OP, bool SOFTMAX, int CPL>
__global__ void __launch_bounds__(QFusedTuning::kBlockThreads)
qfused_row_kernel(QFusedParams<I> p, int G) {
  constexpr int U = QFusedTuning::kUnroll;
  const int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G;
  if (item >= p.M * p.H) return;  // whole groups leave together
  const unsigned mask = group_mask(G);
  const int64_t i = item / p.H, h = item % p.H;
  const int64_t cz = int64_t(blockIdx.y) * G * CPL + int64_t(sub) * CPL;  // this lane's D columns
  const bool zok = cz < p.D;
  const int64_t k0 = static_cast<int64_t>(__ldg(p.rowptr + i)), k1 = static_cast<int64_t>(__ldg(p.rowptr + i + 1));
  const bool write_e = p.E != nullptr && blockIdx.y == 0 && sub == 0;
  const float sx = __ldg(p.sx), sy = __ldg(p.sy), sxy = sx * sy;
  const EdgeFn ef = EdgeFn(p.edge);

  float m = -INFINITY, ssum = 0.0f;
  float acc[CPL];
#pragma unroll
  for (int e = 0; e < CPL; ++e) acc[e] = 0.0f;

  for (int64_t k = k0; k < k1; k += U) {
    int64_t j[U];
    float wv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const bool in = k + u < k1;
      j[u] = in ? static_cast<int64_t>(__ldg(p.col + k + u)) : 0;
      wv[u] = (in && p.val != nullptr) ? __ldg(p.val + k + u) : 1.0f;
    }
    // Rows of Z first: independent of the scores, so their latency overlaps the dot products.
    QVec<BZ, CPL> z[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (zok && k + u < k1) z[u].load(p.Z + j[u] * p.rbz, h * p.D + cz);
    float sc[U];
    if constexpr (OP == SddmmOp::add) {
      QVec<BXY, 1> xv;
      xv.load(p.X + i * p.rbx, h);
      const float xi = __fmul_rn(sx, float(xv.get(0)));
#pragma unroll
      for (int u = 0; u < U; ++u) {
        sc[u] = 0.0f;
        if (k + u < k1) {
          QVec<BXY, 1> yv;
          yv.load(p.Y + j[u] * p.rby, h);
          sc[u] = xi + __fmul_rn(sy, float(yv.get(0)));
        }
      }
    } else {
      int64_t d[U];
#pragma unroll
      for (int u = 0; u < U; ++u) d[u] = 0;
      for (int64_t f = int64_t(sub) * CPL; f < p.F; f += int64_t(G) * CPL) {
        QVec<BXY, CPL> xv;
        xv.load(p.X + i * p.rbx, h * p.F + f);
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (k + u < k1) {
            QVec<BXY, CPL> yv;
            yv.load(p.Y + j[u] * p.rby, h * p.F + f);
            d[u] += qdot<BXY, CPL>(xv, yv);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) sc[u] = sxy * float(group_sum64(d[u], G, mask));
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (k + u >= k1) break;
      if constexpr (SOFTMAX) {
        if (ef == EdgeFn::leaky_relu_softmax) sc[u] = sc[u] > 0.0f ? sc[u] : p.slope * sc[u];
        const float mn = fmaxf(m, sc[u]);
        const float scale = m == mn ? 1.0f : expf(m - mn);
        const float pe = expf(sc[u] - mn);
        ssum = ssum * scale + pe;
        m = mn;
        const float w = pe * wv[u];
#pragma unroll
        for (int e = 0; e < CPL; ++e) acc[e] = acc[e] * scale + w * z[u].getf(e);
        if (write_e) p.E[(k + u) * p.H + h] = sc[u];
      } else {
        float w = sc[u];
        if (ef == EdgeFn::leaky_relu) w = w > 0.0f ? w : p.slope * w;
        else if (ef == EdgeFn::exp) w = expf(w);
        w *= wv[u];
#pragma unroll
        for (int e = 0; e < CPL; ++e) acc[e] += w * z[u].getf(e);
        if (write_e) p.E[(k + u) * p.H + h] = w;
      }
    }
  }
  const float sz = __ldg(p.sz);
  const float inv = SOFTMAX ? (k1 > k0 ? 1.0f / ssum : 0.0f) : 1.0f;
  if (zok) {
    float* o = p.out + (i * p.H + h) * p.D + cz;
#pragma unroll
    for (int e = 0; e < CPL; ++e)
      if (cz + e < p.D) o[e] = sz * (acc[e] * inv);
  }
  if constexpr (SOFTMAX) {
    // E holds the raw scores; turn them into the normalized, value-scaled weights.
    if (p.E != nullptr && blockIdx.y == 0 && k1 > k0) {
      __syncwarp(mask);
      for (int64_t k = k0 + sub; k < k1; k += G) {
        float w = expf(p.E[k * p.H + h] - m) * inv;
        if (p.val != nullptr) w *= p.val[k];
        p.E[k * p.H + h] = w;
      }
    }
  }
}

inline bool qfused_has_work(const QFusedArgs& f) {
  const CsrView& A = f.A;
  check_qview("qfusedmm", "X", f.X, false);
  check_qview("qfusedmm", "Y", f.Y, false);
  check_qview("qfusedmm", "Z", f.Z, false);
  if (f.X.bits != f.Y.bits) throw std::invalid_argument("gnnsparse cuda qfusedmm: X and Y must have the same bits");
  if (A.M < 0 || A.K < 0 || A.nnz < 0 || f.H < 0 || f.F < 0 || f.D < 0)
    throw std::invalid_argument("gnnsparse cuda qfusedmm: negative size");
  if (A.M == 0 || f.H == 0) return false;
  if (A.rowptr == nullptr || (f.out == nullptr && f.D > 0) ||
      (A.nnz > 0 && (A.col == nullptr || f.X.data == nullptr || f.Y.data == nullptr ||
                     (f.Z.data == nullptr && f.D > 0) || f.X.scale == nullptr || f.Y.scale == nullptr ||
                     f.Z.scale == nullptr)))
    throw std::invalid_argument("gnnsparse cuda qfusedmm: null pointer");
  return true;
}

template <int BXY, int BZ, class I, SddmmOp OP, bool SOFTMAX>
void run_qfused(const QFusedArgs& f, cudaStream_t stream) {
  constexpr int B = QFusedTuning::kBlockThreads;
  const int64_t F = OP == SddmmOp::add ? 1 : f.F;
  const int64_t D = f.D;
  int cpl = plan_cpl(BZ, f.Z.data, f.H * D, std::max<int64_t>(D, 1));
  if (OP == SddmmOp::dot)
    cpl = std::min({cpl, plan_cpl(BXY, f.X.data, f.H * F, std::max<int64_t>(F, 1)),
                    plan_cpl(BXY, f.Y.data, f.H * F, std::max<int64_t>(F, 1))});
  const QFusedPlan plan = plan_qfused(f.A.M, f.H, F, D, OP == SddmmOp::add, cpl);
  const int G = plan.group;
  check_grid("qfusedmm", {plan.row_blocks}, plan.col_blocks);
  const QFusedParams<I> p{static_cast<const I*>(f.A.rowptr), static_cast<const I*>(f.A.col),
                          static_cast<const float*>(f.A.val), static_cast<const std::uint8_t*>(f.X.data),
                          static_cast<const std::uint8_t*>(f.Y.data), static_cast<const std::uint8_t*>(f.Z.data),
                          f.X.scale, f.Y.scale, f.Z.scale, f.out, f.E, f.A.M, f.H, F, D,
                          f.X.row_bytes(), f.Y.row_bytes(), f.Z.row_bytes(), static_cast<float>(f.slope),
                          int(f.edge)};
  const dim3 grid(static_cast<unsigned>(plan.row_blocks), static_cast<unsigned>(plan.col_blocks));
  dispatch_cpl(cpl, [&](auto c) {
    qfused_row_kernel<BXY, BZ, I, OP, SOFTMAX, decltype(c)::value><<<grid, B, 0, stream>>>(p, G);
  });
  GS_LAUNCH_CHECK("qfused_row_kernel");
}

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

void qfusedmm(const QFusedArgs& f, cudaStream_t stream) {
  using namespace cuda_detail;
  dispatch_edge_fn(f.edge, [](auto) {});  // an unknown code throws, naming the axis
  if (f.edge != EdgeFn::none && f.edge != EdgeFn::leaky_relu && f.edge != EdgeFn::exp && !row_softmax(f.edge))
    throw std::invalid_argument("gnnsparse cuda qfusedmm: edge function code " + std::to_string(int(f.edge)) +
                                " is not implemented for quantized inputs");
  if (!qfused_has_work(f)) return;
  dispatch_bits(f.X.bits, [&](auto bxy) {
    dispatch_bits(f.Z.bits, [&](auto bz) {
      dispatch_itype(f.A.itype, [&](auto it) {
        dispatch_sddmm_op(f.op, [&](auto op) {
          constexpr int BXY = decltype(bxy)::value, BZ = decltype(bz)::value;
          using I = typename decltype(it)::type;
          constexpr SddmmOp OP = decltype(op)::value;
          if (row_softmax(f.edge)) run_qfused<BXY, BZ, I, OP, true>(f, stream);
          else run_qfused<BXY, BZ, I, OP, false>(f, stream);
        });
      });
    });
  });
}

}  // namespace gnnsparse::cuda
