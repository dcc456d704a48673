// SDDMM: E[k, h] = <X[i, h, :], Y[col k, h, :]> (dot) or X[i, h] + Y[col k, h] (add).
//
// Schedule (policy.cuh, plan_sddmm): a group of G lanes per edge, lanes split F into 16-byte
// vectors; each group owns a fixed run of kEdgesPerGroup consecutive edges (found by one binary
// search in rowptr, then a forward walk), so hub rows spread over many groups for free. U edges
// are kept in flight per group (the gathered Y rows are the traffic, 16-byte loads; the row
// operand X is shared by consecutive edges and comes from L1), and their U dot products are
// finished by one transposed butterfly (U - 1 shuffles, then log2(G / U) levels), each lane set
// writing one edge's value. Fixed shuffle trees: bitwise reproducible.
#include "common.cuh"
#include "dispatch.cuh"
#include "policy.cuh"
#include "gnnsparse/cuda.hpp"

namespace gnnsparse::cuda_detail {

template <class T, class I, SddmmOp OP, int V>
__global__ void __launch_bounds__(SddmmTuning::kBlockThreads,
                                  OP == SddmmOp::dot && std::is_same_v<T, float> ? SddmmTuning::kMinBlocksDot : 1)
sddmm_kernel(const I* __restrict__ rowptr, const I* __restrict__ col, const T* __restrict__ X,
             const T* __restrict__ Y, T* __restrict__ E, int64_t M, int64_t nnz, int64_t H,
             int64_t F, int G) {
  using A = typename AccOf<T>::type;
  constexpr int EPG = SddmmTuning::kEdgesPerGroup;
  // fp32: kUnroll edges in flight; wider accumulators / vectors keep fewer (no spills uncapped)
  constexpr int U = std::is_same_v<T, float> ? SddmmTuning::kUnroll : SddmmTuning::kUnrollWide;
  const int64_t g = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G;
  const int64_t k0 = g * EPG;
  if (k0 >= nnz) return;  // the whole group leaves together
  const unsigned mask = group_mask(G);
  const int64_t k1 = min(nnz, k0 + EPG);
  int64_t r = row_of(rowptr, M, k0);
  int64_t rend = __ldg(rowptr + r + 1);
  for (int64_t k = k0; k < k1; k += U) {
    I i[U], j[U];  // rows and columns in the index type (fewer registers for int32)
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t kk = k + u;
      if (kk < k1) {
        while (kk >= rend) { ++r; rend = __ldg(rowptr + r + 1); }
        j[u] = __ldg(col + kk);
      } else {
        j[u] = 0;
      }
      i[u] = static_cast<I>(r);
    }
    if constexpr (OP == SddmmOp::dot) {
      for (int64_t h = 0; h < H; ++h) {
        A p[U];
#pragma unroll
        for (int u = 0; u < U; ++u) p[u] = A(0);
        for (int64_t f = int64_t(sub) * V; f < F; f += int64_t(G) * V) {
          A y[U][V];
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (k + u < k1) load_vec<T, V>(Y + (int64_t(j[u]) * H + h) * F + f, y[u]);
#pragma unroll
          for (int u = 0; u < U; ++u) {
            if (k + u < k1) {
              // the row operand: consecutive edges mostly share a row, so this is an L1 hit
              A x[V];
              load_vec<T, V>(X + (int64_t(i[u]) * H + h) * F + f, x);
#pragma unroll
              for (int e = 0; e < V; ++e) p[u] += x[e] * y[u][e];
            }
          }
        }
        // Transposed butterfly (G >= U, both powers of two): at each of the first log2(U) levels a
        // lane keeps the half of its partial sums its side of the exchange owns and adds the
        // partner's copy of it, so U dot products cost U - 1 shuffles and end one per lane set;
        // the remaining levels finish each sum. Lane set `base` holds edge k + base.
        int base = 0, o = G >> 1;
#pragma unroll
        for (int half = U / 2; half >= 1; half >>= 1) {
          const bool lo = (sub & o) == 0;
#pragma unroll
          for (int q = 0; q < half; ++q) {
            const A keep = lo ? p[q] : p[q + half];
            const A send = lo ? p[q + half] : p[q];
            p[q] = keep + __shfl_xor_sync(mask, send, o);
          }
          base += lo ? 0 : half;
          o >>= 1;
        }
        A r = p[0];
        for (; o > 0; o >>= 1) r += __shfl_xor_sync(mask, r, o);
        // the G / U lanes that differ only in their low bits hold the same sum: the first writes
        if ((sub & (G / U - 1)) == 0 && k + base < k1) E[(k + base) * H + h] = from_acc<T>(r);
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

// Checks sizes and pointers; false when there is nothing to compute.
inline bool sddmm_has_work(const SddmmArgs& a) {
  const CsrView& A = a.A;
  if (A.M < 0 || A.K < 0 || A.nnz < 0 || a.H < 0 || a.F < 0)
    throw std::invalid_argument("gnnsparse cuda sddmm: negative size");
  if (A.nnz == 0 || a.H == 0) return false;
  if (a.E == nullptr) throw std::invalid_argument("gnnsparse cuda sddmm: null pointer");
  return true;
}

template <class T, class I, SddmmOp OP>
void run_sddmm(const SddmmArgs& a, cudaStream_t stream) {
  if (!sddmm_has_work(a)) return;
  const int64_t M = a.A.M, nnz = a.A.nnz, H = a.H, F = a.F;
  auto* ep = static_cast<T*>(a.E);
  if (OP == SddmmOp::dot && F == 0) {  // empty dot products: E = 0
    GS_CUDA_CHECK(cudaMemsetAsync(ep, 0, static_cast<size_t>(nnz * H) * sizeof(T), stream));
    return;
  }
  if (a.A.rowptr == nullptr || a.A.col == nullptr || a.X == nullptr || a.Y == nullptr)
    throw std::invalid_argument("gnnsparse cuda sddmm: null pointer");
  const bool aligned = reinterpret_cast<uintptr_t>(a.X) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(a.Y) % 16 == 0;
  const SddmmPlan p = plan_sddmm(nnz, H, F, OP == SddmmOp::add, sizeof(T), aligned);
  check_grid("sddmm", {p.blocks}, 1);
  const auto* rp = static_cast<const I*>(a.A.rowptr);
  const auto* cp = static_cast<const I*>(a.A.col);
  const auto* xp = static_cast<const T*>(a.X);
  const auto* yp = static_cast<const T*>(a.Y);
  const dim3 grid(static_cast<unsigned>(p.blocks));
  constexpr int B = SddmmTuning::kBlockThreads;
  if constexpr (OP == SddmmOp::add) {  // one value per (edge, head): no vectors, F = 1
    sddmm_kernel<T, I, OP, 1><<<grid, B, 0, stream>>>(rp, cp, xp, yp, ep, M, nnz, H, 1, p.group);
  } else {
    dispatch_vec<16 / sizeof(T)>(p.vec, [&](auto v) {
      sddmm_kernel<T, I, OP, decltype(v)::value><<<grid, B, 0, stream>>>(rp, cp, xp, yp, ep, M, nnz, H, F, p.group);
    });
  }
  GS_LAUNCH_CHECK("sddmm_kernel");
}

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

void sddmm(const SddmmArgs& a, cudaStream_t stream) {
  using namespace cuda_detail;
  check_precision(a.precision);
  dispatch_types(a.dtype, a.A.itype, [&](auto t, auto i) {
    dispatch_sddmm_op(a.op, [&](auto op) {
      run_sddmm<typename decltype(t)::type, typename decltype(i)::type, decltype(op)::value>(a, stream);
    });
  });
}

}  // namespace gnnsparse::cuda
