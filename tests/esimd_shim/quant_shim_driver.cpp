// Host driver of the ESIMD quantizer passes (sycl/kernels/esimd/quantize.hpp) on the shim, for
// tests/test_quant_esimd.py (built as a shared library, called through ctypes):
//   g++ -DGNNSPARSE_ESIMD_HOST_SHIM -I sycl/kernels -I include -I tests/esimd_shim
// Each entry point registers every array with the shim (read-only inputs, write-counted outputs),
// runs every ESIMD thread of the launch the host launcher (sycl/esimd_quant.cpp) makes -- the
// threads past the useful ones included -- one by one, and checks that every output element was
// written exactly once and no access left its array. Returns the number of shim errors (text:
// shim_quant_errors()).
#include <cstdint>
#include <string>

#include "esimd/quantize.hpp"

namespace ge = gnnsparse::esimd;
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

}  // extern "C"
