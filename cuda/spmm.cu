// CSR SpMM with sum / mean / max / min (+ argmax / argmin as edge indices), deterministic.
//
// Schedule (policy.cuh, plan_spmm): a group of G lanes per row; each lane owns
// kColVecsPerLane vectors of V columns (V * sizeof(T) = 16 bytes when C and alignment allow)
// and walks the row's edges in ascending order, kept U edges in flight (gathers of X rows are
// the traffic). Hub rows (longer than the plan's threshold) are not walked by one group: the hub
// pass of segments.cuh cuts the nnz range into fixed segments, spmm_segment_kernel reduces each
// (segment, hub row) piece into a workspace slot, and spmm_combine_kernel merges a hub row's
// slots in segment order. No atomics anywhere, so results are bitwise reproducible. (Row
// splitting as in Yang, Buluc, Owens, "Design principles for sparse matrix multiplication on the
// GPU", Euro-Par 2018.)
#include "common.cuh"
#include "dispatch.cuh"
#include "policy.cuh"
#include "segments.cuh"
#include "gnnsparse/cuda.hpp"

namespace gnnsparse::cuda_detail {

template <class T, class I, Reduce R, int V>
struct SpmmAgent {
  using A = typename AccOf<T>::type;
  using VT = typename ValOf<T>::type;
  using Red = Reducer<A, R>;
  static constexpr int TL = SpmmTuning::kColVecsPerLane;
  static constexpr int U = spmm_unroll<V>();

  // This lane's columns: c[t] .. c[t] + V - 1, valid when ok[t].
  __device__ __forceinline__ static void columns(int64_t C, int Gc, int cs, int64_t (&c)[TL],
                                                 bool (&ok)[TL]) {
    const int64_t cbase = int64_t(blockIdx.y) * Gc * V * TL;
#pragma unroll
    for (int t = 0; t < TL; ++t) {
      c[t] = cbase + (int64_t(t) * Gc + cs) * V;
      ok[t] = c[t] < C;
    }
  }

  __device__ __forceinline__ static void init(A (&acc)[TL][V], int64_t (&arg)[TL][V]) {
#pragma unroll
    for (int t = 0; t < TL; ++t)
#pragma unroll
      for (int e = 0; e < V; ++e) { acc[t][e] = Red::init(); arg[t][e] = -1; }
  }

  // Reduce the messages of edges [k0, k1) into acc / arg, in ascending k.
  __device__ __forceinline__ static void reduce(const I* __restrict__ col,
                                                const VT* __restrict__ val,
                                                const T* __restrict__ X, int64_t C,
                                                const int64_t (&c)[TL], const bool (&ok)[TL],
                                                int64_t k0, int64_t k1, A (&acc)[TL][V],
                                                int64_t (&arg)[TL][V]) {
    const bool weighted = val != nullptr;
    for (int64_t k = k0; k < k1; k += U) {
      int64_t j[U];
      A w[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t kk = k + u;
        j[u] = kk < k1 ? static_cast<int64_t>(__ldg(col + kk)) : 0;
        w[u] = A(1);
        if (weighted && kk < k1) w[u] = static_cast<A>(__ldg(val + kk));
      }
      A x[U][TL][V];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int t = 0; t < TL; ++t)
          if (ok[t] && k + u < k1) load_vec<T, V>(X + j[u] * C + c[t], x[u][t]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (k + u >= k1) break;
#pragma unroll
        for (int t = 0; t < TL; ++t) {
          if (!ok[t]) continue;
#pragma unroll
          for (int e = 0; e < V; ++e) {
            const A m = weighted ? w[u] * x[u][t][e] : x[u][t][e];
            Red::update(acc[t][e], arg[t][e], m, k + u);
          }
        }
      }
    }
  }

  __device__ __forceinline__ static void write(T* __restrict__ Y, int64_t* __restrict__ argout,
                                               int64_t row, int64_t C, const int64_t (&c)[TL],
                                               const bool (&ok)[TL], int64_t deg,
                                               const A (&acc)[TL][V], const int64_t (&arg)[TL][V]) {
#pragma unroll
    for (int t = 0; t < TL; ++t) {
      if (!ok[t]) continue;
      A out[V];
#pragma unroll
      for (int e = 0; e < V; ++e) out[e] = Red::write(acc[t][e], deg);
      store_vec<T, V>(Y + row * C + c[t], out);
      if constexpr (Red::kHasArg) {
        if (argout != nullptr) {
#pragma unroll
          for (int e = 0; e < V; ++e) argout[row * C + c[t] + e] = deg == 0 ? -1 : arg[t][e];
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
                                                      int64_t (&arg)[TL][V]) {
    const int part = sub / Gc;
    const int64_t n = ke - kb;
    reduce(col, val, X, C, c, ok, kb + n * part / P, kb + n * (part + 1) / P, acc, arg);
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
          if constexpr (Red::kHasArg) {
            const int64_t oa = static_cast<int64_t>(
                __shfl_xor_sync(mask, static_cast<long long>(arg[t][e]), off));
            const A la = left ? acc[t][e] : o, ra = left ? o : acc[t][e];
            const int64_t lg = left ? arg[t][e] : oa, rg = left ? oa : arg[t][e];
            const bool take_right = rg >= 0 && (lg < 0 || Red::better(ra, la));
            acc[t][e] = take_right ? ra : la;
            arg[t][e] = take_right ? rg : lg;
          } else {
            acc[t][e] = left ? acc[t][e] + o : o + acc[t][e];
          }
        }
    }
  }
};

// One warp per segment: Gc column lanes x 32 / Gc edge parts reduce each hub piece of the segment
// (reduce_split) into its workspace slot.
template <class T, class I, Reduce R, int V>
__global__ void __launch_bounds__(SpmmTuning::kBlockThreads)
spmm_segment_kernel(const I* __restrict__ rowptr, const I* __restrict__ col,
                    const typename ValOf<T>::type* __restrict__ val, const T* __restrict__ X,
                    int64_t M, int64_t C, int64_t nnz, int Gc, int64_t seg, int64_t nsegments,
                    typename AccOf<T>::type* __restrict__ wsv, int64_t* __restrict__ wsa,
                    const int* __restrict__ has_hub) {
  using Ag = SpmmAgent<T, I, R, V>;
  using A = typename Ag::A;
  constexpr int TL = Ag::TL;
  if (*has_hub == 0) return;
  const int64_t s = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int sub = threadIdx.x % 32, cs = sub % Gc, P = 32 / Gc;
  if (s >= nsegments) return;
  const SegmentRows sr = segment_rows(rowptr, M, nnz, seg, s);
  int64_t c[TL];
  bool ok[TL];
  Ag::columns(C, Gc, cs, c, ok);
  for_each_hub_piece(rowptr, sr, seg, [&](int slot, int64_t, int64_t kb, int64_t ke) {
    A acc[TL][V];
    int64_t arg[TL][V];
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
        if constexpr (Ag::Red::kHasArg) wsa[base + c[t] + e] = arg[t][e];
      }
    }
  });
}

// One group of G = Gc * P lanes per row: Gc lanes split the columns, P lane sets split the
// row's edges into contiguous parts, merged by a fixed xor-shuffle tree (lower part = smaller
// edge indices, so ties still go to the smallest k). Hub rows (deg > hub_thr) are left to the
// hub pass; with P = 1, rows longer than kWarpRowMin are taken by the whole warp.
template <class T, class I, Reduce R, int V>
__global__ void __launch_bounds__(SpmmTuning::kBlockThreads,
                                  (std::is_same_v<T, float> && (R == Reduce::sum || R == Reduce::mean))
                                      ? SpmmTuning::kRowMinBlocks : 1)
spmm_row_kernel(const I* __restrict__ rowptr, const I* __restrict__ col,
                const typename ValOf<T>::type* __restrict__ val, const T* __restrict__ X,
                T* __restrict__ Y, int64_t* __restrict__ argout, int64_t M, int64_t C, int Gc,
                int P, int64_t hub_thr) {
  using Ag = SpmmAgent<T, I, R, V>;
  using A = typename Ag::A;
  constexpr int TL = Ag::TL;
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
  int64_t arg[TL][V];
  if (row < M && !hub && !warp_row) {
    Ag::init(acc, arg);
    Ag::reduce_split(col, val, X, C, c, ok, k0, k1, Gc, P, sub, acc, arg);
    if (part == 0) Ag::write(Y, argout, row, C, c, ok, deg, acc, arg);
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
      if (lane < Gc) Ag::write(Y, argout, r, C, c, ok, ke - kb, acc, arg);
    }
  }
}

// Hub rows: block b looks at segments NW b .. NW b + NW - 1 (one warp each) for hub rows that start
// in them, and merges each such row's segment partials: thread (p, column) folds a contiguous
// range of segments in order, then the P per-thread results are folded in order p = 0, 1, ... — a
// fixed order, so deterministic.
template <class T, class I, Reduce R>
__global__ void __launch_bounds__(SpmmTuning::kCombineThreads)
spmm_combine_kernel(const I* __restrict__ rowptr, T* __restrict__ Y, int64_t* __restrict__ argout,
                    int64_t M, int64_t C, int64_t nnz, int64_t seg, int64_t nsegments,
                    const typename AccOf<T>::type* __restrict__ wsv,
                    const int64_t* __restrict__ wsa, const int* __restrict__ has_hub) {
  using A = typename AccOf<T>::type;
  using Red = Reducer<A, R>;
  if (*has_hub == 0) return;
  constexpr int NT = SpmmTuning::kCombineThreads, NW = NT / 32;
  __shared__ int64_t rows[NW];
  __shared__ A sacc[NT];
  __shared__ int64_t sarg[Red::kHasArg ? NT : 1];
  const int tid = threadIdx.x;
  hub_rows_starting_in_block<NW>(rowptr, M, nnz, seg, seg, nsegments, rows);
  for (int w = 0; w < NW; ++w) {
    const int64_t r = rows[w];
    if (r < 0) continue;
    const int64_t k0 = rowptr[r], k1 = rowptr[r + 1], deg = k1 - k0;
    const int64_t c0 = k0 / seg, n = (k1 - 1) / seg - c0 + 1;  // the row's segments: c0 .. c0 + n - 1
    const int64_t CT = C < NT ? C : NT;
    const int64_t P = NT / CT;
    for (int64_t cb = 0; cb < C; cb += CT) {
      const int64_t cidx = tid % CT, part = tid / CT, cc = cb + cidx;
      const bool active = part < P && cc < C;
      A acc = Red::init();
      int64_t arg = -1;
      if (active) {
        const int64_t q0 = n * part / P, q1 = n * (part + 1) / P;
#pragma unroll 8
        for (int64_t q = q0; q < q1; ++q) {
          const int64_t s = c0 + q, slot = hub_slot(s, seg, k0);
          const int64_t at = (s * 2 + slot) * C + cc;
          if constexpr (Red::kHasArg) Red::merge(acc, arg, wsv[at], wsa[at]);
          else acc += wsv[at];
        }
      }
      sacc[tid] = acc;
      if constexpr (Red::kHasArg) sarg[tid] = arg;
      __syncthreads();
      if (tid < CT && cc < C) {
        for (int64_t q = 1; q < P; ++q) {
          if constexpr (Red::kHasArg) {
            const int64_t oa = sarg[q * CT + tid];
            if (oa >= 0) Red::merge(acc, arg, sacc[q * CT + tid], oa);
          } else {
            acc += sacc[q * CT + tid];
          }
        }
        Y[r * C + cc] = from_acc<T>(Red::write(acc, deg));
        if constexpr (Red::kHasArg)
          if (argout != nullptr) argout[r * C + cc] = arg;
      }
      __syncthreads();
    }
  }
}

template <class T, class I, Reduce R, int V>
void launch_spmm(const SpmmPlan& p, const SpmmArgs& a, cudaStream_t stream) {
  using A = typename AccOf<T>::type;
  constexpr bool has_arg = Reducer<A, R>::kHasArg;
  const auto* rp = static_cast<const I*>(a.A.rowptr);
  const auto* cp = static_cast<const I*>(a.A.col);
  const auto* vp = static_cast<const typename ValOf<T>::type*>(a.A.val);
  const auto* xp = static_cast<const T*>(a.X);
  auto* yp = static_cast<T*>(a.Y);
  const int64_t M = a.A.M, nnz = a.A.nnz, C = a.C;
  HubWorkspace ws;
  if (p.hub.seg > 0) {
    const size_t slots = static_cast<size_t>(p.hub.nsegments) * 2 * static_cast<size_t>(C);
    ws.begin(slots * sizeof(A) + (has_arg ? slots * sizeof(int64_t) : 0), rp, M, p.hub.thr, stream);
    A* wsv = ws.payload<A>();
    int64_t* wsa = has_arg ? ws.payload<int64_t>(slots * sizeof(A)) : nullptr;
    const dim3 grid(static_cast<unsigned>(p.segment_blocks), static_cast<unsigned>(p.col_blocks));
    spmm_segment_kernel<T, I, R, V><<<grid, SpmmTuning::kBlockThreads, 0, stream>>>(
        rp, cp, vp, xp, M, C, nnz, p.col_lanes, p.hub.seg, p.hub.nsegments, wsv, wsa, ws.flag());
    GS_LAUNCH_CHECK("spmm_segment_kernel");
    spmm_combine_kernel<T, I, R><<<static_cast<unsigned>(p.combine_blocks),
                                   SpmmTuning::kCombineThreads, 0, stream>>>(
        rp, yp, a.arg, M, C, nnz, p.hub.seg, p.hub.nsegments, wsv, wsa, ws.flag());
    GS_LAUNCH_CHECK("spmm_combine_kernel");
  }
  const dim3 grid(static_cast<unsigned>(p.row_blocks), static_cast<unsigned>(p.col_blocks));
  spmm_row_kernel<T, I, R, V><<<grid, SpmmTuning::kBlockThreads, 0, stream>>>(
      rp, cp, vp, xp, yp, a.arg, M, C, p.col_lanes, p.edge_parts, p.hub.row_limit());
  GS_LAUNCH_CHECK("spmm_row_kernel");
  ws.end();
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
  const bool aligned = reinterpret_cast<uintptr_t>(a.X) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(a.Y) % 16 == 0;
  const SpmmPlan p = plan_spmm(a.A.M, a.A.nnz, a.C, a.A.max_degree, sizeof(T), aligned);
  check_grid("spmm", {p.row_blocks, p.segment_blocks, p.combine_blocks}, p.col_blocks);
  dispatch_vec<16 / sizeof(T)>(p.vec, [&](auto v) { launch_spmm<T, I, R, decltype(v)::value>(p, a, stream); });
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
