// CSR SpMM with sum / mean / max / min (+ argmax / argmin as edge indices), deterministic.
//
// Schedule (policy.cuh, plan_spmm): a group of G lanes per row; each lane owns TL vectors of V
// columns (V * sizeof(T) = 16 bytes when C and alignment allow; TL = 1 while a row fits in 32
// vectors, so one load instruction of the group gathers a whole row; on the scalar path, V = 1,
// TL = 3 to 5 columns chosen from C so that nearly all are real) and walks the row's edges
// in ascending order, U edges' loads in flight (gathers of X rows are the traffic; 16-bit
// features stay packed in registers until they are used). Hub rows (longer than the plan's
// threshold) take the hub pass of segments.cuh: spmm_segment_kernel reduces each (segment, hub
// row) piece into a workspace slot and launch_hub_combine<SpmmCombine> folds a hub row's slots
// in segment order. No atomics anywhere, so results are bitwise reproducible. (Row splitting as
// in Yang, Buluc, Owens, "Design principles for sparse matrix multiplication on the GPU",
// Euro-Par 2018.) Dense-ish fp32 sum / mean over rows with sorted columns may instead take the
// row-panel kernels of panel.cu (run_spmm asks spmm_panel first).
#include "common.cuh"
#include "dispatch.cuh"
#include "panel.cuh"
#include "policy.cuh"
#include "segments.cuh"
#include "gnnsparse/cuda.hpp"

namespace gnnsparse::cuda_detail {

// Row: the row kernel's agent (its edges-in-flight budget, spmm_unroll); false: the segment kernel's.
template <class T, class I, Reduce R, int V, int TL, bool Row>
struct SpmmAgent {
  using A = typename AccOf<T>::type;
  using VT = typename ValOf<T>::type;
  using Red = Reducer<A, R>;
  using Gv = GatherVec<T, V>;  // a gathered vector (16-bit T: as whole 32-bit words)
  static constexpr int U = spmm_unroll<TL, V, int(sizeof(T)), Red::kHasArg, Row>();
  // max / min keep the winning edge as an int32 offset from the start of the range a group
  // reduces (at most max(hub threshold, segment) <= 2^30 entries), widened once when written.
  using Arg = int32_t;

  // This lane's columns: c[t] .. c[t] + V - 1, valid when ok[t]. Vector t of the Gc lanes is
  // contiguous, so with TL = 1 one load instruction of the group covers the whole row.
  __device__ __forceinline__ static void columns(int64_t C, int Gc, int cs, int64_t (&c)[TL],
                                                 bool (&ok)[TL]) {
    const int64_t cbase = int64_t(blockIdx.y) * Gc * V * TL;
#pragma unroll
    for (int t = 0; t < TL; ++t) {
      c[t] = cbase + (int64_t(t) * Gc + cs) * V;
      ok[t] = c[t] < C;
    }
  }

  __device__ __forceinline__ static void init(A (&acc)[TL][V], Arg (&arg)[TL][V]) {
#pragma unroll
    for (int t = 0; t < TL; ++t)
#pragma unroll
      for (int e = 0; e < V; ++e) { acc[t][e] = Red::init(); arg[t][e] = -1; }
  }

  // Branch-free max / min step: take m unless the held value is NaN (the first NaN wins) or m is
  // not better (ties keep the earlier edge): for max !(m <= acc), true for m > acc and for a NaN
  // m. Nothing held yet (arg < 0) needs no test: acc starts at -inf (+inf for min), so the first
  // message is taken unless it equals that; a range whose messages all equal it gets its first
  // edge after the loop (reduce). Sum / mean add.
  __device__ __forceinline__ static void step(A& acc, Arg& arg, A m, Arg rel) {
    if constexpr (Red::kHasArg) {
      bool take;
      if constexpr (R == Reduce::max) take = !(m <= acc) & (acc == acc);
      else take = !(m >= acc) & (acc == acc);
      acc = take ? m : acc;
      arg = take ? rel : arg;
    } else {
      acc += m;
    }
  }

  // Reduce the messages of edges [k0, k1) into acc / arg, in ascending k; arg = k - kb.
  __device__ __forceinline__ static void reduce(const I* __restrict__ col,
                                                const VT* __restrict__ val,
                                                const T* __restrict__ X, int64_t C,
                                                const int64_t (&c)[TL], const bool (&ok)[TL],
                                                int64_t k0, int64_t k1, int64_t kb,
                                                A (&acc)[TL][V], Arg (&arg)[TL][V]) {
    const bool weighted = val != nullptr;
    // the column indices of the batch at k, loaded one batch ahead (with the previous batch's
    // gathers in flight); the values come with their own batch's gathers
    I jn[U];
    auto indices = [&](int64_t k) {
#pragma unroll
      for (int u = 0; u < U; ++u) jn[u] = k + u < k1 ? __ldg(col + k + u) : I(0);
    };
    // max / min and 64-bit indices keep the indices in their batch (the register cap of their
    // resident blocks: prefetched, they spilled 52-164 bytes)
    constexpr bool kPrefetch = !Red::kHasArg && sizeof(I) == 4;
    if constexpr (kPrefetch)
      if (k0 < k1) indices(k0);
    for (int64_t k = k0; k < k1; k += U) {
      if constexpr (!kPrefetch) indices(k);
      I j[U];
      A w[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        j[u] = jn[u];
        w[u] = (weighted && k + u < k1) ? static_cast<A>(__ldg(val + k + u)) : A(1);
      }
      // the U x TL gathers, all issued before the first is used
      Gv x[U][TL];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int t = 0; t < TL; ++t)
          if (ok[t] && k + u < k1) x[u][t] = load_gather<T, V>(X + static_cast<int64_t>(j[u]) * C + c[t]);
      if constexpr (kPrefetch)
        if (k + U < k1) indices(k + U);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (k + u >= k1) break;
#pragma unroll
        for (int t = 0; t < TL; ++t) {
          if (!ok[t]) continue;
#pragma unroll
          for (int e = 0; e < V; ++e) {
            const A xv = gather_elem<A>(x[u][t], e);
            const A m = weighted ? w[u] * xv : xv;
            step(acc[t][e], arg[t][e], m, static_cast<Arg>(k + u - kb));
          }
        }
      }
    }
    if constexpr (Red::kHasArg) {  // every message equal to the initial value: the first edge
      if (k1 > k0) {
#pragma unroll
        for (int t = 0; t < TL; ++t)
#pragma unroll
          for (int e = 0; e < V; ++e)
            if (arg[t][e] < 0) arg[t][e] = static_cast<Arg>(k0 - kb);
      }
    }
  }

  // Writes row `row`: values, and for max / min the args (kb + offset, -1 for an empty row), as
  // 16-byte pairs when V is even and argout is 16-byte aligned.
  __device__ __forceinline__ static void write(T* __restrict__ Y, int64_t* __restrict__ argout,
                                               int64_t row, int64_t C, const int64_t (&c)[TL],
                                               const bool (&ok)[TL], int64_t deg, int64_t kb,
                                               const A (&acc)[TL][V], const Arg (&arg)[TL][V]) {
#pragma unroll
    for (int t = 0; t < TL; ++t) {
      if (!ok[t]) continue;
      A out[V];
#pragma unroll
      for (int e = 0; e < V; ++e) out[e] = Red::write(acc[t][e], deg);
      store_packed<T, V>(Y + row * C + c[t], out);
      if constexpr (Red::kHasArg) {
        if (argout != nullptr) {
          int64_t g[V];
#pragma unroll
          for (int e = 0; e < V; ++e) g[e] = deg == 0 ? -1 : kb + arg[t][e];
          int64_t* dst = argout + row * C + c[t];
          if constexpr (V % 2 == 0) {
            if ((reinterpret_cast<uintptr_t>(argout) & 15) == 0) {
#pragma unroll
              for (int e = 0; e < V; e += 2)
                *reinterpret_cast<longlong2*>(dst + e) = make_longlong2(g[e], g[e + 1]);
              continue;
            }
          }
#pragma unroll
          for (int e = 0; e < V; ++e) dst[e] = g[e];
        }
      }
    }
  }

  // Edges [kb, ke) over a group of G = Gc * P lanes: lane set `part = sub / Gc` reduces the
  // part-th contiguous slice, then a fixed xor-shuffle tree merges the slices (the lower slice
  // holds the smaller edge indices, so ties still go to the smallest k). Every lane of the group
  // must call this; the result is complete in the lanes of part 0.
  __device__ __forceinline__ static void reduce_split(const I* __restrict__ col,
                                                      const VT* __restrict__ val,
                                                      const T* __restrict__ X, int64_t C,
                                                      const int64_t (&c)[TL], const bool (&ok)[TL],
                                                      int64_t kb, int64_t ke, int Gc, int P,
                                                      int sub, A (&acc)[TL][V],
                                                      Arg (&arg)[TL][V]) {
    const int part = sub / Gc;
    const int64_t n = ke - kb;
    reduce(col, val, X, C, c, ok, kb + n * part / P, kb + n * (part + 1) / P, kb, acc, arg);
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
          Arg oa = -1;
          if constexpr (Red::kHasArg) oa = __shfl_xor_sync(mask, arg[t][e], off);
          Red::merge(acc[t][e], arg[t][e], o, oa, left);
        }
    }
  }
};

// The hub pass's state of SpMM: one value (and arg) per column of a slot.
template <class T, Reduce R>
struct SpmmCombine {
  using A = typename AccOf<T>::type;
  using Red = Reducer<A, R>;
  struct Params {
    const A* __restrict__ wsv;
    const int64_t* __restrict__ wsa;  // max / min only
    T* __restrict__ Y;
    int64_t* __restrict__ arg;
    int64_t C;
  };
  // max / min carry the winning edge; sums only the value
  struct ArgPart {
    A v;
    int64_t arg;
  };
  struct SumPart {
    A v;
  };
  using Part = std::conditional_t<Red::kHasArg, ArgPart, SumPart>;
  static constexpr int kLoads = 8;  // slots a combine thread loads before folding them
  __host__ __device__ __forceinline__ static int64_t width(const Params& p) { return p.C; }
  // GNNSPARSE_CUDA_HUB_COMBINE=auto: by rows only for sums and means up to kCombineRowsSumWidth
  // columns, the one case it measured faster (H100, 2026-12-07: C = 16 369 vs 414 us; C = 32 and 128
  // the same); max / min, a value and an arg per column, measured 8-14 % slower by rows.
  static bool prefers_rows(const Params& p) { return !Red::kHasArg && p.C <= SegmentTuning::kCombineRowsSumWidth; }
  __device__ __forceinline__ static Part identity() {
    if constexpr (Red::kHasArg) return {Red::init(), -1};
    else return {Red::init()};
  }
  __device__ __forceinline__ static Part load(const Params& p, int64_t slot, int64_t cc) {
    if constexpr (Red::kHasArg) return {p.wsv[slot * p.C + cc], p.wsa[slot * p.C + cc]};
    else return {p.wsv[slot * p.C + cc]};
  }
  __device__ __forceinline__ static void fold(Part& acc, const Part& nx) {
    if constexpr (Red::kHasArg) Red::merge(acc.v, acc.arg, nx.v, nx.arg, true);
    else acc.v += nx.v;
  }
  __device__ __forceinline__ static void write(const Params& p, int64_t r, int64_t cc, const Part& acc,
                                               int64_t deg, int64_t) {
    p.Y[r * p.C + cc] = from_acc<T>(Red::write(acc.v, deg));
    if constexpr (Red::kHasArg)
      if (p.arg != nullptr) p.arg[r * p.C + cc] = acc.arg;
  }
};

// Resident blocks the row kernel asks the register allocator for (4- and 2-byte features; fp64
// is left free), each the most that compiles without spilling for sm_90: kRowMinBlocks (<= 80
// registers) for 4-byte sum / mean and for the scalar path; kRowMinBlocksArg (<= 64) for 4-byte
// max / min on the vector path (one vector per lane); kRowMinBlocksWide (<= 128) for max / min on
// the scalar path and for 2-byte features on the vector path (8 accumulators per vector). Below
// sm_90 one block fewer for the fp32 one-vector instances that spilled there at these values
// (arch_min_blocks; nvcc 13.0, sm_80: sum / mean with int32 indices 12 bytes, max / min with int64
// indices 16).
template <class T, class I, Reduce R, int V, int TL> constexpr int spmm_row_min_blocks() {
  constexpr int sm90 = sizeof(T) > 4              ? 1
                       : V > 1 && sizeof(T) < 4 ? SpmmTuning::kRowMinBlocksWide
                       : !has_arg(R)            ? SpmmTuning::kRowMinBlocks
                       : V == 1                 ? SpmmTuning::kRowMinBlocksWide
                                                : SpmmTuning::kRowMinBlocksArg;
  return arch_min_blocks(sm90, sizeof(T) == 4 && V == 4 && TL == 1 && sizeof(I) == (has_arg(R) ? 8 : 4));
}

// One warp per segment: Gc column lanes x 32 / Gc edge parts reduce each hub piece of the segment
// (reduce_split) into its workspace slot.
template <class T, class I, Reduce R, int V, int TL>
__global__ void __launch_bounds__(SpmmTuning::kBlockThreads)
spmm_segment_kernel(const I* __restrict__ rowptr, const I* __restrict__ col,
                    const typename ValOf<T>::type* __restrict__ val, const T* __restrict__ X,
                    int64_t C, int Gc, HubGeometry g, typename AccOf<T>::type* __restrict__ wsv,
                    int64_t* __restrict__ wsa) {
  using Ag = SpmmAgent<T, I, R, V, TL, false>;
  using A = typename Ag::A;
  if (*g.flag == 0) return;
  const int64_t s = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int sub = threadIdx.x % 32, cs = sub % Gc, P = 32 / Gc;
  if (s >= g.nsegments) return;
  int64_t c[TL];
  bool ok[TL];
  Ag::columns(C, Gc, cs, c, ok);
  hub_pieces(rowptr, g, s, [&](int slot, int64_t, int64_t kb, int64_t ke) {
    A acc[TL][V];
    typename Ag::Arg arg[TL][V];
    Ag::init(acc, arg);
    Ag::reduce_split(col, val, X, C, c, ok, kb, ke, Gc, P, sub, acc, arg);
    if (sub >= Gc) return;
    const int64_t base = (s * 2 + slot) * C;
#pragma unroll
    for (int t = 0; t < TL; ++t) {
      if (!ok[t]) continue;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        wsv[base + c[t] + e] = acc[t][e];
        if constexpr (Ag::Red::kHasArg) wsa[base + c[t] + e] = arg[t][e] < 0 ? -1 : kb + arg[t][e];
      }
    }
  });
}

// One group of G = Gc * P lanes per row: Gc lanes split the columns, P lane sets split the
// row's edges into contiguous parts, merged by a fixed xor-shuffle tree (lower part = smaller
// edge indices, so ties still go to the smallest k). Hub rows (deg > hub_thr) are left to the
// hub pass; with P = 1, rows longer than kWarpRowMin are taken by the whole warp.
template <class T, class I, Reduce R, int V, int TL>
__global__ void __launch_bounds__(SpmmTuning::kBlockThreads, (spmm_row_min_blocks<T, I, R, V, TL>()))
spmm_row_kernel(const I* __restrict__ rowptr, const I* __restrict__ col,
                const typename ValOf<T>::type* __restrict__ val, const T* __restrict__ X,
                T* __restrict__ Y, int64_t* __restrict__ argout, int64_t M, int64_t C, int Gc,
                int P, int64_t hub_thr, const bool* __restrict__ skip) {
  using Ag = SpmmAgent<T, I, R, V, TL, true>;
  using A = typename Ag::A;
  if (skip != nullptr && *skip) return;  // SpmmArgs::skip: the call writes nothing
  const int G = Gc * P;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G, lane = threadIdx.x % 32;
  int64_t k0 = 0, k1 = 0;
  if (row < M) {
    k0 = __ldg(rowptr + row);
    k1 = __ldg(rowptr + row + 1);
  }
  const int64_t deg = k1 - k0;
  const bool hub = hub_thr > 0 && deg > hub_thr;  // left to the hub pass
  // Without an edge split in the plan, rows longer than kWarpRowMin are taken by the whole warp
  // after its short rows (warp-level balancing for skewed degrees).
  const bool warp_split = P == 1 && Gc < 32;
  const bool warp_row = warp_split && !hub && deg > SpmmTuning::kWarpRowMin;
  const int cs = sub % Gc, part = sub / Gc;
  int64_t c[TL];
  bool ok[TL];
  Ag::columns(C, Gc, cs, c, ok);
  A acc[TL][V];
  typename Ag::Arg arg[TL][V];
  if (row < M && !hub && !warp_row) {
    Ag::init(acc, arg);
    Ag::reduce_split(col, val, X, C, c, ok, k0, k1, Gc, P, sub, acc, arg);
    if (part == 0) Ag::write(Y, argout, row, C, c, ok, deg, k0, acc, arg);
  }
  if (warp_split) {
    unsigned pending = __ballot_sync(0xffffffffu, warp_row && sub == 0);
    while (pending) {
      const int leader = __ffs(pending) - 1;
      pending &= pending - 1;
      const int64_t r = __shfl_sync(0xffffffffu, static_cast<long long>(row), leader);
      const int64_t kb = __shfl_sync(0xffffffffu, static_cast<long long>(k0), leader);
      const int64_t ke = __shfl_sync(0xffffffffu, static_cast<long long>(k1), leader);
      Ag::init(acc, arg);
      Ag::reduce_split(col, val, X, C, c, ok, kb, ke, Gc, 32 / Gc, lane, acc, arg);
      if (lane < Gc) Ag::write(Y, argout, r, C, c, ok, ke - kb, kb, acc, arg);
    }
  }
}

int env_choice(const char* name, std::initializer_list<int> allowed);  // panel.cu

// GNNSPARSE_CUDA_ROW_BLOCK: the threads of a row-kernel block of the SpMM and the quantized SpMM
// (64, 128 or 256; unset or "": `dflt`, the policy's), for the bench. A block stays resident until
// its longest row is done, so on a skewed graph smaller blocks hold fewer idle warps.
int row_block_threads(int dflt) {
  const int v = env_choice("GNNSPARSE_CUDA_ROW_BLOCK", {64, 128, 256});
  return v != 0 ? v : dflt;
}

template <class T, class I, Reduce R, int V, int TL>
void launch_spmm(const SpmmPlan& p, const SpmmArgs& a, cudaStream_t stream) {
  using A = typename AccOf<T>::type;
  using Cmb = SpmmCombine<T, R>;
  constexpr bool has_arg = Reducer<A, R>::kHasArg;
  const auto* rp = static_cast<const I*>(a.A.rowptr);
  const auto* cp = static_cast<const I*>(a.A.col);
  const auto* vp = static_cast<const typename ValOf<T>::type*>(a.A.val);
  const auto* xp = static_cast<const T*>(a.X);
  auto* yp = static_cast<T*>(a.Y);
  const int64_t M = a.A.M, nnz = a.A.nnz, C = a.C;
  // the hub pass on its own stream (segments.cuh, HubStream) while the row kernel runs on this one
  HubStream hs(stream, p.hub.seg > 0 && a.A.max_degree > p.hub.thr);
  HubWorkspace ws;
  if (p.hub.seg > 0) {
    const cudaStream_t hub = hs.stream();
    const size_t slots = static_cast<size_t>(p.hub.nsegments) * 2 * static_cast<size_t>(C);
    ws.begin(p.hub, slots * sizeof(A) + (has_arg ? slots * sizeof(int64_t) : 0), rp, M, nnz, a.A.max_degree,
             hub, a.skip);
    A* wsv = ws.payload<A>();
    int64_t* wsa = has_arg ? ws.payload<int64_t>(slots * sizeof(A)) : nullptr;
    const dim3 grid(static_cast<unsigned>(p.segment_blocks), static_cast<unsigned>(p.col_blocks));
    spmm_segment_kernel<T, I, R, V, TL><<<grid, SpmmTuning::kBlockThreads, 0, hub>>>(
        rp, cp, vp, xp, C, p.col_lanes, ws.geometry(), wsv, wsa);
    GS_LAUNCH_CHECK("spmm_segment_kernel");
    launch_hub_combine<Cmb>(p.hub, rp, ws, typename Cmb::Params{wsv, wsa, yp, a.arg, C}, hub);
    ws.end();
  }
  const int threads = row_block_threads(SpmmTuning::kRowBlockThreads);
  const int64_t row_blocks = (M + threads / p.group - 1) / (threads / p.group);
  check_grid("spmm", {row_blocks}, p.col_blocks);
  const dim3 grid(static_cast<unsigned>(row_blocks), static_cast<unsigned>(p.col_blocks));
  spmm_row_kernel<T, I, R, V, TL><<<grid, threads, 0, stream>>>(
      rp, cp, vp, xp, yp, a.arg, M, C, p.col_lanes, p.edge_parts, p.hub.row_limit(), a.skip);
  GS_LAUNCH_CHECK("spmm_row_kernel");
  hs.join();
}

// Checks sizes and pointers; false when there is nothing to compute.
inline bool spmm_has_work(const SpmmArgs& a) {
  const CsrView& A = a.A;
  if (A.M < 0 || A.K < 0 || a.C < 0 || A.nnz < 0)
    throw std::invalid_argument("gnnsparse cuda spmm: negative size");
  if (A.M == 0 || a.C == 0) return false;
  if (A.rowptr == nullptr || a.Y == nullptr || (A.nnz > 0 && (A.col == nullptr || a.X == nullptr)))
    throw std::invalid_argument("gnnsparse cuda spmm: null pointer");
  return true;
}

template <class T, class I, Reduce R>
void run_spmm(const SpmmArgs& a, cudaStream_t stream) {
  if (!spmm_has_work(a)) return;
  // dense-ish fp32 sum / mean: the row-panel kernels (panel.cu) where the policy takes them
  if constexpr (std::is_same_v<T, float> && (R == Reduce::sum || R == Reduce::mean))
    if (spmm_panel<I>(a, R == Reduce::mean, stream)) return;
  const bool aligned = reinterpret_cast<uintptr_t>(a.X) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(a.Y) % 16 == 0;
  const SpmmPlan p = plan_spmm(a.A.M, a.A.nnz, a.C, a.A.max_degree, sizeof(T), aligned, has_arg(R), true);
  check_grid("spmm", {p.row_blocks, p.segment_blocks, p.hub.combine_blocks(), p.hub.map_blocks()}, p.col_blocks);
  dispatch_vec<spmm_vec(sizeof(T))>(p.vec, [&](auto v) {
    constexpr int V = decltype(v)::value;
    if constexpr (V == 1) {  // columns per lane from C (plan_spmm, spmm_scalar_cols): 3, 4 or 5
      if (p.per_lane == 3) launch_spmm<T, I, R, 1, 3>(p, a, stream);
      else if (p.per_lane == 4) launch_spmm<T, I, R, 1, 4>(p, a, stream);
      else launch_spmm<T, I, R, 1, SpmmTuning::kScalarColsPerLane>(p, a, stream);
    } else {
      if (has_arg(R) || p.per_lane == 1) launch_spmm<T, I, R, V, 1>(p, a, stream);  // max / min: TL = 1
      else if constexpr (!has_arg(R)) launch_spmm<T, I, R, V, SpmmTuning::kVecsPerLane>(p, a, stream);
    }
  });
}

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

void spmm(const SpmmArgs& a, cudaStream_t stream) {
  using namespace cuda_detail;
  check_precision(a.precision);
  dispatch_types(a.dtype, a.A.itype, [&](auto t, auto i) {
    dispatch_reduce(a.reduce, [&](auto r) {
      run_spmm<typename decltype(t)::type, typename decltype(i)::type, decltype(r)::value>(a, stream);
    });
  });
}

}  // namespace gnnsparse::cuda
