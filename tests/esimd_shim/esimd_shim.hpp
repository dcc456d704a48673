// Host shim of the Intel ESIMD API, for tests only: exactly the calls the gnnsparse ESIMD kernels
// (sycl/kernels/esimd/*.hpp) make, with the semantics of Intel's ESIMD specification
// (sycl/doc/extensions/supported/sycl_ext_intel_esimd/sycl_ext_intel_esimd.md and the doc comments
// of sycl/ext/intel/esimd/{simd.hpp, memory.hpp, math.hpp} in intel-sycl-rt 2026.x). The kernel
// bodies are compiled by g++ with GNNSPARSE_ESIMD_HOST_SHIM defined. Kernels whose threads share
// nothing (no SLM, no barrier) run one ESIMD thread (work-item) at a time, which is faithful to the
// hardware's concurrent execution. Kernels with SLM and barriers (esimd/panel.hpp) run one
// work-group at a time, its threads as std::threads (WorkGroup below): barrier() is a real barrier,
// SLM is one buffer per work-group, and every SLM access is checked for races between barriers.
//
// What the shim adds over the spec, to catch bugs the GPU would hide or turn into faults:
//   * "undefined" values (masked-off gather lanes) are poison: NaN for floating types, 0x5A.. for
//     integers, so a kernel that forgets its merge produces wrong results;
//   * every memory access is checked against the ranges the test registered (readable / writable),
//     every element store is counted (each output element must be written exactly once), and the
//     alignment rules of each message are asserted.
// Violations are recorded (shim::errors()), not thrown, so a test reports all of them.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace gnnsparse_shim {

// ---- memory registry -------------------------------------------------------------------------
struct Range {
  const char *name;
  std::uintptr_t lo, hi;  // [lo, hi)
  bool writable;
  std::size_t elem;                  // element size for write counting (0: not counted)
  std::vector<std::uint32_t> writes;  // per element
};
struct State {
  std::vector<Range> ranges;
  std::vector<std::string> errors;
  bool check = true;
};
inline State &state() {
  static State s;
  return s;
}
// Guards State when a work-group's threads run at once (SLM kernels).
inline std::recursive_mutex &state_mutex() {
  static std::recursive_mutex m;
  return m;
}
inline void reset() {
  std::lock_guard<std::recursive_mutex> lock(state_mutex());
  state() = State{};
}
inline void error(const std::string &e) {
  std::lock_guard<std::recursive_mutex> lock(state_mutex());
  if (state().errors.size() < 64) state().errors.push_back(e);
}
inline void add_range(const char *name, const void *p, std::size_t bytes, bool writable, std::size_t elem = 0) {
  Range r{name, std::uintptr_t(p), std::uintptr_t(p) + bytes, writable, elem, {}};
  if (writable && elem) r.writes.assign(bytes / elem, 0);
  state().ranges.push_back(std::move(r));
}
inline void access(const void *p, std::size_t bytes, bool write, const char *what) {
  std::lock_guard<std::recursive_mutex> lock(state_mutex());
  if (!state().check) return;
  const std::uintptr_t a = std::uintptr_t(p);
  for (auto &r : state().ranges) {
    if (a >= r.lo && a + bytes <= r.hi) {
      if (write && !r.writable) error(std::string(what) + ": store into read-only " + r.name);
      if (write && r.elem) {
        for (std::uintptr_t b = a; b < a + bytes; b += r.elem) r.writes[(b - r.lo) / r.elem]++;
      }
      return;
    }
  }
  error(std::string(what) + (write ? ": store" : ": load") + " outside every registered array (" +
        std::to_string(bytes) + " bytes)");
}
inline void check_align(const void *p, std::size_t align, const char *what) {
  if (std::uintptr_t(p) % align) error(std::string(what) + ": address not " + std::to_string(align) + "-byte aligned");
}

template <typename T>
constexpr T poison() {
  if constexpr (std::is_floating_point_v<T>)
    return std::numeric_limits<T>::quiet_NaN();
  else
    return T(std::uint64_t(0x5A5A5A5A5A5A5A5Aull));
}

namespace esimd {

template <int N>
class simd_mask;

// A region of a simd object: v.template select<W, S>(offset) (spec: simd_view). Read as simd<T, W>,
// assigned from simd<T, W>.
template <typename T, int N>
class simd;

template <typename T, int N, int W, int S>
struct select_view {
  simd<T, N> *base;
  int off;
  operator simd<T, W>() const {
    simd<T, W> r(T(0));
    for (int i = 0; i < W; ++i) r[i] = (*base)[off + i * S];
    return r;
  }
  select_view &operator=(const simd<T, W> &v) {
    for (int i = 0; i < W; ++i) (*base)[off + i * S] = v[i];
    return *this;
  }
};

// simd<T, N> (spec: "simd class"): a value-semantic vector of N elements held in registers.
// Binary operators act element-wise; a scalar operand is broadcast (converted to T, as the spec's
// computation type is T for all operand combinations the kernels use).
template <typename T, int N>
class simd {
  static_assert(N > 0, "simd size must be positive");

 public:
  using element_type = T;
  static constexpr int length = N;

  simd() { v_.fill(poison<T>()); }  // spec: default-constructed value is undefined
  simd(T x) { v_.fill(x); }         // broadcast
  simd(T base, T step) {            // spec: simd(Ty Val, Ty Step) -> {Val, Val + Step, ...}
    for (int i = 0; i < N; ++i) v_[i] = T(base + T(i) * step);
  }
  T operator[](int i) const { return v_[i]; }
  T &operator[](int i) { return v_[i]; }

  template <int W, int S>
  select_view<T, N, W, S> select(int off) {
    static_assert(W > 0 && S > 0, "select: positive size and stride");
    if (off < 0 || off + (W - 1) * S >= N) error("select: region out of the simd object");
    return {this, off};
  }
  template <int W, int S>
  simd<T, W> select(int off) const {
    simd<T, W> r(T(0));
    for (int i = 0; i < W; ++i) r[i] = v_[off + i * S];
    return r;
  }

  // spec: merge(Val, Mask) replaces the lanes whose mask is set.
  void merge(const simd &val, const simd_mask<N> &m) {
    for (int i = 0; i < N; ++i)
      if (m[i]) v_[i] = val[i];
  }
  // spec: merge(Val1, Val2, Mask): lanes from Val1 where set, from Val2 elsewhere.
  void merge(const simd &a, const simd &b, const simd_mask<N> &m) {
    for (int i = 0; i < N; ++i) v_[i] = m[i] ? a[i] : b[i];
  }

#define GNNSPARSE_SHIM_BINOP(OP)                                                       \
  friend simd operator OP(const simd &a, const simd &b) {                              \
    simd r(T(0));                                                                      \
    for (int i = 0; i < N; ++i) r.v_[i] = T(a.v_[i] OP b.v_[i]);                       \
    return r;                                                                          \
  }                                                                                    \
  template <typename S, typename = std::enable_if_t<std::is_arithmetic_v<S>>>          \
  friend simd operator OP(const simd &a, S b) { return a OP simd(T(b)); }              \
  template <typename S, typename = std::enable_if_t<std::is_arithmetic_v<S>>>          \
  friend simd operator OP(S a, const simd &b) { return simd(T(a)) OP b; }              \
  simd &operator OP##=(const simd &b) { return *this = *this OP b; }                  \
  template <typename S, typename = std::enable_if_t<std::is_arithmetic_v<S>>>          \
  simd &operator OP##=(S b) { return *this = *this OP simd(T(b)); }
  GNNSPARSE_SHIM_BINOP(+)
  GNNSPARSE_SHIM_BINOP(-)
  GNNSPARSE_SHIM_BINOP(*)
  GNNSPARSE_SHIM_BINOP(/)
#undef GNNSPARSE_SHIM_BINOP

#define GNNSPARSE_SHIM_CMP(OP)                                                         \
  friend simd_mask<N> operator OP(const simd &a, const simd &b) {                      \
    simd_mask<N> r(0);                                                                 \
    for (int i = 0; i < N; ++i) r[i] = (a.v_[i] OP b.v_[i]) ? 1 : 0;                   \
    return r;                                                                          \
  }                                                                                    \
  template <typename S, typename = std::enable_if_t<std::is_arithmetic_v<S>>>          \
  friend simd_mask<N> operator OP(const simd &a, S b) { return a OP simd(T(b)); }
  GNNSPARSE_SHIM_CMP(<)
  GNNSPARSE_SHIM_CMP(<=)
  GNNSPARSE_SHIM_CMP(>)
  GNNSPARSE_SHIM_CMP(>=)
  GNNSPARSE_SHIM_CMP(==)
#undef GNNSPARSE_SHIM_CMP

 private:
  std::array<T, N> v_;
};

// simd_mask<N> (spec: simd_mask, elements of type unsigned short, 0 = off, non-zero = on).
template <int N>
class simd_mask {
 public:
  simd_mask(int x) { m_.fill(std::uint16_t(x != 0)); }  // broadcast
  std::uint16_t operator[](int i) const { return m_[i]; }
  std::uint16_t &operator[](int i) { return m_[i]; }
  friend simd_mask operator&(const simd_mask &a, const simd_mask &b) {
    simd_mask r(0);
    for (int i = 0; i < N; ++i) r.m_[i] = std::uint16_t(a.m_[i] && b.m_[i]);
    return r;
  }

 private:
  std::array<std::uint16_t, N> m_;
};

// ---- cache-hint properties (spec: esimd::properties, cache_hint_L1/L2): inert on the host ----
enum class cache_hint { none, uncached, cached, write_back, write_through, streaming, read_invalidate };
template <cache_hint H>
struct cache_hint_L1_t {};
template <cache_hint H>
struct cache_hint_L2_t {};
template <cache_hint H>
inline constexpr cache_hint_L1_t<H> cache_hint_L1{};
template <cache_hint H>
inline constexpr cache_hint_L2_t<H> cache_hint_L2{};
// alignment<K> (spec: esimd::alignment, the assumed alignment of the accessed address in bytes).
template <int K>
struct alignment_t {
  static constexpr int value = K;
};
template <int K>
inline constexpr alignment_t<K> alignment{};
template <typename P>
struct alignment_of_prop {
  static constexpr int value = 0;
};
template <int K>
struct alignment_of_prop<alignment_t<K>> {
  static constexpr int value = K;
};
template <typename... P>
struct properties {
  constexpr properties(P...) {}
  static constexpr int alignment = (0 + ... + alignment_of_prop<P>::value);  // 0: not given
};

// ---- memory messages ------------------------------------------------------------------------
// block_load (usm-bl-1): N contiguous elements from ptr. Spec: without an alignment property the
// address must be 4-byte aligned for elements of <= 4 bytes and 8-byte aligned for 8-byte elements.
template <typename T, int N>
simd<T, N> block_load(const T *ptr) {
  check_align(ptr, sizeof(T) <= 4 ? 4 : 8, "block_load");
  access(ptr, sizeof(T) * N, false, "block_load");
  simd<T, N> r(T(0));
  for (int i = 0; i < N; ++i) r[i] = ptr[i];
  return r;
}

// block_store (usm-bs-1): N contiguous elements to ptr. Spec: without an alignment property (and
// without cache hints) the address is assumed 16-byte (OWORD) aligned; with alignment<K>, K bytes.
template <typename T, int N, typename Props = properties<>>
void block_store(T *ptr, simd<T, N> vals, Props = {}) {
  constexpr int align = Props::alignment ? Props::alignment : 16;
  static_assert(align >= int(sizeof(T)), "block_store: at least element-size alignment");
  check_align(ptr, std::size_t(align), "block_store");
  access(ptr, sizeof(T) * N, true, "block_store");
  for (int i = 0; i < N; ++i) ptr[i] = vals[i];
}

// gather (usm-ga-5): element i from (char*)p + byte_offsets[i] where mask[i] is set; a masked-off
// lane is not accessed and its value is undefined (poison here). Each address element-size aligned.
template <typename T, int N, typename OffsetT>
simd<T, N> gather(const T *p, simd<OffsetT, N> byte_offsets, simd_mask<N> mask) {
  static_assert(std::is_integral_v<OffsetT>, "gather: integral byte offsets");
  simd<T, N> r;
  for (int i = 0; i < N; ++i) {
    if (!mask[i]) continue;
    const T *a = reinterpret_cast<const T *>(reinterpret_cast<const char *>(p) + byte_offsets[i]);
    check_align(a, sizeof(T), "gather");
    access(a, sizeof(T), false, "gather");
    r[i] = *a;
  }
  return r;
}

// scatter (usm-sc-1): element i to (char*)p + byte_offsets[i] where mask[i] is set.
template <typename T, int N, typename OffsetT>
void scatter(T *p, simd<OffsetT, N> byte_offsets, simd<T, N> vals, simd_mask<N> mask) {
  static_assert(std::is_integral_v<OffsetT>, "scatter: integral byte offsets");
  for (int i = 0; i < N; ++i) {
    if (!mask[i]) continue;
    T *a = reinterpret_cast<T *>(reinterpret_cast<char *>(p) + byte_offsets[i]);
    check_align(a, sizeof(T), "scatter");
    access(a, sizeof(T), true, "scatter");
    *a = vals[i];
  }
}

// prefetch (usm-pf-7): a cache hint only; no architectural effect, so a no-op. The spec's static
// limits are enforced: VS in {1,2,3,4,8,16,32,64,(128 for 4-byte)}, at most 512 bytes, and the
// address (when the mask is on) must be 4- (8- for 8-byte T) aligned. The shim also requires an
// enabled prefetch to stay inside a registered array (the kernels promise this).
template <typename T, int VS, typename OffsetT, typename Props>
void prefetch(const T *p, OffsetT byte_offset, simd_mask<1> mask, Props) {
  static_assert(VS == 1 || VS == 2 || VS == 3 || VS == 4 || VS == 8 || VS == 16 || VS == 32 || VS == 64 ||
                    (VS == 128 && sizeof(T) <= 4),
                "prefetch: VS not allowed by the spec");
  static_assert(VS * sizeof(T) <= 512, "prefetch: at most 512 bytes on PVC");
  if (!mask[0]) return;
  const char *a = reinterpret_cast<const char *>(p) + byte_offset;
  check_align(a, sizeof(T) == 8 ? 8 : 4, "prefetch");
  access(a, sizeof(T) * VS, false, "prefetch");
}

}  // namespace esimd

// ---- shared local memory and barrier (slm_init, slm_block_load / store, barrier) --------------
// One work-group runs at a time; the driver makes a WorkGroup (SLM of the size the kernel declares
// with slm_init, poisoned) and runs its threads as std::threads, each bound to it with bind().
// barrier() waits for every thread of the group that has not returned. The shim labels every
// access with the thread's phase (barriers passed) and reports, as the GPU would not:
//   * an SLM load of a word another thread stored in the same phase (a read-after-write race),
//   * an SLM store to a word another thread loaded or stored in the same phase,
//   * an SLM load of a word never stored, an access outside the SLM size or misaligned,
//   * threads of one group that pass different numbers of barriers (finish() of the driver).
struct WorkGroup {
  explicit WorkGroup(std::size_t slm_bytes, int threads)
      : slm(slm_bytes, 0xFF), w_phase(slm_bytes / 4, -1), w_thread(slm_bytes / 4, -1), r_phase(slm_bytes / 4, -1),
        r_mask(slm_bytes / 4, 0), nthreads(threads), barriers(std::size_t(threads), 0) {}
  std::vector<unsigned char> slm;
  std::vector<long> w_phase, w_thread, r_phase;  // per 4-byte word: last store (phase, thread), last loads' phase
  std::vector<std::uint64_t> r_mask;              // threads that loaded the word in r_phase
  std::mutex mu;
  std::condition_variable cv;
  int nthreads, arrived = 0, done = 0;
  long generation = 0;
  std::vector<long> barriers;  // per thread
};
struct ThreadSlot {
  WorkGroup *wg = nullptr;
  int tid = 0;
  long phase = 0;
};
inline ThreadSlot &slot() {
  thread_local ThreadSlot s;
  return s;
}
inline void bind(WorkGroup *wg, int tid) { slot() = ThreadSlot{wg, tid, 0}; }
// The thread returned: a barrier no longer waits for it.
inline void unbind() {
  WorkGroup *wg = slot().wg;
  if (!wg) return;
  std::lock_guard<std::mutex> lock(wg->mu);
  wg->barriers[std::size_t(slot().tid)] = slot().phase;
  ++wg->done;
  if (wg->arrived > 0 && wg->arrived + wg->done == wg->nthreads) {
    wg->arrived = 0;
    ++wg->generation;
    wg->cv.notify_all();
  }
  slot().wg = nullptr;
}

// Runs body(t) as thread t of one work-group with `slm` bytes of SLM (the threads as std::threads:
// link with -pthread); then reports threads that passed different numbers of barriers.
template <typename F>
void run_group(std::size_t slm, int threads, F &&body, const std::string &what) {
  WorkGroup wg(slm, threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      bind(&wg, t);
      body(t);
      unbind();
    });
  for (auto &th : ts) th.join();
  for (long b : wg.barriers)
    if (b != wg.barriers[0]) {
      error(what + ": the threads of a work-group passed different numbers of barriers");
      break;
    }
}

namespace esimd {

template <std::uint32_t Bytes>
void slm_init() {
  WorkGroup *wg = slot().wg;
  if (!wg) { error("slm_init: no work-group bound (the driver runs SLM kernels per work-group)"); return; }
  if (wg->slm.size() < Bytes) error("slm_init: the kernel declares more SLM than the driver gave the group");
}

inline void barrier() {
  WorkGroup *wg = slot().wg;
  if (!wg) { error("barrier: no work-group bound"); return; }
  std::unique_lock<std::mutex> lock(wg->mu);
  const long gen = wg->generation;
  if (++wg->arrived + wg->done == wg->nthreads) {
    wg->arrived = 0;
    ++wg->generation;
    wg->cv.notify_all();
  } else {
    wg->cv.wait(lock, [&] { return wg->generation != gen; });
  }
  ++slot().phase;
}

namespace slm_detail {
// Checks (and records) an SLM access of `bytes` at byte offset `off`; false when it must not happen.
inline bool check(std::uint32_t off, std::size_t bytes, std::size_t align, bool write, const char *what) {
  ThreadSlot &me = slot();
  WorkGroup *wg = me.wg;
  if (!wg) { error(std::string(what) + ": no work-group bound"); return false; }
  if (off % align) { error(std::string(what) + ": SLM offset not " + std::to_string(align) + "-byte aligned"); return false; }
  if (std::size_t(off) + bytes > wg->slm.size()) { error(std::string(what) + ": outside the SLM"); return false; }
  std::lock_guard<std::mutex> lock(wg->mu);
  const std::uint64_t bit = std::uint64_t(1) << (me.tid & 63);
  const char *bad = nullptr;  // the first problem of this access (one report per access)
  for (std::size_t w = off / 4; w < (off + bytes) / 4; ++w) {
    if (write) {
      if (!bad && wg->w_phase[w] == me.phase && wg->w_thread[w] != me.tid)
        bad = "stores of two threads to one SLM word in one phase";
      if (!bad && wg->r_phase[w] == me.phase && (wg->r_mask[w] & ~bit))
        bad = "a store to an SLM word another thread loaded in this phase (no barrier between)";
      wg->w_phase[w] = me.phase;
      wg->w_thread[w] = me.tid;
    } else {
      if (!bad && wg->w_phase[w] < 0) bad = "a load of SLM never stored";
      if (!bad && wg->w_phase[w] == me.phase && wg->w_thread[w] != me.tid)
        bad = "a load of an SLM word another thread stored in this phase (no barrier between)";
      if (wg->r_phase[w] != me.phase) { wg->r_phase[w] = me.phase; wg->r_mask[w] = 0; }
      wg->r_mask[w] |= bit;
    }
  }
  if (bad) error(std::string(what) + ": " + bad);
  return true;
}
}  // namespace slm_detail

// slm_block_load (slm-bl-1) / slm_block_store (slm-bs-2): N contiguous elements at a byte offset in
// SLM; without an alignment property the offset must be 16-byte aligned (the spec's default).
template <typename T, int N, typename Props = properties<>>
simd<T, N> slm_block_load(std::uint32_t byte_offset, Props = {}) {
  constexpr int align = Props::alignment ? Props::alignment : 16;
  simd<T, N> r;
  if (!slm_detail::check(byte_offset, sizeof(T) * N, std::size_t(align), false, "slm_block_load")) return r;
  std::memcpy(&r[0], slot().wg->slm.data() + byte_offset, sizeof(T) * N);
  return r;
}
template <typename T, int N, typename Props = properties<>>
void slm_block_store(std::uint32_t byte_offset, simd<T, N> vals, Props = {}) {
  constexpr int align = Props::alignment ? Props::alignment : 16;
  if (!slm_detail::check(byte_offset, sizeof(T) * N, std::size_t(align), true, "slm_block_store")) return;
  std::memcpy(slot().wg->slm.data() + byte_offset, &vals[0], sizeof(T) * N);
}

}  // namespace esimd

namespace esimd {
// ---- math -----------------------------------------------------------------------------------
// reduce<T0>(v, std::plus<>()) (math.hpp reduce -> detail::sum): for a power-of-two size, the
// halving tree reduce_single: v[0:N/2] + v[N/2:N], recursively, down to one element.
template <typename T0, typename T1, int N>
T0 reduce(simd<T1, N> v, std::plus<>) {
  static_assert((N & (N - 1)) == 0, "the shim implements reduce for power-of-two sizes (what the kernels use)");
  std::array<T0, N> a;
  for (int i = 0; i < N; ++i) a[i] = T0(v[i]);
  for (int n = N / 2; n >= 1; n /= 2)
    for (int i = 0; i < n; ++i) a[i] = T0(a[i] + a[i + n]);
  return a[0];
}

// exp (math.hpp): defined by ESIMD as exp2(x * log2e) with log2e = 1.442695f. The GPU's exp2 is
// a hardware approximation; the shim evaluates it with std::exp2 (tests compare with a tolerance).
template <typename T, int N>
simd<T, N> exp(simd<T, N> x) {
  simd<T, N> r(T(0));
  for (int i = 0; i < N; ++i) r[i] = std::exp2(T(x[i] * T(1.442695f)));
  return r;
}

// ---- XMX: dpas (xmx/dpas.hpp) ---------------------------------------------------------------
// Reference model of esimd::xmx::dpas<SystolicDepth, RepeatCount, T, CT, BT, AT, BPrecision,
// APrecision>(C, B, A) for the operand types the kernels use (tf32 x tf32 -> fp32), following the
// doc comments and static checks of intel-sycl-rt's xmx/dpas.hpp:
//   Result (M x N) = C (M x N) + A (M x K) x B (K x N), all row-major in the simd objects, with
//   M = RepeatCount (1..8), K = SystolicDepth (8) * OpsPerChannel (32 / operand bits: 1 for tf32),
//   N = ExecutionSize, deduced from B's size; tf32 requires N = 16 (pvc). B is "VNNI encoded":
//   element (k, n) at ((k / OPC) * N + n) * OPC + k % OPC, which for tf32 (OPC = 1) is k * N + n.
//   tf32 operands: the hardware reads the fp32 bit pattern as tf32 (1 sign, 8 exponent, 10
//   mantissa bits); the model drops the 13 low mantissa bits, as the library's own emulation of
//   the type does (experimental/esimd/tfloat32.hpp, from_float: bits & 0xFFFFE000).
//   Accumulation: one systolic stage per k (k = 0 .. K - 1 in order), each adding the product
//   (exact: 11 x 11 significant bits fit fp32) to the running fp32 value with round to nearest.
//   The hardware's internal accumulator width and rounding inside one dpas are not specified by
//   the ESIMD documentation: a kernel that is exact only under this model is not proven exact on
//   the GPU (the gnnsparse kernels pre-round their operands to tf32 and add each dpas chain's
//   result to an fp32 sum on the EU, so they depend on this only within one 32-column chunk).
namespace xmx {
enum class dpas_argument_type { Invalid = 0, bf16 = 9, fp16 = 10, tf32 = 12 };

inline float tf32_operand(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  u &= 0xFFFFE000u;
  std::memcpy(&v, &u, 4);
  return v;
}

template <int SystolicDepth, int RepeatCount, typename T, typename CT, typename BT, typename AT,
          dpas_argument_type BPrecision, dpas_argument_type APrecision, int N, int BN, int AN>
simd<T, N> dpas(simd<CT, N> C, simd<BT, BN> B, simd<AT, AN> A) {
  static_assert(SystolicDepth == 8, "dpas: systolic depth must be 8");
  static_assert(RepeatCount >= 1 && RepeatCount <= 8, "dpas: repeat count in [1, 8]");
  static_assert(APrecision == dpas_argument_type::tf32 && BPrecision == dpas_argument_type::tf32,
                "the shim models tf32 x tf32 dpas only (what the kernels use)");
  static_assert(std::is_same_v<T, float> && std::is_same_v<CT, float> && std::is_same_v<BT, float> &&
                    std::is_same_v<AT, float>,
                "tf32 dpas: float result, accumulator and operand storage");
  constexpr int OPC = 1;                        // operands per channel: 32 / 32 bits
  constexpr int K = SystolicDepth * OPC;        // 8
  constexpr int E = BN / K;                     // execution size
  static_assert(E * K == BN, "dpas: cannot deduce the execution size from B");
  static_assert(E == 16, "tf32 dpas: execution size 16 only");
  static_assert(AN == RepeatCount * K, "dpas: A must hold RepeatCount x K operands");
  static_assert(N == RepeatCount * E, "dpas: C / the result must hold RepeatCount x ExecutionSize elements");
  simd<T, N> R(T(0));
  for (int m = 0; m < RepeatCount; ++m)
    for (int n = 0; n < E; ++n) {
      float acc = C[m * E + n];
      for (int k = 0; k < K; ++k) {
        const float a = tf32_operand(A[m * K + k]);
        const float b = tf32_operand(B[((k / OPC) * E + n) * OPC + k % OPC]);
        acc = acc + a * b;  // the product is exact; one rounding per stage (-ffp-contract=off)
      }
      R[m * E + n] = acc;
    }
  return R;
}
}  // namespace xmx

}  // namespace esimd
}  // namespace gnnsparse_shim
