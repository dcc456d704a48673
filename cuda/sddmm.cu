// SDDMM: E[k, h] = <X[i, h, :], Y[col k, h, :]> (dot) or X[i, h] + Y[col k, h] (add).
//
// dot (policy.cuh, plan_sddmm): a group of G lanes per (row, head), lanes split F into 16-byte
// vectors. The group walks its row in batches of U edges: U gathered Y rows in flight (the
// traffic), the row operand X[i] loaded once per batch (an L1 hit after the first), and one
// transposed butterfly finishes the U dot products (U - 1 shuffles, then log2(G / U) levels),
// each lane set writing one edge. No row search: the row is the group's. With short average rows
// a group takes R consecutive rows and walks them as one edge sequence (sddmm_dot_rows_kernel,
// SddmmRowsAgent), the row operands in shared memory. Hub rows (longer than
// the plan's threshold) take the hub pass of segments.cuh without its combine: a warp per
// (segment, head) splits each hub piece over its groups, which write their edges directly.
// add: up to 8 heads EdgesAdd (edges_add.cuh, shared with FusedMM's edge values): all heads of a
// row together, a warp per 32 short rows (lanes over their consecutive entries), a warp per longer
// row, hub rows' pieces by a warp per segment; more heads a group per run of kEdgesPerGroup
// consecutive edges (one binary search for its first row), lanes over heads.
// Fixed shuffle trees: bitwise reproducible.
// Dense-ish fp32 dot (sorted columns, one head) may take the tensor-core kernel of sddmm_tc.cu
// instead (run_sddmm asks sddmm_tc first; knob GNNSPARSE_CUDA_SDDMM=auto|row|tc).
#include "common.cuh"
#include "dispatch.cuh"
#include "edges_add.cuh"
#include "policy.cuh"
#include "sddmm_tc.cuh"
#include "segments.cuh"
#include "gnnsparse/cuda.hpp"

#include <cstdlib>
#include <cstring>

namespace gnnsparse::cuda_detail {

// ONE: each lane's share of F is one vector (F <= G * V), so the row operand X[i] is loaded once
// per row and kept in registers; otherwise the lanes loop over F in chunks of G * V.
template <class T, class I, int V, bool ONE>
struct SddmmDotAgent {
  using A = typename AccOf<T>::type;
  using Vec = VecT<T, V>;
  static constexpr int U = sizeof(T) == 8 || !ONE ? SddmmTuning::kUnrollWide : SddmmTuning::kUnroll;

  // Edges [kb, ke) of row i, head h, by a group of G >= U lanes (sub: this lane's index in it).
  __device__ __forceinline__ static void run(const I* __restrict__ col, const T* __restrict__ X,
                                             const T* __restrict__ Y, T* __restrict__ E, int64_t H,
                                             int64_t F, int64_t i, int64_t h, int64_t kb, int64_t ke,
                                             int G, int sub, unsigned mask) {
    const T* __restrict__ xrow = X + (i * H + h) * F;
    const int64_t f0 = int64_t(sub) * V;
    Vec x;
    if constexpr (ONE) {
      if (f0 < F) x = *reinterpret_cast<const Vec*>(xrow + f0);
    }
    I jn[U];  // the next batch's columns, loaded while this batch's rows are gathered
#pragma unroll
    for (int u = 0; u < U; ++u) jn[u] = kb + u < ke ? __ldg(col + kb + u) : I(0);
    for (int64_t k = kb; k < ke; k += U) {
      I j[U];
#pragma unroll
      for (int u = 0; u < U; ++u) j[u] = jn[u];
      A p[U];
#pragma unroll
      for (int u = 0; u < U; ++u) p[u] = A(0);
      for (int64_t f = f0; f < F; f += int64_t(G) * V) {
        Vec y[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (k + u < ke) y[u] = *reinterpret_cast<const Vec*>(Y + (static_cast<int64_t>(j[u]) * H + h) * F + f);
        if (f == f0) {
#pragma unroll
          for (int u = 0; u < U; ++u) jn[u] = k + U + u < ke ? __ldg(col + k + U + u) : I(0);
        }
        if constexpr (!ONE) x = *reinterpret_cast<const Vec*>(xrow + f);  // an L1 hit after the first batch
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (k + u < ke)
#pragma unroll
            for (int e = 0; e < V; ++e) p[u] += to_acc<A>(x.v[e]) * to_acc<A>(y[u].v[e]);
        if constexpr (ONE) break;
      }
      // Transposed butterfly (G >= U, both powers of two): at each of the first log2(U) levels a
      // lane keeps the half of its partial sums its side of the exchange owns and adds the
      // partner's copy of it, so U dot products cost U - 1 shuffles and end one per lane set;
      // the remaining levels finish each sum. Lane set `base` holds edge k + base.
      int base = 0, o = G >> 1;
#pragma unroll
      for (int half = U / 2; half >= 1; half >>= 1) {
        const bool lo = (sub & o) == 0;
#pragma unroll
        for (int q = 0; q < half; ++q) {
          const A keep = lo ? p[q] : p[q + half];
          const A send = lo ? p[q + half] : p[q];
          p[q] = keep + __shfl_xor_sync(mask, send, o);
        }
        base += lo ? 0 : half;
        o >>= 1;
      }
      A r = p[0];
      for (; o > 0; o >>= 1) r += __shfl_xor_sync(mask, r, o);
      // the G / U lanes that differ only in their low bits hold the same sum: the first writes
      if ((sub & (G / U - 1)) == 0 && k + base < ke) E[(k + base) * H + h] = from_acc<T>(r);
    }
  }
};

// The row kernel's multi-row walk (ONE only): a group streams the edges of R consecutive rows
// [i0, i0 + nr) of head h as one sequence [kb, kb + n), so batches run across row boundaries
// (with ~10 entries per row, the second batch of a row would otherwise be mostly empty). The row
// operands X[i0 + r] of the group live in shared memory (xs: this lane's vector of row r at
// xs[r * G]; each lane reads only what it wrote, so no barrier), and each edge takes its row's from
// there: row r of edge k is the number of row starts bnd[1..R-1] (offsets from kb, n for the
// rows past nr) at or below k.
template <class T, class I, int V, int R>
struct SddmmRowsAgent {
  using A = typename AccOf<T>::type;
  using Vec = VecT<T, V>;
  static constexpr int U = sizeof(T) == 8 ? SddmmTuning::kUnrollWide : SddmmTuning::kUnroll;

  __device__ __forceinline__ static void run(const I* __restrict__ col, const T* __restrict__ X,
                                             const T* __restrict__ Y, T* __restrict__ E, int64_t H,
                                             int64_t F, int64_t i0, int nr, int64_t h, int64_t kb, int n,
                                             const int (&bnd)[R], int G, int sub, unsigned mask,
                                             Vec* __restrict__ xs) {
    const int64_t f0 = int64_t(sub) * V;
    const bool fok = f0 < F;
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (r < nr && fok) xs[r * G] = *reinterpret_cast<const Vec*>(X + ((i0 + r) * H + h) * F + f0);
    const I* __restrict__ colp = col + kb;
    const T* __restrict__ yb = Y + h * F + f0;
    const int64_t ys = H * F;
    T* __restrict__ ep = E + kb * H + h;
    // the next batch's columns, loaded while this batch's rows are gathered (64-bit indices load
    // their own batch's: prefetched, they spilled 80-92 bytes at 80 registers)
    constexpr bool kPrefetch = sizeof(I) == 4;
    I jn[U];
#pragma unroll
    for (int u = 0; u < U; ++u) jn[u] = kPrefetch && u < n ? __ldg(colp + u) : I(0);
#pragma unroll 1
    for (int k = 0; k < n; k += U) {
      I j[U];
#pragma unroll
      for (int u = 0; u < U; ++u) j[u] = kPrefetch ? jn[u] : (k + u < n ? __ldg(colp + k + u) : I(0));
      Vec y[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (fok && k + u < n) y[u] = *reinterpret_cast<const Vec*>(yb + static_cast<int64_t>(j[u]) * ys);
#pragma unroll
      for (int u = 0; u < U; ++u) jn[u] = kPrefetch && k + U + u < n ? __ldg(colp + k + U + u) : I(0);
      A p[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        p[u] = A(0);
        if (fok && k + u < n) {
          int r = 0;
#pragma unroll
          for (int q = 1; q < R; ++q) r += k + u >= bnd[q];
          const Vec x = xs[r * G];
#pragma unroll
          for (int e = 0; e < V; ++e) p[u] += to_acc<A>(x.v[e]) * to_acc<A>(y[u].v[e]);
        }
      }
      int base;
      const A sum = transpose_reduce<U>(p, G, sub, mask, base);
      // the G / U lanes that differ only in their low bits hold the same sum: the first writes
      if ((sub & (G / U - 1)) == 0 && k + base < n) ep[(k + base) * H] = from_acc<T>(sum);
    }
  }
};

// Resident blocks asked of the register allocator, the most that compile without spilling for
// sm_90: 3 (<= 80 registers) for 4-byte features, 2 for 2-byte ones (8 products per vector).
template <class T> constexpr int sddmm_min_blocks() {
  return sizeof(T) == 4 ? SddmmTuning::kMinBlocksDot : (sizeof(T) == 2 ? SddmmTuning::kMinBlocksDot16 : 1);
}
// Below sm_90 one block fewer for the instances that spilled there at that value (arch_min_blocks;
// nvcc 13.0, sm_80): fp32 on the vector path, the row kernel with int64 indices (ONE) 32 bytes, the
// rows kernel with int32 indices 12-36; and an explicit 1 for the long-rows kernel (no bound of its
// own) with bf16 and int64 indices (8 bytes at the 64 registers ptxas chose).
template <class T, class I, int V, bool ONE> constexpr int sddmm_row_min_blocks() {
  return arch_min_blocks(sddmm_min_blocks<T>(), sizeof(T) == 4 && V == 4 && ONE && sizeof(I) == 8);
}
template <class T, class I, int V> constexpr int sddmm_rows_min_blocks() {
  return arch_min_blocks(sddmm_min_blocks<T>(), sizeof(T) == 4 && V == 4 && sizeof(I) == 4);
}
template <class T, class I, int V, bool ONE> constexpr int sddmm_long_rows_min_blocks() {
  return arch_min_blocks(0, std::is_same_v<T, __nv_bfloat16> && sizeof(I) == 8 && V == 1 && !ONE);
}

// One group of G lanes per (row, head). Rows longer than long_min (> 0) are left to
// sddmm_dot_long_rows_kernel, hub rows (deg > hub_thr > 0) to the hub pass.
template <class T, class I, int V, bool ONE>
__global__ void __launch_bounds__(SddmmTuning::kBlockThreads, (sddmm_row_min_blocks<T, I, V, ONE>()))
sddmm_dot_row_kernel(const I* __restrict__ rowptr, const I* __restrict__ col, const T* __restrict__ X,
                     const T* __restrict__ Y, T* __restrict__ E, int64_t M, int64_t H, int64_t F, int G,
                     int64_t long_min) {
  const int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G;
  if (item >= M * H) return;  // whole groups leave together
  const int64_t i = item / H, h = item % H;
  const int64_t kb = __ldg(rowptr + i), ke = __ldg(rowptr + i + 1);
  if (long_min > 0 && ke - kb > long_min) return;
  SddmmDotAgent<T, I, V, ONE>::run(col, X, Y, E, H, F, i, h, kb, ke, G, sub, group_mask(G));
}

// ONE, R > 1: one group of G lanes per R consecutive rows and a head (group g: rows
// R (g / H) .., head g % H), walked as one edge sequence (SddmmRowsAgent). Rows longer than
// long_min (> 0) are left to sddmm_dot_long_rows_kernel or the hub pass; a group that holds one
// walks its other rows one at a time.
template <class T, class I, int V, int R>
__global__ void __launch_bounds__(SddmmTuning::kBlockThreads, (sddmm_rows_min_blocks<T, I, V>()))
sddmm_dot_rows_kernel(const I* __restrict__ rowptr, const I* __restrict__ col, const T* __restrict__ X,
                      const T* __restrict__ Y, T* __restrict__ E, int64_t M, int64_t H, int64_t F, int G,
                      int64_t long_min) {
  using Ag = SddmmRowsAgent<T, I, V, R>;
  using Vec = typename Ag::Vec;
  __shared__ Vec xs_all[R * SddmmTuning::kBlockThreads];
  const int64_t g = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G;
  const int64_t h = g % H, i0 = g / H * R;
  if (i0 >= M) return;  // whole groups leave together
  const int nr = static_cast<int>(M - i0 < R ? M - i0 : int64_t(R));
  int64_t b[R + 1];
#pragma unroll
  for (int r = 0; r <= R; ++r) b[r] = __ldg(rowptr + i0 + (r < nr ? r : nr));
  Vec* xs = xs_all + (threadIdx.x - sub) * R + sub;  // this group's R x G vectors, this lane's column
  const unsigned mask = group_mask(G);
  bool any_long = false;
#pragma unroll
  for (int r = 0; r < R; ++r) any_long |= long_min > 0 && b[r + 1] - b[r] > long_min;
  if (!any_long) {
    int bnd[R];
#pragma unroll
    for (int r = 0; r < R; ++r) bnd[r] = static_cast<int>(b[r] - b[0]);
    Ag::run(col, X, Y, E, H, F, i0, nr, h, b[0], static_cast<int>(b[R] - b[0]), bnd, G, sub, mask, xs);
  } else {
#pragma unroll 1
    for (int r = 0; r < nr; ++r) {
      const int64_t kb = __ldg(rowptr + i0 + r), ke = __ldg(rowptr + i0 + r + 1);
      if (ke - kb > long_min) continue;
      int bnd[R];
#pragma unroll
      for (int q = 0; q < R; ++q) bnd[q] = static_cast<int>(ke - kb);
      bnd[0] = 0;
      Ag::run(col, X, Y, E, H, F, i0 + r, 1, h, kb, static_cast<int>(ke - kb), bnd, G, sub, mask, xs);
    }
  }
}

// Rows longer than kWarpRowMin (and not hubs): warp w looks at the 32 (row, head) items
// 32 w .. 32 w + 31 and runs each long one with all its 32 / G groups, which split the row's
// edges (a power-law graph's rows of 33..256 entries would otherwise keep one group busy while
// the rest of its warp waits). A kernel of its own, so the row kernel keeps its registers.
template <class T, class I, int V, bool ONE>
__global__ void __launch_bounds__(SddmmTuning::kBlockThreads, (sddmm_long_rows_min_blocks<T, I, V, ONE>()))
sddmm_dot_long_rows_kernel(const I* __restrict__ rowptr, const I* __restrict__ col, const T* __restrict__ X,
                           const T* __restrict__ Y, T* __restrict__ E, int64_t M, int64_t H, int64_t F, int G,
                           int64_t hub_thr) {
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32, sub = lane % G, part = lane / G, NG = 32 / G;
  const int64_t item = warp * 32 + lane;
  int64_t kb = 0, ke = 0;
  if (item < M * H) {
    const int64_t i = item / H;
    kb = __ldg(rowptr + i);
    ke = __ldg(rowptr + i + 1);
  }
  const int64_t deg = ke - kb;
  unsigned pending = __ballot_sync(0xffffffffu, deg > SddmmTuning::kWarpRowMin && !(hub_thr > 0 && deg > hub_thr));
  const unsigned mask = group_mask(G);
  while (pending) {
    const int leader = __ffs(pending) - 1;
    pending &= pending - 1;
    const int64_t it = warp * 32 + leader;
    const int64_t b = __shfl_sync(0xffffffffu, static_cast<long long>(kb), leader);
    const int64_t n = __shfl_sync(0xffffffffu, static_cast<long long>(ke), leader) - b;
    SddmmDotAgent<T, I, V, ONE>::run(col, X, Y, E, H, F, it / H, it % H, b + n * part / NG,
                                     b + n * (part + 1) / NG, G, sub, mask);
  }
}

// Hub pass: one warp per (segment, head); its 32 / G groups split each hub piece of the segment
// into contiguous parts and write their edges (no workspace, no combine).
template <class T, class I, int V, bool ONE>
__global__ void __launch_bounds__(SddmmTuning::kBlockThreads)
sddmm_dot_segment_kernel(const I* __restrict__ rowptr, const I* __restrict__ col, const T* __restrict__ X,
                         const T* __restrict__ Y, T* __restrict__ E, int64_t H, int64_t F, int G,
                         HubGeometry g) {
  if (*g.flag == 0) return;
  const int64_t item = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (item >= g.nsegments * H) return;  // whole warps leave together
  const int64_t s = item / H, h = item % H;
  const int lane = threadIdx.x % 32, sub = lane % G, part = lane / G, NG = 32 / G;
  const unsigned mask = group_mask(G);
  hub_pieces(rowptr, g, s, [&](int, int64_t r, int64_t kb, int64_t ke) {
    const int64_t n = ke - kb;
    SddmmDotAgent<T, I, V, ONE>::run(col, X, Y, E, H, F, r, h, kb + n * part / NG, kb + n * (part + 1) / NG, G, sub,
                                mask);
  });
}

// add: one value per (edge, head); a group of G lanes (over heads) per run of kEdgesPerGroup
// consecutive edges, its first row found by binary search, then a forward walk.
template <class T, class I>
__global__ void __launch_bounds__(SddmmTuning::kBlockThreads)
sddmm_add_kernel(const I* __restrict__ rowptr, const I* __restrict__ col, const T* __restrict__ X,
                 const T* __restrict__ Y, T* __restrict__ E, int64_t M, int64_t nnz, int64_t H, int G) {
  using A = typename AccOf<T>::type;
  constexpr int EPG = SddmmTuning::kEdgesPerGroup;
  const int64_t g = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int sub = threadIdx.x % G;
  const int64_t k0 = g * EPG;
  if (k0 >= nnz) return;
  const int64_t k1 = min(nnz, k0 + EPG);
  constexpr int U = SddmmTuning::kUnrollAdd;
  int64_t r = row_of(rowptr, M, k0);
  int64_t rend = __ldg(rowptr + r + 1);
  for (int64_t k = k0; k < k1; k += U) {
    int64_t i[U], j[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t kk = k + u;
      if (kk < k1) {
        while (kk >= rend) { ++r; rend = __ldg(rowptr + r + 1); }
        j[u] = __ldg(col + kk);
      } else {
        j[u] = 0;
      }
      i[u] = r;
    }
    for (int64_t h = sub; h < H; h += G)
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (k + u < k1) E[(k + u) * H + h] = from_acc<T>(to_acc<A>(X[i[u] * H + h]) + to_acc<A>(Y[j[u] * H + h]));
  }
}

// Checks sizes and pointers; false when there is nothing to compute.
inline bool sddmm_has_work(const SddmmArgs& a) {
  const CsrView& A = a.A;
  if (A.M < 0 || A.K < 0 || A.nnz < 0 || a.H < 0 || a.F < 0)
    throw std::invalid_argument("gnnsparse cuda sddmm: negative size");
  if (A.nnz == 0 || a.H == 0) return false;
  if (a.E == nullptr) throw std::invalid_argument("gnnsparse cuda sddmm: null pointer");
  return true;
}

// GNNSPARSE_CUDA_SDDMM_ROWS: unset or "" (the plan), or 1, 2, 4: rows per group of the dot row kernel
// (1: the kernels the row walks replaced, kept for comparison in the bench and the tests: dot a
// group per row; add the edge-chunk kernel, not EdgesAdd). Read at every call.
inline int sddmm_rows_override() {
  const char* e = std::getenv("GNNSPARSE_CUDA_SDDMM_ROWS");
  if (e == nullptr || *e == '\0') return 0;
  if (std::strcmp(e, "1") == 0) return 1;
  if (std::strcmp(e, "2") == 0) return 2;
  if (std::strcmp(e, "4") == 0) return 4;
  throw std::invalid_argument(std::string("gnnsparse cuda: GNNSPARSE_CUDA_SDDMM_ROWS must be 1, 2 or 4, got '") + e +
                              "'");
}

template <class T, class I, SddmmOp OP>
void run_sddmm(const SddmmArgs& a, cudaStream_t stream) {
  if (!sddmm_has_work(a)) return;
  const int64_t M = a.A.M, nnz = a.A.nnz, H = a.H, F = a.F;
  auto* ep = static_cast<T*>(a.E);
  if (OP == SddmmOp::dot && F == 0) {  // empty dot products: E = 0
    GS_CUDA_CHECK(cudaMemsetAsync(ep, 0, static_cast<size_t>(nnz * H) * sizeof(T), stream));
    return;
  }
  if (a.A.rowptr == nullptr || a.A.col == nullptr || a.X == nullptr || a.Y == nullptr)
    throw std::invalid_argument("gnnsparse cuda sddmm: null pointer");
  // dense-ish fp32 dot: the tensor-core panel kernel (sddmm_tc.cu) where the policy takes it
  if constexpr (OP == SddmmOp::dot)
    if (sddmm_tc<I>(a, stream)) return;
  const bool aligned = reinterpret_cast<uintptr_t>(a.X) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(a.Y) % 16 == 0;
  const SddmmPlan p = plan_sddmm(M, nnz, H, F, a.A.max_degree, OP == SddmmOp::add, sizeof(T), aligned,
                                 sddmm_rows_override());
  check_grid("sddmm", {p.blocks, p.rows_blocks, p.long_blocks, p.segment_blocks, p.hub.map_blocks()}, 1);
  const auto* rp = static_cast<const I*>(a.A.rowptr);
  const auto* cp = static_cast<const I*>(a.A.col);
  const auto* xp = static_cast<const T*>(a.X);
  const auto* yp = static_cast<const T*>(a.Y);
  constexpr int B = SddmmTuning::kBlockThreads;
  if constexpr (OP == SddmmOp::add) {
    if (H <= 8 && p.rows != 1) {  // EdgesAdd (edges_add.cuh): all heads of a row per lane or warp
      auto rows = [&](auto hm) {
        constexpr int HM = decltype(hm)::value;
        const size_t vb = sizeof(T) * HM;
        const bool vec = H == HM && reinterpret_cast<uintptr_t>(yp) % vb == 0 && reinterpret_cast<uintptr_t>(ep) % vb == 0;
        launch_edges_map<T, I, EdgeFn::none, HM>(p.hub, {rp, cp, nullptr, xp, yp, ep, M, H, 0.0, vec}, nnz,
                                                 a.A.max_degree, stream);
      };
      if (H <= 4) rows(std::integral_constant<int, 4>{});
      else rows(std::integral_constant<int, 8>{});
      return;
    }
    sddmm_add_kernel<T, I><<<static_cast<unsigned>(p.blocks), B, 0, stream>>>(rp, cp, xp, yp, ep, M, nnz, H,
                                                                               p.group);
    GS_LAUNCH_CHECK("sddmm_add_kernel");
  } else {
    dispatch_vec<16 / sizeof(T)>(p.vec, [&](auto v) {
      constexpr int V = decltype(v)::value;
      auto launch = [&](auto one) {
        constexpr bool ONE = decltype(one)::value;
        HubWorkspace ws;
        if (p.hub.seg > 0) {
          ws.begin(p.hub, 0, rp, M, nnz, a.A.max_degree, stream);
          sddmm_dot_segment_kernel<T, I, V, ONE><<<static_cast<unsigned>(p.segment_blocks), B, 0, stream>>>(
              rp, cp, xp, yp, ep, H, F, p.group, ws.geometry());
          GS_LAUNCH_CHECK("sddmm_dot_segment_kernel");
        }
        // rows longer than kWarpRowMin go to the long-row kernel (when a group is less than a warp
        // and such rows may exist), the rest to the row kernel
        const bool long_rows = p.group < 32 && (a.A.max_degree < 0 || a.A.max_degree > SddmmTuning::kWarpRowMin);
        if (long_rows) {
          sddmm_dot_long_rows_kernel<T, I, V, ONE><<<static_cast<unsigned>(p.long_blocks), B, 0, stream>>>(
              rp, cp, xp, yp, ep, M, H, F, p.group, p.hub.row_limit());
          GS_LAUNCH_CHECK("sddmm_dot_long_rows_kernel");
        }
        const int64_t long_min = long_rows ? SddmmTuning::kWarpRowMin : p.hub.row_limit();
        if constexpr (ONE) {
          if (p.rows > 1) {
            auto rows = [&](auto r) {
              constexpr int R = decltype(r)::value;
              sddmm_dot_rows_kernel<T, I, V, R><<<static_cast<unsigned>(p.rows_blocks), B, 0, stream>>>(
                  rp, cp, xp, yp, ep, M, H, F, p.group, long_min);
              GS_LAUNCH_CHECK("sddmm_dot_rows_kernel");
            };
            if (p.rows == 2) rows(std::integral_constant<int, 2>{});
            else rows(std::integral_constant<int, SddmmTuning::kMaxRows>{});
            ws.end();
            return;
          }
        }
        sddmm_dot_row_kernel<T, I, V, ONE><<<static_cast<unsigned>(p.blocks), B, 0, stream>>>(
            rp, cp, xp, yp, ep, M, H, F, p.group, long_min);
        GS_LAUNCH_CHECK("sddmm_dot_row_kernel");
        ws.end();
      };
      if (p.one) launch(std::true_type{});
      else launch(std::false_type{});
    });
  }
}

}  // namespace gnnsparse::cuda_detail

namespace gnnsparse::cuda {

void sddmm(const SddmmArgs& a, cudaStream_t stream) {
  using namespace cuda_detail;
  check_precision(a.precision);
  dispatch_types(a.dtype, a.A.itype, [&](auto t, auto i) {
    dispatch_sddmm_op(a.op, [&](auto op) {
      run_sddmm<typename decltype(t)::type, typename decltype(i)::type, decltype(op)::value>(a, stream);
    });
  });
}

}  // namespace gnnsparse::cuda
