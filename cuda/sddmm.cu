// SDDMM: E[k, h] = <X[i, h, :], Y[col k, h, :]> (dot) or X[i, h] + Y[col k, h] (add).
//
// Schedule (policy.cuh, plan_sddmm): a group of G lanes per edge, lanes split F into 16-byte
// vectors and finish with a butterfly sum inside the group; each group owns a fixed run of
// kEdgesPerGroup consecutive edges (found by one binary search in rowptr, then a forward walk),
// so hub rows spread over many groups for free. U edges are kept in flight per group.
#include "common.cuh"
#include "policy.cuh"
#include "gnnsparse/cuda.hpp"

namespace gnnsparse::cuda_detail {

template <class T, class I, SddmmOp OP, int V>
__global__ void __launch_bounds__(SddmmTuning::kBlockThreads)
sddmm_kernel(const I* __restrict__ rowptr, const I* __restrict__ col, const T* __restrict__ X,
             const T* __restrict__ Y, T* __restrict__ E, int64_t M, int64_t nnz, int64_t H,
             int64_t F, int G) {
  using A = typename AccOf<T>::type;
  constexpr int EPG = SddmmTuning::kEdgesPerGroup;
  constexpr int U = SddmmTuning::kUnroll;
  const int64_t g = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G;
  const int64_t k0 = g * EPG;
  if (k0 >= nnz) return;  // the whole group leaves together
  const unsigned mask = group_mask(G);
  const int64_t k1 = min(nnz, k0 + EPG);
  int64_t r = row_of(rowptr, M, k0);
  int64_t rend = __ldg(rowptr + r + 1);
  for (int64_t k = k0; k < k1; k += U) {
    int64_t i[U], j[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t kk = k + u;
      if (kk < k1) {
        while (kk >= rend) { ++r; rend = __ldg(rowptr + r + 1); }
        j[u] = static_cast<int64_t>(__ldg(col + kk));
      } else {
        j[u] = 0;
      }
      i[u] = r;
    }
    if constexpr (OP == SddmmOp::dot) {
      for (int64_t h = 0; h < H; ++h) {
        A p[U];
#pragma unroll
        for (int u = 0; u < U; ++u) p[u] = A(0);
        for (int64_t f = int64_t(sub) * V; f < F; f += int64_t(G) * V) {
          A x[U][V], y[U][V];
#pragma unroll
          for (int u = 0; u < U; ++u) {
            if (k + u < k1) {
              load_vec<T, V>(X + (i[u] * H + h) * F + f, x[u]);
              load_vec<T, V>(Y + (j[u] * H + h) * F + f, y[u]);
            }
          }
#pragma unroll
          for (int u = 0; u < U; ++u) {
            if (k + u < k1) {
#pragma unroll
              for (int e = 0; e < V; ++e) p[u] += x[u][e] * y[u][e];
            }
          }
        }
        if (U == 4 && G >= 4) {
          // Transposed butterfly: the first two levels exchange halves of the 4 partial sums
          // (2 + 1 shuffles instead of 4 + 4), then one value per lane finishes the tree.
          // Lane class (bit G/2, bit G/4) ends up holding edge u = 2 * bit(G/2) + bit(G/4).
          const int h1 = G >> 1, h2 = G >> 2;
          const bool l1 = (sub & h1) == 0, l2 = (sub & h2) == 0;
          const A a0 = l1 ? p[0] : p[2], b0 = l1 ? p[2] : p[0];
          const A a1 = l1 ? p[1] : p[3], b1 = l1 ? p[3] : p[1];
          const A q0 = a0 + __shfl_xor_sync(mask, b0, h1);
          const A q1 = a1 + __shfl_xor_sync(mask, b1, h1);
          A r = (l2 ? q0 : q1) + __shfl_xor_sync(mask, l2 ? q1 : q0, h2);
          for (int o = h2 >> 1; o > 0; o >>= 1) r += __shfl_xor_sync(mask, r, o);
          const int u = (l1 ? 0 : 2) + (l2 ? 0 : 1);
          if ((sub & (h2 - 1)) == 0 && k + u < k1) E[(k + u) * H + h] = from_acc<T>(r);
        } else {
#pragma unroll
          for (int u = 0; u < U; ++u) p[u] = group_sum(p[u], G, mask);
          if (sub == 0) {
#pragma unroll
            for (int u = 0; u < U; ++u)
              if (k + u < k1) E[(k + u) * H + h] = from_acc<T>(p[u]);
          }
        }
      }
    } else {
      for (int64_t h = sub; h < H; h += G) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (k + u < k1) {
            const A v = to_acc<A>(X[i[u] * H + h]) + to_acc<A>(Y[j[u] * H + h]);
            E[(k + u) * H + h] = from_acc<T>(v);
          }
        }
      }
    }
  }
}

template <class T, class I>
void sddmm_typed(SddmmOp op, const void* rowptr, const void* col, const void* X, const void* Y,
                 void* E, int64_t M, int64_t nnz, int64_t H, int64_t F, cudaStream_t stream) {
  const bool add = op == SddmmOp::add;
  const bool aligned = reinterpret_cast<uintptr_t>(X) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(Y) % 16 == 0;
  const SddmmPlan p = plan_sddmm(nnz, H, F, add, sizeof(T), aligned);
  if (p.blocks > 0x7fffffffLL)
    throw std::invalid_argument("gnnsparse cuda sddmm: problem too large for one launch");
  const auto* rp = static_cast<const I*>(rowptr);
  const auto* cp = static_cast<const I*>(col);
  const auto* xp = static_cast<const T*>(X);
  const auto* yp = static_cast<const T*>(Y);
  auto* ep = static_cast<T*>(E);
  const dim3 grid(static_cast<unsigned>(p.blocks));
  constexpr int VF = 16 / sizeof(T);
  constexpr int B = SddmmTuning::kBlockThreads;
  if (add)
    sddmm_kernel<T, I, SddmmOp::add, 1><<<grid, B, 0, stream>>>(rp, cp, xp, yp, ep, M, nnz, H, 1, p.group);
  else if (p.vec == VF)
    sddmm_kernel<T, I, SddmmOp::dot, VF><<<grid, B, 0, stream>>>(rp, cp, xp, yp, ep, M, nnz, H, F, p.group);
  else
    sddmm_kernel<T, I, SddmmOp::dot, 1><<<grid, B, 0, stream>>>(rp, cp, xp, yp, ep, M, nnz, H, F, p.group);
  GS_LAUNCH_CHECK("sddmm_kernel");
}

template <class T>
void sddmm_itype(IType it, SddmmOp op, const void* rowptr, const void* col, const void* X,
                 const void* Y, void* E, int64_t M, int64_t nnz, int64_t H, int64_t F,
                 cudaStream_t s) {
  if (it == IType::i32) return sddmm_typed<T, int32_t>(op, rowptr, col, X, Y, E, M, nnz, H, F, s);
  if (it == IType::i64) return sddmm_typed<T, int64_t>(op, rowptr, col, X, Y, E, M, nnz, H, F, s);
  throw std::invalid_argument("gnnsparse cuda sddmm: index type must be int32 or int64");
}

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

void sddmm(DType dtype, IType itype, SddmmOp op, const void* rowptr, const void* col,
           const void* X, const void* Y, void* E, int64_t M, int64_t K, int64_t nnz, int64_t H,
           int64_t F, cudaStream_t stream) {
  using namespace cuda_detail;
  if (M < 0 || K < 0 || nnz < 0 || H < 0 || F < 0)
    throw std::invalid_argument("gnnsparse cuda sddmm: negative size");
  if (op != SddmmOp::dot && op != SddmmOp::add)
    throw std::invalid_argument("gnnsparse cuda sddmm: op must be dot or add");
  if (nnz == 0 || H == 0) return;
  if (op == SddmmOp::dot && F == 0) {
    // Empty dot products: E = 0.
    size_t es = dtype == DType::f64 ? 8 : dtype == DType::f32 ? 4 : 2;
    GS_CUDA_CHECK(cudaMemsetAsync(E, 0, static_cast<size_t>(nnz * H) * es, stream));
    return;
  }
  if (rowptr == nullptr || col == nullptr || X == nullptr || Y == nullptr || E == nullptr)
    throw std::invalid_argument("gnnsparse cuda sddmm: null pointer");
  switch (dtype) {
    case DType::f32: return sddmm_itype<float>(itype, op, rowptr, col, X, Y, E, M, nnz, H, F, stream);
    case DType::f64: return sddmm_itype<double>(itype, op, rowptr, col, X, Y, E, M, nnz, H, F, stream);
    case DType::f16: return sddmm_itype<__half>(itype, op, rowptr, col, X, Y, E, M, nnz, H, F, stream);
    case DType::bf16: return sddmm_itype<__nv_bfloat16>(itype, op, rowptr, col, X, Y, E, M, nnz, H, F, stream);
  }
  throw std::invalid_argument("gnnsparse cuda sddmm: unknown dtype");
}

}  // namespace gnnsparse::cuda
