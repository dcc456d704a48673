// Tiled SpMM for dense-ish inputs: method choice and launchers (sycl/tiles.hpp).
#include "tiles.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "esimd_policy.hpp"
#include "launch.hpp"

namespace gnnsparse::sycl_rt {
namespace {

enum class TilesMode { automatic, on, off };

TilesMode tiles_mode() {
  const char *v = std::getenv("GNNSPARSE_SYCL_TILES");
  if (!v || !*v) return TilesMode::automatic;
  if (!std::strcmp(v, "on") || !std::strcmp(v, "1")) return TilesMode::on;
  if (!std::strcmp(v, "off") || !std::strcmp(v, "0")) return TilesMode::off;
  return TilesMode::automatic;
}

template <typename I>
sycl::event launch_xmx(sycl::queue &q, const SpmmArgs &a, const Deps &deps) {
  namespace pol = gnnsparse::esimd_policy;
  const pol::XmxLaunch l = pol::spmm_xmx_launch(a.A.M, a.C);
  const Instance in = pol::spmm_xmx_instance(sizeof(I) == 8, l.nb, a.precision == Precision::fp32, a.A.val != nullptr);
  const sycl::kernel k = KernelCache::instance().get(q, in);
  return q.submit([&](sycl::handler &h) {
    if (!deps.empty()) h.depends_on(deps);
    h.set_args(static_cast<const I *>(a.A.rowptr), static_cast<const I *>(a.A.col), static_cast<const float *>(a.A.val),
               static_cast<const float *>(a.X), static_cast<float *>(a.Y), std::int64_t(a.A.M), std::int64_t(a.A.K),
               std::int64_t(a.C), a.reduce);
    h.parallel_for(sycl::nd_range<1>{sycl::range<1>(std::size_t(l.global)), sycl::range<1>(std::size_t(l.local))}, k);
  });
}

}  // namespace

std::optional<sycl::event> tiled_spmm(sycl::queue &q, const SpmmArgs &a, const Deps &deps) {
  if (!tiles_cover(a)) return std::nullopt;
  const TilesMode mode = tiles_mode();
  if (mode == TilesMode::off) return std::nullopt;
  const DeviceCaps &caps = caps_of(q);
  if (caps.esimd) {  // Intel GPU: the XMX kernel, only on request (no measurement on an Intel GPU yet)
    if (mode != TilesMode::on || a.precision == Precision::bf16) return std::nullopt;
    return a.A.itype == IType::i64 ? launch_xmx<std::int64_t>(q, a, deps) : launch_xmx<std::int32_t>(q, a, deps);
  }
  if (mode == TilesMode::automatic && !(caps.cpu && prefer_tiles_cpu(a.A.M, a.A.K, a.A.nnz, a.C)))
    return std::nullopt;
  const Launch l = spmm_tiles_launch(caps, a);
  if (l.local > caps.max_wg) return std::nullopt;  // a device with smaller work-groups: sparse kernels
  return submit(q, l, deps, a.A.rowptr, a.A.col, a.A.val, a.X, a.Y, long(a.A.M), long(a.A.K), long(a.C));
}

std::optional<sycl::event> tiled_sddmm(sycl::queue &q, const SddmmArgs &a, const Deps &deps) {
  if (!sddmm_tiles_cover(a)) return std::nullopt;
  const TilesMode mode = tiles_mode();
  if (mode == TilesMode::off) return std::nullopt;
  const DeviceCaps &caps = caps_of(q);
  if (caps.esimd) return std::nullopt;  // the ESIMD SDDMM of the ESIMD paper stays
  if (mode == TilesMode::automatic && !(caps.cpu && prefer_sddmm_tiles_cpu(a.A.M, a.A.K, a.A.nnz, a.F)))
    return std::nullopt;
  const Launch l = sddmm_tiles_launch(caps, a);
  if (l.local > caps.max_wg) return std::nullopt;
  return submit(q, l, deps, a.A.rowptr, a.A.col, a.X, a.Y, a.E, long(a.A.M), long(a.A.K), long(a.H), long(a.F));
}

}  // namespace gnnsparse::sycl_rt
