// Host driver of the ESIMD quantized kernels (sycl/kernels/esimd/quantize.hpp, qspmm.hpp) on the
// shim, for tests/test_quant_esimd.py (built as a shared library, called through ctypes):
//   g++ -DGNNSPARSE_ESIMD_HOST_SHIM -I sycl/kernels -I include -I tests/esimd_shim -pthread
// Each entry point registers every array with the shim (read-only inputs, write-counted outputs),
// runs every ESIMD thread of the launch the host launcher (sycl/esimd_quant.cpp) makes -- the
// threads past the useful ones included -- one by one (the SpMM with a quantized output: each
// work-group's threads as std::threads sharing its SLM and barrier), and checks that every output
// element was written exactly once and no access left its array. Returns the number of shim
// errors (text: shim_quant_errors()).
#include <cstdint>
#include <string>

#include "esimd/qspmm.hpp"
#include "quant_policy.hpp"

namespace ge = gnnsparse::esimd;
namespace rt = gnnsparse::sycl_rt;
namespace shim = gnnsparse_shim;
using i64 = std::int64_t;

namespace {

constexpr int kNQ = 16;      // as sycl/esimd_quant.cpp
constexpr i64 kLocal = 16;

i64 round_up(i64 x, i64 m) { return (x + m - 1) / m * m; }

int finish() {
  auto &st = shim::state();
  for (auto &r : st.ranges) {
    if (!r.writable || !r.elem) continue;
    std::size_t bad = 0, first = 0;
    for (std::size_t e = 0; e < r.writes.size(); ++e)
      if (r.writes[e] != 1 && bad++ == 0) first = e;
    if (bad)
      shim::error(std::string(r.name) + ": " + std::to_string(bad) + " elements not written exactly once (first " +
                  std::to_string(first) + ", written " + std::to_string(r.writes[first]) + " times)");
  }
  return int(st.errors.size());
}

}  // namespace

extern "C" {

const char *shim_quant_errors() {
  static std::string s;
  s.clear();
  for (auto &e : shim::state().errors) s += e + "\n";
  return s.c_str();
}

// work[t] = the absmax key partial of X[t * chunk, (t + 1) * chunk), t < nthreads.
int shim_quant_absmax(const float *X, i64 n, i64 chunk, i64 nthreads, float *work) {
  shim::reset();
  if (n) shim::add_range("X", X, sizeof(float) * n, false);
  shim::add_range("work", work, sizeof(float) * nthreads, true, sizeof(float));
  for (i64 t = 0; t < round_up(nthreads, kLocal); ++t)
    if (t < nthreads) ge::absmax_thread(t, X, n, chunk, work);
  return finish();
}

// Q from X (nquads quads) with scale = {s, inv}.
int shim_quantize(int bits, int stochastic, const float *X, i64 nquads, const float *scale, std::uint64_t seed,
                  std::uint8_t *Q) {
  shim::reset();
  shim::add_range("X", X, sizeof(float) * 4 * nquads, false);
  shim::add_range("scale", scale, sizeof(float) * 2, false);
  const i64 qbytes = bits == 8 ? 4 * nquads : 2 * nquads;
  shim::add_range("Q", Q, std::size_t(qbytes), true, 1);
  const i64 threads = round_up((nquads + kNQ - 1) / kNQ, kLocal);
  for (i64 t = 0; t < threads; ++t) {
    if (bits == 8 && stochastic) ge::quantize_thread<8, true, kNQ>(t, X, nquads, scale, seed, Q);
    else if (bits == 8) ge::quantize_thread<8, false, kNQ>(t, X, nquads, scale, seed, Q);
    else if (stochastic) ge::quantize_thread<4, true, kNQ>(t, X, nquads, scale, seed, Q);
    else ge::quantize_thread<4, false, kNQ>(t, X, nquads, scale, seed, Q);
  }
  return finish();
}

// The quantized SpMM over the launch sycl/esimd_quant.cpp makes (kQSpmmLocal threads per
// work-group, M * ceil(C / 32) useful threads): idx64 selects the index type, weighted whether w
// (A's values, H = 1, or W: nnz x H) is read. Q == nullptr: float32 Y; else Q (int8 M x C or int4
// M x ceil(C / 2) bytes) with qscale_in / obits / ostoch / oseed, and work[g] per work-group g
// (`groups` of them, as the launcher allocates).
int shim_qspmm(int idx64, int bits, int weighted, const void *rowptr, const void *col, const float *w,
               const std::uint8_t *X, const float *scale, float *Y, i64 M, i64 K, i64 nnz, i64 C, i64 H, int ident,
               int mean, std::uint8_t *Q, const float *qscale_in, float *work, i64 groups, int obits, int ostoch,
               std::uint64_t oseed) {
  shim::reset();
  const std::size_t isz = idx64 ? 8 : 4;
  shim::add_range("rowptr", rowptr, isz * std::size_t(M + 1), false);
  if (nnz && !ident) shim::add_range("col", col, isz * std::size_t(nnz), false);
  if (weighted && nnz) shim::add_range("w", w, sizeof(float) * std::size_t(nnz * H), false);
  const i64 row_bytes = bits == 8 ? C : (C + 1) / 2;
  const i64 xrows = ident ? nnz : K;
  if (xrows * row_bytes > 0) shim::add_range("X", X, std::size_t(xrows * row_bytes), false);
  shim::add_range("scale", scale, sizeof(float) * 2, false);
  const i64 ntiles = (C + ge::kQN - 1) / ge::kQN;
  const i64 threads = round_up(M * ntiles, ge::kQSpmmLocal);
  if (Q == nullptr) {
    if (M * C > 0) shim::add_range("Y", Y, sizeof(float) * std::size_t(M * C), true, sizeof(float));
  } else {
    const i64 orow = obits == 8 ? C : (C + 1) / 2;
    if (M * orow > 0) shim::add_range("Q", Q, std::size_t(M * orow), true, 1);
    shim::add_range("qscale_in", qscale_in, sizeof(float) * 2, false);
    shim::add_range("work", work, sizeof(float) * std::size_t(groups), true, sizeof(float));
    if (groups != threads / ge::kQSpmmLocal) shim::error("shim_qspmm: work must hold one float per work-group");
  }
  const i64 D = C / H;
  auto thread = [&](i64 gid) -> float {
    auto run = [&](auto I_tag, auto B_tag, auto W_tag) {
      using I = decltype(I_tag);
      return ge::qspmm_thread<I, decltype(B_tag)::value, decltype(W_tag)::value>(
          gid, static_cast<const I *>(rowptr), static_cast<const I *>(col), w, X, scale, Y, M, C, row_bytes, H, D,
          ident, mean, Q, qscale_in, obits, ostoch, oseed);
    };
    using B8 = std::integral_constant<int, 8>;
    using B4 = std::integral_constant<int, 4>;
    using WT = std::true_type;
    using WF = std::false_type;
    if (idx64) {
      if (bits == 8) return weighted ? run(std::int64_t{}, B8{}, WT{}) : run(std::int64_t{}, B8{}, WF{});
      return weighted ? run(std::int64_t{}, B4{}, WT{}) : run(std::int64_t{}, B4{}, WF{});
    }
    if (bits == 8) return weighted ? run(std::int32_t{}, B8{}, WT{}) : run(std::int32_t{}, B8{}, WF{});
    return weighted ? run(std::int32_t{}, B4{}, WT{}) : run(std::int32_t{}, B4{}, WF{});
  };
  for (i64 g = 0; g < threads / ge::kQSpmmLocal; ++g) {
    if (Q == nullptr) {
      for (i64 t = 0; t < ge::kQSpmmLocal; ++t) thread(g * ge::kQSpmmLocal + t);
      continue;
    }
    shim::run_group(4 * sizeof(float) * ge::kQSpmmLocal, ge::kQSpmmLocal, [&](int t) {
      ge::xe::slm_init<4 * sizeof(float) * ge::kQSpmmLocal>();  // as the kernel's entry point does
      const float key = thread(g * ge::kQSpmmLocal + t);
      ge::qspmm_group_absmax(t, g, key, work);
    }, "qspmm (work-group " + std::to_string(g) + ")");
  }
  return finish();
}

// The int8 GEMM's scale pass (requantize) over the launch sycl/esimd_quant.cpp makes: `threads`
// threads of `chunk` quads each (esimd_requantize_plan), Q of rows x C (int8) or rows x C / 2 (int4)
// bytes, one partial per thread in work.
int shim_requantize(int bits, int stochastic, const int *acc, i64 rows, i64 C, i64 ld, i64 chunk, i64 threads,
                    const float *sa, const float *sb, const float *scale_in, std::uint64_t seed, std::uint8_t *Q,
                    float *work) {
  shim::reset();
  if (rows > 0) shim::add_range("acc", acc, sizeof(int) * std::size_t((rows - 1) * ld + C), false);
  shim::add_range("sa", sa, sizeof(float), false);
  shim::add_range("sb", sb, sizeof(float), false);
  shim::add_range("scale_in", scale_in, sizeof(float) * 2, false);
  const i64 qbytes = bits == 8 ? rows * C : rows * C / 2;
  if (qbytes > 0) shim::add_range("Q", Q, std::size_t(qbytes), true, 1);
  shim::add_range("work", work, sizeof(float) * std::size_t(threads), true, sizeof(float));
  for (i64 t = 0; t < round_up(threads, kLocal); ++t) {
    if (t >= threads) continue;  // the kernel's guard
    if (bits == 8 && stochastic) ge::requantize_thread<8, true, kNQ>(t, acc, rows, C, ld, chunk, sa, sb, scale_in, seed, Q, work);
    else if (bits == 8) ge::requantize_thread<8, false, kNQ>(t, acc, rows, C, ld, chunk, sa, sb, scale_in, seed, Q, work);
    else if (stochastic) ge::requantize_thread<4, true, kNQ>(t, acc, rows, C, ld, chunk, sa, sb, scale_in, seed, Q, work);
    else ge::requantize_thread<4, false, kNQ>(t, acc, rows, C, ld, chunk, sa, sb, scale_in, seed, Q, work);
  }
  return finish();
}

// The launch policy's choices on a device with ESIMD (sycl/quant_policy.hpp), so the tests run the
// launches the launcher makes. qspmm: reduce 0 sum / 1 mean / 2 max; weighted: A's values given;
// returns the work-groups of the ESIMD launch (its absmax partials), or -1 when the portable kernel
// takes the call. requantize: threads and chunk of the ESIMD pass, or -1.
i64 shim_qspmm_plan(i64 M, i64 K, i64 nnz, i64 max_degree, i64 C, int bits, int weighted, int reduce) {
  static int dummy;
  rt::DeviceCaps caps;
  caps.esimd = true;
  gnnsparse::QSpmmArgs a;
  a.A = gnnsparse::CsrView{gnnsparse::IType::i32, &dummy, &dummy, weighted ? &dummy : nullptr, M, K, nnz, max_degree};
  a.X.bits = bits;
  a.X.C = C;
  a.reduce = reduce == 0 ? gnnsparse::Reduce::sum : reduce == 1 ? gnnsparse::Reduce::mean : gnnsparse::Reduce::max;
  const auto l = rt::esimd_qspmm_launch(caps, a);
  if (!l) return -1;
  if (l->local != std::size_t(ge::kQSpmmLocal) || long(rt::kEsimdQSpmmCols) != ge::kQN) return -2;  // kernel and policy disagree
  return i64(l->global / l->local);
}

i64 shim_requantize_plan(i64 rows, i64 C, i64 ld, int bits, i64 *chunk) {
  rt::DeviceCaps caps;
  caps.esimd = true;
  gnnsparse::RequantizeArgs a;
  a.rows = rows;
  a.C = C;
  a.ld = ld;
  a.out.bits = bits;
  const auto p = rt::esimd_requantize_plan(caps, a);
  if (!p) return -1;
  *chunk = p->chunk;
  return p->threads;
}

}  // extern "C"
