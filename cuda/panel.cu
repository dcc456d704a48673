// Dense-ish SpMM (fp32 sum / mean, CSR rows with sorted columns): row panels with X staged in
// shared memory.
//
// At 10-30 % density every row holds hundreds to thousands of entries and the row kernel of
// spmm.cu gathers one row of X from L2 per entry: nnz x C x 4 bytes of L2 reads, while X itself
// sits in L2. Here a block owns a panel of BM rows and BN columns of Y and walks K in chunks of BK
// rows of X; each chunk is copied once into shared memory (cp.async, two buffers: the next chunk
// lands while this one is used) and read there by every row of the panel, so X comes from L2 once
// per panel instead of once per entry (adaptive sparse tiling: Hong, Sukumaran-Rajam, Nisa,
// Singh, Sadayappan, "Adaptive sparse tiling for sparse matrix multiplication", PPoPP 2019).
//
// Schedule (shapes in policy.cuh, PanelGeom): a group of G lanes owns R rows of the panel, one
// at a time; each lane owns NV vectors of VW columns (16-byte shared loads; with G = 4 the odd
// groups take their two vectors in the other order, so the two groups of a quarter warp read
// disjoint banks). Per row the group holds a batch of kBatch entries: their columns in registers
// (kBatch / G per lane) and (column, value) pairs in a shared stage row that every lane of the
// group reads by broadcast, two entries per 16-byte load. Columns are sorted, so the entries of a
// chunk are a prefix of what is left of the batch: ballots count them. Too few blocks (small M, one
// column block): K is split into S slices (a slice starts its rows with a group-wide G-ary search);
// each slice writes its partial sums to a workspace and panel_combine_kernel adds them in slice
// order.
//
// Order: each output element is one lane's fp32 fma chain over the row's entries in ascending
// column order (with S > 1: one chain per slice, then the slices added in order) -- fixed by the
// data and the plan, so results are bitwise reproducible. No atomics.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common.cuh"
#include "dispatch.cuh"
#include "panel.cuh"
#include "panel_common.cuh"
#include "policy.cuh"

namespace gnnsparse::cuda_detail {
namespace {

// ---- asynchronous copies global -> shared (sm_80+; plain copies before) ----------------------
__device__ __forceinline__ void copy16_async(float* dst, const float* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
#else
  *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(src);
#endif
}
__device__ __forceinline__ void copy4_async(float* dst, const float* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src) : "memory");
#else
  *dst = *src;
#endif
}
__device__ __forceinline__ void copy_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void copy_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

// ---- shared loads at 32-bit shared addresses (one add per entry and vector) ------------------
// Volatile asm: kept in program order with the barriers (__syncwarp / __syncthreads) and the
// cp.async asm around them, which order them after the stores they read.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
template <int VW> __device__ __forceinline__ VecT<float, VW> lds(uint32_t a);
template <> __device__ __forceinline__ VecT<float, 4> lds<4>(uint32_t a) {
  VecT<float, 4> v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.v[0]), "=f"(v.v[1]), "=f"(v.v[2]), "=f"(v.v[3]) : "r"(a));
  return v;
}
template <> __device__ __forceinline__ VecT<float, 1> lds<1>(uint32_t a) {
  VecT<float, 1> v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v.v[0]) : "r"(a));
  return v;
}
__device__ __forceinline__ float4 lds_pair2(uint32_t a) {  // two (column, value) entries
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(a));
  return v;
}
__device__ __forceinline__ float2 lds_pair1(uint32_t a) {  // one entry
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(a));
  return v;
}

template <PanelShape S>
constexpr size_t panel_smem_bytes() {
  constexpr PanelGeom Gm = panel_geom(S);
  return size_t(2) * Gm.bk() * Gm.bn() * sizeof(float) + size_t(Gm.bm()) * PanelTuning::kStageRow * sizeof(float2);
}

// Block b: column block b % col_blocks, then K slice, then panel (the column blocks and slices of
// a panel run side by side and share its CSR rows in L2). With split == 1 `out` is Y (mean divided,
// empty rows 0); otherwise the slice's raw sums go to out + slice * M * C.
template <PanelShape S, class I, class Off>
__global__ void __launch_bounds__(PanelTuning::kBlockThreads, 2)
spmm_panel_kernel(const I* __restrict__ rowptr, const I* __restrict__ col, const float* __restrict__ val,
                  const float* __restrict__ X, float* __restrict__ out, int64_t M, int K, int64_t C,
                  int64_t col_blocks, int split, int mean, const bool* __restrict__ skip) {
  if (skip != nullptr && *skip) return;  // SpmmArgs::skip: the call writes nothing
  constexpr PanelGeom Gm = panel_geom(S);
  constexpr int G = Gm.g, R = Gm.r, VW = Gm.vw, NV = Gm.nv, BN = Gm.bn(), BM = Gm.bm(), BK = Gm.bk();
  constexpr int NT = PanelTuning::kBlockThreads, NG = NT / G;
  constexpr int B = PanelTuning::kBatch, T = B / G, SR = PanelTuning::kStageRow;
  static_assert(B % G == 0 && B + 2 <= SR && SR % 2 == 0, "a batch fills one padded stage row");
  using Vec = VecT<float, VW>;
  constexpr bool kQuad = S != PanelShape::w32;  // four entries per step (w32 would spill)
  extern __shared__ float4 panel_smem[];
  float* xs = reinterpret_cast<float*>(panel_smem);              // [2][BK][BN]: X chunks
  float2* stage = reinterpret_cast<float2*>(xs + 2 * BK * BN);  // [BM][SR]: (column, value) batches

  int64_t b = blockIdx.x;
  const int64_t cb = b % col_blocks;
  b /= col_blocks;
  const int slice = static_cast<int>(b % split);
  const int64_t row0 = (b / split) * BM, n0 = cb * BN;
  const int nchunks = (K + BK - 1) / BK;
  const int c_begin = static_cast<int>(int64_t(nchunks) * slice / split);
  const int c_end = static_cast<int>(int64_t(nchunks) * (slice + 1) / split);
  const int tid = threadIdx.x, g = tid / G, li = tid % G;
  const unsigned gmask = group_mask(G);
  int colv[NV];  // this lane's columns within the block: colv[h] .. colv[h] + VW - 1
#pragma unroll
  for (int h = 0; h < NV; ++h) {
    const int part = (NV == 2 && G == 4) ? ((h + g) & 1) : h;
    colv[h] = part * (BN / NV) + li * VW;
  }

  Off base[R], end[R];  // the batch starts at base; the row's (slice's) entries end at end
  int head[R];              // batch entries already used
  int creg[R][T];           // batch entry li + t G's column (INT_MAX past the end)
  float acc[R][NV][VW];

  // The group's next batch of row r: entries base[r] .. base[r] + B - 1 (what exists of them).
  auto load_batch = [&](int r) {
    float2* st = stage + (r * NG + g) * SR;
    __syncwarp(gmask);  // the group is done reading the previous batch
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const Off idx = base[r] + li + t * G;
      int c = INT_MAX;
      float v = 0.f;
      if (idx < end[r]) {
        c = static_cast<int>(__ldg(col + idx));
        v = val != nullptr ? __ldg(val + idx) : 1.f;
      }
      st[li + t * G] = make_float2(__int_as_float(c), v);
      creg[r][t] = c;
    }
    __syncwarp(gmask);
  };
  // Chunk ch of X (rows ch BK .., the block's columns) into buffer buf; rows past K and columns past
  // C are not copied (no entry reads them, no lane writes them). Thread tid copies vector tid % VPR
  // of rows tid / VPR + i NT / VPR.
  constexpr int VPR = BN / VW, RPI = NT / VPR;
  static_assert(NT % VPR == 0 && BK % RPI == 0, "the chunk copy splits evenly over the block");
  const int cv = tid % VPR, kk0 = tid / VPR;
  const bool col_ok = n0 + int64_t(cv) * VW < C;
  auto stage_chunk = [&](int ch, int buf) {
    float* dst = xs + buf * (BK * BN) + kk0 * BN + cv * VW;
    int64_t k = int64_t(ch) * BK + kk0;
    const float* src = X + k * C + n0 + int64_t(cv) * VW;
    if (!col_ok) return;
#pragma unroll 4
    for (int i = 0; i < BK / RPI; ++i, k += RPI, dst += RPI * BN, src += RPI * C) {
      if (k >= K) break;
      if constexpr (VW == 4) copy16_async(dst, src);
      else copy4_async(dst, src);
    }
  };

  if (c_begin < c_end) stage_chunk(c_begin, 0);
  copy_commit();
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = row0 + r * NG + g;
    Off rs = 0, re = 0;
    if (row < M) {
      rs = static_cast<Off>(__ldg(rowptr + row));
      re = static_cast<Off>(__ldg(rowptr + row + 1));
    }
    if (c_begin > 0 && re > rs) rs = static_cast<Off>(group_lower_bound<G>(col, rs, re, c_begin * BK, li, gmask));
    base[r] = rs;
    end[r] = re;
    head[r] = 0;
#pragma unroll
    for (int h = 0; h < NV; ++h)
#pragma unroll
      for (int q = 0; q < VW; ++q) acc[r][h][q] = 0.f;
    load_batch(r);
  }

  for (int ch = c_begin; ch < c_end; ++ch) {
    const int buf = (ch - c_begin) & 1;
    copy_wait_all();
    __syncthreads();  // chunk ch is in `buf`; everyone is done with the other buffer
    if (ch + 1 < c_end) stage_chunk(ch + 1, buf ^ 1);
    copy_commit();
    const int k0 = ch * BK, kend = k0 + BK;
    // entry with column c: its vector h at xl[h] + c * BN * 4 (shared address, mod 2^32)
    constexpr uint32_t kRowBytes = BN * 4;
    uint32_t xl[NV];
#pragma unroll
    for (int h = 0; h < NV; ++h)
      xl[h] = smem_u32(xs + buf * (BK * BN)) + static_cast<uint32_t>(colv[h]) * 4u - static_cast<uint32_t>(k0) * kRowBytes;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const uint32_t st = smem_u32(stage + (r * NG + g) * SR);
      for (;;) {
        int m = 0;  // batch entries left of kend (sorted columns: a prefix of the batch)
#pragma unroll
        for (int t = 0; t < T; ++t) m += __popc(__ballot_sync(gmask, creg[r][t] < kend) & gmask);
        // entries head .. m - 1, in order: an odd first one alone, then fours and twos (16-byte
        // stage loads, all vectors of a step loaded before its fmas), then a last one alone
        int j = head[r];
        auto one = [&](float2 e) {
          Vec x[NV];
#pragma unroll
          for (int h = 0; h < NV; ++h) x[h] = lds<VW>(xl[h] + static_cast<uint32_t>(__float_as_int(e.x)) * kRowBytes);
#pragma unroll
          for (int h = 0; h < NV; ++h)
#pragma unroll
            for (int q = 0; q < VW; ++q) acc[r][h][q] = fmaf(e.y, x[h].v[q], acc[r][h][q]);
        };
        auto pairs = [&](const float4 (&p)[2], auto n) {  // n = 1 or 2 pairs
          constexpr int P = decltype(n)::value;
          Vec x[2 * P][NV];
#pragma unroll
          for (int e = 0; e < 2 * P; ++e) {
            const float c = (e & 1) ? p[e / 2].z : p[e / 2].x;
#pragma unroll
            for (int h = 0; h < NV; ++h) x[e][h] = lds<VW>(xl[h] + static_cast<uint32_t>(__float_as_int(c)) * kRowBytes);
          }
#pragma unroll
          for (int e = 0; e < 2 * P; ++e) {
            const float v = (e & 1) ? p[e / 2].w : p[e / 2].y;
#pragma unroll
            for (int h = 0; h < NV; ++h)
#pragma unroll
              for (int q = 0; q < VW; ++q) acc[r][h][q] = fmaf(v, x[e][h].v[q], acc[r][h][q]);
          }
        };
        if ((j & 1) && j < m) one(lds_pair1(st + j * 8u)), ++j;
        for (; kQuad && j + 3 < m; j += 4) {
          const float4 p[2] = {lds_pair2(st + j * 8u), lds_pair2(st + (j + 2) * 8u)};
          pairs(p, std::integral_constant<int, 2>{});
        }
        for (; j + 1 < m; j += 2) {  // at most once after the fours
          const float4 p[2] = {lds_pair2(st + j * 8u), make_float4(0.f, 0.f, 0.f, 0.f)};
          pairs(p, std::integral_constant<int, 1>{});
        }
        if (j < m) one(lds_pair1(st + j * 8u));
        head[r] = m;
        if (m < B || base[r] + B >= end[r]) break;  // the chunk ends inside this batch, or the row does
        base[r] += B;
        head[r] = 0;
        load_batch(r);
      }
    }
  }

  const int64_t MC = M * C;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = row0 + r * NG + g;
    if (row >= M) continue;
    float* dst = out + (split > 1 ? slice * MC : 0) + row * C + n0;
    float scale = 1.f;
    bool zero = false;
    if (split == 1) {
      const int64_t deg = static_cast<int64_t>(__ldg(rowptr + row + 1)) - static_cast<int64_t>(__ldg(rowptr + row));
      zero = deg == 0;
      if (mean && deg > 0) scale = static_cast<float>(deg);
    }
#pragma unroll
    for (int h = 0; h < NV; ++h) {
      if (n0 + colv[h] >= C) continue;
      Vec y;
#pragma unroll
      for (int q = 0; q < VW; ++q) y.v[q] = zero ? 0.f : (scale != 1.f ? acc[r][h][q] / scale : acc[r][h][q]);
      *reinterpret_cast<Vec*>(dst + colv[h]) = y;
    }
  }
}

template <PanelShape S, class I, class Off>
void launch_panel(const PanelPlan& p, const SpmmArgs& a, bool mean, cudaStream_t stream) {
  constexpr size_t smem = panel_smem_bytes<S>();
  auto kernel = spmm_panel_kernel<S, I, Off>;
  raise_smem_limit<spmm_panel_kernel<S, I, Off>>(smem);
  const auto* rp = static_cast<const I*>(a.A.rowptr);
  const auto* cp = static_cast<const I*>(a.A.col);
  const auto* vp = static_cast<const float*>(a.A.val);
  const auto* xp = static_cast<const float*>(a.X);
  auto* yp = static_cast<float*>(a.Y);
  const int64_t M = a.A.M, C = a.C;
  const unsigned grid = static_cast<unsigned>(p.blocks());
  if (p.split == 1) {
    kernel<<<grid, PanelTuning::kBlockThreads, smem, stream>>>(rp, cp, vp, xp, yp, M, static_cast<int>(a.A.K), C,
                                                              p.col_blocks, 1, mean, a.skip);
    GS_LAUNCH_CHECK("spmm_panel_kernel");
    return;
  }
  SplitWorkspace ws(static_cast<size_t>(p.split) * static_cast<size_t>(M * C) * sizeof(float), stream);
  kernel<<<grid, PanelTuning::kBlockThreads, smem, stream>>>(rp, cp, vp, xp, ws.get(), M, static_cast<int>(a.A.K), C,
                                                            p.col_blocks, static_cast<int>(p.split), mean, a.skip);
  GS_LAUNCH_CHECK("spmm_panel_kernel");
  const int64_t blocks = std::min<int64_t>((M * C + kCombineThreads - 1) / kCombineThreads, kCombineMaxBlocks);
  panel_combine_kernel<I><<<static_cast<unsigned>(blocks), kCombineThreads, 0, stream>>>(
      rp, ws.get(), yp, M, C, static_cast<int>(p.split), mean, a.skip);
  GS_LAUNCH_CHECK("panel_combine_kernel");
}

enum class SpmmMethod { automatic, row, panel, tc };

// GNNSPARSE_CUDA_SPMM: unset, "" or "auto" (the policy), "row" (spmm.cu's row kernels), "panel"
// (the panel kernels whenever the call is eligible), "tc" (the tensor-core panels of panel_tc.cu
// whenever the call is eligible for them; otherwise as auto). Read at every call.
SpmmMethod spmm_method() {
  const char* e = std::getenv("GNNSPARSE_CUDA_SPMM");
  if (e == nullptr || *e == '\0' || std::strcmp(e, "auto") == 0) return SpmmMethod::automatic;
  if (std::strcmp(e, "row") == 0) return SpmmMethod::row;
  if (std::strcmp(e, "panel") == 0) return SpmmMethod::panel;
  if (std::strcmp(e, "tc") == 0) return SpmmMethod::tc;
  throw std::invalid_argument(std::string("gnnsparse cuda: GNNSPARSE_CUDA_SPMM must be auto, row, panel or tc, got '") +
                              e + "'");
}

}  // namespace

cudaMemPool_t split_pool() {
  static std::mutex mu;
  static cudaMemPool_t pools[64] = {};
  int dev = 0;
  GS_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= 64) throw std::runtime_error("gnnsparse cuda: device index out of range for the panel pool");
  std::lock_guard<std::mutex> lock(mu);
  if (pools[dev] == nullptr) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool;
    GS_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
    uint64_t keep = UINT64_MAX;
    GS_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    pools[dev] = pool;
  }
  return pools[dev];
}

int env_choice(const char* name, std::initializer_list<int> allowed) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return 0;
  char* stop = nullptr;
  const long v = std::strtol(e, &stop, 10);
  for (const int ok : allowed)
    if (*stop == '\0' && v == ok) return ok;
  std::string list;
  for (const int ok : allowed) list += (list.empty() ? "" : ", ") + std::to_string(ok);
  throw std::invalid_argument(std::string("gnnsparse cuda: ") + name + " must be one of " + list + ", got '" + e + "'");
}

template <class I>
bool spmm_panel(const SpmmArgs& a, bool mean, cudaStream_t stream) {
  SpmmMethod method = spmm_method();
  if (method == SpmmMethod::row) return false;
  const CsrView& A = a.A;
  if (a.dtype != DType::f32 || A.sorted_cols != 1 || A.nnz <= 0 || A.K > int64_t(INT_MAX) - 1024) return false;
  if ((method == SpmmMethod::tc || method == SpmmMethod::automatic) && panel_tc_eligible(a) &&
      (method == SpmmMethod::tc || prefer_panel_tc(A.M, A.K, A.nnz, a.C, a.precision))) {
    spmm_panel_tc<I>(a, mean, stream);
    return true;
  }
  if (method == SpmmMethod::tc) method = SpmmMethod::automatic;  // not eligible for the tensor cores
  const bool vec = a.C % 4 == 0 && reinterpret_cast<uintptr_t>(a.X) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(a.Y) % 16 == 0;
  if (method == SpmmMethod::automatic && !prefer_panel(A.M, A.K, A.nnz, a.C, vec)) return false;
  const int force_bn = env_choice("GNNSPARSE_CUDA_PANEL_BN", {32, 64, 128});
  const int force_split = env_choice("GNNSPARSE_CUDA_PANEL_SPLIT", {1, 2, 3, 4, 5, 6, 7, 8});
  const PanelPlan p = plan_panel(A.M, A.K, a.C, vec, vec ? force_bn : 0, force_split);
  check_grid("spmm (panel)", {p.blocks()}, 1);
  // entry offsets in 32 bits whenever nnz allows (int64 indices included: fewer registers)
  auto go = [&](auto off) {
    using Off = typename decltype(off)::type;
    switch (p.shape) {
      case PanelShape::w32: launch_panel<PanelShape::w32, I, Off>(p, a, mean, stream); break;
      case PanelShape::w64: launch_panel<PanelShape::w64, I, Off>(p, a, mean, stream); break;
      case PanelShape::w128: launch_panel<PanelShape::w128, I, Off>(p, a, mean, stream); break;
      default: launch_panel<PanelShape::scalar, I, Off>(p, a, mean, stream); break;
    }
  };
  if constexpr (sizeof(I) == 4) go(TypeTag<int>{});
  else if (A.nnz < int64_t(INT_MAX) - 2 * PanelTuning::kBatch) go(TypeTag<int>{});
  else go(TypeTag<int64_t>{});
  return true;
}

template bool spmm_panel<int32_t>(const SpmmArgs&, bool, cudaStream_t);
template bool spmm_panel<int64_t>(const SpmmArgs&, bool, cudaStream_t);

}  // namespace gnnsparse::cuda_detail
