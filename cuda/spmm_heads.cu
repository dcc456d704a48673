// SpMM with per-(edge, head) weights: Out[i, h, :] = sum_k W[k, h] Z[col k, h, :] (ops.hpp,
// spmm_heads), every head in one launch, deterministic.
//
// Schedule: the float SpMM's (spmm.cu; policy.cuh, plan_spmm_heads) over the C = H * D columns of
// a row of Z. A group of G = Gc * P lanes per row; each lane owns TL vectors of V columns and walks
// the row's edges in ascending order, U edges' loads in flight. A lane's vector lies inside one
// head (the vector path needs D % V == 0), so each vector has one weight per edge, W[k, h]: the H
// weights of an edge are contiguous, so a group's weight loads of one edge hit one or two sectors.
// Rows longer than kWarpRowMin are taken by the whole warp; hub rows take the hub pass of
// segments.cuh (heads_segment_kernel: a warp per segment, pieces into workspace slots;
// launch_hub_combine<HeadsCombine>: slots folded in segment order). No atomics: bitwise
// reproducible.
#include "common.cuh"
#include "dispatch.cuh"
#include "policy.cuh"
#include "segments.cuh"
#include "gnnsparse/cuda.hpp"

namespace gnnsparse::cuda_detail {

// Resident blocks the row kernel asks the register allocator for: the float SpMM's sum / mean
// numbers (fp64 left free; 2-byte features on the vector path keep 8 accumulators per vector).
// Below sm_90 one block fewer for the instances that spilled there at these values (arch_min_blocks;
// nvcc 13.0, sm_80: the scalar path at TL = 5 with int32 indices 20-24 bytes, fp32 with int64 8; the
// fp32 vector path at TL = 2 with int32 indices 8).
template <class T, class I, int V, int TL> constexpr int heads_row_min_blocks() {
  constexpr int sm90 = sizeof(T) > 4 ? 1 : V > 1 && sizeof(T) < 4 ? SpmmTuning::kRowMinBlocksWide
                                                                  : SpmmTuning::kRowMinBlocks;
  constexpr bool sm80_spills = (V == 1 && TL == 5 && (sizeof(I) == 4 || sizeof(T) == 4)) ||
                               (V == 4 && TL == 2 && sizeof(I) == 4);
  return arch_min_blocks(sm90, sizeof(T) <= 4 && sm80_spills);
}

template <class T, class I, int V, int TL>
struct HeadsAgent {
  using A = typename AccOf<T>::type;
  using VT = typename ValOf<T>::type;
  using Red = Reducer<A, Reduce::sum>;
  using Vec = VecT<T, V>;
  static constexpr int U = spmm_heads_unroll<TL, V, int(sizeof(T)), int(sizeof(VT))>();

  struct Args {
    const I* __restrict__ rowptr;
    const I* __restrict__ col;
    const VT* __restrict__ W;  // nnz x H
    const T* __restrict__ Z;   // K x C, C = H * D
    int64_t H, D, C;
  };

  // This lane's columns c[t] .. c[t] + V - 1 (valid when ok[t]) and their head h[t]. Vector t of
  // the Gc lanes is contiguous, as in the float SpMM.
  __device__ __forceinline__ static void columns(const Args& a, int Gc, int cs, int64_t (&c)[TL],
                                                 int (&h)[TL], bool (&ok)[TL]) {
    const int64_t cbase = int64_t(blockIdx.y) * Gc * V * TL;
#pragma unroll
    for (int t = 0; t < TL; ++t) {
      c[t] = cbase + (int64_t(t) * Gc + cs) * V;
      ok[t] = c[t] < a.C;
      h[t] = ok[t] ? static_cast<int>(c[t] / a.D) : 0;
    }
  }

  __device__ __forceinline__ static void init(A (&acc)[TL][V]) {
#pragma unroll
    for (int t = 0; t < TL; ++t)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[t][e] = Red::init();
  }

  // Adds the messages of edges [k0, k1) to acc, in ascending k.
  __device__ __forceinline__ static void reduce(const Args& a, const int64_t (&c)[TL], const int (&h)[TL],
                                                const bool (&ok)[TL], int64_t k0, int64_t k1,
                                                A (&acc)[TL][V]) {
    // the column indices of the next batch are loaded while the current batch's rows are gathered
    // (int32 indices; 64-bit ones keep their batch, as in the float SpMM)
    I jn[U];
    auto indices = [&](int64_t k) {
#pragma unroll
      for (int u = 0; u < U; ++u) jn[u] = k + u < k1 ? __ldg(a.col + k + u) : I(0);
    };
    constexpr bool kPrefetch = sizeof(I) == 4;
    if constexpr (kPrefetch)
      if (k0 < k1) indices(k0);
    for (int64_t k = k0; k < k1; k += U) {
      if constexpr (!kPrefetch) indices(k);
      I j[U];
      A w[U][TL];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        j[u] = jn[u];
        const VT* wk = a.W + (k + u) * a.H;
#pragma unroll
        for (int t = 0; t < TL; ++t)
          w[u][t] = (ok[t] && k + u < k1) ? static_cast<A>(__ldg(wk + h[t])) : A(0);
      }
      Vec x[U][TL];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int t = 0; t < TL; ++t)
          if (ok[t] && k + u < k1)
            x[u][t] = *reinterpret_cast<const Vec*>(a.Z + static_cast<int64_t>(j[u]) * a.C + c[t]);
      if constexpr (kPrefetch)
        if (k + U < k1) indices(k + U);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (k + u >= k1) break;
#pragma unroll
        for (int t = 0; t < TL; ++t) {
          if (!ok[t]) continue;
#pragma unroll
          for (int e = 0; e < V; ++e) acc[t][e] += w[u][t] * to_acc<A>(x[u][t].v[e]);
        }
      }
    }
  }

  __device__ __forceinline__ static void write(T* __restrict__ out, int64_t row, int64_t C,
                                               const int64_t (&c)[TL], const bool (&ok)[TL], int64_t deg,
                                               const A (&acc)[TL][V]) {
#pragma unroll
    for (int t = 0; t < TL; ++t) {
      if (!ok[t]) continue;
      A o[V];
#pragma unroll
      for (int e = 0; e < V; ++e) o[e] = Red::write(acc[t][e], deg);
      store_vec<T, V>(out + row * C + c[t], o);
    }
  }

  // Edges [kb, ke) over a group of G = Gc * P lanes: lane set `sub / Gc` sums the part-th
  // contiguous slice, then a fixed xor-shuffle tree adds the slices (lower slice on the left).
  // Every lane of the group must call this; the sum is complete in the lanes of part 0.
  __device__ __forceinline__ static void reduce_split(const Args& a, const int64_t (&c)[TL], const int (&h)[TL],
                                                      const bool (&ok)[TL], int64_t kb, int64_t ke, int Gc,
                                                      int P, int sub, A (&acc)[TL][V]) {
    const int part = sub / Gc;
    const int64_t n = ke - kb;
    reduce(a, c, h, ok, kb + n * part / P, kb + n * (part + 1) / P, acc);
    if (P == 1) return;
    const int G = Gc * P;
    const unsigned mask = group_mask(G);
    for (int off = Gc; off < G; off <<= 1) {
      const bool left = (sub & off) == 0;
#pragma unroll
      for (int t = 0; t < TL; ++t)
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const A o = __shfl_xor_sync(mask, acc[t][e], off);
          int unused = -1;
          Red::merge(acc[t][e], unused, o, -1, left);
        }
    }
  }
};

// The hub pass's state: one partial sum per column of a slot.
template <class T>
struct HeadsCombine {
  using A = typename AccOf<T>::type;
  struct Params {
    const A* __restrict__ ws;
    T* __restrict__ out;
    int64_t C;
  };
  struct Part {
    A v;
  };
  static constexpr int kLoads = 8;  // slots a combine thread loads before folding them
  __host__ __device__ __forceinline__ static int64_t width(const Params& p) { return p.C; }
  // GNNSPARSE_CUDA_HUB_COMBINE=auto: by segments. By rows measured faster only for the float SpMM's
  // sums up to 16 columns (H100, 2026-12-07); a row here is H x D columns, and this combine was not
  // measured by rows.
  static bool prefers_rows(const Params&) { return false; }
  __device__ __forceinline__ static Part identity() { return {A(0)}; }
  __device__ __forceinline__ static Part load(const Params& p, int64_t slot, int64_t cc) {
    return {p.ws[slot * p.C + cc]};
  }
  __device__ __forceinline__ static void fold(Part& acc, const Part& nx) { acc.v += nx.v; }
  __device__ __forceinline__ static void write(const Params& p, int64_t r, int64_t cc, const Part& acc, int64_t,
                                               int64_t) {
    p.out[r * p.C + cc] = from_acc<T>(acc.v);  // a hub row is never empty
  }
};

// One warp per segment: Gc column lanes x 32 / Gc edge parts sum each hub piece of the segment
// into its workspace slot.
template <class T, class I, int V, int TL>
__global__ void __launch_bounds__(SpmmTuning::kBlockThreads)
heads_segment_kernel(typename HeadsAgent<T, I, V, TL>::Args a, int Gc, HubGeometry g,
                     typename AccOf<T>::type* __restrict__ ws) {
  using Ag = HeadsAgent<T, I, V, TL>;
  using A = typename Ag::A;
  if (*g.flag == 0) return;
  const int64_t s = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int sub = threadIdx.x % 32, cs = sub % Gc, P = 32 / Gc;
  if (s >= g.nsegments) return;
  int64_t c[TL];
  int h[TL];
  bool ok[TL];
  Ag::columns(a, Gc, cs, c, h, ok);
  hub_pieces(a.rowptr, g, s, [&](int slot, int64_t, int64_t kb, int64_t ke) {
    A acc[TL][V];
    Ag::init(acc);
    Ag::reduce_split(a, c, h, ok, kb, ke, Gc, P, sub, acc);
    if (sub >= Gc) return;
    const int64_t base = (s * 2 + slot) * a.C;
#pragma unroll
    for (int t = 0; t < TL; ++t) {
      if (!ok[t]) continue;
#pragma unroll
      for (int e = 0; e < V; ++e) ws[base + c[t] + e] = acc[t][e];
    }
  });
}

// One group of G = Gc * P lanes per row (Gc lanes over the columns, P lane sets over the row's
// edges, merged by a fixed shuffle tree). Hub rows (deg > hub_thr) are left to the hub pass; with
// P = 1, rows longer than kWarpRowMin are taken by the whole warp after its short rows.
template <class T, class I, int V, int TL>
__global__ void __launch_bounds__(SpmmTuning::kBlockThreads, (heads_row_min_blocks<T, I, V, TL>()))
heads_row_kernel(typename HeadsAgent<T, I, V, TL>::Args a, T* __restrict__ out, int64_t M, int Gc, int P,
                 int64_t hub_thr) {
  using Ag = HeadsAgent<T, I, V, TL>;
  using A = typename Ag::A;
  const int G = Gc * P;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G, lane = threadIdx.x % 32;
  int64_t k0 = 0, k1 = 0;
  if (row < M) {
    k0 = __ldg(a.rowptr + row);
    k1 = __ldg(a.rowptr + row + 1);
  }
  const int64_t deg = k1 - k0;
  const bool hub = hub_thr > 0 && deg > hub_thr;
  const bool warp_split = P == 1 && Gc < 32;
  const bool warp_row = warp_split && !hub && deg > SpmmTuning::kWarpRowMin;
  const int cs = sub % Gc, part = sub / Gc;
  int64_t c[TL];
  int h[TL];
  bool ok[TL];
  Ag::columns(a, Gc, cs, c, h, ok);
  A acc[TL][V];
  if (row < M && !hub && !warp_row) {
    Ag::init(acc);
    Ag::reduce_split(a, c, h, ok, k0, k1, Gc, P, sub, acc);
    if (part == 0) Ag::write(out, row, a.C, c, ok, deg, acc);
  }
  if (warp_split) {
    unsigned pending = __ballot_sync(0xffffffffu, warp_row && sub == 0);
    while (pending) {
      const int leader = __ffs(pending) - 1;
      pending &= pending - 1;
      const int64_t r = __shfl_sync(0xffffffffu, static_cast<long long>(row), leader);
      const int64_t kb = __shfl_sync(0xffffffffu, static_cast<long long>(k0), leader);
      const int64_t ke = __shfl_sync(0xffffffffu, static_cast<long long>(k1), leader);
      Ag::init(acc);
      Ag::reduce_split(a, c, h, ok, kb, ke, Gc, 32 / Gc, lane, acc);
      if (lane < Gc) Ag::write(out, r, a.C, c, ok, ke - kb, acc);
    }
  }
}

template <class T, class I, int V, int TL>
void launch_spmm_heads(const SpmmPlan& p, const SpmmHeadsArgs& s, cudaStream_t stream) {
  using A = typename AccOf<T>::type;
  using Ag = HeadsAgent<T, I, V, TL>;
  const typename Ag::Args a{static_cast<const I*>(s.A.rowptr), static_cast<const I*>(s.A.col),
                            static_cast<const typename Ag::VT*>(s.W), static_cast<const T*>(s.Z),
                            s.H, s.D, s.H * s.D};
  auto* out = static_cast<T*>(s.out);
  const int64_t M = s.A.M;
  HubWorkspace ws;
  if (p.hub.seg > 0) {
    const size_t slots = static_cast<size_t>(p.hub.nsegments) * 2 * static_cast<size_t>(a.C);
    ws.begin(p.hub, slots * sizeof(A), a.rowptr, M, s.A.nnz, s.A.max_degree, stream);
    A* wsv = ws.payload<A>();
    const dim3 grid(static_cast<unsigned>(p.segment_blocks), static_cast<unsigned>(p.col_blocks));
    heads_segment_kernel<T, I, V, TL><<<grid, SpmmTuning::kBlockThreads, 0, stream>>>(a, p.col_lanes,
                                                                                      ws.geometry(), wsv);
    GS_LAUNCH_CHECK("heads_segment_kernel");
    launch_hub_combine<HeadsCombine<T>>(p.hub, a.rowptr, ws, typename HeadsCombine<T>::Params{wsv, out, a.C},
                                        stream);
  }
  const dim3 grid(static_cast<unsigned>(p.row_blocks), static_cast<unsigned>(p.col_blocks));
  heads_row_kernel<T, I, V, TL><<<grid, SpmmTuning::kBlockThreads, 0, stream>>>(
      a, out, M, p.col_lanes, p.edge_parts, p.hub.row_limit());
  GS_LAUNCH_CHECK("heads_row_kernel");
  ws.end();
}

// Checks sizes and pointers; false when there is nothing to compute.
inline bool spmm_heads_has_work(const SpmmHeadsArgs& s) {
  const CsrView& A = s.A;
  if (A.M < 0 || A.K < 0 || A.nnz < 0 || s.H < 0 || s.D < 0)
    throw std::invalid_argument("gnnsparse cuda spmm_heads: negative size");
  if (A.M == 0 || s.H == 0 || s.D == 0) return false;
  if (s.H > 0x7fffffffLL) throw std::invalid_argument("gnnsparse cuda spmm_heads: more than 2^31 - 1 heads");
  if (A.rowptr == nullptr || s.out == nullptr ||
      (A.nnz > 0 && (A.col == nullptr || s.W == nullptr || s.Z == nullptr)))
    throw std::invalid_argument("gnnsparse cuda spmm_heads: null pointer");
  return true;
}

template <class T, class I>
void run_spmm_heads(const SpmmHeadsArgs& s, cudaStream_t stream) {
  if (!spmm_heads_has_work(s)) return;
  const bool aligned = reinterpret_cast<uintptr_t>(s.Z) % 16 == 0 && reinterpret_cast<uintptr_t>(s.out) % 16 == 0;
  const SpmmPlan p = plan_spmm_heads(s.A.M, s.A.nnz, s.H, s.D, s.A.max_degree, sizeof(T), aligned);
  check_grid("spmm_heads", {p.row_blocks, p.segment_blocks, p.hub.combine_blocks(), p.hub.map_blocks()},
             p.col_blocks);
  dispatch_vec<spmm_vec(sizeof(T))>(p.vec, [&](auto v) {
    constexpr int V = decltype(v)::value;
    if constexpr (V == 1) launch_spmm_heads<T, I, 1, SpmmTuning::kScalarColsPerLane>(p, s, stream);
    else if (p.per_lane == 1) launch_spmm_heads<T, I, V, 1>(p, s, stream);
    else launch_spmm_heads<T, I, V, SpmmTuning::kVecsPerLane>(p, s, stream);
  });
}

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

void spmm_heads(const SpmmHeadsArgs& s, cudaStream_t stream) {
  using namespace cuda_detail;
  check_precision(s.precision);
  dispatch_types(s.dtype, s.A.itype, [&](auto t, auto i) {
    run_spmm_heads<typename decltype(t)::type, typename decltype(i)::type>(s, stream);
  });
}

}  // namespace gnnsparse::cuda
