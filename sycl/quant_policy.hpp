// Launch policy of the quantized SYCL kernels (host code only, plain C++17): which kernel instance
// and which nd_range each pass of a quantized op gets, and the list of every instance these
// choices can produce. sycl/quant.cpp and sycl/esimd_quant.cpp submit what these functions return;
// the ahead-of-time build (cmake/aot/gnnsparse_aot.cpp) compiles the lists; a test checks that the
// choices never leave them (_sycl.launch_policy_outliers).
//
// Kernels (sycl/kernels/quant*.hpp; contract: gnnsparse/quant.hpp):
//   quant_absmax<WG>     P work-groups of WG, each reduces a chunk of X to one partial
//   quant_scale<WG>      one work-group folds the P partials into {s, 1 / s}
//   quant_quantize<B>    a work-item per 4 elements (quads) or per output byte
//   quant_dequantize<B>  a work-item per element
//   quant_requantize<B>  P work-groups over the int8 GEMM's int32 output (delayed scale)
//   qspmm_sg<I, SG, R, W>  a sub-group per (row, tile of SG * kQV columns); reduction R, weighted W;
//                        with a quantized output, one partial absmax per work-group
//   qsddmm_sg<I, SG>     a sub-group per (row, head)
//   qfusedmm_sg<I, SG>   a sub-group per (row, head, tile of SG * kQV output columns)
//   qgemm_tn_partial<SG, TM, VN>, qgemm_tn_combine<U>  the int8 A^T B (qgemm_tn_plan below)
//   esimd::qspmm<I, BITS, W>  (Intel GPUs) a thread per (row, tile of 32 columns), sum / mean
//   esimd::requantize<B, STOCH, NQ>  (Intel GPUs) a thread per chunk of quads, one partial each
// Bits, the SDDMM op and the edge function are run-time arguments of these kernels; the quantized
// SpMM is instantiated per reduction and weights (one edge loop per instance: the driver that
// finishes the SPIR-V at first use compiled all eight in 1.5-2.6 s on the CPU device). The list:
// 32 portable instances at one sub-group size (28 + the int8 TN GEMM's 4), plus 17 ESIMD instances on
// Intel GPUs: the quantizer's 5 and the GEMM scale pass's 4 (sycl/kernels/esimd/quantize.hpp), the
// SpMM's 8 (sycl/kernels/esimd/qspmm.hpp).
#pragma once
#include <algorithm>
#include <cstddef>
#include <optional>

#include "gnnsparse/qgemm.hpp"
#include "gnnsparse/quant.hpp"
#include "policy.hpp"

namespace gnnsparse::sycl_rt {

inline constexpr int kQuantReduceWG = 256;    // absmax / scale work-groups (fewer where the device allows less)
inline constexpr long kQuantMinPerItem = 16;  // elements per work-item of the absmax pass (fewer groups when small)
inline constexpr int kQuantQV = 4;            // columns per lane per feature tile (kQV of sycl/kernels/quant.hpp)

// Work-group size of the two reduction passes: kQuantReduceWG, halved while the device allows less.
// The lists below hold kQuantReduceWG only: a device with max_work_group_size < 256 compiles its
// reduction kernels from source at first use (then caches them), like another sub-group size.
inline int quant_reduce_wg(const DeviceCaps &c) {
  int wg = kQuantReduceWG;
  while (wg > 1 && std::size_t(wg) > c.max_wg) wg /= 2;
  return wg;
}

// quantize: the absmax pass (absent when P == 0, i.e. no elements), the scale pass, and the
// quantization (absent when n == 0).
struct QuantizePlan {
  long n = 0;              // elements
  long P = 0, chunk = 0;   // absmax partials (work-groups of the absmax pass), elements per partial
  long row_bytes = 0;      // bytes per output row
  bool quads = false;      // a work-item per 4 elements (n % 4 == 0, and C even for int4)
  Launch absmax, scale, quantize;
};

inline QuantizePlan quantize_plan(const DeviceCaps &c, const QuantizeArgs &a) {
  QuantizePlan p;
  p.n = long(a.rows * a.C);
  const long wg = quant_reduce_wg(c);
  p.P = std::min<long>(kQuantizeWork, (p.n + wg * kQuantMinPerItem - 1) / (wg * kQuantMinPerItem));
  p.P = std::max<long>(p.P, p.n > 0 ? 1 : 0);
  p.chunk = p.P > 0 ? (p.n + p.P - 1) / p.P : 0;
  p.absmax.inst = Instance::of(Kernel::quant_absmax, pow2_arg(std::uint64_t(wg)));
  p.absmax.local = std::size_t(wg);
  p.absmax.global = std::size_t(std::max<long>(p.P, 1) * wg);
  p.scale.inst = Instance::of(Kernel::quant_scale, pow2_arg(std::uint64_t(wg)));
  p.scale.local = p.scale.global = std::size_t(wg);
  p.row_bytes = a.bits == 8 ? long(a.C) : long((a.C + 1) / 2);
  p.quads = p.n % 4 == 0 && (a.bits == 8 || a.C % 2 == 0);
  p.quantize.inst = Instance::of(Kernel::quant_quantize, a.bits);
  p.quantize.global = std::size_t(p.quads ? p.n / 4 : long(a.rows) * p.row_bytes);
  finish(c, p.quantize);
  return p;
}

// Preconditions (checked by the launchers): bits 4 or 8.
inline Launch dequantize_launch(const DeviceCaps &c, const DequantizeArgs &a) {
  Launch l;
  l.inst = Instance::of(Kernel::quant_dequantize, a.X.bits);
  l.global = std::size_t(a.rows * a.X.C);
  finish(c, l);
  return l;
}

// Feature tiles of SG * kQV columns over `width` columns (at least one).
inline long quant_tiles(const DeviceCaps &c, long width) {
  const long tile = long(c.preferred_sg) * kQuantQV;
  return std::max<long>(1, (width + tile - 1) / tile);
}

// The reductions of the quantized SpMM.
inline constexpr Reduce kQuantReduces[] = {Reduce::sum, Reduce::mean, Reduce::max, Reduce::min};

// Preconditions: M > 0, C > 0, reduce one of kQuantReduces.
inline Launch qspmm_launch(const DeviceCaps &c, const QSpmmArgs &a) {
  const int sg = int(c.preferred_sg);
  const bool weighted = a.W != nullptr || a.A.val != nullptr;  // the launcher passes W, else A's values
  Launch l;
  l.inst = Instance::of(Kernel::qspmm_sg, a.A.itype, sg, a.reduce, weighted);
  l.ntiles = quant_tiles(c, long(a.X.C));
  l.global = std::size_t(a.A.M * l.ntiles) * std::size_t(sg);
  finish(c, l);
  return l;
}

// With a quantized output (a.out active) the same launch writes one partial absmax per
// work-group: global / local floats of work.
inline long qspmm_out_partials(const Launch &l) { return long(l.global / l.local); }

// requantize: P work-groups (at most kQuantizeWork, each a chunk of quads or output bytes; absent
// when there is nothing to write), then quant_scale with the previous scale.
struct RequantizePlan {
  long units = 0;         // quads (quads) or output bytes
  long P = 0, chunk = 0;  // work-groups and units per work-group
  bool quads = false;     // C % 4 == 0 and ld % 4 == 0
  Launch pass, scale;
};

inline RequantizePlan requantize_plan(const DeviceCaps &c, const RequantizeArgs &a) {
  RequantizePlan p;
  const long wg = quant_reduce_wg(c);
  const long row_bytes = a.out.bits == 8 ? long(a.C) : long((a.C + 1) / 2);
  p.quads = a.C % 4 == 0 && a.ld % 4 == 0;
  p.units = p.quads ? long(a.rows * a.C / 4) : long(a.rows) * row_bytes;
  const long per_group = wg * (kQuantMinPerItem / 4);
  p.P = std::min<long>(kQuantizeWork, (p.units + per_group - 1) / per_group);
  p.P = std::max<long>(p.P, p.units > 0 ? 1 : 0);
  p.chunk = p.P > 0 ? (p.units + p.P - 1) / p.P : 0;
  p.pass.inst = Instance::of(Kernel::quant_requantize, a.out.bits);
  p.pass.local = std::size_t(wg);
  p.pass.global = std::size_t(std::max<long>(p.P, 1) * wg);
  p.scale.inst = Instance::of(Kernel::quant_scale, pow2_arg(std::uint64_t(wg)));
  p.scale.local = p.scale.global = std::size_t(wg);
  return p;
}

// Preconditions: M > 0, H > 0, nnz > 0.
inline Launch qsddmm_launch(const DeviceCaps &c, const QSddmmArgs &a) {
  const int sg = int(c.preferred_sg);
  Launch l;
  l.inst = Instance::of(Kernel::qsddmm_sg, a.A.itype, sg);
  l.global = std::size_t(a.A.M * a.H) * std::size_t(sg);
  finish(c, l);
  return l;
}

// Preconditions: M > 0, H > 0.
inline Launch qfusedmm_launch(const DeviceCaps &c, const QFusedArgs &a) {
  const int sg = int(c.preferred_sg);
  Launch l;
  l.inst = Instance::of(Kernel::qfusedmm_sg, a.A.itype, sg);
  l.ntiles = quant_tiles(c, long(a.D));
  l.global = std::size_t(a.A.M * a.H * l.ntiles) * std::size_t(sg);
  finish(c, l);
  return l;
}

// ---- the int8 TN GEMM (sycl/kernels/qgemm.hpp; contract: gnnsparse/qgemm.hpp) -------------------
// qgemm_tn_partial<SG, TM, VN>: a sub-group per (K segment, tile of TM x SG VN outputs), int32
// segment sums to work; qgemm_tn_combine<kQGemmCombineU>: a work-item per output, int64 in segment
// order. Tile (16 float accumulators per lane, or 8): TM = 4 rows x VN = 4 column vectors; N <= 2 SG:
// 4 x 2; N <= SG: 8 x 1 (the fastest of those measured on the OpenCL CPU device, AVX-512,
// 2026-12-02: docs/quantization.md). Segments: at most kQGemmMaxSegment rows and a multiple of
// kQGemmFloatRows; on CPU devices short enough that a segment's rows of A and B (seg (M + N)
// bytes) stay in half of one core's cache while every tile of the segment reads them; on other
// devices as many as give kQGemmGroupsPerCU sub-groups per compute unit (no fewer than 8
// float blocks per segment where K allows); either way no more than keep the scratch (nseg M N
// int32) within kQGemmWorkBudget unless exactness needs more.
inline constexpr long kQGemmFloatRows = 1024;   // kQGemmFloatRows of sycl/kernels/qgemm.hpp
inline constexpr int kQGemmCombineU = 4;        // segments loaded at a time by the combine
inline constexpr long kQGemmGroupsPerCU = 16;   // sub-groups per compute unit (non-CPU devices)
inline constexpr long kQGemmSubgroupsPerWG = 4; // sub-groups per work-group of the partial pass
inline constexpr long kQGemmWorkBudget = 1L << 24;  // int32 of scratch (64 MiB) beyond which segments grow

struct QGemmPlan {
  int sg = 16, tm = 4, vn = 4;
  long tiles_m = 0, tiles_n = 0;
  long seg = 0, nseg = 0;  // rows per segment, segments (0 when K, M or N is 0)
  Launch partial, combine;
  long tiles() const { return tiles_m * tiles_n; }
};

// The tile (TM, VN) of a device of sub-group size sg for N columns.
inline void qgemm_tile(int sg, long N, int &tm, int &vn) {
  if (N <= sg) { tm = 8; vn = 1; }
  else if (N <= 2L * sg) { tm = 4; vn = 2; }
  else { tm = 4; vn = 4; }
}

inline QGemmPlan qgemm_tn_plan(const DeviceCaps &c, long K, long M, long N) {
  QGemmPlan p;
  p.sg = int(c.preferred_sg);
  qgemm_tile(p.sg, N, p.tm, p.vn);
  p.tiles_m = (M + p.tm - 1) / p.tm;
  p.tiles_n = (N + long(p.sg) * p.vn - 1) / (long(p.sg) * p.vn);
  p.combine.inst = Instance::of(Kernel::qgemm_tn_combine, kQGemmCombineU);
  p.combine.global = std::size_t(std::max<long>(M * N, 1));
  finish(c, p.combine);
  if (K <= 0 || M <= 0 || N <= 0) return p;
  const long max_seg = kQGemmMaxSegment / kQGemmFloatRows * kQGemmFloatRows;
  const long need = (K + max_seg - 1) / max_seg;  // exactness
  long S;
  if (c.cpu) {
    const long half = long(c.cache_bytes > 0 ? c.cache_bytes : (1L << 20)) / 2;
    const long rows = std::max(kQGemmFloatRows, half / std::max<long>(M + N, 1));
    S = (K + rows - 1) / rows;
  } else {
    const long fill = (kQGemmGroupsPerCU * long(std::max<std::size_t>(c.compute_units, 1)) + p.tiles() - 1) / p.tiles();
    const long most = std::max<long>(1, K / (8 * kQGemmFloatRows));
    S = std::min(fill, most);
  }
  S = std::min(S, std::max<long>(1, kQGemmWorkBudget / (M * N)));  // bounded scratch
  S = std::max(need, S);
  p.seg = ((K + S - 1) / S + kQGemmFloatRows - 1) / kQGemmFloatRows * kQGemmFloatRows;  // <= max_seg
  p.nseg = (K + p.seg - 1) / p.seg;
  p.partial.inst = Instance::of(Kernel::qgemm_tn_partial, p.sg, p.tm, p.vn);
  const long subgroups = p.nseg * p.tiles();
  const long per_wg = std::max<long>(1, std::min<long>(kQGemmSubgroupsPerWG, long(c.max_wg) / p.sg));
  p.partial.local = std::size_t(per_wg * p.sg);
  p.partial.global = std::size_t((subgroups + per_wg - 1) / per_wg) * p.partial.local;
  return p;
}

// ---- the ESIMD quantizer passes (sycl/kernels/esimd/quantize.hpp; Intel GPUs) --------------------
inline constexpr int kEsimdQuantNQ = 16;      // quads per ESIMD thread of the quantize pass (64 floats)
inline constexpr long kEsimdQuantLocal = 16;  // ESIMD threads per work-group

inline Instance esimd_quant_absmax_instance() { return Instance::of(Kernel::esimd_quant_absmax, 0); }
inline Instance esimd_quantize_instance(int bits, Rounding r) {
  return Instance::of(Kernel::esimd_quantize, bits, r == Rounding::stochastic, kEsimdQuantNQ);
}

// Every portable instance the functions above can return on a device of sub-group size sg with
// max_work_group_size >= kQuantReduceWG: 32 (28 + the int8 TN GEMM's 4).
template <typename F>
void for_each_quant_instance(int sg, F &&f) {
  const int wg = pow2_arg(kQuantReduceWG);
  for (long N : {long(sg), 2L * sg, 2L * sg + 1}) {
    int tm, vn;
    qgemm_tile(sg, N, tm, vn);
    f(Instance::of(Kernel::qgemm_tn_partial, sg, tm, vn));
  }
  f(Instance::of(Kernel::qgemm_tn_combine, kQGemmCombineU));
  f(Instance::of(Kernel::quant_absmax, wg));
  f(Instance::of(Kernel::quant_scale, wg));
  for (int bits : {4, 8}) {
    f(Instance::of(Kernel::quant_quantize, bits));
    f(Instance::of(Kernel::quant_dequantize, bits));
    f(Instance::of(Kernel::quant_requantize, bits));
  }
  for (IType i : {IType::i32, IType::i64}) {
    for (Reduce r : kQuantReduces)
      for (bool w : {false, true}) f(Instance::of(Kernel::qspmm_sg, i, sg, r, w));
    f(Instance::of(Kernel::qsddmm_sg, i, sg));
    f(Instance::of(Kernel::qfusedmm_sg, i, sg));
  }
}

// ---- the ESIMD quantized SpMM (sycl/kernels/esimd/qspmm.hpp; Intel GPUs) ----------------------
// One thread per (row, tile of kEsimdQSpmmCols columns), kEsimdQSpmmLocal threads per work-group;
// with a quantized output one partial absmax per work-group. It takes sum and mean (max / min, and
// their arg, stay with the portable kernel), int8 / int4 inputs, edge weights, per-head weights and
// the incidence form; without weights only where the longest row (CsrView::max_degree, else nnz)
// keeps the integer sum in int32 (the contract's int64 sums stay with the portable kernel).
inline constexpr long kEsimdQSpmmCols = 32;   // kQN of sycl/kernels/esimd/qspmm.hpp
inline constexpr long kEsimdQSpmmLocal = 16;  // kQSpmmLocal of sycl/kernels/esimd/qspmm.hpp

inline Instance esimd_qspmm_instance(IType it, int bits, bool weighted) {
  return Instance::of(Kernel::esimd_qspmm, it, bits, weighted);
}

// The ESIMD launch of a quantized SpMM, or std::nullopt where the portable kernel runs (a device
// without ESIMD, or a call the kernel does not take). Preconditions: those of qspmm_launch.
inline std::optional<Launch> esimd_qspmm_launch(const DeviceCaps &c, const QSpmmArgs &a) {
  if (!c.esimd || (a.reduce != Reduce::sum && a.reduce != Reduce::mean)) return std::nullopt;
  if (a.A.M <= 0 || a.X.C <= 0 || (a.X.bits != 4 && a.X.bits != 8)) return std::nullopt;
  const bool weighted = a.W != nullptr || a.A.val != nullptr;
  const long longest = long(a.A.max_degree >= 0 ? a.A.max_degree : a.A.nnz);
  if (!weighted && !spmm_fits_int32(longest, a.X.bits)) return std::nullopt;
  Launch l;
  l.inst = esimd_qspmm_instance(a.A.itype, a.X.bits, weighted);
  l.ntiles = (long(a.X.C) + kEsimdQSpmmCols - 1) / kEsimdQSpmmCols;
  const long threads = long(a.A.M) * l.ntiles;
  l.local = std::size_t(kEsimdQSpmmLocal);
  l.global = std::size_t((threads + kEsimdQSpmmLocal - 1) / kEsimdQSpmmLocal * kEsimdQSpmmLocal);
  return l;
}

// ---- the ESIMD requantize (the int8 GEMM's scale pass; sycl/kernels/esimd/quantize.hpp) ---------
// P threads (at most kQuantizeWork: one partial each), each a chunk of whole kEsimdQuantNQ-quad
// steps of the rows x C output; the quad layout only (C % 4 == 0, ld % 4 == 0; the launcher also
// needs Q 16-byte aligned), other shapes run the portable pass.
struct EsimdRequantizePlan {
  Instance inst;
  long threads = 0, chunk = 0;  // chunk: quads per thread, a multiple of kEsimdQuantNQ
};

inline std::optional<EsimdRequantizePlan> esimd_requantize_plan(const DeviceCaps &c, const RequantizeArgs &a) {
  if (!c.esimd || a.rows <= 0 || a.C <= 0 || a.C % 4 != 0 || a.ld % 4 != 0) return std::nullopt;
  if (a.out.bits != 4 && a.out.bits != 8) return std::nullopt;
  // strided rows are gathered with 32-bit byte offsets from a step's first row: the rows one step
  // of 4 kEsimdQuantNQ elements spans must lie within 4 GiB
  if (a.ld != a.C && (4 * kEsimdQuantNQ / a.C + 2) * a.ld * std::int64_t(sizeof(std::int32_t)) > 0xFFFFFFFFLL)
    return std::nullopt;
  EsimdRequantizePlan p;
  const long nquads = long(a.rows * a.C / 4);
  const long steps = (nquads + kEsimdQuantNQ - 1) / kEsimdQuantNQ;
  const long P = std::min<long>(kQuantizeWork, steps);
  p.chunk = (steps + P - 1) / P * kEsimdQuantNQ;
  p.threads = (nquads + p.chunk - 1) / p.chunk;
  p.inst = Instance::of(Kernel::esimd_requantize, a.out.bits, a.out.rounding == Rounding::stochastic, kEsimdQuantNQ);
  return p;
}

// Every ESIMD quantized instance: the absmax pass and quantize<bits, stochastic, kEsimdQuantNQ>
// (5), requantize<bits, stochastic, kEsimdQuantNQ> (4) and qspmm<I, bits, weighted> (8): 17.
template <typename F>
void for_each_esimd_quant_instance(F &&f) {
  f(esimd_quant_absmax_instance());
  for (int bits : {4, 8})
    for (Rounding r : {Rounding::nearest, Rounding::stochastic}) {
      f(esimd_quantize_instance(bits, r));
      f(Instance::of(Kernel::esimd_requantize, bits, r == Rounding::stochastic, kEsimdQuantNQ));
    }
  for (IType i : {IType::i32, IType::i64})
    for (int bits : {4, 8})
      for (bool w : {false, true}) f(esimd_qspmm_instance(i, bits, w));
}

}  // namespace gnnsparse::sycl_rt
