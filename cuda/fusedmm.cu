// FusedMM: Out[i, h, :] = sum_k w[k, h] Z[col k, h, :], w = edge_fn(sddmm(X, Y)[k, h]) * val[k],
// without materializing w (Rahman, Sujon, Azad, "FusedMM: A Unified SDDMM-SpMM Kernel for
// Graph Embedding and Graph Neural Networks", IPDPS 2021).
//
// Schedule (policy.cuh, plan_fused): one group of G lanes per (row, head). For each edge the
// group computes the score (lanes split F, butterfly sum, so every lane holds it), applies the
// edge function and accumulates w * Z[j, h, cols] into its registers. Row softmax is done in one
// pass with a running max and sum (the accumulator is rescaled when the max grows; Milakov &
// Gimelshein, "Online normalizer calculation for softmax", 2018). Rows longer than `seg` are cut
// into fixed segments like SpMM's hubs; partial states (max, sum, acc) go to a workspace and a
// combine kernel (one block per hub row) merges them in segment order. Deterministic, no atomics.
#include "common.cuh"
#include "policy.cuh"
#include "gnnsparse/cuda.hpp"

namespace gnnsparse::cuda_detail {

template <class T, class I, SddmmOp OP, EdgeFn EF, int V>
struct FusedAgent {
  using A = typename AccOf<T>::type;
  using VT = typename ValOf<T>::type;
  static constexpr int TL = FusedTuning::kColVecsPerLane;
  static constexpr int U = 4;  // edges in flight

  struct Args {
    const I* __restrict__ rowptr;
    const I* __restrict__ col;
    const VT* __restrict__ val;
    const T* __restrict__ X;
    const T* __restrict__ Y;
    const T* __restrict__ Z;
    T* __restrict__ E;  // may be null
    int64_t M, nnz, H, F, D;
    double slope;
  };
  struct State {
    A m, s;
    A acc[TL][V];
  };

  __device__ __forceinline__ static void init(State& st) {
    st.m = -INFINITY;
    st.s = A(0);
#pragma unroll
    for (int t = 0; t < TL; ++t)
#pragma unroll
      for (int e = 0; e < V; ++e) st.acc[t][e] = A(0);
  }
  __device__ __forceinline__ static void columns(int64_t D, int G, int sub, int64_t (&c)[TL],
                                                 bool (&ok)[TL]) {
    const int64_t cbase = int64_t(blockIdx.y) * G * V * TL;
#pragma unroll
    for (int t = 0; t < TL; ++t) {
      c[t] = cbase + (int64_t(t) * G + sub) * V;
      ok[t] = c[t] < D;
    }
  }
  __device__ __forceinline__ static A apply(A e, double slope) {
    if constexpr (EF == EdgeFn::leaky_relu) return e > A(0) ? e : static_cast<A>(slope) * e;
    else if constexpr (EF == EdgeFn::exp) return exp(e);
    else return e;
  }

  // Edges [k0, k1) of row i, head h. Writes E (raw score for softmax, w otherwise) from
  // column block 0 when E is given.
  __device__ __forceinline__ static void run(const Args& a, int64_t i, int64_t h, int64_t k0,
                                             int64_t k1, int G, int sub, unsigned mask,
                                             const int64_t (&c)[TL], const bool (&ok)[TL],
                                             State& st) {
    const bool weighted = a.val != nullptr;
    const bool write_e = a.E != nullptr && blockIdx.y == 0 && sub == 0;
    for (int64_t k = k0; k < k1; k += U) {
      int64_t j[U];
      A wv[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const bool in = k + u < k1;
        j[u] = in ? static_cast<int64_t>(__ldg(a.col + k + u)) : 0;
        wv[u] = (weighted && in) ? static_cast<A>(__ldg(a.val + k + u)) : A(1);
      }
      // Rows of Z first: independent of the scores, so their latency overlaps the dot products.
      A z[U][TL][V];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int t = 0; t < TL; ++t)
          if (ok[t] && k + u < k1) load_vec<T, V>(a.Z + (j[u] * a.H + h) * a.D + c[t], z[u][t]);
      // Scores.
      A sc[U];
      if constexpr (OP == SddmmOp::add) {
        const A xi = to_acc<A>(a.X[i * a.H + h]);
#pragma unroll
        for (int u = 0; u < U; ++u)
          sc[u] = k + u < k1 ? xi + to_acc<A>(a.Y[j[u] * a.H + h]) : A(0);
      } else {
#pragma unroll
        for (int u = 0; u < U; ++u) sc[u] = A(0);
        for (int64_t f = int64_t(sub) * V; f < a.F; f += int64_t(G) * V) {
          A x[V], y[U][V];
          load_vec<T, V>(a.X + (i * a.H + h) * a.F + f, x);
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (k + u < k1) load_vec<T, V>(a.Y + (j[u] * a.H + h) * a.F + f, y[u]);
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (k + u < k1)
#pragma unroll
              for (int e = 0; e < V; ++e) sc[u] += x[e] * y[u][e];
        }
#pragma unroll
        for (int u = 0; u < U; ++u) sc[u] = group_sum(sc[u], G, mask);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (k + u >= k1) break;
        A w;
        if constexpr (EF == EdgeFn::softmax) {
          const A mn = max(st.m, sc[u]);
          const A scale = st.m == mn ? A(1) : exp(st.m - mn);
          const A p = exp(sc[u] - mn);
          st.s = st.s * scale + p;
          st.m = mn;
          w = p * wv[u];
#pragma unroll
          for (int t = 0; t < TL; ++t)
#pragma unroll
            for (int e = 0; e < V; ++e) st.acc[t][e] = st.acc[t][e] * scale + w * z[u][t][e];
          if (write_e) a.E[(k + u) * a.H + h] = from_acc<T>(sc[u]);
        } else {
          w = apply(sc[u], a.slope) * wv[u];
#pragma unroll
          for (int t = 0; t < TL; ++t)
#pragma unroll
            for (int e = 0; e < V; ++e) st.acc[t][e] += w * z[u][t][e];
          if (write_e) a.E[(k + u) * a.H + h] = from_acc<T>(w);
        }
      }
    }
  }
};

template <class T, class I, SddmmOp OP, EdgeFn EF, int V>
__global__ void __launch_bounds__(FusedTuning::kBlockThreads)
fused_chunk_kernel(typename FusedAgent<T, I, OP, EF, V>::Args a, int G, int64_t seg,
                   int64_t thr, int64_t nchunks, typename AccOf<T>::type* __restrict__ ws,
                   const int* __restrict__ has_hub) {
  if (*has_hub == 0) return;
  using Ag = FusedAgent<T, I, OP, EF, V>;
  constexpr int TL = Ag::TL;
  const int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G;
  if (item >= nchunks * a.H) return;
  const unsigned mask = group_mask(G);
  const int64_t ch = item / a.H, h = item % a.H;
  const int64_t p0 = ch * seg, p1 = min(a.nnz, p0 + seg);
  const int64_t r0 = row_of(a.rowptr, a.M, p0), r1 = row_of(a.rowptr, a.M, p1 - 1);
  int64_t c[TL];
  bool ok[TL];
  Ag::columns(a.D, G, sub, c, ok);
  for (int slot = 0; slot < 2; ++slot) {
    const int64_t r = slot ? r1 : r0;
    if (slot == 1 && r1 == r0) break;
    const int64_t rk0 = a.rowptr[r], rk1 = a.rowptr[r + 1];
    if (rk1 - rk0 <= thr) continue;
    typename Ag::State st;
    Ag::init(st);
    Ag::run(a, r, h, max(p0, rk0), min(p1, rk1), G, sub, mask, c, ok, st);
    auto* w = ws + ((ch * 2 + slot) * a.H + h) * (a.D + 2);
    if (blockIdx.y == 0 && sub == 0) { w[0] = st.m; w[1] = st.s; }
#pragma unroll
    for (int t = 0; t < TL; ++t)
      if (ok[t])
#pragma unroll
        for (int e = 0; e < V; ++e) w[2 + c[t] + e] = st.acc[t][e];
  }
}

template <class T, class I, SddmmOp OP, EdgeFn EF, int V>
__global__ void __launch_bounds__(FusedTuning::kBlockThreads)
fused_row_kernel(typename FusedAgent<T, I, OP, EF, V>::Args a, T* __restrict__ Out, int G,
                 int64_t thr) {
  using Ag = FusedAgent<T, I, OP, EF, V>;
  using A = typename Ag::A;
  constexpr int TL = Ag::TL;
  const int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G;
  if (item >= a.M * a.H) return;
  const unsigned mask = group_mask(G);
  const int64_t i = item / a.H, h = item % a.H;
  int64_t c[TL];
  bool ok[TL];
  Ag::columns(a.D, G, sub, c, ok);
  typename Ag::State st;
  Ag::init(st);
  const int64_t k0 = a.rowptr[i], k1 = a.rowptr[i + 1], deg = k1 - k0;
  if (thr > 0 && deg > thr) return;  // hub row: fused_combine_kernel
  {
    Ag::run(a, i, h, k0, k1, G, sub, mask, c, ok, st);
  }
  A inv = A(1);
  if constexpr (EF == EdgeFn::softmax) inv = deg > 0 ? A(1) / st.s : A(0);
#pragma unroll
  for (int t = 0; t < TL; ++t) {
    if (!ok[t]) continue;
    A out[V];
#pragma unroll
    for (int e = 0; e < V; ++e) out[e] = st.acc[t][e] * inv;
    store_vec<T, V>(Out + (i * a.H + h) * a.D + c[t], out);
  }
  if constexpr (EF == EdgeFn::softmax) {
    // E holds the raw scores; turn them into the normalized, value-scaled weights.
    if (a.E != nullptr && blockIdx.y == 0 && deg > 0) {
      __syncwarp(mask);
      for (int64_t k = k0 + sub; k < k1; k += G) {
        const A e = to_acc<A>(a.E[k * a.H + h]);
        A w = exp(e - st.m) * inv;
        if (a.val != nullptr) w *= static_cast<A>(a.val[k]);
        a.E[k * a.H + h] = from_acc<T>(w);
      }
    }
  }
}


// Hub rows (deg > seg): block b merges the hub rows that start in segments 8b .. 8b+7, head by
// head: thread (part, column) folds a contiguous range of segment states in order, then the
// parts are folded in order through shared memory; softmax edge values of the row are then
// normalized by the whole block. Fixed order everywhere: deterministic.
template <class T, class I, EdgeFn EF>
__global__ void __launch_bounds__(FusedTuning::kCombineThreads)
fused_combine_kernel(const I* __restrict__ rowptr, const typename ValOf<T>::type* __restrict__ val,
                     T* __restrict__ Out, T* __restrict__ E, int64_t M, int64_t nnz, int64_t H,
                     int64_t D, int64_t seg, int64_t thr, int64_t nchunks,
                     const typename AccOf<T>::type* __restrict__ ws,
                     const int* __restrict__ has_hub) {
  using A = typename AccOf<T>::type;
  constexpr int NT = FusedTuning::kCombineThreads, NW = NT / 32;
  if (*has_hub == 0) return;
  constexpr bool SM = EF == EdgeFn::softmax;
  __shared__ int64_t rows[NW];
  __shared__ A sm[NT], ss[NT], sacc[NT];
  __shared__ A fin[2];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tid = threadIdx.x;
  if (lane == 0) {
    const int64_t ch = int64_t(blockIdx.x) * NW + warp;
    int64_t r = -1;
    if (ch < nchunks) {
      const int64_t p0 = ch * seg, p1 = min(nnz, p0 + seg);
      const int64_t rr = row_of(rowptr, M, p1 - 1);
      const int64_t rk0 = rowptr[rr], rk1 = rowptr[rr + 1];
      if (rk0 >= p0 && rk1 - rk0 > thr) r = rr;
    }
    rows[warp] = r;
  }
  __syncthreads();
  auto fold = [](A& m, A& s, A& acc, A pm, A ps, A pacc) {
    if constexpr (SM) {
      const A mn = max(m, pm);
      const A sa = m == mn ? A(1) : exp(m - mn);
      const A sb = pm == mn ? A(1) : exp(pm - mn);
      s = s * sa + ps * sb;
      acc = acc * sa + pacc * sb;
      m = mn;
    } else {
      acc += pacc;
    }
  };
  for (int w = 0; w < NW; ++w) {
    const int64_t r = rows[w];
    if (r < 0) continue;
    const int64_t k0 = rowptr[r], k1 = rowptr[r + 1];
    const int64_t c0 = k0 / seg, n = (k1 - 1) / seg - c0 + 1;
    const int64_t CT = D < 1 ? 1 : (D < NT ? D : NT);
    const int64_t P = NT / CT;
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t cb = 0; cb < (D < 1 ? 1 : D); cb += CT) {
        const int64_t cidx = tid % CT, part = tid / CT, cc = cb + cidx;
        const bool has_col = cc < D;
        A m = -INFINITY, s = A(0), acc = A(0);
        if (part < P) {
          const int64_t q0 = n * part / P, q1 = n * (part + 1) / P;
#pragma unroll 4
          for (int64_t q = q0; q < q1; ++q) {
            const int64_t ch = c0 + q;
            const int64_t slot = (ch * seg >= k0) ? 0 : 1;
            const A* p = ws + ((ch * 2 + slot) * H + h) * (D + 2);
            fold(m, s, acc, SM ? p[0] : A(0), SM ? p[1] : A(0), has_col ? p[2 + cc] : A(0));
          }
        }
        sm[tid] = m;
        ss[tid] = s;
        sacc[tid] = acc;
        __syncthreads();
        if (tid < CT) {
          for (int64_t q = 1; q < P; ++q) fold(m, s, acc, sm[q * CT + tid], ss[q * CT + tid], sacc[q * CT + tid]);
          const A inv = SM ? A(1) / s : A(1);
          if (has_col) Out[(r * H + h) * D + cc] = from_acc<T>(acc * inv);
          if (tid == 0) { fin[0] = m; fin[1] = inv; }
        }
        __syncthreads();
      }
      if constexpr (SM) {
        if (E != nullptr) {
          const A m = fin[0], inv = fin[1];
          for (int64_t k = k0 + tid; k < k1; k += NT) {
            A wv = exp(to_acc<A>(E[k * H + h]) - m) * inv;
            if (val != nullptr) wv *= static_cast<A>(val[k]);
            E[k * H + h] = from_acc<T>(wv);
          }
        }
        __syncthreads();
      }
    }
  }
}

template <class T, class I, SddmmOp OP, EdgeFn EF, int V>
void launch_fused(const FusedPlan& p, const typename FusedAgent<T, I, OP, EF, V>::Args& a,
                  void* Out, cudaStream_t stream) {
  using A = typename AccOf<T>::type;
  A* ws = nullptr;
  void* ws_raw = nullptr;
  int* flag = nullptr;
  constexpr int B = FusedTuning::kBlockThreads;
  if (p.seg > 0) {
    const size_t elems = static_cast<size_t>(p.nchunks) * 2 * a.H * (a.D + 2);
    void* raw = nullptr;
    GS_CUDA_CHECK(cudaMallocAsync(&raw, 16 + elems * sizeof(A), stream));
    ws_raw = raw;
    flag = static_cast<int*>(raw);
    ws = reinterpret_cast<A*>(static_cast<char*>(raw) + 16);
    GS_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), stream));
    const int64_t fb = std::min<int64_t>((a.M + 255) / 256, 1024);
    hub_flag_kernel<I><<<static_cast<unsigned>(fb), 256, 0, stream>>>(a.rowptr, a.M, p.thr, flag);
    GS_LAUNCH_CHECK("hub_flag_kernel");
    const dim3 grid(static_cast<unsigned>(p.chunk_blocks), static_cast<unsigned>(p.col_blocks));
    fused_chunk_kernel<T, I, OP, EF, V><<<grid, B, 0, stream>>>(a, p.group, p.seg, p.thr, p.nchunks, ws, flag);
    GS_LAUNCH_CHECK("fused_chunk_kernel");
    fused_combine_kernel<T, I, EF><<<static_cast<unsigned>(p.combine_blocks),
                                     FusedTuning::kCombineThreads, 0, stream>>>(
        a.rowptr, a.val, static_cast<T*>(Out), a.E, a.M, a.nnz, a.H, a.D, p.seg, p.thr, p.nchunks, ws, flag);
    GS_LAUNCH_CHECK("fused_combine_kernel");
  }
  const dim3 grid(static_cast<unsigned>(p.row_blocks), static_cast<unsigned>(p.col_blocks));
  fused_row_kernel<T, I, OP, EF, V><<<grid, B, 0, stream>>>(a, static_cast<T*>(Out), p.group, p.seg > 0 ? p.thr : 0);
  GS_LAUNCH_CHECK("fused_row_kernel");
  if (ws_raw != nullptr) GS_CUDA_CHECK(cudaFreeAsync(ws_raw, stream));
}

template <class T, class I, SddmmOp OP, EdgeFn EF>
void fused_vec(const FusedPlan& p, const void* rowptr, const void* col, const void* val,
               const void* X, const void* Y, const void* Z, void* Out, void* E, int64_t M,
               int64_t nnz, int64_t H, int64_t F, int64_t D, double slope, cudaStream_t s) {
  constexpr int VF = 16 / sizeof(T);
  auto make = [&](auto agent_tag) {
    using Ag = decltype(agent_tag);
    typename Ag::Args a{static_cast<const I*>(rowptr), static_cast<const I*>(col),
                        static_cast<const typename ValOf<T>::type*>(val), static_cast<const T*>(X),
                        static_cast<const T*>(Y), static_cast<const T*>(Z), static_cast<T*>(E),
                        M, nnz, H, OP == SddmmOp::add ? 1 : F, D, slope};
    return a;
  };
  if (p.vec == VF) launch_fused<T, I, OP, EF, VF>(p, make(FusedAgent<T, I, OP, EF, VF>{}), Out, s);
  else launch_fused<T, I, OP, EF, 1>(p, make(FusedAgent<T, I, OP, EF, 1>{}), Out, s);
}

template <class T, class I, SddmmOp OP>
void fused_edge(EdgeFn ef, const FusedPlan& p, const void* rowptr, const void* col,
                const void* val, const void* X, const void* Y, const void* Z, void* Out, void* E,
                int64_t M, int64_t nnz, int64_t H, int64_t F, int64_t D, double slope,
                cudaStream_t s) {
  switch (ef) {
    case EdgeFn::none: return fused_vec<T, I, OP, EdgeFn::none>(p, rowptr, col, val, X, Y, Z, Out, E, M, nnz, H, F, D, slope, s);
    case EdgeFn::leaky_relu: return fused_vec<T, I, OP, EdgeFn::leaky_relu>(p, rowptr, col, val, X, Y, Z, Out, E, M, nnz, H, F, D, slope, s);
    case EdgeFn::exp: return fused_vec<T, I, OP, EdgeFn::exp>(p, rowptr, col, val, X, Y, Z, Out, E, M, nnz, H, F, D, slope, s);
    case EdgeFn::softmax: return fused_vec<T, I, OP, EdgeFn::softmax>(p, rowptr, col, val, X, Y, Z, Out, E, M, nnz, H, F, D, slope, s);
  }
  throw std::invalid_argument("gnnsparse cuda fusedmm: unknown edge function");
}

template <class T>
void fused_typed(IType it, SddmmOp op, EdgeFn ef, double slope, const void* rowptr,
                 const void* col, const void* val, const void* X, const void* Y, const void* Z,
                 void* Out, void* E, int64_t M, int64_t nnz, int64_t H, int64_t F, int64_t D,
                 cudaStream_t s, int64_t max_deg) {
  const bool add = op == SddmmOp::add;
  const bool aligned = reinterpret_cast<uintptr_t>(X) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(Y) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(Z) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(Out) % 16 == 0;
  const FusedPlan p = plan_fused(M, nnz, H, F, D, add, max_deg, sizeof(T), aligned);
  if (p.row_blocks > 0x7fffffffLL || p.chunk_blocks > 0x7fffffffLL || p.col_blocks > 65535)
    throw std::invalid_argument("gnnsparse cuda fusedmm: problem too large for one launch");
  if (it == IType::i32) {
    if (add) return fused_edge<T, int32_t, SddmmOp::add>(ef, p, rowptr, col, val, X, Y, Z, Out, E, M, nnz, H, F, D, slope, s);
    return fused_edge<T, int32_t, SddmmOp::dot>(ef, p, rowptr, col, val, X, Y, Z, Out, E, M, nnz, H, F, D, slope, s);
  }
  if (it == IType::i64) {
    if (add) return fused_edge<T, int64_t, SddmmOp::add>(ef, p, rowptr, col, val, X, Y, Z, Out, E, M, nnz, H, F, D, slope, s);
    return fused_edge<T, int64_t, SddmmOp::dot>(ef, p, rowptr, col, val, X, Y, Z, Out, E, M, nnz, H, F, D, slope, s);
  }
  throw std::invalid_argument("gnnsparse cuda fusedmm: index type must be int32 or int64");
}

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

void fusedmm(DType dtype, IType itype, SddmmOp op, EdgeFn edge, double slope, const void* rowptr,
             const void* col, const void* val, const void* X, const void* Y, const void* Z,
             void* Out, void* E, int64_t M, int64_t K, int64_t nnz, int64_t H, int64_t F,
             int64_t D, cudaStream_t stream, int64_t max_degree_hint) {
  using namespace cuda_detail;
  if (M < 0 || K < 0 || nnz < 0 || H < 0 || F < 0 || D < 0)
    throw std::invalid_argument("gnnsparse cuda fusedmm: negative size");
  if (op != SddmmOp::dot && op != SddmmOp::add)
    throw std::invalid_argument("gnnsparse cuda fusedmm: op must be dot or add");
  if (M == 0 || H == 0) return;
  if (D == 0) {
    // No output columns; only the edge values (if asked) need the kernel: run with D = 0 is
    // still valid (every lane's columns are masked), so fall through.
  }
  if (rowptr == nullptr || (Out == nullptr && D > 0) ||
      (nnz > 0 && (col == nullptr || X == nullptr || Y == nullptr || (Z == nullptr && D > 0))))
    throw std::invalid_argument("gnnsparse cuda fusedmm: null pointer");
  switch (dtype) {
    case DType::f32: return fused_typed<float>(itype, op, edge, slope, rowptr, col, val, X, Y, Z, Out, E, M, nnz, H, F, D, stream, max_degree_hint);
    case DType::f64: return fused_typed<double>(itype, op, edge, slope, rowptr, col, val, X, Y, Z, Out, E, M, nnz, H, F, D, stream, max_degree_hint);
    case DType::f16: return fused_typed<__half>(itype, op, edge, slope, rowptr, col, val, X, Y, Z, Out, E, M, nnz, H, F, D, stream, max_degree_hint);
    case DType::bf16: return fused_typed<__nv_bfloat16>(itype, op, edge, slope, rowptr, col, val, X, Y, Z, Out, E, M, nnz, H, F, D, stream, max_degree_hint);
  }
  throw std::invalid_argument("gnnsparse cuda fusedmm: unknown dtype");
}

}  // namespace gnnsparse::cuda
