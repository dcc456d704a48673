// FusedMM: Out[i, h, :] = sum_k w[k, h] Z[col k, h, :], w = edge_fn(sddmm(X, Y)[k, h]) * val[k],
// without materializing w (Rahman, Sujon, Azad, "FusedMM: A Unified SDDMM-SpMM Kernel for
// Graph Embedding and Graph Neural Networks", IPDPS 2021).
//
// Schedule (policy.cuh, plan_fused): one group of G lanes per (row, head). For each edge the
// group computes the score (lanes split F, butterfly sum, so every lane holds it), applies the
// edge function and accumulates w * Z[j, h, cols] into its registers. Row softmax is done in one
// pass with a running max and sum (the accumulator is rescaled when the max grows; Milakov &
// Gimelshein, "Online normalizer calculation for softmax", 2018). Hub rows take the hub pass of
// segments.cuh, as SpMM's do: fused_segment_kernel writes the partial state (max, sum, acc) of
// each (segment, hub row, head) to a workspace slot and fused_combine_kernel merges a hub row's
// states in segment order. Deterministic, no atomics.
#include "common.cuh"
#include "dispatch.cuh"
#include "policy.cuh"
#include "segments.cuh"
#include "gnnsparse/cuda.hpp"

namespace gnnsparse::cuda_detail {

template <class T, class I, SddmmOp OP, EdgeFn EF, int V>
struct FusedAgent {
  using A = typename AccOf<T>::type;
  using VT = typename ValOf<T>::type;
  static constexpr int TL = FusedTuning::kColVecsPerLane;
  static constexpr int U = FusedTuning::kUnroll;

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
        if constexpr (row_softmax(EF)) {
          if constexpr (EF == EdgeFn::leaky_relu_softmax)
            sc[u] = sc[u] > A(0) ? sc[u] : static_cast<A>(a.slope) * sc[u];
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

// One group per (segment, head): each hub piece of the segment is run from a fresh state, which
// goes to its workspace slot (max and sum from lane 0 of column block 0, acc from every lane).
template <class T, class I, SddmmOp OP, EdgeFn EF, int V>
__global__ void __launch_bounds__(FusedTuning::kBlockThreads)
fused_segment_kernel(typename FusedAgent<T, I, OP, EF, V>::Args a, int G, int64_t seg,
                     int64_t thr, int64_t nsegments, typename AccOf<T>::type* __restrict__ ws,
                     const int* __restrict__ has_hub) {
  if (*has_hub == 0) return;
  using Ag = FusedAgent<T, I, OP, EF, V>;
  constexpr int TL = Ag::TL;
  const int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G;
  if (item >= nsegments * a.H) return;
  const unsigned mask = group_mask(G);
  const int64_t s = item / a.H, h = item % a.H;
  const SegmentRows sr = segment_rows(a.rowptr, a.M, a.nnz, seg, s);
  int64_t c[TL];
  bool ok[TL];
  Ag::columns(a.D, G, sub, c, ok);
  for_each_hub_piece(a.rowptr, sr, thr, [&](int slot, int64_t r, int64_t kb, int64_t ke) {
    typename Ag::State st;
    Ag::init(st);
    Ag::run(a, r, h, kb, ke, G, sub, mask, c, ok, st);
    auto* w = ws + ((s * 2 + slot) * a.H + h) * (a.D + 2);
    if (blockIdx.y == 0 && sub == 0) { w[0] = st.m; w[1] = st.s; }
#pragma unroll
    for (int t = 0; t < TL; ++t)
      if (ok[t])
#pragma unroll
        for (int e = 0; e < V; ++e) w[2 + c[t] + e] = st.acc[t][e];
  });
}

template <class T, class I, SddmmOp OP, EdgeFn EF, int V>
__global__ void __launch_bounds__(FusedTuning::kBlockThreads)
fused_row_kernel(typename FusedAgent<T, I, OP, EF, V>::Args a, T* __restrict__ Out, int G,
                 int64_t hub_thr) {
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
  if (hub_thr > 0 && deg > hub_thr) return;  // hub row: left to the hub pass
  Ag::run(a, i, h, k0, k1, G, sub, mask, c, ok, st);
  A inv = A(1);
  if constexpr (row_softmax(EF)) inv = deg > 0 ? A(1) / st.s : A(0);
#pragma unroll
  for (int t = 0; t < TL; ++t) {
    if (!ok[t]) continue;
    A out[V];
#pragma unroll
    for (int e = 0; e < V; ++e) out[e] = st.acc[t][e] * inv;
    store_vec<T, V>(Out + (i * a.H + h) * a.D + c[t], out);
  }
  if constexpr (row_softmax(EF)) {
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


// Hub rows: block b merges the hub rows that start in segments NW b .. NW b + NW - 1, head by
// head: thread (part, column) folds a contiguous range of segment states in order, then the
// parts are folded in order through shared memory; softmax edge values of the row are then
// normalized by the whole block. Fixed order everywhere: deterministic.
template <class T, class I, EdgeFn EF>
__global__ void __launch_bounds__(FusedTuning::kCombineThreads)
fused_combine_kernel(const I* __restrict__ rowptr, const typename ValOf<T>::type* __restrict__ val,
                     T* __restrict__ Out, T* __restrict__ E, int64_t M, int64_t nnz, int64_t H,
                     int64_t D, int64_t seg, int64_t thr, int64_t nsegments,
                     const typename AccOf<T>::type* __restrict__ ws,
                     const int* __restrict__ has_hub) {
  using A = typename AccOf<T>::type;
  constexpr int NT = FusedTuning::kCombineThreads, NW = NT / 32;
  if (*has_hub == 0) return;
  constexpr bool SM = row_softmax(EF);
  __shared__ int64_t rows[NW];
  __shared__ A sm[NT], ss[NT], sacc[NT];
  __shared__ A fin[2];
  const int tid = threadIdx.x;
  hub_rows_starting_in_block<NW>(rowptr, M, nnz, seg, thr, nsegments, rows);
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
    const int64_t c0 = k0 / seg, n = (k1 - 1) / seg - c0 + 1;  // the row's segments: c0 .. c0 + n - 1
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
            const int64_t sg = c0 + q, slot = hub_slot(sg, seg, k0);
            const A* p = ws + ((sg * 2 + slot) * H + h) * (D + 2);
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
void launch_fused(const FusedPlan& p, const FusedArgs& f, cudaStream_t stream) {
  using A = typename AccOf<T>::type;
  using Ag = FusedAgent<T, I, OP, EF, V>;
  const typename Ag::Args a{static_cast<const I*>(f.A.rowptr), static_cast<const I*>(f.A.col),
                            static_cast<const typename ValOf<T>::type*>(f.A.val),
                            static_cast<const T*>(f.X), static_cast<const T*>(f.Y),
                            static_cast<const T*>(f.Z), static_cast<T*>(f.E), f.A.M, f.A.nnz, f.H,
                            OP == SddmmOp::add ? 1 : f.F, f.D, f.slope};
  auto* out = static_cast<T*>(f.out);
  constexpr int B = FusedTuning::kBlockThreads;
  HubWorkspace ws;
  if (p.hub.seg > 0) {
    const size_t elems = static_cast<size_t>(p.hub.nsegments) * 2 * a.H * (a.D + 2);
    ws.begin(elems * sizeof(A), a.rowptr, a.M, p.hub.thr, stream);
    const dim3 grid(static_cast<unsigned>(p.segment_blocks), static_cast<unsigned>(p.col_blocks));
    fused_segment_kernel<T, I, OP, EF, V><<<grid, B, 0, stream>>>(
        a, p.group, p.hub.seg, p.hub.thr, p.hub.nsegments, ws.payload<A>(), ws.flag());
    GS_LAUNCH_CHECK("fused_segment_kernel");
    fused_combine_kernel<T, I, EF><<<static_cast<unsigned>(p.combine_blocks),
                                     FusedTuning::kCombineThreads, 0, stream>>>(
        a.rowptr, a.val, out, a.E, a.M, a.nnz, a.H, a.D, p.hub.seg, p.hub.thr, p.hub.nsegments,
        ws.payload<A>(), ws.flag());
    GS_LAUNCH_CHECK("fused_combine_kernel");
  }
  const dim3 grid(static_cast<unsigned>(p.row_blocks), static_cast<unsigned>(p.col_blocks));
  fused_row_kernel<T, I, OP, EF, V><<<grid, B, 0, stream>>>(a, out, p.group, p.hub.row_limit());
  GS_LAUNCH_CHECK("fused_row_kernel");
  ws.end();
}

// Checks sizes and pointers; false when there is nothing to compute. D == 0 is work when E is
// given (edge values only: every lane's output columns are masked).
inline bool fused_has_work(const FusedArgs& f) {
  const CsrView& A = f.A;
  if (A.M < 0 || A.K < 0 || A.nnz < 0 || f.H < 0 || f.F < 0 || f.D < 0)
    throw std::invalid_argument("gnnsparse cuda fusedmm: negative size");
  if (A.M == 0 || f.H == 0) return false;
  if (A.rowptr == nullptr || (f.out == nullptr && f.D > 0) ||
      (A.nnz > 0 && (A.col == nullptr || f.X == nullptr || f.Y == nullptr || (f.Z == nullptr && f.D > 0))))
    throw std::invalid_argument("gnnsparse cuda fusedmm: null pointer");
  return true;
}

template <class T, class I, SddmmOp OP, EdgeFn EF>
void run_fused(const FusedArgs& f, cudaStream_t stream) {
  if (!fused_has_work(f)) return;
  const bool aligned = reinterpret_cast<uintptr_t>(f.X) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(f.Y) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(f.Z) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(f.out) % 16 == 0;
  const FusedPlan p = plan_fused(f.A.M, f.A.nnz, f.H, f.F, f.D, OP == SddmmOp::add,
                                 f.A.max_degree, sizeof(T), aligned);
  check_grid("fusedmm", {p.row_blocks, p.segment_blocks, p.combine_blocks}, p.col_blocks);
  dispatch_vec<16 / sizeof(T)>(p.vec, [&](auto v) { launch_fused<T, I, OP, EF, decltype(v)::value>(p, f, stream); });
}

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

void fusedmm(const FusedArgs& f, cudaStream_t stream) {
  using namespace cuda_detail;
  check_precision(f.precision);
  dispatch_types(f.dtype, f.A.itype, [&](auto t, auto i) {
    dispatch_sddmm_op(f.op, [&](auto op) {
      dispatch_edge_fn(f.edge, [&](auto ef) {
        run_fused<typename decltype(t)::type, typename decltype(i)::type, decltype(op)::value,
                  decltype(ef)::value>(f, stream);
      });
    });
  });
}

}  // namespace gnnsparse::cuda
