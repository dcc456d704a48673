// SYCL backend entry points of the quantized ops (host code): the argument structs of
// gnnsparse/quant.hpp, the caller's queue and the events to wait on; each returns the event of its
// last submission. Kernels: sycl/kernels/quant*.hpp (portable), sycl/kernels/esimd/quantize.hpp
// (the quantizer on devices with aspect::ext_intel_esimd).
#pragma once
#include <sycl/sycl.hpp>

#include <optional>
#include <vector>

#include "gnnsparse/qgemm.hpp"
#include "gnnsparse/quant.hpp"
#include "policy.hpp"

namespace gnnsparse::sycl_rt {

using QDeps = std::vector<sycl::event>;

sycl::event quantize(sycl::queue &q, const QuantizeArgs &a, const QDeps &deps);
sycl::event dequantize(sycl::queue &q, const DequantizeArgs &a, const QDeps &deps);
sycl::event qspmm(sycl::queue &q, const QSpmmArgs &a, const QDeps &deps);
// Floats of work a qspmm with a quantized output (a.out active) needs: one per work-group.
long qspmm_out_work(sycl::queue &q, const QSpmmArgs &a);
// The int8 GEMM's scale pass with a quantized, delayed-scale output (work: kQuantizeWork floats).
sycl::event requantize(sycl::queue &q, const RequantizeArgs &a, const QDeps &deps);
sycl::event qsddmm(sycl::queue &q, const QSddmmArgs &a, const QDeps &deps);
sycl::event qfusedmm(sycl::queue &q, const QFusedArgs &a, const QDeps &deps);
// The int8 TN GEMM C = scale * A^T B (gnnsparse/qgemm.hpp; sycl/qgemm.cpp) and the int32
// elements of work it needs.
sycl::event qgemm_tn(sycl::queue &q, const QGemmTnArgs &a, const QDeps &deps);
long qgemm_tn_work(sycl::queue &q, long K, long M, long N);

// The ESIMD passes of quantize (sycl/esimd_quant.cpp): the absmax partials (P threads, chunks of
// `chunk` elements, into a.work) and the quantization. std::nullopt when the device has no ESIMD
// or the shape is not covered; the portable kernel runs instead.
std::optional<sycl::event> esimd_absmax_pass(sycl::queue &q, const QuantizeArgs &a, long P, long chunk,
                                             const QDeps &deps);
std::optional<sycl::event> esimd_quantize_pass(sycl::queue &q, const QuantizeArgs &a, const QDeps &deps);
// The ESIMD requantize (the int8 GEMM's scale pass) where esimd_requantize_plan takes the call and
// Q is 16-byte aligned, with the number of partials it leaves in a.out.work; else std::nullopt.
std::optional<sycl::event> esimd_requantize_pass(sycl::queue &q, const RequantizeArgs &a, const QDeps &deps,
                                                 long &partials);
// The ESIMD quantized SpMM (sycl/esimd_quant.cpp) with the launch esimd_qspmm_launch chose.
sycl::event esimd_qspmm_pass(sycl::queue &q, const QSpmmArgs &a, const Launch &l, const QDeps &deps);

}  // namespace gnnsparse::sycl_rt
