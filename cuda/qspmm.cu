// Quantized SpMM over int8 / int4 features (contract: gnnsparse/quant.hpp), which also serves the
// incidence SpMM (identity_col: row v aggregates its own edges' rows, no index array) and the
// multi-head aggregation (per-head edge weights W, every head in one launch).
//
// Schedule (plan_qspmm): a group of G = Gc * P lanes per row. Gc lanes split the row's features
// into vectors of CPL quantized features (16 int8 = 16 bytes, or 16 int4 = 8 bytes, per load when
// shapes and alignment allow; see QVec); P lane sets split the row's edges into contiguous parts
// (only for long average rows), merged at the end by a fixed xor-shuffle tree whose lower half
// always holds the smaller edge indices. Each lane keeps U edges' loads in flight. Hub rows
// (longer than the plan's threshold) take the hub pass of segments.cuh, as the float SpMM's do:
// fixed segments of the nnz range reduced by one warp each into workspace slots, folded per hub
// row in segment order by a combine kernel. Messages are
// integers (no edge weights: exact int32 / int64 sums, integer max / min) or float32 w * q
// (weights); the scale is applied once per output element. Gathers of X rows are the traffic:
// a quarter (int8) or an eighth (int4) of the float32 bytes. No atomics: bitwise reproducible.
#include "quant_common.cuh"
#include "policy.cuh"
#include "segments.cuh"
#include "gnnsparse/cuda_quant.hpp"

namespace gnnsparse::cuda_detail {

struct QSpmmTuning {
  static constexpr int kBlockThreads = 256;
  static constexpr int64_t kMinEdgesPerLane = 8;  // edge split only when each part keeps this many
  static constexpr int kCombineThreads = 512;     // hub combine: one warp per segment
};

template <int CPL> constexpr int qspmm_unroll() { return CPL == 16 ? 4 : 8; }

struct QSpmmPlan {
  int cpl = 1;        // features per vector load
  int col_lanes = 1;  // Gc
  int edge_parts = 1; // P
  int64_t col_blocks = 1;
  int64_t row_blocks = 0;
  bool y_vec = false;  // 16-byte output stores
  SegmentPlan hub;     // hub pass (hub.seg == 0: none), as the float SpMM's
  int64_t segment_blocks = 0;
  int64_t combine_blocks = 0;
};

inline QSpmmPlan plan_qspmm(int64_t M, int64_t nnz, int64_t C, int64_t D, int64_t max_deg, const QView& X,
                            const float* Y) {
  QSpmmPlan p;
  p.cpl = plan_cpl(X.bits, X.data, C, D);
  const int64_t vecs = (C + p.cpl - 1) / p.cpl;
  p.col_lanes = static_cast<int>(std::min<int64_t>(32, pow2ceil(vecs)));
  p.col_blocks = (vecs + p.col_lanes - 1) / p.col_lanes;
  const int64_t avg = M > 0 ? nnz / M : 0;
  while (p.col_lanes * p.edge_parts * 2 <= 32 && avg >= int64_t(p.edge_parts) * 2 * QSpmmTuning::kMinEdgesPerLane)
    p.edge_parts *= 2;
  const int G = p.col_lanes * p.edge_parts;
  const int64_t groups_per_block = QSpmmTuning::kBlockThreads / G;
  p.row_blocks = (M + groups_per_block - 1) / groups_per_block;
  p.y_vec = p.cpl >= 4 && aligned16(Y);
  p.hub = plan_segments(M, nnz, max_deg, hub_threshold(M, nnz), C);
  p.segment_blocks = (p.hub.nsegments * 32 + QSpmmTuning::kBlockThreads - 1) / QSpmmTuning::kBlockThreads;
  p.combine_blocks = combine_blocks(p.hub.nsegments, QSpmmTuning::kCombineThreads);
  return p;
}

// Reduction over messages of type Acc (int32 / int64 without edge weights, float with them).
// update() takes messages in ascending edge order; merge(left, right) takes the partial results
// of two consecutive edge ranges, left first (ties keep the smaller edge index, NaN wins).
template <class Acc, Reduce R>
struct QRed {
  static constexpr bool kArg = has_arg(R);
  __device__ __forceinline__ static bool better(Acc v, Acc cur) {
    if constexpr (R == Reduce::max) return v > cur || (is_nan(v) && !is_nan(cur));
    else return v < cur || (is_nan(v) && !is_nan(cur));
  }
  __device__ __forceinline__ static void update(Acc& acc, int64_t& arg, Acc v, int64_t k) {
    if constexpr (kArg) {
      if (arg < 0 || better(v, acc)) { acc = v; arg = k; }
    } else {
      acc += v;
    }
  }
  // (acc, arg) := left (+) right, where `left` says whether this lane holds the left range.
  __device__ __forceinline__ static void merge(Acc& acc, int64_t& arg, Acc o, int64_t oa, bool left) {
    if constexpr (kArg) {
      const Acc la = left ? acc : o, ra = left ? o : acc;
      const int64_t lg = left ? arg : oa, rg = left ? oa : arg;
      const bool take_right = rg >= 0 && (lg < 0 || better(ra, la));
      acc = take_right ? ra : la;
      arg = take_right ? rg : lg;
    } else {
      acc = left ? acc + o : o + acc;
    }
  }
};

template <class I>
struct QSpmmParams {
  const I* __restrict__ rowptr;
  const I* __restrict__ col;    // unused when ident
  const float* __restrict__ w;  // A.val (H == 1) or W (nnz x H), or nullptr
  const std::uint8_t* __restrict__ X;
  const float* __restrict__ scale;
  float* __restrict__ Y;
  int64_t* __restrict__ arg;
  int64_t M, C, row_bytes, H, D;
  bool ident, y_vec;
};

template <class Acc> __device__ __forceinline__ Acc shfl_xor(Acc v, int o, unsigned mask) {
  if constexpr (sizeof(Acc) == 8) return static_cast<Acc>(__shfl_xor_sync(mask, static_cast<long long>(v), o));
  else return __shfl_xor_sync(mask, v, o);
}

// The float output of one element (see the contract: exact for integer sums / max / min).
template <Reduce R, class Acc>
__device__ __forceinline__ float qspmm_final(Acc acc, int64_t deg, float s) {
  if (deg == 0) return 0.0f;
  float v = s * float(acc);
  if constexpr (R == Reduce::mean) v = v / float(deg);
  return v;
}

template <int BITS, class I, Reduce R, class Acc, int CPL>
struct QSpmmAgent {
  using Red = QRed<Acc, R>;
  static constexpr bool kWeighted = std::is_same_v<Acc, float>;
  static constexpr int U = qspmm_unroll<CPL>();

  __device__ __forceinline__ static void init(Acc (&acc)[CPL], int64_t (&arg)[CPL]) {
#pragma unroll
    for (int e = 0; e < CPL; ++e) { acc[e] = Acc(0); arg[e] = -1; }
  }

  // Messages of edges [kb, ke) into acc / arg (this lane's vector at column c0, in head `head`).
  __device__ __forceinline__ static void reduce(const QSpmmParams<I>& p, int64_t kb, int64_t ke, int64_t c0,
                                                int64_t head, Acc (&acc)[CPL], int64_t (&arg)[CPL]) {
    for (int64_t k = kb; k < ke; k += U) {
      int64_t j[U];
      float w[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t kk = k + u;
        const bool in = kk < ke;
        j[u] = !in ? 0 : (p.ident ? kk : static_cast<int64_t>(__ldg(p.col + kk)));
        if constexpr (kWeighted) w[u] = (in && p.w != nullptr) ? __ldg(p.w + kk * p.H + head) : 1.0f;
      }
      QVec<BITS, CPL> x[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (k + u < ke) x[u].load(p.X + j[u] * p.row_bytes, c0);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (k + u >= ke) break;
#pragma unroll
        for (int e = 0; e < CPL; ++e) {
          Acc m;
          if constexpr (kWeighted) m = w[u] * float(x[u].get(e));
          else m = Acc(x[u].get(e));
          Red::update(acc[e], arg[e], m, k + u);
        }
      }
    }
  }

  // Lane set `part = sub / Gc` reduces the part-th contiguous slice of [kb, ke); a fixed xor
  // tree merges the P slices (lower half = smaller edge indices). Every lane of the group of
  // Gc * P lanes must call this; the result is complete in the lanes of part 0.
  __device__ __forceinline__ static void reduce_split(const QSpmmParams<I>& p, int64_t kb, int64_t ke, int64_t c0,
                                                      bool ok, int64_t head, int Gc, int P, int sub,
                                                      Acc (&acc)[CPL], int64_t (&arg)[CPL]) {
    init(acc, arg);
    const int part = sub / Gc;
    const int64_t n = ke - kb;
    if (ok) reduce(p, kb + n * part / P, kb + n * (part + 1) / P, c0, head, acc, arg);
    if (P == 1) return;
    const int G = Gc * P;
    const unsigned mask = group_mask(G);
    for (int off = Gc; off < G; off <<= 1) {
      const bool left = (sub & off) == 0;
#pragma unroll
      for (int e = 0; e < CPL; ++e) {
        const Acc o = shfl_xor(acc[e], off, mask);
        int64_t oa = -1;
        if constexpr (Red::kArg) oa = static_cast<int64_t>(__shfl_xor_sync(mask, static_cast<long long>(arg[e]), off));
        Red::merge(acc[e], arg[e], o, oa, left);
      }
    }
  }

  __device__ __forceinline__ static void write(const QSpmmParams<I>& p, int64_t row, int64_t c0, int64_t deg,
                                               const Acc (&acc)[CPL], const int64_t (&arg)[CPL]) {
    const float s = __ldg(p.scale);
    float out[CPL];
#pragma unroll
    for (int e = 0; e < CPL; ++e) out[e] = qspmm_final<R>(acc[e], deg, s);
    float* y = p.Y + row * p.C + c0;
    if (CPL >= 4 && p.y_vec) {
#pragma unroll
      for (int t = 0; t < CPL / 4; ++t)
        reinterpret_cast<float4*>(y)[t] = make_float4(out[4 * t], out[4 * t + 1], out[4 * t + 2], out[4 * t + 3]);
    } else {
#pragma unroll
      for (int e = 0; e < CPL; ++e)
        if (c0 + e < p.C) y[e] = out[e];
    }
    if constexpr (Red::kArg) {
      if (p.arg != nullptr) {
#pragma unroll
        for (int e = 0; e < CPL; ++e)
          if (c0 + e < p.C) p.arg[row * p.C + c0 + e] = deg == 0 ? -1 : arg[e];
      }
    }
  }
};

// One group of G = Gc * P lanes per row; rows longer than hub_thr (> 0) are left to the hub pass.
template <int BITS, class I, Reduce R, class Acc, int CPL>
__global__ void __launch_bounds__(QSpmmTuning::kBlockThreads)
qspmm_row_kernel(QSpmmParams<I> p, int Gc, int P, int64_t hub_thr) {
  using Ag = QSpmmAgent<BITS, I, R, Acc, CPL>;
  const int G = Gc * P;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G, cs = sub % Gc;
  const int64_t c0 = (int64_t(blockIdx.y) * Gc + cs) * CPL;
  const bool ok = c0 < p.C;
  const int64_t head = ok ? c0 / p.D : 0;  // one head per vector (the plan keeps D % CPL == 0)
  int64_t k0 = 0, k1 = 0;
  if (row < p.M) {
    k0 = static_cast<int64_t>(__ldg(p.rowptr + row));
    k1 = static_cast<int64_t>(__ldg(p.rowptr + row + 1));
  }
  const bool hub = hub_thr > 0 && k1 - k0 > hub_thr;
  Acc acc[CPL];
  int64_t arg[CPL];
  Ag::reduce_split(p, k0, hub ? k0 : k1, c0, ok, head, Gc, P, sub, acc, arg);  // every lane takes part
  if (row >= p.M || hub || !ok || sub >= Gc) return;
  Ag::write(p, row, c0, k1 - k0, acc, arg);
}

// Hub pass, segment side: one warp per segment (Gc column lanes x 32 / Gc edge parts) reduces
// each hub piece of the segment into its workspace slot (segments.cuh).
template <int BITS, class I, Reduce R, class Acc, int CPL>
__global__ void __launch_bounds__(QSpmmTuning::kBlockThreads)
qspmm_segment_kernel(QSpmmParams<I> p, int Gc, int64_t nnz, int64_t seg, int64_t nsegments,
                     Acc* __restrict__ wsv, int64_t* __restrict__ wsa, const int* __restrict__ has_hub) {
  using Ag = QSpmmAgent<BITS, I, R, Acc, CPL>;
  if (*has_hub == 0) return;
  const int64_t s = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (s >= nsegments) return;  // whole warps leave together
  const int sub = threadIdx.x % 32, cs = sub % Gc, P = 32 / Gc;
  const int64_t c0 = (int64_t(blockIdx.y) * Gc + cs) * CPL;
  const bool ok = c0 < p.C;
  const int64_t head = ok ? c0 / p.D : 0;
  const SegmentRows sr = segment_rows(p.rowptr, p.M, nnz, seg, s);
  for_each_hub_piece(p.rowptr, sr, seg, [&](int slot, int64_t, int64_t kb, int64_t ke) {
    Acc acc[CPL];
    int64_t arg[CPL];
    Ag::reduce_split(p, kb, ke, c0, ok, head, Gc, P, sub, acc, arg);
    if (!ok || sub >= Gc) return;
    const int64_t base = (s * 2 + slot) * p.C + c0;
#pragma unroll
    for (int e = 0; e < CPL; ++e) {
      if (c0 + e >= p.C) break;
      wsv[base + e] = acc[e];
      if constexpr (QRed<Acc, R>::kArg) wsa[base + e] = arg[e];
    }
  });
}

// Hub pass, combine side: block b merges the hub rows that start in segments NW b .. NW b + NW - 1:
// thread (part, column) folds a contiguous range of the row's segment slots in order, then the
// parts are folded in order through shared memory (fixed order: deterministic).
template <class I, Reduce R, class Acc>
__global__ void __launch_bounds__(QSpmmTuning::kCombineThreads)
qspmm_combine_kernel(const I* __restrict__ rowptr, const float* __restrict__ scale, float* __restrict__ Y,
                     int64_t* __restrict__ argout, int64_t M, int64_t C, int64_t nnz, int64_t seg,
                     int64_t nsegments, const Acc* __restrict__ wsv, const int64_t* __restrict__ wsa,
                     const int* __restrict__ has_hub) {
  using Red = QRed<Acc, R>;
  if (*has_hub == 0) return;
  constexpr int NT = QSpmmTuning::kCombineThreads, NW = NT / 32;
  __shared__ int64_t rows[NW];
  __shared__ Acc sacc[NT];
  __shared__ int64_t sarg[Red::kArg ? NT : 1];
  const int tid = threadIdx.x;
  const float s = __ldg(scale);
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
      Acc acc = Acc(0);
      int64_t arg = -1;
      if (active) {
        const int64_t q0 = n * part / P, q1 = n * (part + 1) / P;
        for (int64_t q = q0; q < q1; ++q) {
          const int64_t sg = c0 + q, at = (sg * 2 + hub_slot(sg, seg, k0)) * C + cc;
          Red::merge(acc, arg, wsv[at], Red::kArg ? wsa[at] : 0, true);
        }
      }
      sacc[tid] = acc;
      if constexpr (Red::kArg) sarg[tid] = arg;
      __syncthreads();
      if (tid < CT && cc < C) {
        for (int64_t q = 1; q < P; ++q) Red::merge(acc, arg, sacc[q * CT + tid], Red::kArg ? sarg[q * CT + tid] : 0, true);
        Y[r * C + cc] = qspmm_final<R>(acc, deg, s);
        if constexpr (Red::kArg)
          if (argout != nullptr) argout[r * C + cc] = arg;
      }
      __syncthreads();
    }
  }
}

template <int BITS, class I, Reduce R, class Acc>
void launch_qspmm(const QSpmmArgs& a, cudaStream_t stream) {
  const int64_t C = a.X.C, D = C / a.H;
  const QSpmmPlan plan = plan_qspmm(a.A.M, a.A.nnz, C, D, a.A.max_degree, a.X, a.Y);
  check_grid("qspmm", {plan.row_blocks, plan.segment_blocks, plan.combine_blocks}, plan.col_blocks);
  QSpmmParams<I> p{static_cast<const I*>(a.A.rowptr), static_cast<const I*>(a.A.col),
                   a.W != nullptr ? a.W : static_cast<const float*>(a.A.val),
                   static_cast<const std::uint8_t*>(a.X.data), a.X.scale, a.Y, a.arg,
                   a.A.M, C, a.X.row_bytes(), a.W != nullptr ? a.H : 1, D, a.identity_col, plan.y_vec};
  constexpr bool kArg = QRed<Acc, R>::kArg;
  dispatch_cpl(plan.cpl, [&](auto c) {
    constexpr int CPL = decltype(c)::value;
    HubWorkspace ws;
    if (plan.hub.seg > 0) {
      const size_t slots = static_cast<size_t>(plan.hub.nsegments) * 2 * static_cast<size_t>(C);
      ws.begin(slots * sizeof(Acc) + (kArg ? slots * sizeof(int64_t) : 0), p.rowptr, p.M, plan.hub.thr, stream);
      Acc* wsv = ws.payload<Acc>();
      int64_t* wsa = kArg ? ws.payload<int64_t>(slots * sizeof(Acc)) : nullptr;
      const dim3 sgrid(static_cast<unsigned>(plan.segment_blocks), static_cast<unsigned>(plan.col_blocks));
      qspmm_segment_kernel<BITS, I, R, Acc, CPL><<<sgrid, QSpmmTuning::kBlockThreads, 0, stream>>>(
          p, plan.col_lanes, a.A.nnz, plan.hub.seg, plan.hub.nsegments, wsv, wsa, ws.flag());
      GS_LAUNCH_CHECK("qspmm_segment_kernel");
      qspmm_combine_kernel<I, R, Acc><<<static_cast<unsigned>(plan.combine_blocks), QSpmmTuning::kCombineThreads, 0,
                                        stream>>>(p.rowptr, p.scale, p.Y, p.arg, p.M, C, a.A.nnz, plan.hub.seg,
                                                  plan.hub.nsegments, wsv, wsa, ws.flag());
      GS_LAUNCH_CHECK("qspmm_combine_kernel");
    }
    const dim3 grid(static_cast<unsigned>(plan.row_blocks), static_cast<unsigned>(plan.col_blocks));
    qspmm_row_kernel<BITS, I, R, Acc, CPL><<<grid, QSpmmTuning::kBlockThreads, 0, stream>>>(
        p, plan.col_lanes, plan.edge_parts, plan.hub.row_limit());
    GS_LAUNCH_CHECK("qspmm_row_kernel");
    ws.end();
  });
}

inline bool qspmm_has_work(const QSpmmArgs& a) {
  const CsrView& A = a.A;
  check_qview("qspmm", "X", a.X, false);
  if (A.M < 0 || A.K < 0 || A.nnz < 0 || a.H <= 0)
    throw std::invalid_argument("gnnsparse cuda qspmm: negative size or no heads");
  if (a.X.C % a.H != 0) throw std::invalid_argument("gnnsparse cuda qspmm: features not divisible by heads");
  if (a.A.val != nullptr && a.W != nullptr)
    throw std::invalid_argument("gnnsparse cuda qspmm: give edge values or per-head weights, not both");
  if (A.M == 0 || a.X.C == 0) return false;
  if (A.rowptr == nullptr || a.Y == nullptr ||
      (A.nnz > 0 && ((!a.identity_col && A.col == nullptr) || a.X.data == nullptr || a.X.scale == nullptr)))
    throw std::invalid_argument("gnnsparse cuda qspmm: null pointer");
  return true;
}

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

void qspmm(const QSpmmArgs& a, cudaStream_t stream) {
  using namespace cuda_detail;
  dispatch_reduce(a.reduce, [](auto) {});  // an unknown code throws, naming the axis
  if (a.reduce != Reduce::sum && a.reduce != Reduce::mean && a.reduce != Reduce::max && a.reduce != Reduce::min)
    throw std::invalid_argument("gnnsparse cuda qspmm: reduction code " + std::to_string(int(a.reduce)) +
                                " is not implemented for quantized inputs");
  if (!qspmm_has_work(a)) return;
  // Unweighted messages are integers; int64 sums only when a row could overflow int32.
  const int64_t longest = a.A.max_degree >= 0 ? a.A.max_degree : a.A.nnz;
  const bool weighted = a.A.val != nullptr || a.W != nullptr;
  const bool wide = !spmm_fits_int32(longest, a.X.bits);
  dispatch_bits(a.X.bits, [&](auto bt) {
    constexpr int B = decltype(bt)::value;
    dispatch_itype(a.A.itype, [&](auto it) {
      using I = typename decltype(it)::type;
      dispatch_reduce(a.reduce, [&](auto r) {
        constexpr Reduce R = decltype(r)::value;
        if (weighted) {
          launch_qspmm<B, I, R, float>(a, stream);
        } else if constexpr (has_arg(R)) {  // max / min of integers never overflow
          launch_qspmm<B, I, R, int32_t>(a, stream);
        } else {
          if (wide) launch_qspmm<B, I, R, int64_t>(a, stream);
          else launch_qspmm<B, I, R, int32_t>(a, stream);
        }
      });
    });
  });
}

}  // namespace gnnsparse::cuda
