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
// row in segment order by launch_hub_combine<QSpmmCombine>. Messages are
// integers (no edge weights: exact int32 / int64 sums, integer max / min) or float32 w * q
// (weights); the scale is applied once per output element. Gathers of X rows are the traffic:
// a quarter (int8) or an eighth (int4) of the float32 bytes. No atomics: bitwise reproducible.
//
// Quantized output (QSpmmArgs::out, the OUT instances; DELAYED SCALING in gnnsparse/quant.hpp):
// the epilogue quantizes each lane's values with the previous step's scale (stochastic rounding
// by element index, one Philox call per 4 values) and stores int8 / packed int4 instead of
// float32; each row-kernel block leaves the absmax of what it wrote in out.work. Hub rows: the
// combine leaves their float values in the hub workspace and qspmm_hub_out_kernel quantizes them
// (one partial per segment). One more launch folds the partials into the scales
// (launch_delayed_finish, quantize.cu). The float32 Y is never written.
#include "quant_common.cuh"
#include "policy.cuh"
#include "segments.cuh"
#include "gnnsparse/cuda_quant.hpp"

namespace gnnsparse::cuda_detail {

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
  QOutParams out;      // OUT kernels: the quantized output (Y unused)
  float* __restrict__ work;   // OUT kernels: one partial absmax per row-kernel block
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
  using Red = Reducer<Acc, R>;
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
          if constexpr (kWeighted) m = w[u] * x[u].getf(e);
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
        if constexpr (Red::kHasArg) oa = static_cast<int64_t>(__shfl_xor_sync(mask, static_cast<long long>(arg[e]), off));
        Red::merge(acc[e], arg[e], o, oa, left);
      }
    }
  }

  // reduce_split's merge as a reduce-scatter (CPL 16): at each of the first two levels the partners
  // (lanes xor off) exchange half of their run -- the left lane (smaller edge indices) keeps the
  // lower half, the right lane the upper -- and each adds the other's half in the tree's order (the
  // same sums bit for bit, half the shuffles, and the epilogue spread over every lane of the group);
  // further levels merge whole runs of 4. The lane's values end in acc[0, n), for the columns
  // c0 + first ..; they are results in the lanes whose bits of the whole-run levels are all 0
  // (writer). Every lane of the group must call this.
  struct Run {
    int first, n;
    bool writer;
  };
  __device__ __forceinline__ static Run reduce_scatter(const QSpmmParams<I>& p, int64_t kb, int64_t ke, int64_t c0,
                                                       bool ok, int64_t head, int Gc, int P, int sub,
                                                       Acc (&acc)[CPL], int64_t (&arg)[CPL]) {
    static_assert(CPL == 16, "runs of at least 4 values (one stochastic-rounding word each)");
    init(acc, arg);
    const int part = sub / Gc;
    const int64_t n = ke - kb;
    if (ok) reduce(p, kb + n * part / P, kb + n * (part + 1) / P, c0, head, acc, arg);
    Run r{0, CPL, true};
    const int G = Gc * P;
    const unsigned mask = group_mask(G);
    int off = Gc;
#pragma unroll
    for (int L = 0; L < 2; ++L) {
      if (off >= G) break;
      const int H = CPL >> (L + 1);
      const bool left = (sub & off) == 0;
#pragma unroll
      for (int e = 0; e < CPL / 2; ++e) {
        if (e >= H) break;
        Acc keep = left ? acc[e] : acc[H + e];
        const Acc o = shfl_xor(left ? acc[H + e] : acc[e], off, mask);
        int64_t ka = -1, oa = -1;
        if constexpr (Red::kHasArg) {
          ka = left ? arg[e] : arg[H + e];
          oa = static_cast<int64_t>(__shfl_xor_sync(mask, static_cast<long long>(left ? arg[H + e] : arg[e]), off));
        }
        Red::merge(keep, ka, o, oa, left);
        acc[e] = keep;
        arg[e] = ka;
      }
      if (!left) r.first += H;
      r.n = H;
      off <<= 1;
    }
    for (; off < G; off <<= 1) {  // whole runs (r.n == 4 here)
      const bool left = (sub & off) == 0;
#pragma unroll
      for (int e = 0; e < CPL / 4; ++e) {
        const Acc o = shfl_xor(acc[e], off, mask);
        int64_t oa = -1;
        if constexpr (Red::kHasArg) oa = static_cast<int64_t>(__shfl_xor_sync(mask, static_cast<long long>(arg[e]), off));
        Red::merge(acc[e], arg[e], o, oa, left);
      }
      r.writer = r.writer && left;
    }
    return r;
  }

  // The float output of a run of reduce_scatter (n of the CPL values, from column col).
  __device__ __forceinline__ static void write_run(const QSpmmParams<I>& p, int64_t row, int64_t col, int n,
                                                   int64_t deg, const Acc (&acc)[CPL], const int64_t (&arg)[CPL]) {
    const float s = __ldg(p.scale);
    float* y = p.Y + row * p.C + col;
#pragma unroll
    for (int t = 0; t < CPL / 4; ++t) {
      if (4 * t >= n) break;
      float out[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) out[u] = qspmm_final<R>(acc[4 * t + u], deg, s);
      if (p.y_vec) {
        reinterpret_cast<float4*>(y)[t] = make_float4(out[0], out[1], out[2], out[3]);
      } else {
#pragma unroll
        for (int u = 0; u < 4; ++u) y[4 * t + u] = out[u];
      }
    }
    if constexpr (Red::kHasArg) {
      if (p.arg != nullptr) {
#pragma unroll
        for (int e = 0; e < CPL; ++e)
          if (e < n) p.arg[row * p.C + col + e] = deg == 0 ? -1 : arg[e];
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
    if constexpr (Red::kHasArg) {
      if (p.arg != nullptr) {
#pragma unroll
        for (int e = 0; e < CPL; ++e)
          if (c0 + e < p.C) p.arg[row * p.C + c0 + e] = deg == 0 ? -1 : arg[e];
      }
    }
  }
};

// The OUT epilogue: the lane's values quantized with the delayed scale and stored (every lane of
// the group calls it: int4 with CPL 1 pairs neighbouring lanes by a shuffle); returns the absmax
// of what this lane wrote (0 when it writes nothing).
template <Reduce R, class Acc, int CPL>
__device__ __forceinline__ float qspmm_write_q(const QOutParams& o, const float* __restrict__ scale, int64_t C,
                                               int64_t row, int64_t c0, int64_t deg, const Acc (&acc)[CPL],
                                               bool writer, unsigned mask) {
  const float s = __ldg(scale);
  float y[CPL];
  float m = 0.0f;
#pragma unroll
  for (int e = 0; e < CPL; ++e) {
    const bool in = writer && c0 + e < C;
    y[e] = in ? qspmm_final<R>(acc[e], deg, s) : 0.0f;
    if (in) m = quant::absmax_combine(m, y[e]);
  }
  int q[CPL];
  quantize_run<CPL>(o, row, c0, C, y, q);
  int next = 0;
  if constexpr (CPL == 1) {
    if (o.bits == 4) next = __shfl_down_sync(mask, q[0], 1);
  }
  if (writer) store_run<CPL>(o, row, c0, C, q, next);
  return m;
}

// The OUT epilogue of a run of reduce_scatter (n of 16 values, from column col, a multiple of 4):
// quantized and stored 4 values (one stochastic-rounding word) at a time; returns the absmax of what
// this lane wrote (0 when it writes nothing).
template <Reduce R, class Acc>
__device__ __forceinline__ float qspmm_write_q_run(const QOutParams& o, const float* __restrict__ scale, int64_t C,
                                                   int64_t row, int64_t col, int n, int64_t deg, const Acc (&acc)[16],
                                                   bool writer) {
  const float s = __ldg(scale);
  float m = 0.0f;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    if (4 * t >= n) break;
    float y[4];
    int q[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      y[u] = writer ? qspmm_final<R>(acc[4 * t + u], deg, s) : 0.0f;
      m = quant::absmax_combine(m, y[u]);
    }
    if (!writer) continue;
    quantize_run<4>(o, row, col + 4 * t, C, y, q);
    store_run<4>(o, row, col + 4 * t, C, q, 0);
  }
  return m;
}

// Register budget of the row kernel: sum / mean with 4-byte accumulators at 16 values per lane in
// at most 64 registers (4 blocks of 256 threads, 16 of 64), 72-78 without the cap (3 of 256, 12-14
// of 64); under it int8 spills 16 bytes, int4 nothing; int64 sums and max / min (which would spill
// 56 bytes and more) stay uncapped.
template <Reduce R, class Acc, int CPL> constexpr int qspmm_row_min_blocks() {
  return (R == Reduce::sum || R == Reduce::mean) && sizeof(Acc) == 4 && CPL == 16 ? 4 : 1;
}

// One group of G = Gc * P lanes per row; rows longer than hub_thr (> 0) are left to the hub pass.
// OUT: the output is written quantized (delayed scale) and each block leaves its partial absmax
// in p.work[blockIdx.y * gridDim.x + blockIdx.x].
template <int BITS, class I, Reduce R, class Acc, int CPL, bool OUT>
__global__ void __launch_bounds__(QSpmmTuning::kBlockThreads, (qspmm_row_min_blocks<R, Acc, CPL>()))
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
  if constexpr (CPL == 16) {  // results spread over the group's lanes (reduce_scatter)
    const auto r = Ag::reduce_scatter(p, k0, hub ? k0 : k1, c0, ok, head, Gc, P, sub, acc, arg);
    const bool writer = row < p.M && !hub && ok && r.writer;
    if constexpr (OUT) {
      __shared__ float smem[32];
      float m = qspmm_write_q_run<R, Acc>(p.out, p.scale, p.C, row, c0 + r.first, r.n, k1 - k0, acc, writer);
      m = block_absmax(m, smem);
      if (threadIdx.x == 0) p.work[int64_t(blockIdx.y) * gridDim.x + blockIdx.x] = m;
    } else {
      if (writer) Ag::write_run(p, row, c0 + r.first, r.n, k1 - k0, acc, arg);
    }
    return;
  }
  Ag::reduce_split(p, k0, hub ? k0 : k1, c0, ok, head, Gc, P, sub, acc, arg);  // every lane takes part
  const bool writer = row < p.M && !hub && ok && sub < Gc;
  if constexpr (OUT) {
    __shared__ float smem[32];
    float m = qspmm_write_q<R, Acc, CPL>(p.out, p.scale, p.C, row, c0, k1 - k0, acc, writer, group_mask(G));
    m = block_absmax(m, smem);
    if (threadIdx.x == 0) p.work[int64_t(blockIdx.y) * gridDim.x + blockIdx.x] = m;
  } else {
    if (!writer) return;
    Ag::write(p, row, c0, k1 - k0, acc, arg);
  }
}

// Hub pass, segment side: one warp per segment (Gc column lanes x 32 / Gc edge parts) reduces
// each hub piece of the segment into its workspace slot (segments.cuh).
template <int BITS, class I, Reduce R, class Acc, int CPL>
__global__ void __launch_bounds__(QSpmmTuning::kBlockThreads)
qspmm_segment_kernel(QSpmmParams<I> p, int Gc, HubGeometry g, Acc* __restrict__ wsv, int64_t* __restrict__ wsa) {
  using Ag = QSpmmAgent<BITS, I, R, Acc, CPL>;
  if (*g.flag == 0) return;
  const int64_t s = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (s >= g.nsegments) return;  // whole warps leave together
  const int sub = threadIdx.x % 32, cs = sub % Gc, P = 32 / Gc;
  const int64_t c0 = (int64_t(blockIdx.y) * Gc + cs) * CPL;
  const bool ok = c0 < p.C;
  const int64_t head = ok ? c0 / p.D : 0;
  hub_pieces(p.rowptr, g, s, [&](int slot, int64_t, int64_t kb, int64_t ke) {
    Acc acc[CPL];
    int64_t arg[CPL];
    Ag::reduce_split(p, kb, ke, c0, ok, head, Gc, P, sub, acc, arg);
    if (!ok || sub >= Gc) return;
    const int64_t base = (s * 2 + slot) * p.C + c0;
#pragma unroll
    for (int e = 0; e < CPL; ++e) {
      if (c0 + e >= p.C) break;
      wsv[base + e] = acc[e];
      if constexpr (Reducer<Acc, R>::kHasArg) wsa[base + e] = arg[e];
    }
  });
}

// The hub pass's state of the quantized SpMM: one integer (or float) value and arg per column.
// OUT: the hub row's float values go to hub_y[(its first segment) * C + column], quantized by
// qspmm_hub_out_kernel afterwards (which also needs their absmax).
template <Reduce R, class Acc, bool OUT = false>
struct QSpmmCombine {
  using Red = Reducer<Acc, R>;
  struct Params {
    const Acc* __restrict__ wsv;
    const int64_t* __restrict__ wsa;  // max / min only
    const float* __restrict__ scale;
    float* __restrict__ Y;
    int64_t* __restrict__ arg;
    int64_t C;
    float* __restrict__ hub_y;        // OUT only
  };
  struct Part {
    Acc v;
    int64_t arg;
  };
  static constexpr int kLoads = 8;
  __host__ __device__ __forceinline__ static int64_t width(const Params& p) { return p.C; }
  // GNNSPARSE_CUDA_HUB_COMBINE=auto: by segments. Every Part carries an arg, as the float SpMM's max /
  // min, whose combine by rows measured 8-14 % slower (H100, 2026-12-07).
  static bool prefers_rows(const Params&) { return false; }
  __device__ __forceinline__ static Part identity() { return {Acc(0), -1}; }
  __device__ __forceinline__ static Part load(const Params& p, int64_t slot, int64_t cc) {
    return {p.wsv[slot * p.C + cc], Red::kHasArg ? p.wsa[slot * p.C + cc] : int64_t(-1)};
  }
  __device__ __forceinline__ static void fold(Part& acc, const Part& nx) {
    Red::merge(acc.v, acc.arg, nx.v, nx.arg, true);
  }
  __device__ __forceinline__ static void write(const Params& p, int64_t r, int64_t cc, const Part& acc,
                                               int64_t deg, int64_t first_segment) {
    const float y = qspmm_final<R>(acc.v, deg, __ldg(p.scale));
    if constexpr (OUT) {
      p.hub_y[first_segment * p.C + cc] = y;
    } else {
      p.Y[r * p.C + cc] = y;
      if constexpr (Red::kHasArg)
        if (p.arg != nullptr) p.arg[r * p.C + cc] = acc.arg;
    }
  }
};

// OUT, hub rows: block s quantizes the hub row that starts in segment s (if any) from hub_y and
// leaves its absmax in work[s] (0 when no hub row starts there). One Philox call per element.
constexpr int kHubOutThreads = 128;

template <class I>
__global__ void __launch_bounds__(kHubOutThreads)
qspmm_hub_out_kernel(const I* __restrict__ rowptr, HubGeometry g, int64_t C, const float* __restrict__ hub_y,
                     QOutParams o, float* __restrict__ work) {
  __shared__ float smem[32];
  const int64_t s = blockIdx.x;
  int64_t rk0 = 0, rk1 = 0;
  const int64_t r = *g.flag != 0 ? hub_row_starting(rowptr, g, s, rk0, rk1) : -1;
  float m = 0.0f;
  if (r >= 0) {
    const float inv = __ldg(o.scale_in + 1);
    const int qmax = o.bits == 4 ? 7 : 127;
    for (int64_t b = threadIdx.x; b < o.row_bytes; b += blockDim.x) {
      const int64_t c0 = o.bits == 8 ? b : 2 * b;
      const int n = (o.bits == 8 || c0 + 1 >= C) ? 1 : 2;
      int q[2] = {0, 0};
      for (int u = 0; u < n; ++u) {
        const float y = hub_y[s * C + c0 + u];
        const int64_t e = r * C + c0 + u;
        const std::uint32_t w = o.stoch ? quant::element_words(o.seed, std::uint64_t(e) >> 2).w[e & 3] : 0u;
        m = quant::absmax_combine(m, y);
        q[u] = quantize_sat_fast(y, inv, qmax, o.stoch, w);
      }
      o.Q[r * o.row_bytes + b] = o.bits == 8 ? std::uint8_t(q[0]) : quant::pack4(q[0], q[1]);
    }
  }
  m = block_absmax(m, smem);
  if (threadIdx.x == 0) work[s] = m;
}

int row_block_threads(int dflt);  // spmm.cu: GNNSPARSE_CUDA_ROW_BLOCK, else dflt

// The plan, with the row kernel's grid for the block size in force (row_block_threads).
inline QSpmmPlan qspmm_plan(const QSpmmArgs& a) {
  const int64_t C = a.X.C, D = C / a.H;
  QSpmmPlan p =
      plan_qspmm(a.A.M, a.A.nnz, C, a.A.max_degree, plan_cpl(a.X.bits, a.X.data, C, D), aligned16(a.Y));
  const int64_t groups = row_block_threads(QSpmmTuning::kRowBlockThreads) / (p.col_lanes * p.edge_parts);
  p.row_blocks = (a.A.M + groups - 1) / groups;
  return p;
}

// Partial maxima of an OUT launch: one per row-kernel block, then one per hub segment.
inline int64_t qspmm_out_partials(const QSpmmPlan& plan) {
  return plan.row_blocks * plan.col_blocks + (plan.hub.seg > 0 ? plan.hub.nsegments : 0);
}

template <int BITS, class I, Reduce R, class Acc, bool OUT>
void launch_qspmm(const QSpmmArgs& a, cudaStream_t stream) {
  const int64_t C = a.X.C, D = C / a.H;
  const QSpmmPlan plan = qspmm_plan(a);
  check_grid("qspmm", {plan.row_blocks, plan.segment_blocks, plan.hub.combine_blocks(), plan.hub.map_blocks()},
             plan.col_blocks);
  QSpmmParams<I> p{static_cast<const I*>(a.A.rowptr), static_cast<const I*>(a.A.col),
                   a.W != nullptr ? a.W : static_cast<const float*>(a.A.val),
                   static_cast<const std::uint8_t*>(a.X.data), a.X.scale, a.Y, a.arg,
                   a.A.M, C, a.X.row_bytes(), a.W != nullptr ? a.H : 1, D, a.identity_col, plan.y_vec,
                   OUT ? qout_params(a.out, C) : QOutParams{}, OUT ? a.out.work : nullptr};
  using Cmb = QSpmmCombine<R, Acc, OUT>;
  constexpr bool kArg = Reducer<Acc, R>::kHasArg;
  dispatch_cpl(plan.cpl, [&](auto c) {
    constexpr int CPL = decltype(c)::value;
    // the hub pass on its own stream while the row kernel runs on this one (segments.cuh, HubStream)
    HubStream hs(stream, plan.hub.seg > 0 && a.A.max_degree > plan.hub.thr);
    HubWorkspace ws;
    if (plan.hub.seg > 0) {
      const cudaStream_t hub = hs.stream();
      const size_t slots = static_cast<size_t>(plan.hub.nsegments) * 2 * static_cast<size_t>(C);
      const size_t hub_y = OUT ? static_cast<size_t>(plan.hub.nsegments) * static_cast<size_t>(C) : 0;
      const size_t arg_bytes = kArg ? slots * sizeof(int64_t) : 0;
      ws.begin(plan.hub, slots * sizeof(Acc) + arg_bytes + hub_y * sizeof(float), p.rowptr, p.M, a.A.nnz,
               a.A.max_degree, hub);
      Acc* wsv = ws.payload<Acc>();
      int64_t* wsa = kArg ? ws.payload<int64_t>(slots * sizeof(Acc)) : nullptr;
      float* hy = OUT ? ws.payload<float>(slots * sizeof(Acc) + arg_bytes) : nullptr;
      const dim3 sgrid(static_cast<unsigned>(plan.segment_blocks), static_cast<unsigned>(plan.col_blocks));
      qspmm_segment_kernel<BITS, I, R, Acc, CPL><<<sgrid, QSpmmTuning::kBlockThreads, 0, hub>>>(
          p, plan.col_lanes, ws.geometry(), wsv, wsa);
      GS_LAUNCH_CHECK("qspmm_segment_kernel");
      launch_hub_combine<Cmb>(plan.hub, p.rowptr, ws,
                              typename Cmb::Params{wsv, wsa, p.scale, p.Y, OUT ? nullptr : p.arg, C, hy}, hub);
      if constexpr (OUT) {
        qspmm_hub_out_kernel<I><<<static_cast<unsigned>(plan.hub.nsegments), kHubOutThreads, 0,
                                  hub>>>(p.rowptr, ws.geometry(), C, hy, p.out,
                                            a.out.work + plan.row_blocks * plan.col_blocks);
        GS_LAUNCH_CHECK("qspmm_hub_out_kernel");
      }
      ws.end();
    }
    const dim3 grid(static_cast<unsigned>(plan.row_blocks), static_cast<unsigned>(plan.col_blocks));
    qspmm_row_kernel<BITS, I, R, Acc, CPL, OUT><<<grid, row_block_threads(QSpmmTuning::kRowBlockThreads), 0, stream>>>(
        p, plan.col_lanes, plan.edge_parts, plan.hub.row_limit());
    GS_LAUNCH_CHECK("qspmm_row_kernel");
    hs.join();
  });
  if constexpr (OUT) launch_delayed_finish(a.out, qspmm_out_partials(plan), stream);
}

inline bool qspmm_has_work(const QSpmmArgs& a) {
  const CsrView& A = a.A;
  check_qview("qspmm", "X", a.X, false);
  if (a.out.active() && a.arg != nullptr)
    throw std::invalid_argument("gnnsparse cuda qspmm: no arg with a quantized output");
  if (A.M < 0 || A.K < 0 || A.nnz < 0 || a.H <= 0)
    throw std::invalid_argument("gnnsparse cuda qspmm: negative size or no heads");
  if (a.X.C % a.H != 0) throw std::invalid_argument("gnnsparse cuda qspmm: features not divisible by heads");
  if (a.A.val != nullptr && a.W != nullptr)
    throw std::invalid_argument("gnnsparse cuda qspmm: give edge values or per-head weights, not both");
  if (A.M == 0 || a.X.C == 0) return false;
  if (A.rowptr == nullptr || (a.Y == nullptr && !a.out.active()) ||
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
  if (!qspmm_has_work(a)) {
    if (a.out.active()) {  // nothing to aggregate: the scales still follow the contract
      check_qout("qspmm", a.out, 0);
      launch_delayed_finish(a.out, 0, stream);
    }
    return;
  }
  const bool out = a.out.active();
  if (out) {
    check_qout("qspmm", a.out, qspmm_out_partials(qspmm_plan(a)));
    if (a.out.Q == nullptr) throw std::invalid_argument("gnnsparse cuda qspmm: null pointer for the quantized output");
  }
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
        auto go = [&](auto acc_tag) {
          using Acc = typename decltype(acc_tag)::type;
          if (out) launch_qspmm<B, I, R, Acc, true>(a, stream);
          else launch_qspmm<B, I, R, Acc, false>(a, stream);
        };
        if (weighted) {
          go(TypeTag<float>{});
        } else if constexpr (has_arg(R)) {  // max / min of integers never overflow
          go(TypeTag<int32_t>{});
        } else {
          if (wide) go(TypeTag<int64_t>{});
          else go(TypeTag<int32_t>{});
        }
      });
    });
  });
}

std::int64_t qspmm_out_work(const QSpmmArgs& a) {
  using namespace cuda_detail;
  if (a.A.M <= 0 || a.X.C <= 0 || a.H <= 0 || a.X.C % a.H != 0) return 0;
  return qspmm_out_partials(qspmm_plan(a));
}

}  // namespace gnnsparse::cuda
