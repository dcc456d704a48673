// Dense-ish SDDMM dot on tensor cores (fp32 features, one head, CSR rows with sorted columns):
// E[e] = <X[i], Y[j]> for every entry e = (i, j) of A, computed as a dense score tile per
// (row panel, column chunk) and sampled at A's entries.
//
// At 10-30 % density the row kernels of sddmm.cu gather one row of Y from L2 per entry (nnz x F x
// 4 bytes) and do 2 F flops per 4 F bytes. Here a block owns a panel of BM rows of A: their X rows
// are staged once in shared memory (BM x FT, FT = F rounded up to 32 / 64 / 128, zero-filled), and
// the block walks K in chunks of BK columns. Each chunk's BK rows of Y are staged (16-byte
// cp.async, kStages buffers in flight), the BM x BK score tile is computed with mma.sync m16n8k8
// (8 warps, 32 x 32 scores each) and stored to shared memory, and then every entry of the panel
// whose column lies in the chunk reads its score there and writes it to E at its CSR position.
// The products are dense: M x K x FT multiply-adds at the tensor-core rate, so the kernel is worth
// it above a crossover density (policy.cuh, prefer_sddmm_tc), never on graphs.
//
// Precision: fp32 (the default) is 3xTF32 (mma.cuh, Prec<fp32>: each operand split into big +
// small tf32 halves, three products), fp32-accurate; the tensor cores accumulate with truncation,
// so each 32-wide group of F is summed from zero on the tensor cores and the groups are added in
// order with fp32 adds. tf32: one product per step (operands rounded to tf32). bf16: one bf16
// product per 16-wide step (operands rounded to bf16 as they are loaded from shared memory, fp32
// accumulation; the row kernels of sddmm.cu compute bf16 calls at fp32 and measured 0.5-3.5 ms
// where the tensor-core fp32 call took 0.1-0.9 ms, H200 2026-12-06).
//
// Write-out: a warp owns 16 rows of the panel; lanes run over consecutive entries of one row
// (coalesced stores). Columns are sorted, so a row's entries in the chunk are a prefix of what is
// left of the row, from a per-row cursor (kept in the registers of one lane of the owning warp);
// one ballot counts them. The first kWindow column indices from each cursor are copied to shared
// memory for the next chunk (4- or 8-byte cp.async, issued right after the row's cursor moves), so
// they land while the next chunk's products run; only rows with more than kWindow entries in one
// chunk read the rest from global memory.
//
// Few panels (small M): K is split into S slices of chunks, a block each (a slice starts each row
// with a binary search for its first column). Each entry is written by exactly one block, once: no
// combine, no atomics; every score is a fixed sequence of mma and fp32 adds, so results are bitwise
// reproducible.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common.cuh"
#include "dispatch.cuh"
#include "mma.cuh"
#include "policy.cuh"
#include "sddmm_tc.cuh"

namespace gnnsparse::cuda_detail {
namespace {

using tiles::cp_async16;
using tiles::cp_async_commit;
using tiles::cp_async_wait;
using tiles::Prec;

// A column index (4 or 8 bytes) global -> shared; when !pred the destination is zero-filled and src
// is not read.
template <class I>
__device__ __forceinline__ void cp_async_index(I* dst, const I* src, bool pred) {
  const int n = pred ? int(sizeof(I)) : 0;
  const unsigned s = tiles::smem_addr(dst);
  if constexpr (sizeof(I) == 8)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(src), "r"(n) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(n) : "memory");
}

// Shared memory of one block: X panel [BM][LDX], Y chunks [STAGES][BK][LDX], scores [BM][LDS],
// column windows [BM][W] (index type).
template <int FT, class I>
struct TcSmem {
  static constexpr int BM = SddmmTcTuning::kBM, BK = SddmmTcTuning::kBK, W = SddmmTcTuning::kWindow;
  static constexpr int STAGES = sddmm_tc_stages(FT);
  static constexpr int LDX = FT + 8;  // = 8 (mod 32): conflict-free 64-bit fragment loads
  static constexpr int LDS = BK + 8;  // = 8 (mod 32): conflict-free 64-bit score stores
  static constexpr size_t kX = sizeof(float) * BM * LDX;
  static constexpr size_t kY = sizeof(float) * STAGES * BK * LDX;
  static constexpr size_t kS = sizeof(float) * BM * LDS;
  static constexpr size_t kW = sizeof(I) * BM * W;
  static constexpr size_t bytes() { return kX + kY + kS + kW; }
};

// Block b: slice b % split of panel b / split (the slices of a panel run side by side and share
// its X rows in L2). E is written at the CSR positions of the entries whose columns lie in the
// slice's chunks.
template <Precision P, int FT, class I, class Off>
__global__ void __launch_bounds__(SddmmTcTuning::kBlockThreads, sddmm_tc_min_blocks(FT))
sddmm_tc_kernel(const I* __restrict__ rowptr, const I* __restrict__ col, const float* __restrict__ X,
                const float* __restrict__ Y, float* __restrict__ E, int64_t M, int K, int F, int split) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using SM = TcSmem<FT, I>;
  constexpr int NT = SddmmTcTuning::kBlockThreads, BM = SM::BM, BK = SM::BK, W = SM::W;
  constexpr int STAGES = SM::STAGES, LDX = SM::LDX, LDS = SM::LDS;
  constexpr int NW = NT / 32, RPW = BM / NW;  // warps; rows each warp writes out
  constexpr int KSTEP = Prec<P>::kStep;
  constexpr bool FOLD = P == Precision::fp32 && FT > 32;  // 32-wide groups summed in fp32
  constexpr int VPR = FT / 4;                             // 16-byte vectors per staged row
  static_assert(BM == 4 * 32 && BK == 2 * 32 && NW == 8, "8 warps of 32 x 32 scores");
  static_assert(W == 32 && RPW <= 32, "one window entry per lane, one cursor per lane");
  using FragA = typename Prec<P>::FragA;
  using FragB = typename Prec<P>::FragB;

  extern __shared__ float4 tc_smem[];
  float* Xs = reinterpret_cast<float*>(tc_smem);
  float* Ys = Xs + BM * LDX;
  float* Ss = Ys + STAGES * BK * LDX;
  I* Ws = reinterpret_cast<I*>(Ss + BM * LDS);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int wm = warp & 3, wn = warp >> 2;  // this warp's 32 x 32 scores: rows 32 wm .., columns 32 wn ..
  const int64_t b = blockIdx.x;
  const int slice = static_cast<int>(b % split);
  const int64_t row0 = (b / split) * BM;
  const int nchunks = (K + BK - 1) / BK;
  const int c_begin = static_cast<int>(int64_t(nchunks) * slice / split);
  const int c_end = static_cast<int>(int64_t(nchunks) * (slice + 1) / split);
  if (c_begin >= c_end) return;  // the whole block (the policy never plans one)

  // X rows of the panel (rows past M and features past F zero-filled): one cp.async group with the
  // first Y chunk.
  for (int v = tid; v < BM * VPR; v += NT) {
    const int r = v / VPR, f = (v % VPR) * 4;
    const bool ok = row0 + r < M && f < F;
    cp_async16(Xs + r * LDX + f, ok ? X + (row0 + r) * F + f : X, ok);
  }
  // Chunk c of Y (rows c BK .., rows past K zero-filled) into buffer st, then commit (an empty group
  // past the slice: the wait counts below assume one group per call).
  auto issue_y = [&](int c, int st) {
    if (c < c_end) {
      float* Yd = Ys + st * BK * LDX;
      for (int v = tid; v < BK * VPR; v += NT) {
        const int jr = v / VPR, f = (v % VPR) * 4;
        const int64_t j = int64_t(c) * BK + jr;
        const bool ok = j < K && f < F;
        cp_async16(Yd + jr * LDX + f, ok ? Y + j * F + f : Y, ok);
      }
    }
    cp_async_commit();
  };

  // Row cursors: lane l < RPW of warp w holds panel row w RPW + l (the rows this warp writes out):
  // its first entry not yet written (from the slice's first column on) and its end.
  Off cur = 0, end = 0;
  if (lane < RPW) {
    const int64_t row = row0 + warp * RPW + lane;
    if (row < M) {
      cur = static_cast<Off>(__ldg(rowptr + row));
      end = static_cast<Off>(__ldg(rowptr + row + 1));
      if (c_begin > 0) {  // first entry with column >= the slice's first column
        const I key = static_cast<I>(int64_t(c_begin) * BK);
        Off lo = cur, hi = end;
        while (lo < hi) {
          const Off mid = lo + (hi - lo) / 2;
          if (__ldg(col + mid) < key) lo = mid + 1;
          else hi = mid;
        }
        cur = lo;
      }
    }
  }
  // The column indices of row q (of this warp) from cursor c: entry `lane` of its window.
  auto issue_window = [&](int q, Off c, Off e) {
    const bool ok = c + lane < e;
    cp_async_index(Ws + (warp * RPW + q) * W + lane, ok ? col + c + lane : col, ok);
  };

  // Prologue, in the order of the steady state (iteration j commits Y(j + STAGES - 1), then the
  // windows of chunk j + 1): Y(0) [with X], W(-STAGES + 2), .., Y(STAGES - 2), W(0), where the
  // windows of negative chunks are empty groups.
  for (int s = 0; s < STAGES - 1; ++s) {
    issue_y(c_begin + s, s);
    if (s == STAGES - 2) {
#pragma unroll 1
      for (int q = 0; q < RPW; ++q)
        issue_window(q, __shfl_sync(0xffffffffu, cur, q), __shfl_sync(0xffffffffu, end, q));
    }
    cp_async_commit();
  }

  for (int c = c_begin; c < c_end; ++c) {
    const int it = c - c_begin;
    // groups committed after Y(c): (W, Y) x (STAGES - 2), then W(c)
    cp_async_wait<2 * STAGES - 3>();
    __syncthreads();  // Y(c) (and X) visible; chunk c - 1 done (its Y buffer and the scores free)
    issue_y(c + STAGES - 1, (it + STAGES - 1) % STAGES);
    const float* Yd = Ys + (it % STAGES) * BK * LDX;

    // ---- scores: acc[mt][nt] = rows 32 wm + 16 mt .., columns 32 wn + 8 nt ..
    float acc[2][4][4];
#pragma unroll
    for (int grp = 0; grp < FT / 32; ++grp) {
      if (grp > 0 && grp * 32 >= F) break;  // zero-filled features
      float tmp[2][4][4];
#pragma unroll
      for (int kk = 0; kk < 32 / KSTEP; ++kk) {
        const int k0 = grp * 32 + kk * KSTEP;
        if (kk > 0 && k0 >= F) break;
        FragA a[2];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) tiles::load_a<P>(a[mt], Xs, LDX, wm * 32 + mt * 16, k0, g, t);
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          FragB bf;
          tiles::load_b_nk<P>(bf, Yd, LDX, k0, wn * 32 + nt * 8, g, t);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            float(&d)[4] = (FOLD && grp > 0) ? tmp[mt][nt] : acc[mt][nt];
            if (kk == 0 && (FOLD || grp == 0)) Prec<P>::mma_zero(d, a[mt], bf);
            else Prec<P>::mma(d, a[mt], bf);
          }
        }
      }
      if constexpr (FOLD) {
        if (grp > 0) {
#pragma unroll
          for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[i][j][e] += tmp[i][j][e];
        }
      }
    }
    // C fragment: c0, c1 = (g, 2t), (g, 2t + 1); c2, c3 = (g + 8, ..)
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        float* s = Ss + (wm * 32 + mt * 16 + g) * LDS + wn * 32 + nt * 8 + 2 * t;
        *reinterpret_cast<float2*>(s) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
        *reinterpret_cast<float2*>(s + 8 * LDS) = make_float2(acc[mt][nt][2], acc[mt][nt][3]);
      }
    cp_async_wait<1>();  // this thread's window copies of chunk c (only Y(c + STAGES - 1) may stay)
    __syncthreads();     // the score tile and the windows are complete

    // ---- write-out: rows warp RPW .. + RPW - 1, lanes over consecutive entries
    const int k0 = c * BK, kend = k0 + BK;
#pragma unroll 1
    for (int q = 0; q < RPW; ++q) {
      const int r = warp * RPW + q;
      Off cq = __shfl_sync(0xffffffffu, cur, q);
      const Off eq = __shfl_sync(0xffffffffu, end, q);
      const I* w = Ws + r * W;
      const float* srow = Ss + r * LDS;
      // 32 entries from the cursor at a time: the first 32 from the window, any further from global
      for (bool first = true;; first = false) {
        const Off pos = cq + lane;
        const bool valid = pos < eq;
        int cl = INT_MAX;
        if (valid) cl = static_cast<int>(first ? w[lane] : __ldg(col + pos));
        const bool in = valid && cl < kend;
        if (in) E[pos] = srow[cl - k0];
        const int n = __popc(__ballot_sync(0xffffffffu, in));  // sorted: a prefix of the lanes
        cq += n;
        if (n < 32) break;
      }
      if (lane == q) cur = cq;
      __syncwarp();  // every lane has read row q's window
      if (c + 1 < c_end) issue_window(q, cq, eq);
    }
    cp_async_commit();  // W(c + 1)
  }
  cp_async_wait<0>();
#endif
}

template <Precision P, int FT, class I, class Off>
void launch_tc(const SddmmTcPlan& p, const SddmmArgs& a, cudaStream_t stream) {
  constexpr size_t smem = TcSmem<FT, I>::bytes();
  static_assert(smem <= 227 * 1024, "one block's shared memory fits an sm_90 / sm_80 SM");
  constexpr auto kernel = sddmm_tc_kernel<P, FT, I, Off>;
  raise_smem_limit<kernel>(smem);
  kernel<<<static_cast<unsigned>(p.blocks()), SddmmTcTuning::kBlockThreads, smem, stream>>>(
      static_cast<const I*>(a.A.rowptr), static_cast<const I*>(a.A.col), static_cast<const float*>(a.X),
      static_cast<const float*>(a.Y), static_cast<float*>(a.E), a.A.M, static_cast<int>(a.A.K),
      static_cast<int>(a.F), static_cast<int>(p.split));
  GS_LAUNCH_CHECK("sddmm_tc_kernel");
}

enum class SddmmMethod { automatic, row, tc };

// GNNSPARSE_CUDA_SDDMM: unset, "" or "auto" (the policy), "row" (sddmm.cu's kernels), "tc" (the
// tensor-core kernel whenever the call is eligible). Read at every call.
SddmmMethod sddmm_method() {
  const char* e = std::getenv("GNNSPARSE_CUDA_SDDMM");
  if (e == nullptr || *e == '\0' || std::strcmp(e, "auto") == 0) return SddmmMethod::automatic;
  if (std::strcmp(e, "row") == 0) return SddmmMethod::row;
  if (std::strcmp(e, "tc") == 0) return SddmmMethod::tc;
  throw std::invalid_argument(std::string("gnnsparse cuda: GNNSPARSE_CUDA_SDDMM must be auto, row or tc, got '") + e +
                              "'");
}

// GNNSPARSE_CUDA_SDDMM_TC_SPLIT: unset / "" -> 0 (the plan), else the K slices, 1 .. kMaxSplit
// (for the bench and the tests). Read only once the tensor-core path is taken.
int tc_split_override() {
  const char* e = std::getenv("GNNSPARSE_CUDA_SDDMM_TC_SPLIT");
  if (e == nullptr || *e == '\0') return 0;
  char* stop = nullptr;
  const long v = std::strtol(e, &stop, 10);
  if (*stop != '\0' || v < 1 || v > SddmmTcTuning::kMaxSplit)
    throw std::invalid_argument(std::string("gnnsparse cuda: GNNSPARSE_CUDA_SDDMM_TC_SPLIT must be 1 .. ") +
                                std::to_string(SddmmTcTuning::kMaxSplit) + ", got '" + e + "'");
  return static_cast<int>(v);
}

}  // namespace

template <class I>
bool sddmm_tc(const SddmmArgs& a, cudaStream_t stream) {
  const SddmmMethod method = sddmm_method();
  if (method == SddmmMethod::row) return false;
  const CsrView& A = a.A;
  if (a.dtype != DType::f32 || a.op != SddmmOp::dot || a.H != 1 || A.sorted_cols != 1) return false;
  if (a.precision != Precision::fp32 && a.precision != Precision::tf32 && a.precision != Precision::bf16) return false;
  if (A.nnz <= 0 || A.M <= 0 || A.K <= 0 || A.K > int64_t(INT_MAX) - 1024) return false;
  if (a.F < 4 || a.F > SddmmTcTuning::kMaxFeatures || a.F % 4 != 0) return false;
  if (reinterpret_cast<uintptr_t>(a.X) % 16 != 0 || reinterpret_cast<uintptr_t>(a.Y) % 16 != 0) return false;
  if (method == SddmmMethod::automatic && !prefer_sddmm_tc(A.M, A.K, A.nnz, a.F)) return false;
  const SddmmTcPlan p = plan_sddmm_tc(A.M, A.K, a.F, tc_split_override());
  check_grid("sddmm (tc)", {p.blocks()}, 1);
  auto go = [&](auto prec, auto off) {
    constexpr Precision P = decltype(prec)::value;
    using Off = typename decltype(off)::type;
    switch (p.ft) {
      case 32: launch_tc<P, 32, I, Off>(p, a, stream); break;
      case 64: launch_tc<P, 64, I, Off>(p, a, stream); break;
      default: launch_tc<P, 128, I, Off>(p, a, stream); break;
    }
  };
  // entry offsets in 32 bits whenever nnz allows (a cursor runs at most 2 x 32 past a row's end)
  auto with_prec = [&](auto off) {
    if (a.precision == Precision::tf32) go(std::integral_constant<Precision, Precision::tf32>{}, off);
    else if (a.precision == Precision::bf16) go(std::integral_constant<Precision, Precision::bf16>{}, off);
    else go(std::integral_constant<Precision, Precision::fp32>{}, off);
  };
  if (A.nnz < int64_t(INT_MAX) - 1024) with_prec(TypeTag<int>{});
  else with_prec(TypeTag<int64_t>{});
  return true;
}

template bool sddmm_tc<int32_t>(const SddmmArgs&, cudaStream_t);
template bool sddmm_tc<int64_t>(const SddmmArgs&, cudaStream_t);

}  // namespace gnnsparse::cuda_detail
