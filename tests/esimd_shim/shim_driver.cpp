// Host driver of the ESIMD kernel bodies on the shim (tests only). Built by tests/test_esimd.py as a
// shared library (g++ -DGNNSPARSE_ESIMD_HOST_SHIM -I sycl/kernels -I sycl -I include
// -I tests/esimd_shim) and called through ctypes. Codes (reduce, edge) are those of
// gnnsparse/ops.hpp. Each entry point:
//   1. takes the launch the host launcher (sycl/esimd.cpp) would make, from the same policy header
//      (sycl/esimd_policy.hpp); a non-zero nt / vlc / n / n2 forces that instance instead;
//   2. registers every array with the shim (read-only inputs, write-counted outputs);
//   3. runs every thread of the nd_range (global ids past the useful threads included) one by one;
//   4. checks that every output element was written exactly once and no access left its array.
// Returns 0 on success, else the number of shim errors (text: shim_last_errors()).
// Compile with -DSHIM_PART=1|2|3 to build one op per object (parallel builds); the default builds all.
// -DSHIM_PART=4 builds only the XMX tiled SpMM (esimd/tiles.hpp) and the dpas model, as its own library
// (tests/test_sycl_tiles.py). -DSHIM_PART=5 builds only the row-panel SpMM (esimd/panel.hpp, SLM and
// barriers: one work-group at a time, its threads as std::threads; link with -pthread;
// tests/test_sycl_panel.py).
#include <cstdint>
#include <cstring>
#include <string>

#include "esimd/fusedmm.hpp"
#include "esimd/sddmm.hpp"
#include "esimd/spmm.hpp"
#include "esimd_policy.hpp"
#ifndef SHIM_PART
#define SHIM_PART 0
#endif
#if SHIM_PART == 4
#include "esimd/tiles.hpp"
#endif
#if SHIM_PART == 5
#include "esimd/panel.hpp"
#endif

namespace ge = gnnsparse::esimd;
namespace gp = gnnsparse::esimd_policy;
namespace shim = gnnsparse_shim;
using i64 = std::int64_t;

namespace {

// Calls f(std::integral_constant<int, v>) for the v in Vs equal to x; false when none is.
template <int... Vs, typename F>
bool dispatch(int x, F &&f) {
  return ((x == Vs ? (f(std::integral_constant<int, Vs>{}), true) : false) || ...);
}

int finish(const char *out_name) {
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
  (void)out_name;
  return int(st.errors.size());
}

template <typename I>
void register_csr(const void *rowptr, const void *col, const float *val, i64 M, i64 nnz) {
  shim::add_range("rowptr", rowptr, sizeof(I) * (M + 1), false);
  if (nnz) shim::add_range("col", col, sizeof(I) * nnz, false);
  if (val && nnz) shim::add_range("val", val, sizeof(float) * nnz, false);
}

}  // namespace

extern "C" {

#if SHIM_PART == 0 || SHIM_PART == 1
// All errors of the last run, newline separated.
const char *shim_last_errors() {
  static std::string s;
  s.clear();
  for (auto &e : shim::state().errors) s += e + "\n";
  return s.c_str();
}

// The launch the host launcher makes: out = {nt, vlc, n, n2, local, global, threads}.
// op: 0 sddmm, 1 spmm, 2 fusedmm.
void shim_policy(int op, i64 M, i64 nnz, i64 H, i64 F, i64 D, i64 *out) {
  gp::Launch l = op == 0 ? gp::sddmm_launch(M, nnz, H, F) : op == 1 ? gp::spmm_launch(M, nnz, F)
                                                                    : gp::fusedmm_launch(M, nnz, H, F, D);
  const i64 v[7] = {l.nt, l.vlc, l.n, l.n2, l.local, l.global, l.threads};
  std::memcpy(out, v, sizeof v);
}

// Registered names of every instance the launchers can pick for an entry file, newline separated.
const char *shim_instance_names(const char *entry) {
  static std::string s;
  s.clear();
  for (auto &n : gp::all_instance_names(entry)) s += n + "\n";
  return s.c_str();
}
#endif

#if SHIM_PART == 0 || SHIM_PART == 1
// SDDMM dot: E[nnz, H] from X[M, H, F], Y[K, H, F].
int shim_sddmm(int idx64, int nt, int vlc, int n, const void *rowptr, const void *col, const float *X,
               const float *Y, float *E, i64 M, i64 K, i64 nnz, i64 H, i64 F) {
  shim::reset();
  gp::Launch l = gp::sddmm_launch(M, nnz, H, F);
  if (nt) l.nt = nt, l.local = nt, l.threads = l.global = M * H * nt;
  if (vlc) l.vlc = vlc;
  if (n) l.n = n;
  bool ok = false;
  auto run = [&](auto I_tag) {
    using I = decltype(I_tag);
    register_csr<I>(rowptr, col, nullptr, M, nnz);
    if (M * H * F != 0) shim::add_range("X", X, sizeof(float) * M * H * F, false);
    if (K * H * F != 0) shim::add_range("Y", Y, sizeof(float) * K * H * F, false);
    if (nnz * H != 0) shim::add_range("E", E, sizeof(float) * nnz * H, true, sizeof(float));
    dispatch<1, 2, 4, 8, 16>(l.nt, [&](auto NT) {
      dispatch<8, 16>(l.vlc, [&](auto VLC) {
        dispatch<16, 32, 64, 128>(l.n, [&](auto N) {
          ok = true;
          for (i64 g = 0; g < l.global; ++g)
            ge::sddmm_thread<float, I, NT.value, VLC.value, N.value>(g / l.local, int(g % l.local),
                                                                     static_cast<const I *>(rowptr),
                                                                     static_cast<const I *>(col), X, Y, E, H, F);
        });
      });
    });
  };
  if (idx64) run(std::int64_t{}); else run(std::int32_t{});
  if (!ok) { shim::error("sddmm: no instance for these parameters"); }
  return finish("E");
}
#endif

#if SHIM_PART == 0 || SHIM_PART == 2
// SpMM sum / mean (reduce: a gnnsparse::Reduce code): Y[M, C] from X[K, C]; val may be null.
int shim_spmm(int idx64, int vlc, int n, int reduce, const void *rowptr, const void *col, const float *val,
              const float *X, float *Y, i64 M, i64 K, i64 nnz, i64 C) {
  shim::reset();
  gp::Launch l = gp::spmm_launch(M, nnz, C);
  if (vlc) l.vlc = vlc;
  if (n) {
    l.n = n;
    l.threads = M * gp::ceil_div(C, n);
    l.global = gp::ceil_div(l.threads, l.local) * l.local;
  }
  bool ok = false;
  auto run = [&](auto I_tag) {
    using I = decltype(I_tag);
    register_csr<I>(rowptr, col, val, M, nnz);
    if (K * C != 0) shim::add_range("X", X, sizeof(float) * K * C, false);
    if (M * C != 0) shim::add_range("Y", Y, sizeof(float) * M * C, true, sizeof(float));
    dispatch<8, 16>(l.vlc, [&](auto VLC) {
      dispatch<16, 32, 64, 128>(l.n, [&](auto N) {
        ok = true;
        for (i64 g = 0; g < l.global; ++g) {
          if (val)
            ge::spmm_thread<float, I, VLC.value, N.value, true>(g, static_cast<const I *>(rowptr),
                                                               static_cast<const I *>(col), val, X, Y, M, C, gnnsparse::Reduce(reduce));
          else
            ge::spmm_thread<float, I, VLC.value, N.value, false>(g, static_cast<const I *>(rowptr),
                                                                static_cast<const I *>(col), val, X, Y, M, C, gnnsparse::Reduce(reduce));
        }
      });
    });
  };
  if (idx64) run(std::int64_t{}); else run(std::int32_t{});
  if (!ok) { shim::error("spmm: no instance for these parameters"); }
  return finish("Y");
}
#endif

#if SHIM_PART == 4
// All errors of the last run, newline separated.
const char *shim_last_errors() {
  static std::string s;
  s.clear();
  for (auto &e : shim::state().errors) s += e + "\n";
  return s.c_str();
}

// The dpas model alone: out[8 x 16] = C[8 x 16] + A[8 x 8] x B[8 x 16] (tf32 operands).
void shim_dpas_tf32(const float *C, const float *B, const float *A, float *out) {
  ge::simd<float, 128> c(0.0f), b(0.0f);
  ge::simd<float, 64> a(0.0f);
  for (int i = 0; i < 128; ++i) { c[i] = C[i]; b[i] = B[i]; }
  for (int i = 0; i < 64; ++i) a[i] = A[i];
  const ge::simd<float, 128> r = ge::dpas_tf32(c, b, a);
  for (int i = 0; i < 128; ++i) out[i] = r[i];
}

// The launch the host launcher makes for the XMX tiled SpMM: out = {nb, local, global, threads}.
void shim_xmx_policy(i64 M, i64 C, i64 *out) {
  const gp::XmxLaunch l = gp::spmm_xmx_launch(M, C);
  const i64 v[4] = {l.nb, l.local, l.global, l.threads};
  std::memcpy(out, v, sizeof v);
}

// Registered names of the XMX instances, newline separated.
const char *shim_instance_names(const char *entry) {
  static std::string s;
  s.clear();
  for (auto &n : gp::all_instance_names(entry)) s += n + "\n";
  return s.c_str();
}

// XMX tiled SpMM (sum / mean; reduce: a gnnsparse::Reduce code): Y[M, C] from X[K, C]; val may be
// null. nb = 0: the launcher's choice; split: 1 = 3xTF32 (precision fp32), 0 = tf32.
int shim_spmm_xmx(int idx64, int nb, int split, int reduce, const void *rowptr, const void *col, const float *val,
                  const float *X, float *Y, i64 M, i64 K, i64 nnz, i64 C) {
  shim::reset();
  gp::XmxLaunch l = gp::spmm_xmx_launch(M, C);
  if (nb) {
    l.nb = nb;
    l.threads = gp::ceil_div(M, 8) * gp::ceil_div(C, 16 * nb);
    l.global = gp::ceil_div(l.threads, l.local) * l.local;
  }
  bool ok = false;
  auto run = [&](auto I_tag) {
    using I = decltype(I_tag);
    register_csr<I>(rowptr, col, val, M, nnz);
    if (K * C != 0) shim::add_range("X", X, sizeof(float) * K * C, false);
    if (M * C != 0) shim::add_range("Y", Y, sizeof(float) * M * C, true, sizeof(float));
    dispatch<1, 2>(l.nb, [&](auto NB) {
      ok = true;
      for (i64 g = 0; g < l.global; ++g) {
        const auto *rp = static_cast<const I *>(rowptr);
        const auto *cp = static_cast<const I *>(col);
        const auto red = gnnsparse::Reduce(reduce);
        if (split && val) ge::spmm_xmx_thread<float, I, NB.value, true, true>(g, rp, cp, val, X, Y, M, K, C, red);
        else if (split) ge::spmm_xmx_thread<float, I, NB.value, true, false>(g, rp, cp, val, X, Y, M, K, C, red);
        else if (val) ge::spmm_xmx_thread<float, I, NB.value, false, true>(g, rp, cp, val, X, Y, M, K, C, red);
        else ge::spmm_xmx_thread<float, I, NB.value, false, false>(g, rp, cp, val, X, Y, M, K, C, red);
      }
    });
  };
  if (idx64) run(std::int64_t{}); else run(std::int32_t{});
  if (!ok) shim::error("spmm_xmx: no instance for these parameters");
  return finish("Y");
}
#endif

#if SHIM_PART == 5
// All errors of the last run, newline separated.
const char *shim_last_errors() {
  static std::string s;
  s.clear();
  for (auto &e : shim::state().errors) s += e + "\n";
  return s.c_str();
}

// Registered names of the panel instances, newline separated.
const char *shim_instance_names(const char *entry) {
  static std::string s;
  s.clear();
  for (auto &n : gp::all_instance_names(entry)) s += n + "\n";
  return s.c_str();
}

// The launch the host launcher makes for the panel SpMM: out = {bn, local, global, groups}.
void shim_panel_policy(i64 M, i64 C, i64 *out) {
  const gp::PanelLaunch l = gp::spmm_panel_launch(M, C);
  const i64 v[4] = {l.bn, l.local, l.global, l.groups};
  std::memcpy(out, v, sizeof v);
}

// Probes of the shim's SLM checks, two threads and 64 bytes of SLM: mode 0: thread 0 stores,
// barrier, thread 1 loads (clean); 1: the same without the barrier (a race); 2: thread 1 skips the
// barrier; 3: thread 1 loads SLM nobody stored; 4: both threads store the same words in one phase.
// Returns the number of shim errors.
int shim_slm_probe(int mode) {
  shim::reset();
  shim::run_group(64, 2, [&](int t) {
    const ge::simd<float, 12> v(float(t + 1));
    if (t == 0 || mode == 4) ge::xe::slm_block_store<float, 12>(0, v);  // bytes 0 .. 47
    if (mode != 1 && !(mode == 2 && t == 1)) ge::xe::barrier();
    if (t == 1 && mode == 3) (void)ge::xe::slm_block_load<float, 16>(0);  // bytes 48 .. 63: never stored
    else if (t == 1 && mode != 4) (void)ge::xe::slm_block_load<float, 12>(0);
  }, "probe");
  return int(shim::state().errors.size());
}

// Row-panel SpMM (sum / mean; reduce: a gnnsparse::Reduce code): Y[M, C] from X[K, C]; val may be
// null. bn = 0: the launcher's choice. Each work-group runs with its own SLM, its threads at once.
int shim_spmm_panel(int idx64, int bn, int reduce, const void *rowptr, const void *col, const float *val,
                    const float *X, float *Y, i64 M, i64 K, i64 nnz, i64 C) {
  static_assert(gp::kPanelThreads == ge::kPanelThreads && gp::kPanelRowsPerGroup == ge::panel_shape<16>::BM,
                "the launch policy and the kernel agree on the work-group shape");
  shim::reset();
  gp::PanelLaunch l = gp::spmm_panel_launch(M, C);
  if (bn) {
    l.bn = bn;
    l.groups = gp::ceil_div(M, gp::kPanelRowsPerGroup) * gp::ceil_div(C, bn);
    l.global = l.groups * l.local;
  }
  bool ok = false;
  auto run = [&](auto I_tag) {
    using I = decltype(I_tag);
    register_csr<I>(rowptr, col, val, M, nnz);
    if (K * C != 0) shim::add_range("X", X, sizeof(float) * K * C, false);
    if (M * C != 0) shim::add_range("Y", Y, sizeof(float) * M * C, true, sizeof(float));
    dispatch<16, 32, 64, 128>(l.bn, [&](auto BN) {
      ok = true;
      using Shape = ge::panel_shape<BN.value>;
      const auto *rp = static_cast<const I *>(rowptr);
      const auto *cp = static_cast<const I *>(col);
      const auto red = gnnsparse::Reduce(reduce);
      for (i64 g = 0; g < l.groups; ++g)
        shim::run_group(Shape::kSlmBytes, int(l.local), [&](int t) {
          ge::xe::slm_init<Shape::kSlmBytes>();  // as the kernel's entry point does
          if (val) ge::spmm_panel_thread<float, I, BN.value, true>(g, t, rp, cp, val, X, Y, M, K, C, red);
          else ge::spmm_panel_thread<float, I, BN.value, false>(g, t, rp, cp, val, X, Y, M, K, C, red);
        }, "spmm_panel (work-group " + std::to_string(g) + ")");
    });
  };
  if (idx64) run(std::int64_t{}); else run(std::int32_t{});
  if (!ok) shim::error("spmm_panel: no instance for these parameters");
  return finish("Y");
}
#endif

#if SHIM_PART == 0 || SHIM_PART == 3
#ifndef SHIM_FUSED_HALF
#define SHIM_FUSED_HALF 0  // 1: the unweighted instances only, 2: the weighted ones, 0: both
#endif
}  // extern "C"
#define GNNSPARSE_FUSED_ARGS                                                                                   \
  int idx64, int vlc, int nf, int nd, int edge, float slope, const void *rowptr, const void *col,               \
      const float *val, const float *X, const float *Y, const float *Z, float *Out, float *E, i64 M, i64 K,     \
      i64 nnz, i64 H, i64 F, i64 D
#define GNNSPARSE_FUSED_PASS idx64, vlc, nf, nd, edge, slope, rowptr, col, val, X, Y, Z, Out, E, M, K, nnz, H, F, D

template <bool HAS_VAL>
int fused_run(GNNSPARSE_FUSED_ARGS) {
  shim::reset();
  gp::Launch l = gp::fusedmm_launch(M, nnz, H, F, D);
  if (vlc) l.vlc = vlc;
  if (nf) l.n = nf;
  if (nd) {
    l.n2 = nd;
    l.threads = M * H * gp::ceil_div(D, nd);
    l.global = gp::ceil_div(l.threads, l.local) * l.local;
  }
  bool ok = false;
  auto run = [&](auto I_tag) {
    using I = decltype(I_tag);
    register_csr<I>(rowptr, col, val, M, nnz);
    if (M * H * F != 0) shim::add_range("X", X, sizeof(float) * M * H * F, false);
    if (K * H * F != 0) shim::add_range("Y", Y, sizeof(float) * K * H * F, false);
    if (K * H * D != 0) shim::add_range("Z", Z, sizeof(float) * K * H * D, false);
    if (M * H * D != 0) shim::add_range("Out", Out, sizeof(float) * M * H * D, true, sizeof(float));
    if (E && nnz * H != 0) shim::add_range("E", E, sizeof(float) * nnz * H, true, sizeof(float));
    dispatch<8, 16>(l.vlc, [&](auto VLC) {
      dispatch<16, 32, 64, 128>(l.n, [&](auto NF) {
        dispatch<16, 32, 64, 128>(l.n2, [&](auto ND) {
          ok = true;
          for (i64 g = 0; g < l.global; ++g)
            ge::fusedmm_thread<float, I, VLC.value, NF.value, ND.value, HAS_VAL>(
                g, static_cast<const I *>(rowptr), static_cast<const I *>(col), val, X, Y, Z, Out, E, M, H, F, D,
                gnnsparse::EdgeFn(edge), slope);
        });
      });
    });
  };
  if (idx64) run(std::int64_t{}); else run(std::int32_t{});
  if (!ok) shim::error("fusedmm: no instance for these parameters");
  return finish("Out");
}

extern "C" {
int shim_fusedmm_weighted(GNNSPARSE_FUSED_ARGS);
int shim_fusedmm_unweighted(GNNSPARSE_FUSED_ARGS);
#if SHIM_FUSED_HALF == 0 || SHIM_FUSED_HALF == 1
int shim_fusedmm_unweighted(GNNSPARSE_FUSED_ARGS) { return fused_run<false>(GNNSPARSE_FUSED_PASS); }
#endif
#if SHIM_FUSED_HALF == 0 || SHIM_FUSED_HALF == 2
int shim_fusedmm_weighted(GNNSPARSE_FUSED_ARGS) { return fused_run<true>(GNNSPARSE_FUSED_PASS); }
#endif
#if SHIM_FUSED_HALF == 0 || SHIM_FUSED_HALF == 1
// FusedMM dot + edge function (edge: a gnnsparse::EdgeFn code): Out[M, H, D]; val and E may be null.
int shim_fusedmm(GNNSPARSE_FUSED_ARGS) {
  return val ? shim_fusedmm_weighted(GNNSPARSE_FUSED_PASS) : shim_fusedmm_unweighted(GNNSPARSE_FUSED_PASS);
}
#endif
#endif

}  // extern "C"
