// GATv2 scores and their backward pass (ops.hpp, gatv2_scores), without an (nnz, H, C) tensor:
//   scores  S[k, h] = sum_c att[h, c] lrelu(X[i, h, c] + Y[col k, h, c])
//   grad    dX[i, h, c] = sum_k dS[k, h] att[h, c] lrelu'(z),  dAtt_i[h, c] = sum_k dS[k, h] lrelu(z)
// (dY is the grad pass over A^T with X and Y swapped.)
//
// Schedule (policy.cuh, plan_gatv2): the SDDMM dot row kernel's (sddmm.cu): a group of G lanes per
// (row, head), lanes over C in 16-byte vectors, U gathered Y rows in flight. Scores: each lane sums
// its columns' terms, a butterfly over the group finishes each edge, the group's first lane writes
// it. Grad: the same walk with per-lane sums of the two outputs (no cross-lane reduction), one
// pass over the row per G * V columns. One template serves both (GRAD); scores hold the row operand
// and att in registers when C <= G * V (ONE). Rows longer than kWarpRowMin are taken by the whole
// warp after its short rows: its 32 / G groups each walk a contiguous slice of the row (scores:
// each writes its own edges; grad: the slices' sums are merged by a fixed xor-shuffle tree, the
// lower slice on the left). Hub rows take the hub pass of segments.cuh: a warp per (segment, head)
// runs the same agent on each hub piece of the segment (scores write their edges directly, as
// SDDMM's hub pass does; grad writes each piece's sums into its workspace slot, and
// launch_hub_combine<Gatv2Combine> folds a row's slots in segment order). Every output is one
// fixed sequence of operations: no atomics, bitwise reproducible.
#include "common.cuh"
#include "dispatch.cuh"
#include "policy.cuh"
#include "segments.cuh"
#include "gnnsparse/cuda.hpp"

namespace gnnsparse::cuda_detail {

template <class T, class I, int V, bool ONE>
struct Gatv2Agent {
  using A = typename AccOf<T>::type;
  using VT = typename ValOf<T>::type;
  using Vec = VecT<T, V>;
  static constexpr int U = Gatv2Tuning::kUnroll;

  struct Args {
    const I* __restrict__ rowptr;
    const I* __restrict__ col;
    const T* __restrict__ X;    // M x H x C (row operand)
    const T* __restrict__ Y;    // K x H x C (gathered)
    const T* __restrict__ att;  // H x C
    const VT* __restrict__ dS;  // grad: nnz x H
    VT* __restrict__ S;         // scores: nnz x H
    T* __restrict__ dX;         // grad: M x H x C
    VT* __restrict__ dAtt;      // grad: M x H x C, or nullptr
    int64_t M, H, C;
    A slope;
  };

  __device__ __forceinline__ static void load_or_zero(const T* __restrict__ p, bool ok, A (&o)[V]) {
    if (ok) {
      load_vec<T, V>(p, o);
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e) o[e] = A(0);
    }
  }

  // Scores of edges [kb, ke) of row i, head h, by the group of G lanes this lane is `sub` of.
  __device__ __forceinline__ static void scores(const Args& a, int64_t i, int64_t h, int64_t kb, int64_t ke, int G,
                                                int sub, unsigned mask) {
    const T* __restrict__ xrow = a.X + (i * a.H + h) * a.C;
    const T* __restrict__ arow = a.att + h * a.C;
    const int64_t f0 = int64_t(sub) * V, step = int64_t(G) * V;
    A x[V], w[V];
    if constexpr (ONE) {
      load_or_zero(xrow + f0, f0 < a.C, x);
      load_or_zero(arow + f0, f0 < a.C, w);
    }
    for (int64_t k = kb; k < ke; k += U) {
      I j[U];
#pragma unroll
      for (int u = 0; u < U; ++u) j[u] = k + u < ke ? __ldg(a.col + k + u) : I(0);
      A p[U];
#pragma unroll
      for (int u = 0; u < U; ++u) p[u] = A(0);
      for (int64_t fb = 0; fb < a.C; fb += step) {  // ONE: a single pass
        const int64_t f = fb + f0;
        if (f < a.C) {
          if constexpr (!ONE) {  // L1 hits after the first edge batch
            load_vec<T, V>(xrow + f, x);
            load_vec<T, V>(arow + f, w);
          }
          Vec y[U];
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (k + u < ke) y[u] = *reinterpret_cast<const Vec*>(a.Y + (static_cast<int64_t>(j[u]) * a.H + h) * a.C + f);
#pragma unroll
          for (int u = 0; u < U; ++u)
            if (k + u < ke)
#pragma unroll
              for (int e = 0; e < V; ++e) {
                const A z = x[e] + to_acc<A>(y[u].v[e]);
                p[u] += w[e] * (z > A(0) ? z : z * a.slope);
              }
        }
        if constexpr (ONE) break;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const A r = group_sum(p[u], G, mask);
        if (sub == 0 && k + u < ke) a.S[(k + u) * a.H + h] = static_cast<VT>(r);
      }
    }
  }

  // dX[i, h] (and dAtt's row-i partial) from edges [kb, ke) of row i, head h. P > 1: the whole warp
  // calls this, part `lane / G` with its slice [kb, ke); the parts' sums are merged and part 0
  // writes. Every lane of the group (of the warp when P > 1) runs the same column loop.
  // sink(f, dx, da) stores the sums of columns f .. f + V - 1 (called by the lanes that hold them).
  template <class Sink>
  __device__ __forceinline__ static void grad(const Args& a, int64_t i, int64_t h, int64_t kb, int64_t ke, int G,
                                              int sub, int P, int lane, Sink&& sink) {
    const T* __restrict__ xrow = a.X + (i * a.H + h) * a.C;
    const T* __restrict__ arow = a.att + h * a.C;
    const int64_t f0 = int64_t(sub) * V, step = int64_t(G) * V;
    for (int64_t fb = 0; fb < a.C; fb += step) {
      const int64_t f = fb + f0;
      const bool ok = f < a.C;
      A x[V], w[V], dx[V], da[V];
      load_or_zero(xrow + f, ok, x);
      load_or_zero(arow + f, ok, w);
#pragma unroll
      for (int e = 0; e < V; ++e) dx[e] = da[e] = A(0);
      for (int64_t k = kb; k < ke; k += U) {
        I j[U];
        A ds[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const bool in = k + u < ke;
          j[u] = in ? __ldg(a.col + k + u) : I(0);
          ds[u] = in ? static_cast<A>(__ldg(a.dS + (k + u) * a.H + h)) : A(0);
        }
        Vec y[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (ok && k + u < ke)
            y[u] = *reinterpret_cast<const Vec*>(a.Y + (static_cast<int64_t>(j[u]) * a.H + h) * a.C + f);
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (ok && k + u < ke)
#pragma unroll
            for (int e = 0; e < V; ++e) {
              const A z = x[e] + to_acc<A>(y[u].v[e]);
              const A g = z > A(0) ? ds[u] : ds[u] * a.slope;  // dS * lrelu'(z)
              dx[e] += g * w[e];
              da[e] += z * g;  // dS * lrelu(z)
            }
      }
      if (P > 1) {  // slices of one row: lower part on the left, both partners get the same value
        for (int off = G; off < 32; off <<= 1) {
          const bool left = (lane & off) == 0;
#pragma unroll
          for (int e = 0; e < V; ++e) {
            const A ox = __shfl_xor_sync(0xffffffffu, dx[e], off);
            const A oa = __shfl_xor_sync(0xffffffffu, da[e], off);
            dx[e] = left ? dx[e] + ox : ox + dx[e];
            da[e] = left ? da[e] + oa : oa + da[e];
          }
        }
      }
      if (ok && (P == 1 || lane < G)) sink(f, dx, da);  // part 0 writes
    }
  }

  template <bool GRAD>
  __device__ __forceinline__ static void run(const Args& a, int64_t item, int64_t kb, int64_t ke, int G, int sub,
                                             int P, int lane) {
    const int64_t i = item / a.H, h = item % a.H;
    if constexpr (GRAD) {
      grad(a, i, h, kb, ke, G, sub, P, lane, [&](int64_t f, const A(&dx)[V], const A(&da)[V]) {
        const int64_t base = (i * a.H + h) * a.C + f;
        store_vec<T, V>(a.dX + base, dx);
        if (a.dAtt != nullptr)
#pragma unroll
          for (int e = 0; e < V; ++e) a.dAtt[base + e] = static_cast<VT>(da[e]);
      });
    } else {
      scores(a, i, h, kb, ke, G, sub, group_mask(G));
    }
  }
};

// The grad hub pass's state: one partial sum per slot column (dX's H * C columns, then dAtt's).
template <class T>
struct Gatv2Combine {
  using A = typename AccOf<T>::type;
  using VT = typename ValOf<T>::type;
  struct Params {
    const A* __restrict__ ws;
    T* __restrict__ dX;
    VT* __restrict__ dAtt;  // or nullptr
    int64_t HC;
  };
  struct Part {
    A v;
  };
  static constexpr int kLoads = 8;  // slots a combine thread loads before folding them
  __host__ __device__ __forceinline__ static int64_t width(const Params& p) {
    return p.dAtt != nullptr ? 2 * p.HC : p.HC;
  }
  // GNNSPARSE_CUDA_HUB_COMBINE=auto: by segments. By rows measured faster only for the float SpMM's
  // sums up to 16 columns (H100, 2026-12-07); this combine was not measured by rows.
  static bool prefers_rows(const Params&) { return false; }
  __device__ __forceinline__ static Part identity() { return {A(0)}; }
  __device__ __forceinline__ static Part load(const Params& p, int64_t slot, int64_t cc) {
    return {p.ws[slot * width(p) + cc]};
  }
  __device__ __forceinline__ static void fold(Part& acc, const Part& nx) { acc.v += nx.v; }
  __device__ __forceinline__ static void write(const Params& p, int64_t r, int64_t cc, const Part& acc, int64_t,
                                               int64_t) {
    if (cc < p.HC) p.dX[r * p.HC + cc] = from_acc<T>(acc.v);
    else p.dAtt[r * p.HC + cc - p.HC] = static_cast<VT>(acc.v);
  }
};

// Hub pass: one warp per (segment, head); its 32 / G groups split each hub piece of the segment
// into contiguous parts. Scores write their edges; grad merges the parts (the agent's shuffle
// tree) and writes the piece's sums into slot 2 s + slot (row width `slot_width`: dX's H * C
// columns, then dAtt's when it is wanted).
template <class T, class I, int V, bool ONE, bool GRAD>
__global__ void __launch_bounds__(Gatv2Tuning::kBlockThreads)
gatv2_segment_kernel(typename Gatv2Agent<T, I, V, ONE>::Args a, int G, HubGeometry g,
                     typename AccOf<T>::type* __restrict__ ws, int64_t slot_width) {
  using Ag = Gatv2Agent<T, I, V, ONE>;
  using A = typename Ag::A;
  if (*g.flag == 0) return;
  const int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (item >= g.nsegments * a.H) return;  // whole warps leave together
  const int64_t s = item / a.H, h = item % a.H;
  const int lane = threadIdx.x % 32, sub = lane % G, part = lane / G, P = 32 / G;
  const int64_t HC = a.H * a.C;
  hub_pieces(a.rowptr, g, s, [&](int slot, int64_t r, int64_t kb, int64_t ke) {
    const int64_t n = ke - kb, b = kb + n * part / P, e = kb + n * (part + 1) / P;
    if constexpr (GRAD) {
      A* __restrict__ w = ws + (s * 2 + slot) * slot_width + h * a.C;
      const bool att = a.dAtt != nullptr;
      Ag::grad(a, r, h, b, e, G, sub, P, lane, [&](int64_t f, const A(&dx)[V], const A(&da)[V]) {
#pragma unroll
        for (int q = 0; q < V; ++q) {
          w[f + q] = dx[q];
          if (att) w[HC + f + q] = da[q];
        }
      });
    } else {
      Ag::scores(a, r, h, b, e, G, sub, group_mask(G));
    }
  });
}

// Resident blocks asked of the register allocator: the SDDMM dot kernel's numbers.
template <class T> constexpr int gatv2_min_blocks() {
  return sizeof(T) == 4 ? SddmmTuning::kMinBlocksDot : (sizeof(T) == 2 ? SddmmTuning::kMinBlocksDot16 : 1);
}

// One group of G lanes per (row, head) item; with G < 32, rows longer than kWarpRowMin are taken
// by the whole warp after its short rows (32 / G parts on contiguous slices). Hub rows (deg >
// hub_thr > 0) are left to the hub pass.
template <class T, class I, int V, bool ONE, bool GRAD>
__global__ void __launch_bounds__(Gatv2Tuning::kBlockThreads, gatv2_min_blocks<T>())
gatv2_row_kernel(typename Gatv2Agent<T, I, V, ONE>::Args a, int G, int64_t hub_thr) {
  using Ag = Gatv2Agent<T, I, V, ONE>;
  const int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G, lane = threadIdx.x % 32;
  const int64_t MH = a.M * a.H;
  int64_t kb = 0, ke = 0;
  if (item < MH) {
    const int64_t i = item / a.H;
    kb = __ldg(a.rowptr + i);
    ke = __ldg(a.rowptr + i + 1);
  }
  const bool split = G < 32;
  const bool hub = hub_thr > 0 && ke - kb > hub_thr;  // left to the hub pass
  const bool warp_row = split && !hub && ke - kb > Gatv2Tuning::kWarpRowMin;
  if (item < MH && !warp_row && !hub) Ag::template run<GRAD>(a, item, kb, ke, G, sub, 1, lane);
  if (split) {
    unsigned pending = __ballot_sync(0xffffffffu, warp_row && sub == 0);
    const int P = 32 / G, part = lane / G;
    while (pending) {
      const int leader = __ffs(pending) - 1;
      pending &= pending - 1;
      const int64_t it = __shfl_sync(0xffffffffu, static_cast<long long>(item), leader);
      const int64_t b = __shfl_sync(0xffffffffu, static_cast<long long>(kb), leader);
      const int64_t n = __shfl_sync(0xffffffffu, static_cast<long long>(ke), leader) - b;
      Ag::template run<GRAD>(a, it, b + n * part / P, b + n * (part + 1) / P, G, sub, P, lane);
    }
  }
}

template <class T, class I, int V, bool ONE, bool GRAD>
void launch_gatv2(const Gatv2Plan& p, const Gatv2Args& s, cudaStream_t stream) {
  using Ag = Gatv2Agent<T, I, V, ONE>;
  using A = typename Ag::A;
  using VT = typename Ag::VT;
  const typename Ag::Args a{static_cast<const I*>(s.A.rowptr), static_cast<const I*>(s.A.col),
                            static_cast<const T*>(s.X), static_cast<const T*>(s.Y), static_cast<const T*>(s.att),
                            static_cast<const VT*>(s.dS), static_cast<VT*>(s.S), static_cast<T*>(s.dX),
                            static_cast<VT*>(s.dAtt), s.A.M, s.H, s.C, static_cast<A>(s.slope)};
  constexpr int B = Gatv2Tuning::kBlockThreads;
  HubWorkspace ws;
  if (p.hub.seg > 0) {
    const size_t slots = static_cast<size_t>(p.hub.nsegments) * 2 * static_cast<size_t>(p.slot_width);
    ws.begin(p.hub, slots * sizeof(A), a.rowptr, s.A.M, s.A.nnz, s.A.max_degree, stream);
    A* wsv = GRAD ? ws.payload<A>() : nullptr;
    gatv2_segment_kernel<T, I, V, ONE, GRAD><<<static_cast<unsigned>(p.segment_blocks), B, 0, stream>>>(
        a, p.group, ws.geometry(), wsv, p.slot_width);
    GS_LAUNCH_CHECK("gatv2_segment_kernel");
    if constexpr (GRAD)
      launch_hub_combine<Gatv2Combine<T>>(p.hub, a.rowptr, ws,
                                          typename Gatv2Combine<T>::Params{wsv, a.dX, a.dAtt, s.H * s.C}, stream);
  }
  gatv2_row_kernel<T, I, V, ONE, GRAD>
      <<<static_cast<unsigned>(p.blocks), B, 0, stream>>>(a, p.group, p.hub.row_limit());
  GS_LAUNCH_CHECK(GRAD ? "gatv2_row_kernel (grad)" : "gatv2_row_kernel (scores)");
  ws.end();
}

// Checks sizes and pointers; false when there is nothing to compute.
inline bool gatv2_has_work(const Gatv2Args& s, bool grad) {
  const CsrView& A = s.A;
  const char* op = grad ? "gnnsparse cuda gatv2_grad: " : "gnnsparse cuda gatv2_scores: ";
  if (A.M < 0 || A.K < 0 || A.nnz < 0 || s.H < 0 || s.C < 0) throw std::invalid_argument(std::string(op) + "negative size");
  if (A.M == 0 || s.H == 0 || s.C == 0 || (!grad && A.nnz == 0)) return false;
  const bool edges = A.nnz > 0;
  bool ok = A.rowptr != nullptr && s.X != nullptr && s.att != nullptr && (!edges || (A.col != nullptr && s.Y != nullptr));
  ok = ok && (grad ? (s.dX != nullptr && (!edges || s.dS != nullptr)) : s.S != nullptr);
  if (!ok) throw std::invalid_argument(std::string(op) + "null pointer");
  return true;
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <class T, class I, bool GRAD>
void run_gatv2(const Gatv2Args& s, cudaStream_t stream) {
  if (!GRAD && s.C == 0 && s.A.M >= 0 && s.A.nnz > 0 && s.H > 0 && s.S != nullptr) {  // empty sums: 0
    GS_CUDA_CHECK(cudaMemsetAsync(s.S, 0, size_t(s.A.nnz * s.H) * sizeof(typename ValOf<T>::type), stream));
    return;
  }
  if (!gatv2_has_work(s, GRAD)) return;
  const bool aligned = aligned16(s.X) && aligned16(s.Y) && aligned16(s.att) && (!GRAD || aligned16(s.dX));
  const Gatv2Plan p = plan_gatv2(s.A.M, s.A.nnz, s.H, s.C, s.A.max_degree, sizeof(T), aligned, GRAD,
                                 s.dAtt != nullptr);
  check_grid(GRAD ? "gatv2_grad" : "gatv2_scores",
             {p.blocks, p.segment_blocks, p.hub.combine_blocks(), p.hub.map_blocks()}, 1);
  dispatch_vec<16 / int(sizeof(T))>(p.vec, [&](auto v) {
    constexpr int V = decltype(v)::value;
    if constexpr (GRAD) launch_gatv2<T, I, V, false, true>(p, s, stream);  // the grad pass ignores ONE
    else if (p.one) launch_gatv2<T, I, V, true, false>(p, s, stream);
    else launch_gatv2<T, I, V, false, false>(p, s, stream);
  });
}

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

void gatv2_scores(const Gatv2Args& s, cudaStream_t stream) {
  using namespace cuda_detail;
  dispatch_types(s.dtype, s.A.itype, [&](auto t, auto i) {
    run_gatv2<typename decltype(t)::type, typename decltype(i)::type, false>(s, stream);
  });
}

void gatv2_grad(const Gatv2Args& s, cudaStream_t stream) {
  using namespace cuda_detail;
  dispatch_types(s.dtype, s.A.itype, [&](auto t, auto i) {
    run_gatv2<typename decltype(t)::type, typename decltype(i)::type, true>(s, stream);
  });
}

}  // namespace gnnsparse::cuda
