// Launchers of the portable quantized kernels (host code, g++ without -fsycl): each checks its
// arguments, takes the instance and nd_range of each pass from sycl/quant_policy.hpp, gets the
// kernel from the KernelCache (shipped SPIR-V, the persistent cache or the run-time compiler:
// sycl/kernel_store.hpp) and submits it after `deps`. Contract: gnnsparse/quant.hpp.
#include <algorithm>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>

#include "launch.hpp"
#include "quant_ops.hpp"
#include "quant_policy.hpp"

namespace gnnsparse::sycl_rt {
namespace {

void check_bits(const char *op, int bits) {
  if (bits != 4 && bits != 8)
    throw std::invalid_argument(std::string("gnnsparse sycl ") + op + ": bits must be 4 or 8, got " +
                                std::to_string(bits));
}

void check_qout(const char *op, const QOut &o, long need_work) {
  const std::string where = std::string("gnnsparse sycl ") + op + " (quantized output): ";
  if (o.bits != 4 && o.bits != 8) throw std::invalid_argument(where + "bits must be 4 or 8, got " + std::to_string(o.bits));
  if (o.rounding != Rounding::nearest && o.rounding != Rounding::stochastic)
    throw std::invalid_argument(where + "unknown rounding code " + std::to_string(int(o.rounding)));
  if (o.scale_in == nullptr || o.scale == nullptr || (need_work > 0 && o.work == nullptr))
    throw std::invalid_argument(where + "null pointer");
  if (!(o.decay >= 0.0f && o.decay < 1.0f)) throw std::invalid_argument(where + "decay must be in [0, 1)");
  if (o.work_size < need_work)
    throw std::invalid_argument(where + "work holds " + std::to_string(o.work_size) + " floats, the launch needs " +
                                std::to_string(need_work));
}

// The fold of a producer's P partial maxima into its scales (quant_scale with a previous scale).
sycl::event delayed_finish(sycl::queue &q, const QOut &o, long P, const QDeps &deps) {
  const DeviceCaps &caps = caps_of(q);
  const long wg = quant_reduce_wg(caps);
  Launch l;
  l.inst = Instance::of(Kernel::quant_scale, pow2_arg(std::uint64_t(wg)));
  l.local = l.global = std::size_t(wg);
  return submit(q, l, deps, static_cast<const float *>(o.work), P, int(qmax_for_bits(o.bits)), o.scale,
                o.scale_in, o.decay, o.stats);
}

}  // namespace

sycl::event quantize(sycl::queue &q, const QuantizeArgs &a, const QDeps &deps) {
  check_bits("quantize", a.bits);
  if (a.rows < 0 || a.C < 0) throw std::invalid_argument("gnnsparse sycl quantize: negative size");
  const long n = long(a.rows * a.C);
  if (a.scale == nullptr || a.work == nullptr || (n > 0 && (a.X == nullptr || a.Q == nullptr)))
    throw std::invalid_argument("gnnsparse sycl quantize: null pointer");
  const DeviceCaps &caps = caps_of(q);
  const QuantizePlan p = quantize_plan(caps, a);
  QDeps d = deps;
  if (p.P > 0) {
    std::optional<sycl::event> ea;
    if (caps.esimd) ea = esimd_absmax_pass(q, a, p.P, p.chunk, d);
    d = {ea ? *ea : submit(q, p.absmax, d, a.X, n, p.chunk, a.work)};
  }
  sycl::event e = submit(q, p.scale, d, static_cast<const float *>(a.work), long(p.P), int(qmax_for_bits(a.bits)),
                         a.scale, static_cast<const float *>(nullptr), 0.0f, static_cast<float *>(nullptr));
  if (n == 0) return e;
  if (caps.esimd)
    if (auto ee = esimd_quantize_pass(q, a, {e})) return *ee;
  const int stochastic = a.rounding == Rounding::stochastic ? 1 : 0;
  return submit(q, p.quantize, {e}, a.X, long(a.rows), long(a.C), p.row_bytes, stochastic,
                static_cast<unsigned long>(a.seed), static_cast<const float *>(a.scale),
                static_cast<unsigned char *>(a.Q), p.quads ? 1 : 0);
}

sycl::event dequantize(sycl::queue &q, const DequantizeArgs &a, const QDeps &deps) {
  check_bits("dequantize", a.X.bits);
  const long n = long(a.rows * a.X.C);
  if (n == 0) return q.ext_oneapi_submit_barrier(deps);
  if (a.X.data == nullptr || a.X.scale == nullptr || a.Y == nullptr)
    throw std::invalid_argument("gnnsparse sycl dequantize: null pointer");
  return submit(q, dequantize_launch(caps_of(q), a), deps, static_cast<const unsigned char *>(a.X.data), a.X.scale,
                long(a.rows), long(a.X.C), long(a.X.row_bytes()), a.Y);
}

sycl::event qspmm(sycl::queue &q, const QSpmmArgs &a, const QDeps &deps) {
  check_bits("qspmm", a.X.bits);
  if (std::find(std::begin(kQuantReduces), std::end(kQuantReduces), a.reduce) == std::end(kQuantReduces))
    throw std::invalid_argument("gnnsparse sycl qspmm: reduction code " + std::to_string(int(a.reduce)) +
                                " is not implemented for quantized inputs");
  if (a.A.M < 0 || a.A.nnz < 0 || a.X.C < 0 || a.H <= 0 || a.X.C % a.H != 0)
    throw std::invalid_argument("gnnsparse sycl qspmm: bad sizes");
  const QOut &o = a.out;
  if (o.active() && a.arg != nullptr) throw std::invalid_argument("gnnsparse sycl qspmm: no arg with a quantized output");
  if (a.A.M == 0 || a.X.C == 0) {
    if (!o.active()) return q.ext_oneapi_submit_barrier(deps);
    check_qout("qspmm", o, 0);  // nothing to aggregate: the scales still follow the contract
    return delayed_finish(q, o, 0, deps);
  }
  const DeviceCaps &caps = caps_of(q);
  const std::optional<Launch> el = esimd_qspmm_launch(caps, a);  // Intel GPUs: the ESIMD kernel
  const Launch l = el ? *el : qspmm_launch(caps, a);
  if (o.active()) {
    check_qout("qspmm", o, qspmm_out_partials(l));
    if (o.Q == nullptr) throw std::invalid_argument("gnnsparse sycl qspmm: null pointer for the quantized output");
  }
  if (el) {
    const sycl::event e = esimd_qspmm_pass(q, a, l, deps);
    return o.active() ? delayed_finish(q, o, qspmm_out_partials(l), {e}) : e;
  }
  const float *w = a.W != nullptr ? a.W : static_cast<const float *>(a.A.val);
  sycl::event e = submit(q, l, deps, a.A.rowptr, a.A.col, w, static_cast<const unsigned char *>(a.X.data), a.X.scale,
                         a.Y, has_arg(a.reduce) ? a.arg : nullptr, long(a.A.M), long(a.X.C), long(a.X.row_bytes()),
                         long(a.W != nullptr ? a.H : 1), long(a.X.C / a.H), a.X.bits, a.identity_col ? 1 : 0,
                         l.ntiles, static_cast<unsigned char *>(o.Q), o.scale_in, o.work, o.bits,
                         o.rounding == Rounding::stochastic ? 1 : 0, static_cast<unsigned long>(o.seed));
  if (!o.active()) return e;
  return delayed_finish(q, o, qspmm_out_partials(l), {e});
}

long qspmm_out_work(sycl::queue &q, const QSpmmArgs &a) {
  if (a.A.M <= 0 || a.X.C <= 0 || a.H <= 0 || a.X.C % a.H != 0) return 0;
  const DeviceCaps &caps = caps_of(q);
  const std::optional<Launch> el = esimd_qspmm_launch(caps, a);
  return qspmm_out_partials(el ? *el : qspmm_launch(caps, a));
}

sycl::event requantize(sycl::queue &q, const RequantizeArgs &a, const QDeps &deps) {
  if (a.rows < 0 || a.C < 0 || a.ld < a.C) throw std::invalid_argument("gnnsparse sycl requantize: bad sizes");
  check_qout("requantize", a.out, kQuantizeWork);
  if (a.rows * a.C > 0 && a.out.Q == nullptr) throw std::invalid_argument("gnnsparse sycl requantize: null pointer for Q");
  if (a.rows * a.C > 0 && (a.acc == nullptr || a.sa == nullptr || a.sb == nullptr))
    throw std::invalid_argument("gnnsparse sycl requantize: null pointer");
  const RequantizePlan p = requantize_plan(caps_of(q), a);
  if (p.P == 0) return delayed_finish(q, a.out, 0, deps);
  const QOut &o = a.out;
  if (caps_of(q).esimd) {  // Intel GPUs: the ESIMD pass where it takes the shape
    long partials = 0;
    if (auto e = esimd_requantize_pass(q, a, deps, partials)) return delayed_finish(q, o, partials, {*e});
  }
  sycl::event e = submit(q, p.pass, deps, static_cast<const int *>(a.acc), long(a.rows), long(a.C), long(a.ld),
                         p.chunk, p.quads ? 1 : 0, a.sa, a.sb, o.scale_in, o.rounding == Rounding::stochastic ? 1 : 0,
                         static_cast<unsigned long>(o.seed), static_cast<unsigned char *>(o.Q), o.work);
  return delayed_finish(q, o, p.P, {e});
}

sycl::event qsddmm(sycl::queue &q, const QSddmmArgs &a, const QDeps &deps) {
  check_bits("qsddmm", a.X.bits);
  check_bits("qsddmm", a.Y.bits);
  if (a.A.M < 0 || a.A.nnz < 0 || a.H < 0 || a.F < 0) throw std::invalid_argument("gnnsparse sycl qsddmm: negative size");
  if (a.A.nnz == 0 || a.H == 0 || a.A.M == 0) return q.ext_oneapi_submit_barrier(deps);
  const long F = a.op == SddmmOp::add ? 1 : long(a.F);
  return submit(q, qsddmm_launch(caps_of(q), a), deps, a.A.rowptr, a.A.col, int(a.op),
                static_cast<const unsigned char *>(a.X.data), a.X.scale, a.X.bits,
                static_cast<const unsigned char *>(a.Y.data), a.Y.scale, a.Y.bits, a.E, long(a.A.M), long(a.H), F,
                long(a.X.row_bytes()), long(a.Y.row_bytes()));
}

sycl::event qfusedmm(sycl::queue &q, const QFusedArgs &a, const QDeps &deps) {
  check_bits("qfusedmm", a.X.bits);
  check_bits("qfusedmm", a.Y.bits);
  check_bits("qfusedmm", a.Z.bits);
  if (a.A.M < 0 || a.A.nnz < 0 || a.H < 0 || a.F < 0 || a.D < 0)
    throw std::invalid_argument("gnnsparse sycl qfusedmm: negative size");
  if (a.edge != EdgeFn::none && a.edge != EdgeFn::leaky_relu && a.edge != EdgeFn::exp && !row_softmax(a.edge))
    throw std::invalid_argument("gnnsparse sycl qfusedmm: edge function code " + std::to_string(int(a.edge)) +
                                " is not implemented for quantized inputs");
  if (a.A.M == 0 || a.H == 0) return q.ext_oneapi_submit_barrier(deps);
  const Launch l = qfusedmm_launch(caps_of(q), a);
  const long F = a.op == SddmmOp::add ? 1 : long(a.F);
  return submit(q, l, deps, a.A.rowptr, a.A.col, static_cast<const float *>(a.A.val), int(a.op), int(a.edge),
                float(a.slope), static_cast<const unsigned char *>(a.X.data), a.X.scale, a.X.bits,
                static_cast<const unsigned char *>(a.Y.data), a.Y.scale, a.Y.bits,
                static_cast<const unsigned char *>(a.Z.data), a.Z.scale, a.Z.bits, a.out, a.E, long(a.A.M), long(a.H),
                F, long(a.D), long(a.X.row_bytes()), long(a.Y.row_bytes()), long(a.Z.row_bytes()), l.ntiles);
}

}  // namespace gnnsparse::sycl_rt
