// gnnsparse ESIMD launch policy: which kernel instance and which nd_range a call gets.
//
// Plain C++17, no SYCL and no ESIMD: included by the host launcher (sycl/esimd.cpp), the
// ahead-of-time tools and the host-shim test driver (tests/esimd_shim/shim_driver.cpp), so the
// tests run exactly the choices the launcher makes and compile-check exactly the instance set it
// can pick (for_each_esimd_instance()). Host code: it lives outside the embedded kernel folder.
//
// Kernels (sycl/kernels/esimd/*.hpp), after the ESIMD paper ("Performance Optimization of Deep
// Learning Sparse Matrix Kernels on Intel Max Series GPU"):
//   sddmm  <float, I, NT, VLC, N>      NT threads per (row, head), chunks of VLC nonzeros, feature tile N
//   spmm   <float, I, VLC, N, HAS_VAL> one thread per (row, feature tile of N), chunks of VLC nonzeros
//   fusedmm<float, I, VLC, NF, ND, HAS_VAL>  NT = 1 SDDMM (feature tile NF) feeding the SpMM (output tile ND)
//   spmm_xmx<float, I, NB, SPLIT, HAS_VAL>   dense-ish SpMM on DPAS: 8 rows x NB * 16 columns per thread
//   spmm_panel<float, I, BN, HAS_VAL>        dense-ish SpMM, row panels: 16 threads x 4 rows per
//                                            work-group share each chunk of X staged in SLM
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "instances.hpp"

namespace gnnsparse::esimd_policy {

// The tuning values every kernel is instantiated for. sycl/kernels/esimd/common.hpp static_asserts
// the same sets (kernel_param); test_esimd.py compiles every combination.
inline constexpr int kNT[] = {1, 2, 4, 8, 16};  // SDDMM threads per row
inline constexpr int kVLC[] = {8, 16};          // nonzeros per chunk (one simd block of indices)
inline constexpr int kN[] = {16, 32, 64, 128};  // feature tile held in registers (simd<float, N>)

// One stack of a Max 1550 holds 4096 ESIMD threads at full occupancy (ESIMD paper, Section 4).
inline constexpr std::int64_t kThreadsPerStack = 4096;

// Occupancy of a launch of `threads` ESIMD threads: the fraction of the last wave that is filled,
// threads / (4096 * ceil(threads / 4096)).
inline double occupancy(std::int64_t threads) {
  if (threads <= 0) return 0.0;
  const std::int64_t waves = (threads + kThreadsPerStack - 1) / kThreadsPerStack;
  return double(threads) / double(waves * kThreadsPerStack);
}

// The ESIMD paper's host rule for NT: the smallest power of two, at most 16, that maximizes the occupancy
// of M * NT threads. M = 1024 -> NT = 4 (4096 threads); M = 3072 -> NT = 4 (12288 = 3 * 4096,
// the paper's second example); M >= 4096 and a multiple of 4096 -> NT = 1.
inline int choose_nt(std::int64_t M) {
  int best = 1;
  double best_occ = occupancy(M);
  for (int nt : kNT) {
    const double occ = occupancy(M * nt);
    if (occ > best_occ + 1e-12) { best = nt; best_occ = occ; }
  }
  return best;
}

// VLC: 16 when a thread's average share of nonzeros fills a 16-wide chunk, else 8 (less tail waste).
inline int choose_vlc(std::int64_t nnz, std::int64_t threads_per_row_total) {
  if (threads_per_row_total <= 0) return 8;
  return nnz >= 16 * threads_per_row_total ? 16 : 8;
}

// Feature tile: the smallest tile >= width (the whole row in registers, as in the paper for
// N = 32 / 128); wider rows are tiled by 128 and the last tile is masked.
inline int choose_tile(std::int64_t width) {
  for (int n : kN)
    if (width <= n) return n;
  return 128;
}

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// One launch: kernel instance parameters and the 1-D nd_range (global is a multiple of local).
struct Launch {
  int nt = 1, vlc = 8, n = 16, n2 = 16;  // n2: fusedmm output tile (ND)
  std::int64_t local = 1, global = 0;
  std::int64_t threads = 0;               // useful threads (global - threads idle at the end)
};

// Work-group size for the one-thread-per-row kernels (SpMM, FusedMM): the ESIMD paper puts NT rows in a
// work-group for small matrices; we use the SDDMM NT rule on the number of threads.
inline std::int64_t rows_per_group(std::int64_t threads) { return choose_nt(threads); }

// SDDMM: M * H work-groups of NT threads; thread t of group g = (row, head) takes
// ceil(nnzr / NT) nonzeros of the row.
inline Launch sddmm_launch(std::int64_t M, std::int64_t nnz, std::int64_t H, std::int64_t F) {
  Launch l;
  l.nt = choose_nt(M * H);
  l.vlc = choose_vlc(nnz * H, M * H * l.nt);
  l.n = choose_tile(F);
  l.local = l.nt;
  l.threads = M * H * l.nt;
  l.global = l.threads;
  return l;
}

// SpMM: one thread per (row, feature tile).
inline Launch spmm_launch(std::int64_t M, std::int64_t nnz, std::int64_t C) {
  Launch l;
  l.n = choose_tile(C);
  l.threads = M * ceil_div(C, l.n);
  l.vlc = choose_vlc(nnz, M);
  l.local = rows_per_group(l.threads);
  l.global = ceil_div(l.threads, l.local) * l.local;
  return l;
}

// FusedMM: NT = 1; one thread per (row, head, output tile); each output tile recomputes the row's
// edge values (one tile when D <= 128).
inline Launch fusedmm_launch(std::int64_t M, std::int64_t nnz, std::int64_t H, std::int64_t F, std::int64_t D) {
  Launch l;
  l.n = choose_tile(F);
  l.n2 = choose_tile(D);
  l.threads = M * H * ceil_div(D, l.n2);
  l.vlc = choose_vlc(nnz * H, M * H);
  l.local = rows_per_group(l.threads);
  l.global = ceil_div(l.threads, l.local) * l.local;
  return l;
}

// The instance of a launch (sycl/instances.hpp names it).
using sycl_rt::Instance;
using sycl_rt::Kernel;
inline IType itype_of(bool i64) { return i64 ? IType::i64 : IType::i32; }
inline Instance sddmm_instance(bool i64, int nt, int vlc, int n) {
  return Instance::of(Kernel::esimd_sddmm, DType::f32, itype_of(i64), nt, vlc, n);
}
inline Instance spmm_instance(bool i64, int vlc, int n, bool has_val) {
  return Instance::of(Kernel::esimd_spmm, DType::f32, itype_of(i64), vlc, n, has_val);
}
inline Instance fusedmm_instance(bool i64, int vlc, int nf, int nd, bool has_val) {
  return Instance::of(Kernel::esimd_fusedmm, DType::f32, itype_of(i64), vlc, nf, nd, has_val);
}

// ---- XMX (DPAS) tiled SpMM for dense-ish inputs (sycl/kernels/esimd/tiles.hpp) ------------------
// One thread per (block of 8 rows, NB * 16 output columns): NB = 1 for C <= 16, else 2.
inline constexpr int kXmxNB[] = {1, 2};
struct XmxLaunch {
  int nb = 1;
  std::int64_t local = 1, global = 0, threads = 0;
};
inline XmxLaunch spmm_xmx_launch(std::int64_t M, std::int64_t C) {
  XmxLaunch l;
  l.nb = C <= 16 ? 1 : 2;
  l.threads = ceil_div(M, 8) * ceil_div(C, 16 * l.nb);
  l.local = rows_per_group(l.threads);
  l.global = ceil_div(l.threads, l.local) * l.local;
  return l;
}
// split: 3xTF32 (precision fp32) or one tf32 product (precision tf32).
inline Instance spmm_xmx_instance(bool i64, int nb, bool split, bool has_val) {
  return Instance::of(Kernel::esimd_spmm_xmx, DType::f32, itype_of(i64), nb, split, has_val);
}

// ---- row-panel SpMM for dense-ish inputs (sycl/kernels/esimd/panel.hpp) ------------------------
// A work-group of kPanelThreads ESIMD threads owns 64 rows (4 per thread) and one BN-column tile;
// BN: the smallest tile >= C (choose_tile), C > 128 in tiles of 128. The kernel's panel_shape
// holds the same numbers (the shim driver static_asserts that they agree).
inline constexpr int kPanelThreads = 16;
inline constexpr std::int64_t kPanelRowsPerGroup = 64;
struct PanelLaunch {
  int bn = 16;
  std::int64_t local = kPanelThreads, global = 0, groups = 0;
};
inline PanelLaunch spmm_panel_launch(std::int64_t M, std::int64_t C) {
  PanelLaunch l;
  l.bn = choose_tile(C);
  l.groups = ceil_div(M, kPanelRowsPerGroup) * ceil_div(C, l.bn);
  l.global = l.groups * l.local;
  return l;
}
inline Instance spmm_panel_instance(bool i64, int bn, bool has_val) {
  return Instance::of(Kernel::esimd_spmm_panel, DType::f32, itype_of(i64), bn, has_val);
}

// Every instance the launchers can pick: 80 SDDMM, 32 SpMM, 128 FusedMM, 16 XMX SpMM, 16 panel SpMM.
template <typename F>
void for_each_esimd_instance(F &&f) {
  for (bool i64 : {false, true})
    for (int vlc : kVLC)
      for (int n : kN) {
        for (int nt : kNT) f(sddmm_instance(i64, nt, vlc, n));
        for (bool v : {false, true}) f(spmm_instance(i64, vlc, n, v));
        for (int nd : kN)
          for (bool v : {false, true}) f(fusedmm_instance(i64, vlc, n, nd, v));
      }
  for (bool i64 : {false, true})
    for (int nb : kXmxNB)
      for (bool split : {true, false})
        for (bool v : {false, true}) f(spmm_xmx_instance(i64, nb, split, v));
  for (bool i64 : {false, true})
    for (int bn : kN)
      for (bool v : {false, true}) f(spmm_panel_instance(i64, bn, v));
}

// Registered names of every instance of one entry file ("esimd/sddmm.hpp", ...).
inline std::vector<std::string> all_instance_names(const std::string &entry) {
  std::vector<std::string> out;
  for_each_esimd_instance([&](Instance in) {
    if (entry == in.spec().entry) out.push_back(sycl_rt::instance_name(in));
  });
  return out;
}

}  // namespace gnnsparse::esimd_policy
