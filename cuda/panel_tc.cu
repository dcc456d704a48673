// Dense-ish SpMM on tensor cores (fp32 sum / mean, CSR rows with sorted columns, C % 4 == 0):
// row panels densified by scatter, multiplied with mma.sync at fp32 accuracy (3xTF32) or in TF32.
//
// At 10-30 % density a CUDA-core kernel needs one shared load per fma (panel.cu): its ceiling is
// ~25 % of the FMA peak. The tensor cores reuse operands in registers, but only on dense tiles; the
// 2026-11-30 tiles (bench/grid/tiles) densified one 4-byte cp.async per *dense* entry and were bound
// by that. Here the densify costs per row and chunk: a block owns BM rows x BN columns of Y and walks
// K in chunks of BK = 64 columns; per chunk each warp zeroes its rows of a BM x BK tile of A in
// shared memory (16-byte stores) and scatters the rows' entries of the chunk into it. Columns are
// sorted, so a row's entries of a chunk are contiguous from a per-row cursor (shared memory): for a
// batch of 8 (16) rows the warp loads each row's next 32 entries (columns, values; lane j entry j,
// one coalesced load per row and array, the batch's loads all in flight), one ballot per row counts
// those inside the chunk (a prefix) and advances the cursor, and each lane alone in its column stores
// its value into the tile: straight-line code over the batch, no shared-memory read, no per-row
// chain. Rows with a run of equal columns, or with all 32 entries inside the chunk, take a second
// pass: the first lane of a run adds the run's values in CSR order and writes the sum; further rounds
// of 32 entries are loaded and added to the tile (zero, or the previous round's part of a run): one
// writer per address, a fixed order. (Until 2026-12-02 a 32-entry window of every row was copied to
// shared memory each 32-column chunk and the rows were scattered one after another: a dependent chain
// of shared loads per row, density-independent, ~90 SM clocks per row and chunk: docs/grid.md.)
// X's BK x BN chunk arrives with 16-byte cp.async (two buffers; rows past K and columns past C
// zero-filled), issued one chunk ahead. In 128-thread blocks (N <= 32: 32 rows a warp, 2 warps a
// sub-partition) the next chunk's scatter is interleaved with this chunk's products: a batch's
// loads, half the k steps, the batch's stores.
//
// Products: warps own 32 x 32 tiles of Y (2 x 4 m16n8k8 tiles). Precision fp32: each operand split
// into big + small tf32 parts (mma.cuh, Prec<fp32>), small*big + big*small + big*big; the tensor
// cores accumulate with truncation, so each k step's product (8 values of k) starts from zero and
// is then added to the running sum with one fp32 add (round to nearest): the sum over K is an fp32
// sum in k-step order. (Folding once per 32-column chunk, as the 2026-11-30 tiles did, needs 32
// more registers a thread and spilled at two blocks of 256 threads per SM.) Precision tf32: one
// product per step, accumulated across chunks on the tensor cores.
// bf16 requests run the fp32 kernel (more accurate than asked).
//
// Small M: K split into S slices (a lane binary search finds each row's first entry of the slice);
// each slice writes its partial tile to a workspace, panel_combine_kernel adds them in slice order.
// Everything has a fixed order (data and plan): results are bitwise reproducible. No atomics.
//
// Note: the dense tile multiplies A's zeros with every row of X in the chunk, so an Inf / NaN in a
// row of X that a row of A does not reference still makes that row NaN (0 * Inf), unlike the row
// kernels. The auto policy does not take this path at present (policy.cuh: prefer_panel_tc);
// GNNSPARSE_CUDA_SPMM=tc forces it.
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

template <int BN, int WM>
struct TcSmem {
  static constexpr int WN = BN / 32, NW = WM * WN, BM = WM * 32, BK = TcTuning::kBK;
  static constexpr int LDA = TcTuning::kLdA, LDX = BN + 4;
  static_assert(LDA % 32 == 8 && LDX % 32 == 4 && LDA >= BK, "conflict-free fragment loads (mma.cuh)");
  static constexpr size_t kX = sizeof(float) * 2 * BK * LDX;   // X chunks, two buffers
  static constexpr size_t kA = sizeof(float) * 2 * BM * LDA;   // A tiles, two buffers
  static constexpr size_t kCur = sizeof(int64_t) * 2 * BM;     // row cursors and ends (Off <= 8 B)
  static constexpr size_t bytes() { return kX + kA + kCur; }
};

// Block b: column block b % col_blocks, then K slice, then panel (as panel.cu). With split == 1
// `out` is Y (mean divided, empty rows 0); otherwise the slice's raw sums go to out + slice * M * C.
template <Precision P, int BN, int WM, class I, class Off>
__global__ void __launch_bounds__(WM * BN, 2)
spmm_tc_kernel(const I* __restrict__ rowptr, const I* __restrict__ col, const float* __restrict__ val,
               const float* __restrict__ X, float* __restrict__ out, int64_t M, int K, int64_t C,
               int64_t col_blocks, int split, int mean, const bool* __restrict__ skip) {
  if (skip != nullptr && *skip) return;  // SpmmArgs::skip: the call writes nothing
  using SM = TcSmem<BN, WM>;
  constexpr int WN = SM::WN, NW = SM::NW, NT = NW * 32, BM = SM::BM, BK = SM::BK;
  constexpr int LDA = SM::LDA, LDX = SM::LDX;
  constexpr int RPW = BM / NW;  // rows each warp densifies
  static_assert(BM % NW == 0 && RPW <= 32, "one lane per row of a warp in the setup");
  // rows of a warp whose entries are loaded together (independent loads in flight): twice as many
  // in 128-thread blocks (up to 255 registers a thread there)
  constexpr int RB0 = NW * 32 <= 128 ? 2 * TcTuning::kScatterRows : TcTuning::kScatterRows;
  constexpr int RB = RPW < RB0 ? RPW : RB0;
  static_assert(RPW % RB == 0, "whole batches of rows");
  constexpr int KSTEP = Prec<P>::kStep;
  static_assert(KSTEP == 8 && BK % KSTEP == 0, "tf32 steps");
  constexpr bool kFold = P == Precision::fp32;  // k-step sums from zero, added in fp32
  constexpr unsigned kAll = 0xffffffffu;
  using FragA = typename Prec<P>::FragA;
  using FragB = typename Prec<P>::FragB;

  extern __shared__ float4 tc_smem[];
  float* xs = reinterpret_cast<float*>(tc_smem);  // [2][BK][LDX]
  float* as = xs + 2 * BK * LDX;                   // [2][BM][LDA]
  Off* cur = reinterpret_cast<Off*>(as + 2 * BM * LDA);  // [BM]
  Off* rend = cur + BM;                                   // [BM]

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

  // ---- rows: lane i of a warp sets up row r_first + i's cursor (its next entry; the slice's first
  // by a binary search) and end, in shared memory (registers would spill at 256 threads) -----------
  if (lane < RPW) {
    const int64_t row = row0 + r_first + lane;
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
    cur[r_first + lane] = rs;
    rend[r_first + lane] = re;
  }
  __syncwarp();

  // Chunk ch of X (rows ch BK .., the block's columns) into buffer buf; zero-filled past K and C.
  constexpr int VPR = BN / 4;
  static_assert(NT % VPR == 0 && BK % (NT / VPR) == 0, "the chunk copy splits evenly over the block");
  // Thread tid copies column vector tid % VPR of rows tid / VPR + i NT / VPR (one running pointer).
  constexpr int XROWS = NT / VPR;  // chunk rows per pass of the block
  auto issue_x = [&](int ch, int buf) {
    const int c4 = (tid % VPR) * 4, kr0 = tid / VPR;
    const int64_t cc = n0 + c4;
    float* dst = xs + buf * (BK * LDX) + kr0 * LDX + c4;
    int k = ch * BK + kr0;
    const float* src = X + int64_t(k) * C + cc;
#pragma unroll 2
    for (int i = 0; i < BK / XROWS; ++i, k += XROWS, src += XROWS * C, dst += XROWS * LDX) {
      const bool ok = k < K && cc < C;
      tiles::cp_async16(dst, ok ? src : X, ok);
    }
  };
  // Entry c + lane of a row (column INT_MAX past its end; value 1 without values).
  auto load_entry = [&](Off c, Off e, int& cj, float& v) {
    const Off idx = c + lane;
    const bool ok = idx < e;
    cj = ok ? static_cast<int>(__ldg(col + idx)) : INT_MAX;
    v = ok && val != nullptr ? __ldg(val + idx) : 1.f;
  };
  // A later round of a row (lanes hold entries c .. c + 31; the first is in `put_batch`): those
  // inside the chunk are a prefix (sorted columns), counted by one ballot. The first lane of each
  // run of equal columns adds the run's values in CSR order (the rest of the run read again, L1
  // hits) and adds the sum to the tile (zero, or the part of a run the previous round wrote). One
  // writer per address and round; returns the count.
  auto put = [&](float* arow, int cj, float v, Off c, int k0) -> int {
    const bool in = cj < k0 + BK;
    const int cnt = __popc(__ballot_sync(kAll, in));
    const int prev = __shfl_up_sync(kAll, cj, 1);
    const int next = __shfl_down_sync(kAll, cj, 1);
    if (in && (lane == 0 || prev != cj)) {
      float s = v;
      if (lane + 1 < cnt && next == cj)
        for (int q = lane + 1; q < cnt && static_cast<int>(__ldg(col + c + q)) == cj; ++q)
          s += val != nullptr ? __ldg(val + c + q) : 1.f;
      if (static_cast<unsigned>(cj - k0) < static_cast<unsigned>(BK)) {
        arow[cj - k0] += s;
      }
    }
    return cnt;
  };
  // Chunk ch of the warp's rows into A tile buf: zero them, then per batch of RB rows load each
  // row's next 32 entries (one coalesced load per row and array, all RB rows in flight) and put the
  // first round of every row in straight-line code (lanes alone in their column: one store each);
  // rows with a run of equal columns, or with all 32 entries inside the chunk (repeats, or density
  // > 1/2 at BK = 64), then finish in a second pass: the runs' sums, more rounds from global memory.
  auto zero_tile = [&](int buf) {
    float* at = as + buf * (BM * LDA);
    constexpr int VPRA = BK / 4;  // 16-byte vectors per tile row
#pragma unroll
    for (int v = lane; v < RPW * VPRA; v += 32)
      *reinterpret_cast<float4*>(at + (r_first + v / VPRA) * LDA + (v % VPRA) * 4) = make_float4(0.f, 0.f, 0.f, 0.f);
    __syncwarp();
  };
  auto load_batch = [&](int i0, int (&cj)[RB], float (&vj)[RB]) {
#pragma unroll
    for (int q = 0; q < RB; ++q) load_entry(cur[r_first + i0 + q], rend[r_first + i0 + q], cj[q], vj[q]);
  };
  auto put_batch = [&](int ch, int buf, int i0, const int (&cj)[RB], const float (&vj)[RB]) {
    float* at = as + buf * (BM * LDA);
    const int k0 = ch * BK, kend = k0 + BK;
    {
      unsigned slow = 0;  // rows of the batch for the second pass (warp-uniform)
      Off ncur = 0;       // lane q: row i0 + q's next cursor
#pragma unroll
      for (int q = 0; q < RB; ++q) {
        const int r = r_first + i0 + q;
        const Off c = cur[r], e = rend[r];
        const bool in = cj[q] < kend;
        const int cnt = __popc(__ballot_sync(kAll, in));  // a prefix: sorted columns
        const int prev = __shfl_up_sync(kAll, cj[q], 1);
        const int next = __shfl_down_sync(kAll, cj[q], 1);
        const bool head = in && (lane == 0 || prev != cj[q]);
        const bool run = head && lane + 1 < cnt && next == cj[q];
        if (__any_sync(kAll, run) || (cnt == 32 && c + 32 < e)) slow |= 1u << q;
        if (head && !run && static_cast<unsigned>(cj[q] - k0) < static_cast<unsigned>(BK))
          at[r * LDA + (cj[q] - k0)] = 0.f + vj[q];  // 0 + v: the tile's zero, as an add would give
        if (lane == q) ncur = c + cnt;
      }
      if (slow != 0) {
#pragma unroll
        for (int q = 0; q < RB; ++q) {
          if (!((slow >> q) & 1u)) continue;  // warp-uniform
          const int r = r_first + i0 + q;
          Off c = cur[r];
          const Off e = rend[r];
          float* arow = at + r * LDA;
          // the first round's runs: the head adds the run's values in CSR order (read again, L1
          // hits), into the zero tile
          const bool in = cj[q] < kend;
          int cnt = __popc(__ballot_sync(kAll, in));
          const int prev = __shfl_up_sync(kAll, cj[q], 1);
          const int next = __shfl_down_sync(kAll, cj[q], 1);
          if (in && (lane == 0 || prev != cj[q]) && lane + 1 < cnt && next == cj[q]) {
            float sum = vj[q];
            for (int j = lane + 1; j < cnt && static_cast<int>(__ldg(col + c + j)) == cj[q]; ++j)
              sum += val != nullptr ? __ldg(val + c + j) : 1.f;
            if (static_cast<unsigned>(cj[q] - k0) < static_cast<unsigned>(BK)) arow[cj[q] - k0] = 0.f + sum;
          }
          while (cnt == 32 && c + 32 < e) {  // warp-uniform
            c += 32;
            __syncwarp();  // the previous round's writes are seen
            int cj2;
            float v2;
            load_entry(c, e, cj2, v2);
            cnt = put(arow, cj2, v2, c, k0);
          }
          if (lane == q) ncur = c + cnt;
        }
      }
      __syncwarp();  // every lane has read the batch's cursors
      if (lane < RB) cur[r_first + i0 + lane] = ncur;
    }
  };
  auto scatter = [&](int ch, int buf) {
    zero_tile(buf);
#pragma unroll 1
    for (int i0 = 0; i0 < RPW; i0 += RB) {
      int cj[RB];
      float vj[RB];
      load_batch(i0, cj, vj);
      put_batch(ch, buf, i0, cj, vj);
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

  constexpr int KS = BK / KSTEP;  // k steps per chunk
  auto compute = [&](int buf, int ks0, int ks1) {
    const float* at = as + buf * (BM * LDA);
    const float* xt = xs + buf * (BK * LDX);
#pragma unroll 1
    for (int ks = ks0; ks < ks1; ++ks) {
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
  // Iteration ch: wait for X chunk ch (issued a whole iteration ago), barrier; issue X ch + 1;
  // scatter ch + 1; multiply chunk ch. In 128-thread blocks (N <= 32: 2 warps a sub-partition, 32
  // rows a warp) the two are interleaved: a batch's loads are issued, then a share of chunk ch's k
  // steps runs, then the batch is put, so the warp's own products hide the loads' latency.
  constexpr bool kInterleave = NT <= 128;
  constexpr int NB = RPW / RB;  // batches per chunk
  static_assert(!kInterleave || KS % NB == 0, "whole k steps per batch");
  if (c_begin < c_end) {
    issue_x(c_begin, 0);
    tiles::cp_async_commit();
    scatter(c_begin, 0);
  }
  for (int ch = c_begin; ch < c_end; ++ch) {
    const int buf = (ch - c_begin) & 1;
    tiles::cp_async_wait<0>();
    __syncthreads();  // X and A of chunk ch are in `buf`; everyone is done with the other buffers
    if (ch + 1 < c_end) {
      issue_x(ch + 1, buf ^ 1);
      tiles::cp_async_commit();
      if constexpr (kInterleave) {
        zero_tile(buf ^ 1);
#pragma unroll 1
        for (int bi = 0; bi < NB; ++bi) {
          int cj[RB];
          float vj[RB];
          load_batch(bi * RB, cj, vj);
          compute(buf, bi * KS / NB, (bi + 1) * KS / NB);
          put_batch(ch + 1, buf ^ 1, bi * RB, cj, vj);
        }
        __syncwarp();
        continue;  // chunk ch's products are done
      } else {
        scatter(ch + 1, buf ^ 1);
      }
    }
    compute(buf, 0, KS);
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
  constexpr size_t smem = TcSmem<BN, WM>::bytes();
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
    kernel<<<grid, threads, smem, stream>>>(rp, cp, vp, xp, yp, M, static_cast<int>(a.A.K), C, p.col_blocks, 1, mean,
                                            a.skip);
    GS_LAUNCH_CHECK("spmm_tc_kernel");
    return;
  }
  SplitWorkspace ws(static_cast<size_t>(p.split) * static_cast<size_t>(M * C) * sizeof(float), stream);
  kernel<<<grid, threads, smem, stream>>>(rp, cp, vp, xp, ws.get(), M, static_cast<int>(a.A.K), C, p.col_blocks,
                                          static_cast<int>(p.split), mean, a.skip);
  GS_LAUNCH_CHECK("spmm_tc_kernel");
  const int64_t blocks = std::min<int64_t>((M * C + kCombineThreads - 1) / kCombineThreads, kCombineMaxBlocks);
  panel_combine_kernel<I><<<static_cast<unsigned>(blocks), kCombineThreads, 0, stream>>>(
      rp, ws.get(), yp, M, C, static_cast<int>(p.split), mean, a.skip);
  GS_LAUNCH_CHECK("panel_combine_kernel");
}

}  // namespace

bool panel_tc_eligible(const SpmmArgs& a) {
  return a.dtype == DType::f32 && a.A.sorted_cols == 1 && a.A.nnz > 0 && a.A.K > 0 &&
         a.A.K <= int64_t(INT_MAX) - 2 * TcTuning::kBK && a.C % 4 == 0 &&
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
  // entry offsets in 32 bits whenever nnz allows (a cursor plus a round of 32 stays below 2^31)
  auto by_off = [&](auto prec) {
    if (a.A.nnz < int64_t(INT_MAX) - 64) go(prec, TypeTag<int>{});
    else go(prec, TypeTag<int64_t>{});
  };
  if (a.precision == Precision::tf32) by_off(std::integral_constant<Precision, Precision::tf32>{});
  else by_off(std::integral_constant<Precision, Precision::fp32>{});
}

template void spmm_panel_tc<int32_t>(const SpmmArgs&, bool, cudaStream_t);
template void spmm_panel_tc<int64_t>(const SpmmArgs&, bool, cudaStream_t);

}  // namespace gnnsparse::cuda_detail
