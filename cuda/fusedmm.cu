// FusedMM: Out[i, h, :] = sum_k w[k, h] Z[col k, h, :], w = edge_fn(sddmm(X, Y)[k, h]) * val[k],
// without materializing w (Rahman, Sujon, Azad, "FusedMM: A Unified SDDMM-SpMM Kernel for
// Graph Embedding and Graph Neural Networks", IPDPS 2021).
//
// Schedule (policy.cuh, plan_fused): one group of G lanes per (row, head). For each edge the
// group computes the score (lanes split F, butterfly sum, so every lane holds it; the row operand
// X[i] is held in registers when it fits one vector per lane), applies the edge function and
// accumulates w * Z[j, h, cols] into its registers (TL vectors per lane). When Y is Z (and F ==
// D) the gathered row feeds both. A dot whose F is one vector per lane (TL = 1) takes the
// one-vector walk (with Y is Z: FusedPath::one_same, 8 edges per batch and one gather each;
// FusedAgent::run_one: the batch's dots finished by one transposed
// reduce-scatter, one edge per lane set, the weights broadcast; its rows longer than kWarpRowMin
// go to fused_long_rows_kernel; with D == 0, its edges form, FusedPath::edges, computes the edge
// values alone: the recompute pass of FusedMM's backward). Row softmax is done in one pass with
// a running max and sum (the accumulator is rescaled when the max grows; Milakov & Gimelshein,
// "Online normalizer calculation for softmax", 2018), and partial states of contiguous edge
// ranges merge exactly like that (FusedAgent::merge). Rows longer than kWarpRowMin are taken by the whole warp (its
// groups run contiguous parts, merged by a fixed shuffle tree). Hub rows take the hub pass of
// segments.cuh: fused_segment_kernel (a warp per (segment, head)) writes each piece's state to a
// workspace slot, launch_hub_combine<FusedCombine> folds a hub row's states in segment order, and
// fused_hub_norm_kernel turns a softmax hub row's raw scores in E into weights. Deterministic,
// no atomics.
#include "common.cuh"
#include "dispatch.cuh"
#include "edges_add.cuh"
#include "policy.cuh"
#include "segments.cuh"
#include "gnnsparse/cuda.hpp"

#include <cstdlib>
#include <cstring>

namespace gnnsparse::cuda_detail {

// Which walk of a row the agent does: generic (lanes loop over F, one butterfly per edge), same (Y
// is Z: one gathered row feeds the score and the sum), one (F in one vector per lane, TL = 1, Y !=
// Z: the row operand held, the next batch's columns prefetched, the batch's U partial dots
// finished by one transposed reduce-scatter, each lane set applying the edge function to its
// edge and broadcasting the weight), edges (one for D == 0, the edge values alone: no Z gathers,
// no aggregation), one_same (one with Y is Z and G >= 8: each gathered row feeds the score and the
// sum, so 8 edges are in flight per group in the registers 4 took with two gathers).
enum class FusedPath : int { generic, same, one, edges, one_same };

template <class T, class I, SddmmOp OP, EdgeFn EF, int V, int TL, FusedPath P>
struct FusedAgent {
  using A = typename AccOf<T>::type;
  using VT = typename ValOf<T>::type;
  using Vec = VecT<T, V>;
  static constexpr bool YZ = P == FusedPath::one_same;  // the one-vector walk, Y is Z
  static constexpr int U = YZ ? FusedTuning::kUnrollSame : FusedTuning::kUnroll;
  static constexpr bool SM = row_softmax(EF);
  static constexpr bool SAME = P == FusedPath::same;
  static constexpr bool ONE = P == FusedPath::one || P == FusedPath::edges || YZ;
  static constexpr bool AGG = P != FusedPath::edges;  // Out is a sum over the row (D > 0)
  static_assert(!ONE || (OP == SddmmOp::dot && TL == 1), "the one-vector path is a dot with TL = 1");

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
    else if constexpr (EF == EdgeFn::exp) return exp_of(e);
    else return e;
  }

  // st := st (+) o, the states of two consecutive edge ranges (`left`: st holds the earlier one);
  // both lanes of a shuffle exchange compute the same value.
  __device__ __forceinline__ static void merge(State& st, const State& o, bool left) {
    if constexpr (SM) {
      A sa, sb;
      softmax_merge(st.m, st.s, o.m, o.s, left, sa, sb);
#pragma unroll
      for (int t = 0; t < TL; ++t)
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const A la = left ? st.acc[t][e] : o.acc[t][e], ra = left ? o.acc[t][e] : st.acc[t][e];
          st.acc[t][e] = la * sa + ra * sb;
        }
    } else {
#pragma unroll
      for (int t = 0; t < TL; ++t)
#pragma unroll
        for (int e = 0; e < V; ++e) st.acc[t][e] = left ? st.acc[t][e] + o.acc[t][e] : o.acc[t][e] + st.acc[t][e];
    }
  }
  // The partner's state across an xor-shuffle of distance `off`.
  __device__ __forceinline__ static State shfl(const State& st, int off) {
    State o;
    o.m = __shfl_xor_sync(0xffffffffu, st.m, off);
    o.s = __shfl_xor_sync(0xffffffffu, st.s, off);
#pragma unroll
    for (int t = 0; t < TL; ++t)
#pragma unroll
      for (int e = 0; e < V; ++e) o.acc[t][e] = __shfl_xor_sync(0xffffffffu, st.acc[t][e], off);
    return o;
  }

  // Edges [k0, k1) of row i, head h, in ascending order, into st. Writes E (raw score for
  // softmax, w otherwise) from column block 0 when E is given.
  __device__ __forceinline__ static void run(const Args& a, int64_t i, int64_t h, int64_t k0,
                                             int64_t k1, int G, int sub, unsigned mask,
                                             const int64_t (&c)[TL], const bool (&ok)[TL],
                                             State& st) {
    if constexpr (ONE) {
      run_one(a, i, h, k0, k1, G, sub, mask, c[0], ok[0], st);
      return;
    }
    const bool weighted = a.val != nullptr;
    const bool write_e = a.E != nullptr && blockIdx.y == 0 && sub == 0;
    const T* __restrict__ xrow = a.X + (i * a.H + h) * a.F;
    // The row operand: in registers when Y is Z (the lane's TL vectors); otherwise loaded per batch
    // (an L1 hit after the first).
    Vec xr[TL];
    if constexpr (SAME) {
#pragma unroll
      for (int t = 0; t < TL; ++t)
        if (ok[t]) xr[t] = *reinterpret_cast<const Vec*>(xrow + c[t]);
    }
    for (int64_t k = k0; k < k1; k += U) {
      I j[U];
      A wv[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const bool in = k + u < k1;
        j[u] = in ? __ldg(a.col + k + u) : I(0);
        wv[u] = (weighted && in) ? static_cast<A>(__ldg(a.val + k + u)) : A(1);
      }
      // Rows of Z first: independent of the scores, so their latency overlaps the dot products
      // (when Y is Z they are the dot's operand too).
      Vec z[U][TL];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int t = 0; t < TL; ++t)
          if (ok[t] && k + u < k1) z[u][t] = *reinterpret_cast<const Vec*>(a.Z + (static_cast<int64_t>(j[u]) * a.H + h) * a.D + c[t]);
      A sc[U];
      if constexpr (OP == SddmmOp::add) {
        const A xi = to_acc<A>(a.X[i * a.H + h]);
#pragma unroll
        for (int u = 0; u < U; ++u)
          sc[u] = k + u < k1 ? xi + to_acc<A>(a.Y[static_cast<int64_t>(j[u]) * a.H + h]) : A(0);
      } else {
#pragma unroll
        for (int u = 0; u < U; ++u) sc[u] = A(0);
        if constexpr (SAME) {
#pragma unroll
          for (int u = 0; u < U; ++u)
#pragma unroll
            for (int t = 0; t < TL; ++t)
              if (ok[t] && k + u < k1)
#pragma unroll
                for (int e = 0; e < V; ++e) sc[u] += to_acc<A>(xr[t].v[e]) * to_acc<A>(z[u][t].v[e]);
        } else {
          for (int64_t f = int64_t(sub) * V; f < a.F; f += int64_t(G) * V) {
            const Vec x = *reinterpret_cast<const Vec*>(xrow + f);
            Vec y[U];
#pragma unroll
            for (int u = 0; u < U; ++u)
              if (k + u < k1) y[u] = *reinterpret_cast<const Vec*>(a.Y + (static_cast<int64_t>(j[u]) * a.H + h) * a.F + f);
#pragma unroll
            for (int u = 0; u < U; ++u)
              if (k + u < k1)
#pragma unroll
                for (int e = 0; e < V; ++e) sc[u] += to_acc<A>(x.v[e]) * to_acc<A>(y[u].v[e]);
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) sc[u] = group_sum(sc[u], G, mask);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (k + u >= k1) break;
        if constexpr (SM) {
          if constexpr (EF == EdgeFn::leaky_relu_softmax) sc[u] = leaky(sc[u], a.slope);
          A scale, p;
          softmax_step(st.m, st.s, sc[u], scale, p);
          const A w = p * wv[u];
#pragma unroll
          for (int t = 0; t < TL; ++t)
#pragma unroll
            for (int e = 0; e < V; ++e) st.acc[t][e] = st.acc[t][e] * scale + w * to_acc<A>(z[u][t].v[e]);
          if (write_e) a.E[(k + u) * a.H + h] = from_acc<T>(sc[u]);
        } else {
          const A w = apply(sc[u], a.slope) * wv[u];
#pragma unroll
          for (int t = 0; t < TL; ++t)
#pragma unroll
            for (int e = 0; e < V; ++e) st.acc[t][e] += w * to_acc<A>(z[u][t].v[e]);
          if (write_e) a.E[(k + u) * a.H + h] = from_acc<T>(w);
        }
      }
    }
  }

  // The one-vector path of run (P == one, edges or one_same; G >= U): lane sub owns F's vector sub
  // (x, held) and D's vector at column c. Per batch of U edges: with 32-bit indices of P == one /
  // edges the next batch's columns are loaded while this batch's U rows of Y and U rows of Z are in
  // flight (Z's do not wait on the scores); P == one_same (Y is Z, F == D, c == f0) gathers only the
  // U = 8 rows of Y, each feeding its dot and its sum, and loads the batch's columns first. The U
  // partial dots are finished by one transposed reduce-scatter (lane set u holds edge k + u), each
  // lane set applies the edge function to its own edge (one exp per lane and batch; softmax: the
  // batch's max over the lane sets first, then one rescale per batch), writes its edge of E and
  // broadcasts the weight to the group for the sums. Softmax sums: each lane set adds its own
  // edges' terms (all share the batch's rescale), folded over the lane sets at the end by a fixed
  // xor tree. Edge offsets are 32-bit (a range is at most a hub threshold, <= 2^30).
  // P == edges (D == 0, edge values only): the same walk without the Z gathers, the rescales and
  // the weight broadcast; its scores, softmax state and E are those of P == one.
  __device__ __forceinline__ static void run_one(const Args& a, int64_t i, int64_t h, int64_t k0, int64_t k1,
                                                 int G, int sub, unsigned mask, int64_t c, bool ok, State& st) {
    const int span = G / U;  // lanes per lane set
    int base = sub / span;
    const int n = static_cast<int>(k1 - k0);
    const int64_t f0 = int64_t(sub) * V;
    const bool fok = f0 < a.F;
    Vec x;
    if (fok) x = *reinterpret_cast<const Vec*>(a.X + (i * a.H + h) * a.F + f0);
    // this lane's vectors of the Y and Z rows: base + j * stride
    const T* __restrict__ yb = a.Y + h * a.F + f0;
    const T* __restrict__ zb = a.Z + h * a.D + c;
    const int64_t ys = a.H * a.F, zs = a.H * a.D;
    const I* __restrict__ colp = a.col + k0;
    const VT* __restrict__ valp = a.val != nullptr ? a.val + k0 : nullptr;
    T* __restrict__ ep = a.E != nullptr && blockIdx.y == 0 && sub % span == 0 ? a.E + k0 * a.H + h : nullptr;
    A s = base == 0 ? st.s : A(0);  // softmax: this lane set's part of the sum
    // the next batch's columns, loaded while this batch's rows are gathered (64-bit indices and
    // one_same's 8-edge batches load their own batch's: prefetched, they cost 8-16 registers more)
    constexpr bool kPrefetch = sizeof(I) == 4 && !YZ;
    I jn[U];
#pragma unroll
    for (int u = 0; u < U; ++u) jn[u] = kPrefetch && u < n ? __ldg(colp + u) : I(0);
#pragma unroll 1
    for (int k = 0; k < n; k += U) {
      I j[U];
#pragma unroll
      for (int u = 0; u < U; ++u) j[u] = kPrefetch ? jn[u] : (k + u < n ? __ldg(colp + k + u) : I(0));
      const bool valid = k + base < n;
      const A own = valp != nullptr && valid ? static_cast<A>(__ldg(valp + k + base)) : A(1);
      Vec y[U], z[U];  // YZ: z is y (F == D, one column block: c == f0, ok == fok)
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (k + u < n) {
          if (fok) y[u] = *reinterpret_cast<const Vec*>(yb + static_cast<int64_t>(j[u]) * ys);
          if (!YZ && AGG && ok) z[u] = *reinterpret_cast<const Vec*>(zb + static_cast<int64_t>(j[u]) * zs);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) jn[u] = kPrefetch && k + U + u < n ? __ldg(colp + k + U + u) : I(0);
      A pd[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        pd[u] = A(0);
        if (fok && k + u < n)
#pragma unroll
          for (int e = 0; e < V; ++e) pd[u] += to_acc<A>(x.v[e]) * to_acc<A>(y[u].v[e]);
      }
      A sc = transpose_reduce<U>(pd, G, sub, mask, base);  // edge k + base's score
      A w;  // this lane set's edge weight
      if constexpr (SM) {
        if constexpr (EF == EdgeFn::leaky_relu_softmax) sc = sc > A(0) ? sc : static_cast<A>(a.slope) * sc;
        A bm = valid ? sc : A(-INFINITY);
        for (int o = span; o < G; o <<= 1) bm = max(bm, __shfl_xor_sync(mask, bm, o));
        const A mn = max(st.m, bm);
        const A scale = st.m == mn ? A(1) : exp_of(st.m - mn);
        const A pe = valid ? exp_of(sc - mn) : A(0);
        s = s * scale + pe;
        st.m = mn;
        if constexpr (AGG)
#pragma unroll
          for (int e = 0; e < V; ++e) st.acc[0][e] *= scale;
        w = pe * own;
        if (ep != nullptr && valid) ep[(k + base) * a.H] = from_acc<T>(sc);
      } else {
        w = apply(sc, a.slope) * own;
        if (ep != nullptr && valid) ep[(k + base) * a.H] = from_acc<T>(w);
      }
      if constexpr (!AGG) continue;  // P == edges
      A wt[U];
#pragma unroll
      for (int u = 0; u < U; ++u) wt[u] = __shfl_sync(mask, w, u * span, G);
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (ok && k + u < n)
#pragma unroll
          for (int e = 0; e < V; ++e) st.acc[0][e] += wt[u] * to_acc<A>((YZ ? y[u] : z[u]).v[e]);
    }
    if constexpr (SM) {
      // the lane sets' parts of the sum, folded by a fixed tree (lower lane set = earlier edges)
      for (int o = span; o < G; o <<= 1) {
        const A other = __shfl_xor_sync(mask, s, o);
        s = (sub & o) == 0 ? s + other : other + s;
      }
      st.s = s;
    }
  }

  // Edges [kb, ke) of row i, head h, by the whole warp: its NG = 32 / G groups each run a
  // contiguous part, then a fixed xor tree merges the parts (lower part = earlier edges). Every
  // lane of the warp must call this; every lane ends with the row's state.
  __device__ __forceinline__ static void run_warp(const Args& a, int64_t i, int64_t h, int64_t kb, int64_t ke,
                                                  int G, int lane, const int64_t (&c)[TL], const bool (&ok)[TL],
                                                  State& st) {
    const int sub = lane % G, part = lane / G, NG = 32 / G;
    const int64_t n = ke - kb;
    init(st);
    run(a, i, h, kb + n * part / NG, kb + n * (part + 1) / NG, G, sub, group_mask(G), c, ok, st);
    for (int off = G; off < 32; off <<= 1) merge(st, shfl(st, off), (lane & off) == 0);
  }

  // Out row i, head h, from the finished state; for softmax, E's raw scores of the row turned into
  // the normalized, value-scaled weights by the `lanes` lanes (sub: this lane's index in them).
  __device__ __forceinline__ static void finish(const Args& a, T* __restrict__ Out, int64_t i, int64_t h,
                                                int64_t k0, int64_t k1, const int64_t (&c)[TL],
                                                const bool (&ok)[TL], const State& st, bool writer, int sub,
                                                int lanes, unsigned mask) {
    const int64_t deg = k1 - k0;
    A inv = A(1);
    if constexpr (SM) inv = deg > 0 ? A(1) / st.s : A(0);
    if (writer) {
#pragma unroll
      for (int t = 0; t < TL; ++t) {
        if (!ok[t]) continue;
        A out[V];
#pragma unroll
        for (int e = 0; e < V; ++e) out[e] = st.acc[t][e] * inv;
        store_vec<T, V>(Out + (i * a.H + h) * a.D + c[t], out);
      }
    }
    if constexpr (SM) {
      if (a.E != nullptr && blockIdx.y == 0 && deg > 0) {
        __syncwarp(mask);  // the raw scores of the row were written by other lanes
        for (int64_t k = k0 + sub; k < k1; k += lanes) {
          A w = exp_of(to_acc<A>(a.E[k * a.H + h]) - st.m) * inv;
          if (a.val != nullptr) w *= static_cast<A>(a.val[k]);
          a.E[k * a.H + h] = from_acc<T>(w);
        }
      }
    }
  }
};

// Resident blocks asked of the register allocator (TL = 1 only), the most that compile without
// spilling for sm_90 (the one-vector path with fp32 softmax: 32 bytes, two reloads per batch):
// 3 (<= 80 registers) for 4-byte features when the dot's operands need no second gather (Y is Z),
// there is no dot (add) or the dot takes the one-vector path (or its edges form) with 32-bit
// indices; else 2. Below sm_90 one block fewer for the fp32 dot instances that spilled there at
// these values (arch_min_blocks; nvcc 13.0, sm_80): the one-vector walk with Y is Z 72-104 bytes,
// the one-vector walk with softmax and int32 indices 28.
template <class T, class I, int TL, SddmmOp OP, EdgeFn EF, FusedPath P> constexpr int fused_min_blocks() {
  constexpr int sm90 = TL != 1 || sizeof(T) == 8 ? 1
                       : sizeof(T) == 4 && (P == FusedPath::same || P == FusedPath::one_same || OP == SddmmOp::add ||
                                            ((P == FusedPath::one || P == FusedPath::edges) && sizeof(I) == 4))
                           ? FusedTuning::kMinBlocks
                           : FusedTuning::kMinBlocksWide;
  constexpr bool sm80_spills = sizeof(T) == 4 && TL == 1 && OP == SddmmOp::dot &&
                               (P == FusedPath::one_same || (P == FusedPath::one && sizeof(I) == 4 && row_softmax(EF)));
  return arch_min_blocks(sm90, sm80_spills);
}

// One group per (row, head); rows longer than kWarpRowMin (when G < 32) are taken by the whole warp
// after its short rows (the one-vector path leaves them to fused_long_rows_kernel: in this kernel
// the warp's loop cost it ~25 registers and 3 resident blocks), hub rows (deg > hub_thr > 0) are
// left to the hub pass.
template <class T, class I, SddmmOp OP, EdgeFn EF, int V, int TL, FusedPath P>
__global__ void __launch_bounds__(FusedTuning::kBlockThreads, (fused_min_blocks<T, I, TL, OP, EF, P>()))
fused_row_kernel(typename FusedAgent<T, I, OP, EF, V, TL, P>::Args a, T* __restrict__ Out, int G,
                 int64_t hub_thr) {
  using Ag = FusedAgent<T, I, OP, EF, V, TL, P>;
  const int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G, lane = threadIdx.x % 32;
  const bool live = item < a.M * a.H;
  const int64_t i = live ? item / a.H : 0, h = live ? item % a.H : 0;
  int64_t k0 = 0, k1 = 0;
  if (live) {
    k0 = static_cast<int64_t>(__ldg(a.rowptr + i));
    k1 = static_cast<int64_t>(__ldg(a.rowptr + i + 1));
  }
  const bool hub = hub_thr > 0 && k1 - k0 > hub_thr;
  // every head count: restricted to one head, the GAT epoch (4 heads) went from 10.81 to 12.05 ms
  // (H200, 2026-12-01)
  constexpr bool kLongApart = Ag::ONE;
  const bool warp_split = G < 32;
  const bool warp_row = live && !hub && warp_split && k1 - k0 > FusedTuning::kWarpRowMin;
  int64_t c[TL];
  bool ok[TL];
  Ag::columns(a.D, G, sub, c, ok);
  typename Ag::State st;
  if (live && !hub && !warp_row) {
    const unsigned mask = group_mask(G);
    Ag::init(st);
    Ag::run(a, i, h, k0, k1, G, sub, mask, c, ok, st);
    Ag::finish(a, Out, i, h, k0, k1, c, ok, st, true, sub, G, mask);
  }
  if (!kLongApart && warp_split) {
    unsigned pending = __ballot_sync(0xffffffffu, warp_row && sub == 0);
    while (pending) {
      const int leader = __ffs(pending) - 1;
      pending &= pending - 1;
      const int64_t r = __shfl_sync(0xffffffffu, static_cast<long long>(i), leader);
      const int64_t rh = __shfl_sync(0xffffffffu, static_cast<long long>(h), leader);
      const int64_t kb = __shfl_sync(0xffffffffu, static_cast<long long>(k0), leader);
      const int64_t ke = __shfl_sync(0xffffffffu, static_cast<long long>(k1), leader);
      Ag::run_warp(a, r, rh, kb, ke, G, lane, c, ok, st);
      Ag::finish(a, Out, r, rh, kb, ke, c, ok, st, lane < G, lane, 32, 0xffffffffu);
    }
  }
}

// The one-vector path's rows longer than kWarpRowMin that are not hubs: warp w looks at the
// (row, head) items 32 w .. 32 w + 31 and runs each long one with the whole warp (its 32 / G
// groups on contiguous parts, merged by a fixed shuffle tree).
template <class T, class I, SddmmOp OP, EdgeFn EF, int V, int TL, FusedPath P>
__global__ void __launch_bounds__(FusedTuning::kBlockThreads)
fused_long_rows_kernel(typename FusedAgent<T, I, OP, EF, V, TL, P>::Args a, T* __restrict__ Out, int G,
                       int64_t hub_thr) {
  using Ag = FusedAgent<T, I, OP, EF, V, TL, P>;
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32, sub = lane % G;
  const int64_t item = warp * 32 + lane;
  int64_t k0 = 0, k1 = 0;
  if (item < a.M * a.H) {
    const int64_t i = item / a.H;
    k0 = static_cast<int64_t>(__ldg(a.rowptr + i));
    k1 = static_cast<int64_t>(__ldg(a.rowptr + i + 1));
  }
  const int64_t deg = k1 - k0;
  unsigned pending = __ballot_sync(0xffffffffu, deg > FusedTuning::kWarpRowMin && !(hub_thr > 0 && deg > hub_thr));
  int64_t c[TL];
  bool ok[TL];
  Ag::columns(a.D, G, sub, c, ok);
  typename Ag::State st;
  while (pending) {
    const int leader = __ffs(pending) - 1;
    pending &= pending - 1;
    const int64_t it = warp * 32 + leader;
    const int64_t kb = __shfl_sync(0xffffffffu, static_cast<long long>(k0), leader);
    const int64_t ke = __shfl_sync(0xffffffffu, static_cast<long long>(k1), leader);
    Ag::run_warp(a, it / a.H, it % a.H, kb, ke, G, lane, c, ok, st);
    Ag::finish(a, Out, it / a.H, it % a.H, kb, ke, c, ok, st, lane < G, lane, 32, 0xffffffffu);
  }
}

// One warp per (segment, head): each hub piece of the segment is run by the warp's groups from a
// fresh state, merged, and stored to its workspace slot (max and sum from lane 0 of column block
// 0, acc from the lanes of the first group).
template <class T, class I, SddmmOp OP, EdgeFn EF, int V, int TL, FusedPath P>
__global__ void __launch_bounds__(FusedTuning::kBlockThreads)
fused_segment_kernel(typename FusedAgent<T, I, OP, EF, V, TL, P>::Args a, int G, HubGeometry g,
                     typename AccOf<T>::type* __restrict__ ws) {
  using Ag = FusedAgent<T, I, OP, EF, V, TL, P>;
  if (*g.flag == 0) return;
  const int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (item >= g.nsegments * a.H) return;  // whole warps leave together
  const int lane = threadIdx.x % 32, sub = lane % G;
  const int64_t s = item / a.H, h = item % a.H;
  int64_t c[TL];
  bool ok[TL];
  Ag::columns(a.D, G, sub, c, ok);
  hub_pieces(a.rowptr, g, s, [&](int slot, int64_t r, int64_t kb, int64_t ke) {
    typename Ag::State st;
    Ag::run_warp(a, r, h, kb, ke, G, lane, c, ok, st);
    if (lane >= G) return;
    auto* w = ws + ((s * 2 + slot) * a.H + h) * (a.D + 2);
    if (blockIdx.y == 0 && sub == 0) { w[0] = st.m; w[1] = st.s; }
#pragma unroll
    for (int t = 0; t < TL; ++t)
      if (ok[t])
#pragma unroll
        for (int e = 0; e < V; ++e) w[2 + c[t] + e] = st.acc[t][e];
  });
}

// The hub pass's state of FusedMM: per slot and head (max, sum) and acc[D]; a Part is one column
// of it (the head's max and sum with one accumulator). write() stores Out and, for the softmax's
// edge values, the row's final (max, 1 / sum) per head in fin (indexed by the row's first
// segment).
template <class T, EdgeFn EF>
struct FusedCombine {
  using A = typename AccOf<T>::type;
  static constexpr bool SM = row_softmax(EF);
  struct Params {
    const A* __restrict__ ws;
    T* __restrict__ out;
    A* __restrict__ fin;  // nsegments x H x 2, or null
    int64_t H, D;
  };
  struct Part {
    A m, s, acc;
  };
  static constexpr int kLoads = 8;
  __host__ __device__ __forceinline__ static int64_t width(const Params& p) { return p.H * (p.D > 0 ? p.D : 1); }
  // GNNSPARSE_CUDA_HUB_COMBINE=auto: by segments. A Part is three values, more than the float SpMM's
  // max / min (value and arg), whose combine by rows measured 8-14 % slower (H100, 2026-12-07).
  static bool prefers_rows(const Params&) { return false; }
  __device__ __forceinline__ static Part identity() { return {A(-INFINITY), A(0), A(0)}; }
  __device__ __forceinline__ static Part load(const Params& p, int64_t slot, int64_t cc) {
    const int64_t Dw = p.D > 0 ? p.D : 1, h = cc / Dw, d = cc % Dw;
    const A* w = p.ws + (slot * p.H + h) * (p.D + 2);
    return {SM ? w[0] : A(0), SM ? w[1] : A(0), p.D > 0 ? w[2 + d] : A(0)};
  }
  __device__ __forceinline__ static void fold(Part& acc, const Part& nx) {
    if constexpr (SM) {
      A mn, sa, sb;
      merge_scales(acc.m, nx.m, mn, sa, sb);
      acc.s = acc.s * sa + nx.s * sb;
      acc.acc = acc.acc * sa + nx.acc * sb;
      acc.m = mn;
    } else {
      acc.acc += nx.acc;
    }
  }
  __device__ __forceinline__ static void write(const Params& p, int64_t r, int64_t cc, const Part& acc, int64_t,
                                               int64_t c0) {
    const int64_t Dw = p.D > 0 ? p.D : 1, h = cc / Dw, d = cc % Dw;
    const A inv = SM ? A(1) / acc.s : A(1);
    if (p.D > 0) p.out[(r * p.H + h) * p.D + d] = from_acc<T>(acc.acc * inv);
    if (p.fin != nullptr && d == 0) {
      p.fin[(c0 * p.H + h) * 2] = acc.m;
      p.fin[(c0 * p.H + h) * 2 + 1] = inv;
    }
  }
};

// Softmax hub rows with E: one warp per (segment, head) turns the raw scores of each hub piece
// into the normalized, value-scaled weights, with the row's (max, 1 / sum) from fin.
template <class T, class I>
__global__ void __launch_bounds__(FusedTuning::kBlockThreads)
fused_hub_norm_kernel(const I* __restrict__ rowptr, const typename ValOf<T>::type* __restrict__ val,
                      T* __restrict__ E, int64_t H, HubGeometry g, const typename AccOf<T>::type* __restrict__ fin) {
  using A = typename AccOf<T>::type;
  if (*g.flag == 0) return;
  const int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (item >= g.nsegments * H) return;
  const int lane = threadIdx.x % 32;
  const int64_t s = item / H, h = item % H;
  hub_pieces(rowptr, g, s, [&](int, int64_t r, int64_t kb, int64_t ke) {
    const int64_t c0 = static_cast<int64_t>(g.segment_of(rowptr[r]));
    const A m = fin[(c0 * H + h) * 2], inv = fin[(c0 * H + h) * 2 + 1];
    for (int64_t k = kb + lane; k < ke; k += 32) {
      A w = exp_of(to_acc<A>(E[k * H + h]) - m) * inv;
      if (val != nullptr) w *= static_cast<A>(val[k]);
      E[k * H + h] = from_acc<T>(w);
    }
  });
}

template <class T, class I, SddmmOp OP, EdgeFn EF, int V, int TL, FusedPath P>
void launch_fused(const FusedPlan& p, const FusedArgs& f, cudaStream_t stream) {
  using A = typename AccOf<T>::type;
  using Ag = FusedAgent<T, I, OP, EF, V, TL, P>;
  using Cmb = FusedCombine<T, EF>;
  const typename Ag::Args a{static_cast<const I*>(f.A.rowptr), static_cast<const I*>(f.A.col),
                            static_cast<const typename ValOf<T>::type*>(f.A.val),
                            static_cast<const T*>(f.X), static_cast<const T*>(f.Y),
                            static_cast<const T*>(f.Z), static_cast<T*>(f.E), f.A.M, f.A.nnz, f.H,
                            OP == SddmmOp::add ? 1 : f.F, f.D, f.slope};
  auto* out = static_cast<T*>(f.out);
  constexpr int B = FusedTuning::kBlockThreads;
  if constexpr (Ag::ONE) {  // a lane set per edge of a batch: the group must hold U of them (span >= 1)
    if (p.group < Ag::U || p.group > 32 || p.group % Ag::U != 0)
      throw std::logic_error("gnnsparse cuda fusedmm: plan group " + std::to_string(p.group) +
                             " does not fit the one-vector walk's lane sets");
  }
  HubWorkspace ws;
  if (p.hub.seg > 0) {
    const bool norm = row_softmax(EF) && a.E != nullptr;
    const size_t elems = static_cast<size_t>(p.hub.nsegments) * 2 * a.H * (a.D + 2);
    const size_t fin_elems = norm ? static_cast<size_t>(p.hub.nsegments) * a.H * 2 : 0;
    ws.begin(p.hub, (elems + fin_elems) * sizeof(A), a.rowptr, a.M, a.nnz, f.A.max_degree, stream);
    A* fin = norm ? ws.payload<A>(elems * sizeof(A)) : nullptr;
    const dim3 grid(static_cast<unsigned>(p.segment_blocks), static_cast<unsigned>(p.col_blocks));
    fused_segment_kernel<T, I, OP, EF, V, TL, P><<<grid, B, 0, stream>>>(a, p.group, ws.geometry(),
                                                                           ws.payload<A>());
    GS_LAUNCH_CHECK("fused_segment_kernel");
    launch_hub_combine<Cmb>(p.hub, a.rowptr, ws, typename Cmb::Params{ws.payload<A>(), out, fin, a.H, a.D},
                            stream);
    if (norm) {
      fused_hub_norm_kernel<T, I><<<static_cast<unsigned>(p.segment_blocks), B, 0, stream>>>(
          a.rowptr, a.val, a.E, a.H, ws.geometry(), fin);
      GS_LAUNCH_CHECK("fused_hub_norm_kernel");
    }
  }
  if constexpr (Ag::ONE) {
    // rows longer than kWarpRowMin go to the long-row kernel (when such rows may exist)
    if (p.group < 32 && (f.A.max_degree < 0 || f.A.max_degree > FusedTuning::kWarpRowMin)) {
      const dim3 lgrid(static_cast<unsigned>(p.long_blocks), static_cast<unsigned>(p.col_blocks));
      fused_long_rows_kernel<T, I, OP, EF, V, TL, P><<<lgrid, B, 0, stream>>>(a, out, p.group, p.hub.row_limit());
      GS_LAUNCH_CHECK("fused_long_rows_kernel");
    }
  }
  const dim3 grid(static_cast<unsigned>(p.row_blocks), static_cast<unsigned>(p.col_blocks));
  fused_row_kernel<T, I, OP, EF, V, TL, P><<<grid, B, 0, stream>>>(a, out, p.group, p.hub.row_limit());
  GS_LAUNCH_CHECK("fused_row_kernel");
  ws.end();
}

template <class T, class I, EdgeFn EF, int HM>
void launch_edges_add(const FusedArgs& f, cudaStream_t stream) {
  using Ag = EdgesAdd<T, I, EF, HM>;
  using A = typename Ag::A;
  constexpr size_t kVecBytes = sizeof(T) * HM;
  const bool vec = f.H == HM && reinterpret_cast<uintptr_t>(f.Y) % kVecBytes == 0 &&
                   reinterpret_cast<uintptr_t>(f.E) % kVecBytes == 0;
  const typename Ag::Args a{static_cast<const I*>(f.A.rowptr), static_cast<const I*>(f.A.col),
                            static_cast<const typename ValOf<T>::type*>(f.A.val), static_cast<const T*>(f.X),
                            static_cast<const T*>(f.Y), static_cast<T*>(f.E), f.A.M, f.H, f.slope, vec};
  const SegmentPlan hub = plan_edges_add(f.A.M, f.A.nnz, f.H, f.A.max_degree, Ag::SM);
  check_grid("fusedmm", {(f.A.M + 255) / 256, (hub.nsegments * 32 + 255) / 256, hub.combine_blocks(), hub.map_blocks()},
             1);
  if constexpr (!Ag::SM) {
    launch_edges_map<T, I, EF, HM>(hub, a, f.A.nnz, f.A.max_degree, stream);
  } else {
    constexpr int B = FusedTuning::kBlockThreads;
    HubWorkspace ws;
    if (hub.seg > 0) {
      const size_t elems = static_cast<size_t>(hub.nsegments) * 2 * a.H * 2;
      const size_t fin_elems = static_cast<size_t>(hub.nsegments) * a.H * 2;
      ws.begin(hub, (elems + fin_elems) * sizeof(A), a.rowptr, a.M, f.A.nnz, f.A.max_degree, stream);
      A* fin = ws.payload<A>(elems * sizeof(A));
      const auto seg_blocks = static_cast<unsigned>((hub.nsegments * 32 + B - 1) / B);
      fused_edges_add_segment_kernel<T, I, EF, HM><<<seg_blocks, B, 0, stream>>>(a, ws.geometry(), ws.payload<A>());
      GS_LAUNCH_CHECK("fused_edges_add_segment_kernel");
      using Cmb = FusedCombine<T, EF>;
      launch_hub_combine<Cmb>(hub, a.rowptr, ws, typename Cmb::Params{ws.payload<A>(), nullptr, fin, a.H, 0}, stream);
      fused_edges_add_norm_kernel<T, I, EF, HM><<<seg_blocks, B, 0, stream>>>(a, ws.geometry(), fin);
      GS_LAUNCH_CHECK("fused_edges_add_norm_kernel");
    }
    fused_edges_add_kernel<T, I, EF, HM><<<static_cast<unsigned>((a.M + B - 1) / B), B, 0, stream>>>(
        a, hub.row_limit());
    GS_LAUNCH_CHECK("fused_edges_add_kernel");
    ws.end();
  }
}

// Checks sizes and pointers; false when there is nothing to compute. D == 0 is work when E is
// given (edge values only: every lane's output columns are masked; on the one-vector walk the
// aggregation is skipped), none without it.
inline bool fused_has_work(const FusedArgs& f) {
  const CsrView& A = f.A;
  if (A.M < 0 || A.K < 0 || A.nnz < 0 || f.H < 0 || f.F < 0 || f.D < 0)
    throw std::invalid_argument("gnnsparse cuda fusedmm: negative size");
  if (A.M == 0 || f.H == 0 || (f.D == 0 && f.E == nullptr)) return false;
  // X is read per row (the one-vector walks hold it before the edge loop), even with no edges
  if (A.rowptr == nullptr || (f.out == nullptr && f.D > 0) || (f.X == nullptr && f.F > 0) ||
      (A.nnz > 0 && (A.col == nullptr || f.X == nullptr || f.Y == nullptr || (f.Z == nullptr && f.D > 0))))
    throw std::invalid_argument("gnnsparse cuda fusedmm: null pointer");
  return true;
}

// GNNSPARSE_CUDA_FUSEDMM: unset, "" or "auto" (the plan), "generic" (never the one-vector path nor
// EdgesAdd: the kernels they replaced, kept for comparison in the bench and the tests). Read at
// every call.
inline bool fused_one_allowed() {
  const char* e = std::getenv("GNNSPARSE_CUDA_FUSEDMM");
  if (e == nullptr || *e == '\0' || std::strcmp(e, "auto") == 0) return true;
  if (std::strcmp(e, "generic") == 0) return false;
  throw std::invalid_argument(std::string("gnnsparse cuda: GNNSPARSE_CUDA_FUSEDMM must be auto or generic, got '") +
                              e + "'");
}

template <class T, class I, SddmmOp OP, EdgeFn EF>
void run_fused(const FusedArgs& f, cudaStream_t stream) {
  if (!fused_has_work(f)) return;
  const bool aligned = reinterpret_cast<uintptr_t>(f.X) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(f.Y) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(f.Z) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(f.out) % 16 == 0;
  const bool tuned = fused_one_allowed();
  if constexpr (OP == SddmmOp::add) {
    // the edge values alone: EdgesAdd (all heads of a row together), up to 8 heads
    if (f.D == 0 && f.H <= 8 && tuned) {
      if (f.H <= 4) launch_edges_add<T, I, EF, 4>(f, stream);
      else launch_edges_add<T, I, EF, 8>(f, stream);
      return;
    }
  }
  const FusedPlan p = plan_fused(f.A.M, f.A.nnz, f.H, f.F, f.D, OP == SddmmOp::add, f.A.max_degree, sizeof(T),
                                 aligned, f.Y == f.Z, tuned);
  check_grid("fusedmm", {p.row_blocks, p.long_blocks, p.segment_blocks, p.hub.combine_blocks(), p.hub.map_blocks()},
             p.col_blocks);
  dispatch_vec<16 / sizeof(T)>(p.vec, [&](auto v) {
    constexpr int V = decltype(v)::value;
    constexpr int TL2 = FusedTuning::kMaxVecsPerLane;
    if constexpr (V == 1) {  // the scalar path (odd widths): one instance, the plan's TL
      constexpr int TLs = fused_scalar_tl(1, OP == SddmmOp::add);
      launch_fused<T, I, OP, EF, 1, TLs, FusedPath::generic>(p, f, stream);
    } else if (p.per_lane == 1) {
      if constexpr (OP == SddmmOp::dot) {
        if (p.one_same) return launch_fused<T, I, OP, EF, V, 1, FusedPath::one_same>(p, f, stream);
        if (p.same) return launch_fused<T, I, OP, EF, V, 1, FusedPath::same>(p, f, stream);
        if (p.one && f.D == 0) return launch_fused<T, I, OP, EF, V, 1, FusedPath::edges>(p, f, stream);
        if (p.one) return launch_fused<T, I, OP, EF, V, 1, FusedPath::one>(p, f, stream);
      }
      launch_fused<T, I, OP, EF, V, 1, FusedPath::generic>(p, f, stream);
    } else {
      launch_fused<T, I, OP, EF, V, TL2, FusedPath::generic>(p, f, stream);
    }
  });
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
