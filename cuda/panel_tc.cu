// Dense-ish SpMM on tensor cores (fp32 sum / mean, CSR rows with sorted columns, C % 4 == 0):
// row panels densified by scatter, multiplied with mma.sync at fp32 accuracy (3xTF32) or in TF32.
//
// At 10-30 % density a CUDA-core kernel needs one shared load per fma (panel.cu): its ceiling is
// ~25 % of the FMA peak. The tensor cores reuse operands in registers, but only on dense tiles; the
// 2026-11-30 tiles (bench/grid/tiles) densified one 4-byte cp.async per *dense* entry and were bound
// by that. Here the densify costs per *stored* entry: a block owns BM rows x BN columns of Y and
// walks K in chunks of BK = 32 columns; per chunk each warp zeroes its rows of a BM x BK tile of A
// in shared memory (16-byte stores) and scatters the rows' entries of the chunk into it. Columns
// are sorted, so a row's entries of a chunk are contiguous from a per-row cursor: a window of the
// next 32 entries (columns, values) of every row is prefetched with cp.async one chunk ahead, lane
// j holds entry j, one ballot counts the window's entries inside the chunk (a prefix), and the
// window is refilled from global memory inside the chunk only when all 32 fall in it (repeated
// columns). Repeated columns: the first lane of a run of equal columns adds the run's values in CSR
// order, then adds that sum to the tile (zero, or the previous window's part of the run): one
// writer per address, a fixed order. X's BK x BN chunk arrives with 16-byte cp.async (two
// buffers; rows past K and columns past C zero-filled).
//
// Products: warps own 32 x 32 tiles of Y (2 x 4 m16n8k8 tiles). Precision fp32: each operand split
// into big + small tf32 parts (mma.cuh, Prec<fp32>), small*big + big*small + big*big; the tensor
// cores accumulate with truncation, so each k step's product (8 values of k) starts from zero and
// is then added to the running sum with one fp32 add (round to nearest): the sum over K is an fp32
// sum in k-step order. (Folding once per 32-column chunk, as the 2026-11-30 tiles did, needs 32
// more registers a thread and spilled at two blocks of 256 threads per SM.) Precision tf32: one product per step, accumulated across chunks on the tensor cores.
// bf16 requests run the fp32 kernel (more accurate than asked).
//
// Small M: K split into S slices (a lane binary search finds each row's first entry of the slice);
// each slice writes its partial tile to a workspace, panel_combine_kernel adds them in slice order.
// Everything has a fixed order (data and plan): results are bitwise reproducible. No atomics.
//
// Note: the dense tile multiplies A's zeros with every row of X in the chunk, so an Inf / NaN in a
// row of X that a row of A does not reference still makes that row NaN (0 * Inf), unlike the row
// kernels. The auto policy takes this path only for dense-ish matrices (policy.cuh).
#include <algorithm>
#include <climits>
#include <cstdint>

#include "common.cuh"
#include "dispatch.cuh"
#include "mma.cuh"
#include "panel.cuh"
#include "panel_common.cuh"
#include "policy.cuh"

namespace gnnsparse::cuda_detail {
namespace {

using tiles::Prec;

// 4 / 8-byte asynchronous copy global -> shared (the index width), always reading src.
template <int B>
__device__ __forceinline__ void cp_async_small(void* dst, const void* src) {
  const uint32_t s = tiles::smem_addr(dst);
  if constexpr (B == 8) asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(src) : "memory");
  else asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src) : "memory");
}

template <int BN, int WM, class I, class Off>
struct TcSmem {
  static constexpr int WN = BN / 32, NW = WM * WN, BM = WM * 32, BK = TcTuning::kBK;
  static constexpr int LDA = TcTuning::kLdA, LDX = BN + 4, W = TcTuning::kWindow;
  static_assert(LDA % 32 == 8 && LDX % 32 == 4, "conflict-free fragment loads (mma.cuh)");
  static constexpr size_t kX = sizeof(float) * 2 * BK * LDX;   // X chunks, two buffers
  static constexpr size_t kA = sizeof(float) * 2 * BM * LDA;   // A tiles, two buffers
  static constexpr size_t kWv = sizeof(float) * BM * W;        // window values
  static constexpr size_t kWc = sizeof(I) * BM * W;            // window columns
  static constexpr size_t kCur = sizeof(Off) * 2 * BM;         // row cursor and end
  static constexpr size_t bytes() { return kX + kA + kWv + kWc + kCur; }
};

// Block b: column block b % col_blocks, then K slice, then panel (as panel.cu). With split == 1
// `out` is Y (mean divided, empty rows 0); otherwise the slice's raw sums go to out + slice * M * C.
template <Precision P, int BN, int WM, class I, class Off>
__global__ void __launch_bounds__(WM * BN, 2)
spmm_tc_kernel(const I* __restrict__ rowptr, const I* __restrict__ col, const float* __restrict__ val,
               const float* __restrict__ X, float* __restrict__ out, int64_t M, int K, int64_t C,
               int64_t col_blocks, int split, int mean) {
  using SM = TcSmem<BN, WM, I, Off>;
  constexpr int WN = SM::WN, NW = SM::NW, NT = NW * 32, BM = SM::BM, BK = SM::BK;
  constexpr int LDA = SM::LDA, LDX = SM::LDX, W = SM::W;
  constexpr int RPW = BM / NW;  // rows each warp densifies
  static_assert(BM % NW == 0 && RPW <= 32, "one lane per row of a warp in the setup");
  constexpr int KSTEP = Prec<P>::kStep;
  static_assert(KSTEP == 8 && BK % KSTEP == 0, "tf32 steps");
  constexpr bool kFold = P == Precision::fp32;  // k-step sums from zero, added in fp32
  using FragA = typename Prec<P>::FragA;
  using FragB = typename Prec<P>::FragB;

  extern __shared__ float4 tc_smem[];
  float* xs = reinterpret_cast<float*>(tc_smem);                         // [2][BK][LDX]
  float* as = xs + 2 * BK * LDX;                                          // [2][BM][LDA]
  float* wval = as + 2 * BM * LDA;                                        // [BM][W]
  I* wcol = reinterpret_cast<I*>(wval + BM * W);                          // [BM][W]
  Off* cur = reinterpret_cast<Off*>(reinterpret_cast<char*>(wcol) + SM::kWc);  // [BM]
  Off* rend = cur + BM;                                                   // [BM]

  int64_t b = blockIdx.x;
  const int64_t cb = b % col_blocks;
  b /= col_blocks;
  const int slice = static_cast<int>(b % split);
  const int64_t row0 = (b / split) * BM, n0 = cb * BN;
  const int nchunks = (K + BK - 1) / BK;
  const int c_begin = static_cast<int>(int64_t(nchunks) * slice / split);
  const int c_end = static_cast<int>(int64_t(nchunks) * (slice + 1) / split);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int wm = warp / WN, wn = warp % WN;
  const int r_first = warp * RPW;  // the warp's rows for the scatter: r_first .. r_first + RPW - 1

  // ---- rows: lane i of a warp sets up row r_first + i (its slice's first entry: binary search) --
  if (lane < RPW) {
    const int r = r_first + lane;
    const int64_t row = row0 + r;
    Off rs = 0, re = 0;
    if (row < M) {
      rs = static_cast<Off>(__ldg(rowptr + row));
      re = static_cast<Off>(__ldg(rowptr + row + 1));
    }
    if (c_begin > 0) {
      const int64_t key = int64_t(c_begin) * BK;
      Off lo = rs, hi = re;
      while (lo < hi) {
        const Off mid = lo + (hi - lo) / 2;
        if (static_cast<int64_t>(__ldg(col + mid)) < key) lo = mid + 1;
        else hi = mid;
      }
      rs = lo;
    }
    cur[r] = rs;
    rend[r] = re;
  }
  __syncwarp();

  // The next W entries of each of the warp's rows (from its cursor) into the window, async.
  auto issue_window = [&]() {
    for (int i = 0; i < RPW; ++i) {
      const int r = r_first + i;
      const Off idx = cur[r] + lane;
      if (idx < rend[r]) {
        cp_async_small<sizeof(I)>(wcol + r * W + lane, col + idx);
        if (val != nullptr) cp_async_small<4>(wval + r * W + lane, val + idx);
      }
    }
  };
  // Chunk ch of X (rows ch BK .., the block's columns) into buffer buf; zero-filled past K and C.
  constexpr int VPR = BN / 4;
  static_assert((BK * VPR) % NT == 0, "the chunk copy splits evenly over the block");
  auto issue_x = [&](int ch, int buf) {
    float* dst = xs + buf * (BK * LDX);
#pragma unroll
    for (int i = 0; i < BK * VPR / NT; ++i) {
      const int v = tid + i * NT, kr = v / VPR, c4 = (v % VPR) * 4;
      const int64_t k = int64_t(ch) * BK + kr, cc = n0 + c4;
      const bool ok = k < K && cc < C;
      tiles::cp_async16(dst + kr * LDX + c4, ok ? X + k * C + cc : X, ok);
    }
  };
  // Chunk ch of the warp's rows into A tile buf: zero them, then scatter the window's entries of
  // the chunk (refilled synchronously while a whole window falls inside the chunk).
  auto scatter = [&](int ch, int buf) {
    float* at = as + buf * (BM * LDA);
    constexpr int VPRA = BK / 4;  // 16-byte vectors per tile row
#pragma unroll
    for (int v = lane; v < RPW * VPRA; v += 32)
      *reinterpret_cast<float4*>(at + (r_first + v / VPRA) * LDA + (v % VPRA) * 4) = make_float4(0.f, 0.f, 0.f, 0.f);
    __syncwarp();
    const int k0 = ch * BK, kend = k0 + BK;
    for (int i = 0; i < RPW; ++i) {
      const int r = r_first + i;
      I* wc = wcol + r * W;
      float* wv = wval + r * W;
      float* arow = at + r * LDA;
      Off c = cur[r];
      const Off e = rend[r];
      for (;;) {
        const int avail = e - c < Off(W) ? static_cast<int>(e - c) : W;
        const int cj = lane < avail ? static_cast<int>(wc[lane]) : INT_MAX;
        const bool in = cj < kend;
        const int cnt = __popc(__ballot_sync(0xffffffffu, in));  // a prefix: sorted columns
        if (in && (lane == 0 || static_cast<int>(wc[lane - 1]) != cj)) {
          // first lane of a run of equal columns: the run's sum, in CSR order
          float s = val != nullptr ? wv[lane] : 1.f;
          for (int q = lane + 1; q < cnt && static_cast<int>(wc[q]) == cj; ++q) s += val != nullptr ? wv[q] : 1.f;
          if (static_cast<unsigned>(cj - k0) < static_cast<unsigned>(BK)) arow[cj - k0] += s;
        }
        c += cnt;
        if (cnt < W || c >= e) break;
        // all W entries fell inside the chunk: refill the window from global memory
        __syncwarp();
        if (c + lane < e) {
          wc[lane] = __ldg(col + c + lane);
          if (val != nullptr) wv[lane] = __ldg(val + c + lane);
        }
        __syncwarp();
      }
      __syncwarp();  // the window is read before the next one is copied over it
      if (lane == 0) cur[r] = c;
    }
    __syncwarp();
  };

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  auto compute = [&](int buf) {
    const float* at = as + buf * (BM * LDA);
    const float* xt = xs + buf * (BK * LDX);
#pragma unroll 1
    for (int ks = 0; ks < BK / KSTEP; ++ks) {
      FragA a[2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) tiles::load_a<P>(a[mt], at, LDA, wm * 32 + mt * 16, ks * KSTEP, g, t);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        FragB fb;
        tiles::load_b_kn<P>(fb, xt, LDX, ks * KSTEP, wn * 32 + nt * 8, g, t);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          if constexpr (kFold) {
            // the step's three products from zero, then one fp32 add per element (round to
            // nearest): the tensor cores' truncating accumulation spans 8 values of k only
            float d[4];
            Prec<P>::mma_zero(d, a[mt], fb);
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mt][nt][e] += d[e];
          } else {
            Prec<P>::mma(acc[mt][nt], a[mt], fb);
          }
        }
      }
    }
  };

  // ---- pipeline: chunk ch + 1's X and A tile are built while chunk ch is multiplied -----------
  // Iteration ch: wait for everything in flight (X chunk ch + 1 was issued a whole iteration ago,
  // the window for ch + 1 before the last products), barrier; issue X ch + 1; scatter ch + 1 from
  // its window; issue the window for ch + 2; multiply chunk ch.
  if (c_begin < c_end) {
    issue_window();
    issue_x(c_begin, 0);
    tiles::cp_async_commit();
    tiles::cp_async_wait<0>();
    __syncwarp();
    scatter(c_begin, 0);
    issue_window();
    tiles::cp_async_commit();
  }
  for (int ch = c_begin; ch < c_end; ++ch) {
    const int buf = (ch - c_begin) & 1;
    tiles::cp_async_wait<0>();
    __syncthreads();  // X and A of chunk ch are in `buf`; everyone is done with the other buffers
    if (ch + 1 < c_end) {
      issue_x(ch + 1, buf ^ 1);
      tiles::cp_async_commit();
      scatter(ch + 1, buf ^ 1);
      issue_window();
      tiles::cp_async_commit();
    }
    compute(buf);
  }
  tiles::cp_async_wait<0>();  // (nothing useful is left in flight; no copy outlives the block)

  // ---- epilogue: C fragment (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1) of each tile ----
  const int64_t MC = M * C;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = row0 + wm * 32 + mt * 16 + g + 8 * h;
      if (row >= M) continue;
      float* dst = out + (split > 1 ? slice * MC : 0) + row * C;
      float scale = 1.f;
      bool zero = false;
      if (split == 1) {
        const int64_t deg = static_cast<int64_t>(__ldg(rowptr + row + 1)) - static_cast<int64_t>(__ldg(rowptr + row));
        zero = deg == 0;
        if (mean && deg > 0) scale = static_cast<float>(deg);
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int64_t cc = n0 + wn * 32 + nt * 8 + 2 * t;  // even, C % 4 == 0: both columns or none
        if (cc >= C) continue;
        float y0 = acc[mt][nt][2 * h], y1 = acc[mt][nt][2 * h + 1];
        if (zero) y0 = y1 = 0.f;
        else if (scale != 1.f) y0 /= scale, y1 /= scale;
        *reinterpret_cast<float2*>(dst + cc) = make_float2(y0, y1);
      }
    }
}

template <Precision P, TcShape S, class I, class Off>
void launch_tc(const TcPlan& p, const SpmmArgs& a, bool mean, cudaStream_t stream) {
  constexpr TcGeom Gm = tc_geom(S);
  constexpr int BN = Gm.bn, WM = Gm.wm;
  constexpr size_t smem = TcSmem<BN, WM, I, Off>::bytes();
  constexpr auto kernel = spmm_tc_kernel<P, BN, WM, I, Off>;
  raise_smem_limit<kernel>(smem);
  const auto* rp = static_cast<const I*>(a.A.rowptr);
  const auto* cp = static_cast<const I*>(a.A.col);
  const auto* vp = static_cast<const float*>(a.A.val);
  const auto* xp = static_cast<const float*>(a.X);
  auto* yp = static_cast<float*>(a.Y);
  const int64_t M = a.A.M, C = a.C;
  const unsigned grid = static_cast<unsigned>(p.blocks());
  constexpr int threads = Gm.threads();
  if (p.split == 1) {
    kernel<<<grid, threads, smem, stream>>>(rp, cp, vp, xp, yp, M, static_cast<int>(a.A.K), C, p.col_blocks, 1, mean);
    GS_LAUNCH_CHECK("spmm_tc_kernel");
    return;
  }
  SplitWorkspace ws(static_cast<size_t>(p.split) * static_cast<size_t>(M * C) * sizeof(float), stream);
  kernel<<<grid, threads, smem, stream>>>(rp, cp, vp, xp, ws.get(), M, static_cast<int>(a.A.K), C, p.col_blocks,
                                          static_cast<int>(p.split), mean);
  GS_LAUNCH_CHECK("spmm_tc_kernel");
  const int64_t blocks = std::min<int64_t>((M * C + kCombineThreads - 1) / kCombineThreads, kCombineMaxBlocks);
  panel_combine_kernel<I><<<static_cast<unsigned>(blocks), kCombineThreads, 0, stream>>>(
      rp, ws.get(), yp, M, C, static_cast<int>(p.split), mean);
  GS_LAUNCH_CHECK("panel_combine_kernel");
}

}  // namespace

bool panel_tc_eligible(const SpmmArgs& a) {
  return a.dtype == DType::f32 && a.A.sorted_cols == 1 && a.A.nnz > 0 && a.A.K > 0 &&
         a.A.K <= int64_t(INT_MAX) - TcTuning::kBK && a.C % 4 == 0 &&
         reinterpret_cast<uintptr_t>(a.X) % 16 == 0 && reinterpret_cast<uintptr_t>(a.Y) % 16 == 0;
}

template <class I>
void spmm_panel_tc(const SpmmArgs& a, bool mean, cudaStream_t stream) {
  // knobs of their own (read only here, so a test sees which panel kernels a call took)
  const int force_bn = env_choice("GNNSPARSE_CUDA_TC_BN", {32, 64, 128});
  const int force_split = env_choice("GNNSPARSE_CUDA_TC_SPLIT", {1, 2, 3, 4, 5, 6, 7, 8});
  const TcPlan p = plan_panel_tc(a.A.M, a.A.K, a.C, force_bn, force_split);
  check_grid("spmm (panel_tc)", {p.blocks()}, 1);
  auto go = [&](auto prec, auto off) {
    constexpr Precision P = decltype(prec)::value;
    using Off = typename decltype(off)::type;
    switch (p.shape) {
      case TcShape::w32: launch_tc<P, TcShape::w32, I, Off>(p, a, mean, stream); break;
      case TcShape::w64: launch_tc<P, TcShape::w64, I, Off>(p, a, mean, stream); break;
      default: launch_tc<P, TcShape::w128, I, Off>(p, a, mean, stream); break;
    }
  };
  // entry offsets in 32 bits whenever nnz allows (a cursor plus a window stays below 2^31)
  auto by_off = [&](auto prec) {
    if (a.A.nnz < int64_t(INT_MAX) - 2 * TcTuning::kWindow) go(prec, TypeTag<int>{});
    else go(prec, TypeTag<int64_t>{});
  };
  if (a.precision == Precision::tf32) by_off(std::integral_constant<Precision, Precision::tf32>{});
  else by_off(std::integral_constant<Precision, Precision::fp32>{});
}

template void spmm_panel_tc<int32_t>(const SpmmArgs&, bool, cudaStream_t);
template void spmm_panel_tc<int64_t>(const SpmmArgs&, bool, cudaStream_t);

}  // namespace gnnsparse::cuda_detail
