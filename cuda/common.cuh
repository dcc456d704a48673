// Device helpers shared by the CUDA kernels: element conversion, 16-byte vector loads,
// error checking, CSR row search, and the reduction policy Reducer<Acc, R> (after
// pytorch_scatter's reducer.cuh: init / update / merge / write, so kernels never branch on R).
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gnnsparse/ops.hpp"

// A failed call also leaves its error as the runtime's last error: cleared before the throw (a
// non-sticky error such as a failed cudaMallocAsync), or the next op's GS_LAUNCH_CHECK would report
// it as its own launch failure ("launch of segment_map_kernel failed: out of memory" once memory was
// back, seen in the GPU suite 2026-12-06).
#define GS_CUDA_CHECK(expr)                                                                    \
  do {                                                                                         \
    cudaError_t gs_err_ = (expr);                                                              \
    if (gs_err_ != cudaSuccess) {                                                              \
      (void)cudaGetLastError();                                                                \
      throw std::runtime_error(std::string("gnnsparse cuda: ") + #expr + " failed: " +         \
                               cudaGetErrorString(gs_err_));                                   \
    }                                                                                          \
  } while (0)
#define GS_LAUNCH_CHECK(name)                                                                  \
  do {                                                                                         \
    cudaError_t gs_err_ = cudaGetLastError();                                                  \
    if (gs_err_ != cudaSuccess)                                                                \
      throw std::runtime_error(std::string("gnnsparse cuda: launch of ") + (name) +            \
                               " failed: " + cudaGetErrorString(gs_err_));                     \
  } while (0)

namespace gnnsparse::cuda_detail {

// Launch limits: grid.x up to 2^31 - 1 blocks, grid.y up to 65535.
inline void check_grid(const char* op, std::initializer_list<int64_t> x_blocks, int64_t y_blocks) {
  bool fits = y_blocks <= 65535;
  for (const int64_t b : x_blocks) fits = fits && b <= 0x7fffffffLL;
  if (!fits)
    throw std::invalid_argument(std::string("gnnsparse cuda ") + op +
                                ": problem too large for one launch");
}

// The kernel's dynamic shared memory limit, raised once per device (one flag set per kernel
// instance): for kernels that take more than the default 48 KiB.
template <auto Kernel>
void raise_smem_limit(size_t bytes) {
  static std::atomic<uint64_t> done{0};
  int dev = 0;
  GS_CUDA_CHECK(cudaGetDevice(&dev));
  const uint64_t bit = dev >= 0 && dev < 64 ? uint64_t(1) << dev : 0;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return;
  GS_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  done.fetch_or(bit, std::memory_order_release);
}

// Accumulator type: fp32 for fp32/fp16/bf16 features, fp64 for fp64.
template <class T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };
// Edge-value type: the feature type, except fp32 for fp16/bf16 features.
template <class T> struct ValOf { using type = T; };
template <> struct ValOf<__half> { using type = float; };
template <> struct ValOf<__nv_bfloat16> { using type = float; };

template <class A, class T> __device__ __forceinline__ A to_acc(T x) {
  if constexpr (std::is_same_v<T, __half>) return static_cast<A>(__half2float(x));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return static_cast<A>(__bfloat162float(x));
  else return static_cast<A>(x);
}
template <class T, class A> __device__ __forceinline__ T from_acc(A x) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(static_cast<float>(x));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(static_cast<float>(x));
  else return static_cast<T>(x);
}

// V consecutive elements, loaded as one (up to) 16-byte transaction.
template <class T, int V> struct alignas(sizeof(T) * V) VecT { T v[V]; };

template <class T, int V, class A>
__device__ __forceinline__ void load_vec(const T* __restrict__ p, A (&out)[V]) {
  const VecT<T, V> r = *reinterpret_cast<const VecT<T, V>*>(p);
#pragma unroll
  for (int e = 0; e < V; ++e) out[e] = to_acc<A>(r.v[e]);
}
template <class T, int V, class A>
__device__ __forceinline__ void store_vec(T* __restrict__ p, const A (&in)[V]) {
  VecT<T, V> r;
#pragma unroll
  for (int e = 0; e < V; ++e) r.v[e] = from_acc<T>(in[e]);
  *reinterpret_cast<VecT<T, V>*>(p) = r;
}

// A gathered vector of V 16-bit T held as whole 32-bit words (one word for V = 1, upper half
// zero), for gathers that are loaded under a predicate and used later. Loaded as VecT<T, V>, a
// predicated load writes half registers, which the compiler merges into their registers right
// after the load (PRMT): every load then waits for its data before the next one is issued, so a
// lane has one gather in flight instead of all of them (the SpMM row kernel's fp16 / bf16
// instances, SASS of 2026-12-02). Whole words keep the loads in flight; the elements are unpacked
// where they are used, exactly (fp16 / bf16 -> fp32 is exact). 4- and 8-byte T keep VecT, whose
// predicated loads already write whole registers (GatherVec picks).
template <class T, int V> struct RawVec {
  static_assert(sizeof(T) == 2 && (V == 1 || V == 2 || V == 4 || V == 8), "RawVec: 16-bit T, 2 to 16 bytes");
  static constexpr int kBytes = 2 * V;
  static constexpr int kWords = V == 1 ? 1 : V / 2;
  uint32_t w[kWords];
};
template <class T, int V> using GatherVec = std::conditional_t<sizeof(T) == 2, RawVec<T, V>, VecT<T, V>>;

template <class T, int V>
__device__ __forceinline__ GatherVec<T, V> load_gather(const T* __restrict__ p) {
  using G = GatherVec<T, V>;
  if constexpr (sizeof(T) != 2) {
    return *reinterpret_cast<const G*>(p);
  } else {
    G r;
    if constexpr (V == 8) {
      const uint4 q = *reinterpret_cast<const uint4*>(p);
      r.w[0] = q.x; r.w[1] = q.y; r.w[2] = q.z; r.w[3] = q.w;
    } else if constexpr (V == 4) {
      const uint2 q = *reinterpret_cast<const uint2*>(p);
      r.w[0] = q.x; r.w[1] = q.y;
    } else if constexpr (V == 2) {
      r.w[0] = *reinterpret_cast<const uint32_t*>(p);
    } else {
      r.w[0] = *reinterpret_cast<const unsigned short*>(p);
    }
    return r;
  }
}
// Element e (a constant after unrolling) of a gathered vector, converted to the accumulator A.
template <class A, class T, int V>
__device__ __forceinline__ A gather_elem(const VecT<T, V>& r, int e) { return to_acc<A>(r.v[e]); }
template <class A, class T, int V>
__device__ __forceinline__ A gather_elem(const RawVec<T, V>& r, int e) {
  const uint32_t word = r.w[e / 2];
  if constexpr (std::is_same_v<T, __nv_bfloat16>)  // a bf16 is the upper half of an fp32
    return static_cast<A>(__uint_as_float(e % 2 == 0 ? word << 16 : word & 0xffff0000u));
  else
    return static_cast<A>(__half2float(__ushort_as_half(static_cast<unsigned short>(e % 2 == 0 ? word : word >> 16))));
}
// V values rounded to T and stored. 16-bit T: packed in pairs into whole words and written with
// one (up to) 16-byte store (store_vec's aggregate copy of a VecT compiles to 4-byte stores, and a
// plain uint4 store did as well in the SpMM row kernel: hence the st.global.v4 / .v2 asm). 4- and
// 8-byte T: store_vec, whose register allocation in the SpMM row kernel the asm changed (a 32-byte
// spill of the fp32 / int64-index mean instance on sm_90).
template <class T, int V, class A>
__device__ __forceinline__ void store_packed(T* __restrict__ p, const A (&in)[V]) {
  if constexpr (sizeof(T) != 2) {
    store_vec<T, V>(p, in);
  } else {
    static_assert(V == 1 || V == 2 || V == 4 || V == 8, "store_packed: 2 to 16 bytes");
    uint32_t h[V];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const T t = from_acc<T>(in[e]);
      if constexpr (std::is_same_v<T, __nv_bfloat16>) h[e] = __bfloat16_as_ushort(t);
      else h[e] = __half_as_ushort(t);
    }
    if constexpr (V == 1) {
      *reinterpret_cast<unsigned short*>(p) = static_cast<unsigned short>(h[0]);
    } else {
      uint32_t w[V / 2];
#pragma unroll
      for (int e = 0; e < V; e += 2) w[e / 2] = h[e] | (h[e + 1] << 16);
      if constexpr (V == 8)
        asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]),
                     "r"(w[3]) : "memory");
      else if constexpr (V == 4)
        asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(w[0]), "r"(w[1]) : "memory");
      else
        *reinterpret_cast<uint32_t*>(p) = w[0];
    }
  }
}

// Largest r in [0, M) with rowptr[r] <= p; for p < nnz this is the row that holds entry p.
template <class I>
__device__ __forceinline__ int64_t row_of(const I* __restrict__ rowptr, int64_t M, int64_t p) {
  int64_t lo = 0, hi = M;  // rowptr[lo] <= p, invariant; answer in [lo, hi)
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) >> 1;
    if (static_cast<int64_t>(__ldg(rowptr + mid)) <= p) lo = mid; else hi = mid;
  }
  return lo;
}

// Lanes of this lane's aligned group of G (a power of two) lanes, for *_sync intrinsics.
__device__ __forceinline__ unsigned group_mask(int G) {
  const int lane = threadIdx.x & 31;
  return G >= 32 ? 0xffffffffu : (((1u << G) - 1u) << (lane & ~(G - 1)));
}
template <class A> __device__ __forceinline__ A group_sum(A v, int G, unsigned mask) {
  for (int o = G >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(mask, v, o);
  return v;
}

// Transposed butterfly over an aligned group of G lanes (G >= U, both powers of two): p[u] holds
// this lane's partial of sum u. At each of the first log2(U) levels a lane keeps the half of its
// partials its side of the exchange owns and adds the partner's copy of it, so the U sums cost
// U - 1 shuffles and end one per lane set; the remaining log2(G / U) levels finish each sum.
// Returns sum `base` (base = sub / (G / U): lanes u G / U .. (u + 1) G / U - 1 hold sum u, all
// with the same bits). A fixed tree: bitwise reproducible.
template <int U, class A>
__device__ __forceinline__ A transpose_reduce(A (&p)[U], int G, int sub, unsigned mask, int& base) {
  base = 0;
  int o = G >> 1;
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
  return r;
}

template <class A> __device__ __forceinline__ bool is_nan(A x) { return x != x; }

// The reduction rule of every kernel (float and quantized; row kernels, shuffle-tree merges and
// the hub pass): A is the accumulator (float / double, or int32 / int64 for unweighted quantized
// messages). update() takes messages in ascending edge order; merge() joins the partial results
// of two consecutive edge ranges -- `left` says whether (acc, arg) holds the earlier one, and both
// lanes of a shuffle exchange compute the same value. Ties keep the smallest edge index and the
// first NaN wins (numpy.argmax semantics); as that is a total order on (value, edge), max / min
// give the same result whatever the merge tree. write() does the mean division and zeroes empty
// rows.
template <class A, Reduce R> struct Reducer {
  static constexpr bool kHasArg = has_arg(R);
  __device__ __forceinline__ static A init() {
    if constexpr (std::is_floating_point_v<A>) {
      if constexpr (R == Reduce::max) return -INFINITY;
      else if constexpr (R == Reduce::min) return INFINITY;
      else return A(0);
    } else {
      return A(0);  // integer max / min: the arg (-1 = nothing held) decides, not the value
    }
  }
  __device__ __forceinline__ static bool better(A v, A cur) {
    if constexpr (R == Reduce::max) return v > cur || (is_nan(v) && !is_nan(cur));
    else return v < cur || (is_nan(v) && !is_nan(cur));
  }
  __device__ __forceinline__ static void update(A& acc, int64_t& arg, A v, int64_t k) {
    if constexpr (kHasArg) {
      if (arg < 0 || better(v, acc)) { acc = v; arg = k; }
    } else {
      acc += v;
    }
  }
  template <class Arg>
  __device__ __forceinline__ static void merge(A& acc, Arg& arg, A o, Arg oa, bool left) {
    if constexpr (kHasArg) {
      const A la = left ? acc : o, ra = left ? o : acc;
      const Arg lg = left ? arg : oa, rg = left ? oa : arg;
      const bool take_right = rg >= 0 && (lg < 0 || better(ra, la));
      acc = take_right ? ra : la;
      arg = take_right ? rg : lg;
    } else {
      acc = left ? acc + o : o + acc;
    }
  }
  __device__ __forceinline__ static A write(A acc, int64_t deg) {
    if (deg == 0) return A(0);
    if constexpr (R == Reduce::mean) return acc / static_cast<A>(deg);
    else return acc;
  }
};

}  // namespace gnnsparse::cuda_detail
