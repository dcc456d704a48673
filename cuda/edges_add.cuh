// Shared by FusedMM (fusedmm.cu) and SDDMM (sddmm.cu): the online softmax's steps, and EdgesAdd,
// the edge values of op add with all heads of a row at once (FusedMM with D == 0: GAT's attention
// weights; SDDMM add is its edge function `none` without values).
#pragma once
#include "common.cuh"
#include "policy.cuh"
#include "segments.cuh"

namespace gnnsparse::cuda_detail {

template <class A> __device__ __forceinline__ A exp_of(A x) { return exp(x); }

// Products and fused multiply-adds that the compiler may not contract or split differently from one
// kernel to another (the online softmax's steps must give the same bits in every walk that shares
// them).
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }

// leaky_relu with the slope's product rounded on its own (never fused into what follows).
template <class A> __device__ __forceinline__ A leaky(A v, double slope) {
  return v > A(0) ? v : mul_rn(static_cast<A>(slope), v);
}

// Online-softmax rescale factors of two states with maxima m and o merged into max(m, o).
template <class A> __device__ __forceinline__ void merge_scales(A m, A o, A& mn, A& sa, A& sb) {
  mn = max(m, o);
  sa = m == mn ? A(1) : exp_of(m - mn);
  sb = o == mn ? A(1) : exp_of(o - mn);
}

// One edge's score sc into a running (max m, sum s); scale rescales what was summed before, p is
// the edge's term. The generic walk and EdgesAdd both call it: the same bits.
template <class A> __device__ __forceinline__ void softmax_step(A& m, A& s, A sc, A& scale, A& p) {
  const A mn = max(m, sc);
  scale = m == mn ? A(1) : exp_of(m - mn);
  p = exp_of(sc - mn);
  s = fma_rn(s, scale, p);
  m = mn;
}

// (m, s) := the merge of (m, s) with (om, os), two consecutive edge ranges (`left`: (m, s) holds
// the earlier one); sa and sb rescale the two sides' sums.
template <class A> __device__ __forceinline__ void softmax_merge(A& m, A& s, A om, A os, bool left, A& sa, A& sb) {
  A mn;
  merge_scales(left ? m : om, left ? om : m, mn, sa, sb);
  const A ls = left ? s : os, rs = left ? os : s;
  s = fma_rn(ls, sa, mul_rn(rs, sb));
  m = mn;
}

// ---- FusedMM's edge values with op add (D == 0: GAT's attention weights) ------------------------
// The generic walk gives op add with D == 0 a group of one lane per (row, head), and rows longer
// than kWarpRowMin a whole warp per (row, head), one after another: on a products-sized graph with
// 4 heads ~12 ms for ~2 GB of edge values (H100, 2026-12-06). EdgesAdd takes all heads of a row at
// once (one column load per edge, the heads' values adjacent: one vector when H == HM and the
// pointers allow), with the generic walk's per-head arithmetic and order at G = 1 (softmax_step
// per edge in order; a long row in 32 contiguous parts merged by the same xor tree), so a row's
// values are bitwise those of a D = 1 call on the same walk.
//  - Rows up to kWarpRowMin entries (short): a warp takes 32 consecutive rows. Their entries are
//    walked together in chunks of kChunk: the lanes form the chunk's scores (consecutive entries:
//    coalesced column loads) into shared memory, then each lane folds its own row's scores in
//    order. The weights are then written the same way, lanes over consecutive entries (coalesced
//    stores), from the scores formed again and the row's state taken from its lane.
//  - Longer rows: the whole warp, row by row (32 contiguous parts, then the weights by all lanes).
//  - Hub rows (a softmax only; longer than the plan's threshold): the hub pass -- a warp per
//    segment folds each piece into a workspace slot, the combine folds a row's slots, and a warp
//    per segment writes the pieces' weights from the scores formed again.
// The weights are written once, from recomputed scores (no raw scores stored and read back). Edge
// functions without a row softmax are a map (the same walks without the fold; hub pieces written
// by their segment's warp).
template <class T, class I, EdgeFn EF, int HM>
struct EdgesAdd {
  using A = typename AccOf<T>::type;
  using VT = typename ValOf<T>::type;
  static constexpr bool SM = row_softmax(EF);
  static constexpr int U = FusedTuning::kUnroll;  // edges whose loads are in flight together
  static constexpr int kChunk = 64;               // short rows' entries per shared-memory chunk
  struct Args {
    const I* __restrict__ rowptr;
    const I* __restrict__ col;
    const VT* __restrict__ val;
    const T* __restrict__ X;  // M x H
    const T* __restrict__ Y;  // K x H
    T* __restrict__ E;        // nnz x H
    int64_t M, H;
    double slope;
    bool vec;                 // H == HM, Y and E aligned to HM elements: one vector per row of heads
  };
  struct State {
    A m[HM], s[HM];
  };

  __device__ __forceinline__ static void init(State& st) {
#pragma unroll
    for (int h = 0; h < HM; ++h) {
      st.m[h] = -INFINITY;
      st.s[h] = A(0);
    }
  }
  __device__ __forceinline__ static void row_operand(const Args& a, int64_t i, A (&xi)[HM]) {
#pragma unroll
    for (int h = 0; h < HM; ++h) xi[h] = h < a.H ? to_acc<A>(a.X[i * a.H + h]) : A(0);
  }
  // Edge (column j)'s scores of every head: X[i, h] + Y[j, h], leaky_relu'd before a softmax.
  __device__ __forceinline__ static void scores(const Args& a, const A (&xi)[HM], I j, A (&sc)[HM]) {
    const T* __restrict__ y = a.Y + static_cast<int64_t>(j) * a.H;
    A yv[HM];
    if (a.vec) {
      const VecT<T, HM> r = *reinterpret_cast<const VecT<T, HM>*>(y);
#pragma unroll
      for (int h = 0; h < HM; ++h) yv[h] = to_acc<A>(r.v[h]);
    } else {
#pragma unroll
      for (int h = 0; h < HM; ++h) yv[h] = h < a.H ? to_acc<A>(y[h]) : A(0);
    }
#pragma unroll
    for (int h = 0; h < HM; ++h) {
      A v = xi[h] + yv[h];
      if constexpr (EF == EdgeFn::leaky_relu_softmax) v = leaky(v, a.slope);
      sc[h] = v;
    }
  }
  __device__ __forceinline__ static A apply(A e, double slope) {
    if constexpr (EF == EdgeFn::leaky_relu) return e > A(0) ? e : static_cast<A>(slope) * e;
    else if constexpr (EF == EdgeFn::exp) return exp_of(e);
    else return e;
  }
  // Edge k's value of every head into E: the weight exp(score - m) * inv (* val) for a softmax,
  // else the edge function (* val). inv = 1 / the row's sum.
  __device__ __forceinline__ static void store(const Args& a, int64_t k, const A (&sc)[HM], const A (&m)[HM],
                                               const A (&inv)[HM]) {
    const A wv = a.val != nullptr ? static_cast<A>(__ldg(a.val + k)) : A(1);
    A w[HM];
#pragma unroll
    for (int h = 0; h < HM; ++h) {
      if constexpr (SM) {
        // the raw score as the generic walk stores and reloads it (rounded to T)
        w[h] = exp_of(to_acc<A>(from_acc<T>(sc[h])) - m[h]) * inv[h];
        if (a.val != nullptr) w[h] *= wv;
      } else {
        w[h] = apply(sc[h], a.slope) * wv;
      }
    }
    T* __restrict__ e = a.E + k * a.H;
    if (a.vec) {
      if constexpr (HM * sizeof(T) <= 16) store_packed<T, HM>(e, w);
      else store_vec<T, HM>(e, w);
    } else {
#pragma unroll
      for (int h = 0; h < HM; ++h)
        if (h < a.H) e[h] = from_acc<T>(w[h]);
    }
  }
  // Edges [k0, k1) in ascending order into st, U edges' loads in flight.
  __device__ __forceinline__ static void fold(const Args& a, const A (&xi)[HM], int64_t k0, int64_t k1, State& st) {
    for (int64_t k = k0; k < k1; k += U) {
      A sc[U][HM];
#pragma unroll
      for (int u = 0; u < U; ++u) scores(a, xi, k + u < k1 ? __ldg(a.col + k + u) : I(0), sc[u]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (k + u >= k1) break;
#pragma unroll
        for (int h = 0; h < HM; ++h) {
          if (h >= a.H) break;
          A scale, p;
          softmax_step(st.m[h], st.s[h], sc[u][h], scale, p);
        }
      }
    }
  }
  // Edges [kb, ke) by the whole warp: lane p folds the contiguous part p of 32, then the parts
  // merge by an xor tree (lower part = earlier edges); every lane ends with the state.
  __device__ __forceinline__ static void warp_range(const Args& a, const A (&xi)[HM], int64_t kb, int64_t ke,
                                                    int lane, State& st) {
    const int64_t n = ke - kb;
    init(st);
    fold(a, xi, kb + n * lane / 32, kb + n * (lane + 1) / 32, st);
    for (int off = 1; off < 32; off <<= 1) {
#pragma unroll
      for (int h = 0; h < HM; ++h) {
        if (h >= a.H) break;  // the same for the whole warp
        const A om = __shfl_xor_sync(0xffffffffu, st.m[h], off);
        const A os = __shfl_xor_sync(0xffffffffu, st.s[h], off);
        A sa, sb;
        softmax_merge(st.m[h], st.s[h], om, os, (lane & off) == 0, sa, sb);
      }
    }
  }
  // E of edges [k0, k1) of one row (operand xi, state m / inv) by the warp's lanes, U edges' loads
  // in flight per lane.
  __device__ __forceinline__ static void write_warp(const Args& a, const A (&xi)[HM], int64_t k0, int64_t k1,
                                                    const A (&m)[HM], const A (&inv)[HM], int lane) {
    for (int64_t kb = k0 + lane; kb < k1; kb += int64_t(U) * 32) {
      A sc[U][HM];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t k = kb + int64_t(u) * 32;
        scores(a, xi, k < k1 ? __ldg(a.col + k) : I(0), sc[u]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t k = kb + int64_t(u) * 32;
        if (k >= k1) break;
        store(a, k, sc[u], m, inv);
      }
    }
  }
  // 1 / s per head (1 for a map or an empty row).
  __device__ __forceinline__ static void inverse(const State& st, bool nonempty, A (&inv)[HM]) {
#pragma unroll
    for (int h = 0; h < HM; ++h) inv[h] = SM && nonempty ? A(1) / st.s[h] : A(1);
  }
};

// The lane r (0..31) whose run [off_r, off_r + n_r) of the warp's short-row entries holds entry idx
// (off nondecreasing over the lanes, idx < the total): the largest r with off_r <= idx.
__device__ __forceinline__ int run_owner(int off, int idx) {
  int r = 0;
#pragma unroll
  for (int b = 16; b > 0; b >>= 1) {
    const int o = __shfl_sync(0xffffffffu, off, r + b);
    if (o <= idx) r += b;
  }
  return r;
}

// A warp per 32 consecutive rows: the short ones (up to kWarpRowMin entries) walked together, the
// longer ones (not hubs: deg > hub_thr > 0) then one at a time by the whole warp.
template <class T, class I, EdgeFn EF, int HM>
__global__ void __launch_bounds__(FusedTuning::kBlockThreads)
fused_edges_add_kernel(typename EdgesAdd<T, I, EF, HM>::Args a, int64_t hub_thr) {
  using Ag = EdgesAdd<T, I, EF, HM>;
  using A = typename Ag::A;
  constexpr int CH = Ag::kChunk, NW = FusedTuning::kBlockThreads / 32;
  __shared__ A chunk[Ag::SM ? NW : 1][Ag::SM ? CH : 1][HM];
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const bool live = i < a.M;
  int64_t k0 = 0, k1 = 0;
  if (live) {
    k0 = static_cast<int64_t>(__ldg(a.rowptr + i));
    k1 = static_cast<int64_t>(__ldg(a.rowptr + i + 1));
  }
  const bool hub = hub_thr > 0 && k1 - k0 > hub_thr;
  const bool warp_row = live && !hub && k1 - k0 > FusedTuning::kWarpRowMin;
  const bool short_row = live && !hub && !warp_row;
  // the short rows' entries as one sequence: this lane's run [off, off + n) of it, `total` in all
  const int n = short_row ? static_cast<int>(k1 - k0) : 0;
  int off = n;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int v = __shfl_up_sync(0xffffffffu, off, o);
    if (lane >= o) off += v;
  }
  const int total = __shfl_sync(0xffffffffu, off, 31);
  off -= n;
  A xi[HM];
  if (short_row) Ag::row_operand(a, i, xi);
  else
#pragma unroll
    for (int h = 0; h < HM; ++h) xi[h] = A(0);
  typename Ag::State st;
  Ag::init(st);
  // entry idx of the sequence: its edge k and its row's operand (from the row's lane r)
  auto entry = [&](int idx, int64_t& k, A (&xr)[HM], int& r) {
    r = run_owner(off, idx);
    k = __shfl_sync(0xffffffffu, static_cast<long long>(k0), r) + (idx - __shfl_sync(0xffffffffu, off, r));
#pragma unroll
    for (int h = 0; h < HM; ++h) xr[h] = __shfl_sync(0xffffffffu, xi[h], r);
  };
  if constexpr (Ag::SM) {
    for (int cb = 0; cb < total; cb += CH) {
#pragma unroll
      for (int t = 0; t < CH; t += 32) {
        const int idx = cb + t + lane;
        int64_t k;
        A xr[HM], sc[HM];
        int r;
        entry(idx, k, xr, r);
        if (idx < total) {
          Ag::scores(a, xr, __ldg(a.col + k), sc);
#pragma unroll
          for (int h = 0; h < HM; ++h) chunk[w][t + lane][h] = sc[h];
        }
      }
      __syncwarp();
      const int e0 = max(off, cb) - cb, e1 = min(off + n, cb + CH) - cb;
      for (int e = e0; e < e1; ++e)
#pragma unroll
        for (int h = 0; h < HM; ++h) {
          if (h >= a.H) break;
          A scale, p;
          softmax_step(st.m[h], st.s[h], chunk[w][e][h], scale, p);
        }
      __syncwarp();
    }
  }
  {
    A inv[HM];
    Ag::inverse(st, n > 0, inv);
    for (int t = 0; t < total; t += 32) {
      const int idx = t + lane;
      int64_t k;
      A xr[HM], mr[HM], ir[HM], sc[HM];
      int r;
      entry(idx, k, xr, r);
#pragma unroll
      for (int h = 0; h < HM; ++h) {
        mr[h] = __shfl_sync(0xffffffffu, st.m[h], r);
        ir[h] = __shfl_sync(0xffffffffu, inv[h], r);
      }
      if (idx < total) {
        Ag::scores(a, xr, __ldg(a.col + k), sc);
        Ag::store(a, k, sc, mr, ir);
      }
    }
  }
  unsigned pending = __ballot_sync(0xffffffffu, warp_row);
  while (pending) {
    const int leader = __ffs(pending) - 1;
    pending &= pending - 1;
    const int64_t r = __shfl_sync(0xffffffffu, static_cast<long long>(i), leader);
    const int64_t kb = __shfl_sync(0xffffffffu, static_cast<long long>(k0), leader);
    const int64_t ke = __shfl_sync(0xffffffffu, static_cast<long long>(k1), leader);
    Ag::row_operand(a, r, xi);
    if constexpr (Ag::SM) Ag::warp_range(a, xi, kb, ke, lane, st);
    A inv[HM];
    Ag::inverse(st, ke > kb, inv);
    Ag::write_warp(a, xi, kb, ke, st.m, inv, lane);
  }
}

// The hub pass's segment kernel for EdgesAdd: one warp per segment, all heads. A softmax folds each
// hub piece into its workspace slot (per head: max, sum), as fused_segment_kernel's with D = 0; a
// map writes the piece's values (no workspace).
template <class T, class I, EdgeFn EF, int HM>
__global__ void __launch_bounds__(FusedTuning::kBlockThreads)
fused_edges_add_segment_kernel(typename EdgesAdd<T, I, EF, HM>::Args a, HubGeometry g,
                               typename AccOf<T>::type* __restrict__ ws) {
  using Ag = EdgesAdd<T, I, EF, HM>;
  using A = typename Ag::A;
  if (*g.flag == 0) return;
  const int64_t s = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (s >= g.nsegments) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  hub_pieces(a.rowptr, g, s, [&](int slot, int64_t r, int64_t kb, int64_t ke) {
    A xi[HM];
    Ag::row_operand(a, r, xi);
    typename Ag::State st;
    if constexpr (!Ag::SM) {
      A one[HM];
      Ag::inverse(st, false, one);
      Ag::write_warp(a, xi, kb, ke, one, one, lane);
      return;
    }
    Ag::warp_range(a, xi, kb, ke, lane, st);
    if (lane != 0) return;
#pragma unroll
    for (int h = 0; h < HM; ++h) {
      if (h >= a.H) break;
      A* wsl = ws + ((s * 2 + slot) * a.H + h) * 2;
      wsl[0] = st.m[h];
      wsl[1] = st.s[h];
    }
  });
}

// Softmax hub rows: one warp per segment writes each hub piece's weights from the scores formed
// again, with the row's (max, 1 / sum) per head from fin (FusedCombine's, by the row's first
// segment).
template <class T, class I, EdgeFn EF, int HM>
__global__ void __launch_bounds__(FusedTuning::kBlockThreads)
fused_edges_add_norm_kernel(typename EdgesAdd<T, I, EF, HM>::Args a, HubGeometry g,
                            const typename AccOf<T>::type* __restrict__ fin) {
  using Ag = EdgesAdd<T, I, EF, HM>;
  using A = typename Ag::A;
  if (*g.flag == 0) return;
  const int64_t s = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (s >= g.nsegments) return;
  const int lane = threadIdx.x % 32;
  hub_pieces(a.rowptr, g, s, [&](int, int64_t r, int64_t kb, int64_t ke) {
    const int64_t c0 = static_cast<int64_t>(g.segment_of(a.rowptr[r]));
    A xi[HM], m[HM], inv[HM];
    Ag::row_operand(a, r, xi);
#pragma unroll
    for (int h = 0; h < HM; ++h) {
      m[h] = h < a.H ? fin[(c0 * a.H + h) * 2] : A(0);
      inv[h] = h < a.H ? fin[(c0 * a.H + h) * 2 + 1] : A(1);
    }
    Ag::write_warp(a, xi, kb, ke, m, inv, lane);
  });
}

// Edge functions without a row softmax (a map; SDDMM add is `none`): the hub rows' pieces by a warp
// per segment, the other rows by the row kernel. `hub` is the plan's hub pass (seg == 0: none).
template <class T, class I, EdgeFn EF, int HM>
void launch_edges_map(const SegmentPlan& hub, const typename EdgesAdd<T, I, EF, HM>::Args& a, int64_t nnz,
                      int64_t max_degree, cudaStream_t stream) {
  static_assert(!row_softmax(EF), "a row softmax needs the hub pass's combine (launch_edges_add)");
  constexpr int B = FusedTuning::kBlockThreads;
  HubWorkspace ws;
  if (hub.seg > 0) {
    ws.begin(hub, 0, a.rowptr, a.M, nnz, max_degree, stream);
    const int64_t seg_blocks = (hub.nsegments * 32 + B - 1) / B;
    fused_edges_add_segment_kernel<T, I, EF, HM><<<static_cast<unsigned>(seg_blocks), B, 0, stream>>>(
        a, ws.geometry(), nullptr);
    GS_LAUNCH_CHECK("fused_edges_add_segment_kernel");
  }
  fused_edges_add_kernel<T, I, EF, HM><<<static_cast<unsigned>((a.M + B - 1) / B), B, 0, stream>>>(a, hub.row_limit());
  GS_LAUNCH_CHECK("fused_edges_add_kernel");
  ws.end();
}

}  // namespace gnnsparse::cuda_detail
