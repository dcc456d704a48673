// ESIMD launchers of the quantized kernels (host code, g++ without -fsycl): the hooks
// esimd_absmax_pass / esimd_quantize_pass / esimd_qspmm_pass of sycl/quant_ops.hpp, on devices with
// aspect::ext_intel_esimd. Kernels: sycl/kernels/esimd/quantize.hpp and qspmm.hpp, instances chosen by
// sycl/quant_policy.hpp, loaded through the KernelCache (shipped SPIR-V or pvc binaries when the
// package was built with GNNSPARSE_SYCL_PVC=ON, else compiled at first use and cached). The
// quantize pass covers the quad layout (n % 4 == 0; int4 also needs an even C) with 16-byte
// aligned outputs; other shapes return std::nullopt and run the portable kernel. The SpMM takes
// what esimd_qspmm_launch (sycl/quant_policy.hpp) covers.
#include <sycl/sycl.hpp>

#include <cstdint>
#include <optional>

#include "quant_ops.hpp"
#include "quant_policy.hpp"
#include "runtime.hpp"

namespace gnnsparse::sycl_rt {
namespace {

constexpr int kNQ = kEsimdQuantNQ;
constexpr long kLocal = kEsimdQuantLocal;

template <typename... Args>
sycl::event submit_esimd(sycl::queue &q, Instance in, long threads, const QDeps &deps, Args... args) {
  const sycl::kernel k = KernelCache::instance().get(q, in);
  const std::size_t global = std::size_t((threads + kLocal - 1) / kLocal * kLocal);
  return q.submit([&](sycl::handler &h) {
    if (!deps.empty()) h.depends_on(deps);
    h.set_args(args...);
    h.parallel_for(sycl::nd_range<1>{global, std::size_t(kLocal)}, k);
  });
}

}  // namespace

std::optional<sycl::event> esimd_absmax_pass(sycl::queue &q, const QuantizeArgs &a, long P, long chunk,
                                             const QDeps &deps) {
  if (!q.get_device().has(sycl::aspect::ext_intel_esimd) || P <= 0) return std::nullopt;
  return submit_esimd(q, esimd_quant_absmax_instance(), P, deps, a.X, std::int64_t(a.rows * a.C),
                      std::int64_t(chunk), std::int64_t(P), a.work);
}

std::optional<sycl::event> esimd_quantize_pass(sycl::queue &q, const QuantizeArgs &a, const QDeps &deps) {
  if (!q.get_device().has(sycl::aspect::ext_intel_esimd)) return std::nullopt;
  const std::int64_t n = a.rows * a.C;
  if (n <= 0 || n % 4 != 0 || (a.bits == 4 && a.C % 2 != 0)) return std::nullopt;
  if (reinterpret_cast<std::uintptr_t>(a.Q) % 16 != 0 || reinterpret_cast<std::uintptr_t>(a.X) % 4 != 0)
    return std::nullopt;
  const std::int64_t nquads = n / 4;
  const long threads = long((nquads + kNQ - 1) / kNQ);
  return submit_esimd(q, esimd_quantize_instance(a.bits, a.rounding), threads, deps, a.X, nquads,
                      static_cast<const float *>(a.scale), a.seed, static_cast<std::uint8_t *>(a.Q));
}

std::optional<sycl::event> esimd_requantize_pass(sycl::queue &q, const RequantizeArgs &a, const QDeps &deps,
                                                 long &partials) {
  const std::optional<EsimdRequantizePlan> p = esimd_requantize_plan(caps_of(q), a);
  if (!p || reinterpret_cast<std::uintptr_t>(a.out.Q) % 16 != 0) return std::nullopt;
  partials = p->threads;
  const QOut &o = a.out;
  return submit_esimd(q, p->inst, p->threads, deps, a.acc, std::int64_t(a.rows), std::int64_t(a.C),
                      std::int64_t(a.ld), std::int64_t(p->chunk), std::int64_t(p->threads), a.sa, a.sb, o.scale_in,
                      std::uint64_t(o.seed), static_cast<std::uint8_t *>(o.Q), o.work);
}

sycl::event esimd_qspmm_pass(sycl::queue &q, const QSpmmArgs &a, const Launch &l, const QDeps &deps) {
  const sycl::kernel k = KernelCache::instance().get(q, l.inst);
  const QOut &o = a.out;
  const float *w = a.W != nullptr ? a.W : static_cast<const float *>(a.A.val);
  return q.submit([&](sycl::handler &h) {
    if (!deps.empty()) h.depends_on(deps);
    h.set_args(a.A.rowptr, a.A.col, w, static_cast<const std::uint8_t *>(a.X.data), a.X.scale, a.Y,
               std::int64_t(a.A.M), std::int64_t(a.X.C), std::int64_t(a.X.row_bytes()),
               std::int64_t(a.W != nullptr ? a.H : 1), std::int64_t(a.X.C / a.H), a.identity_col ? 1 : 0,
               a.reduce == Reduce::mean ? 1 : 0, static_cast<std::uint8_t *>(o.Q), o.scale_in, o.work, o.bits,
               o.rounding == Rounding::stochastic ? 1 : 0, std::uint64_t(o.seed));
    h.parallel_for(sycl::nd_range<1>{l.global, l.local}, k);
  });
}

}  // namespace gnnsparse::sycl_rt
