// Row-panel SpMM for dense-ish inputs: method choice and launchers (sycl/tiles.hpp, panel_spmm).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "esimd_policy.hpp"
#include "launch.hpp"
#include "tiles.hpp"

namespace gnnsparse::sycl_rt {
namespace {

enum class PanelMode { automatic, on, staged, off };

PanelMode panel_mode() {
  const char *v = std::getenv("GNNSPARSE_SYCL_PANEL");
  if (!v || !*v || !std::strcmp(v, "auto")) return PanelMode::automatic;
  if (!std::strcmp(v, "on") || !std::strcmp(v, "1")) return PanelMode::on;
  if (!std::strcmp(v, "staged")) return PanelMode::staged;
  if (!std::strcmp(v, "off") || !std::strcmp(v, "0")) return PanelMode::off;
  throw std::invalid_argument(std::string("GNNSPARSE_SYCL_PANEL must be auto, on, staged or off, got '") + v + "'");
}

// GNNSPARSE_SYCL_PANEL_BK: unset or empty -> 0 (the policy's chunk), else a positive integer.
long panel_chunk_override() {
  const char *v = std::getenv("GNNSPARSE_SYCL_PANEL_BK");
  if (!v || !*v) return 0;
  char *stop = nullptr;
  const long n = std::strtol(v, &stop, 10);
  if (*stop != '\0' || n <= 0)
    throw std::invalid_argument(std::string("GNNSPARSE_SYCL_PANEL_BK must be a positive integer, got '") + v + "'");
  return n;
}

template <typename I>
sycl::event launch_esimd(sycl::queue &q, const SpmmArgs &a, const Deps &deps) {
  namespace pol = gnnsparse::esimd_policy;
  const pol::PanelLaunch l = pol::spmm_panel_launch(a.A.M, a.C);
  const Instance in = pol::spmm_panel_instance(sizeof(I) == 8, l.bn, a.A.val != nullptr);
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

std::optional<sycl::event> panel_spmm(sycl::queue &q, const SpmmArgs &a, const Deps &deps) {
  const PanelMode mode = panel_mode();
  if (mode == PanelMode::off || !panel_cover(a)) return std::nullopt;
  const DeviceCaps &caps = caps_of(q);
  if (caps.esimd) {  // Intel GPU: the ESIMD kernel, only on request (no measurement on an Intel GPU yet)
    if (mode != PanelMode::on) return std::nullopt;
    return a.A.itype == IType::i64 ? launch_esimd<std::int64_t>(q, a, deps) : launch_esimd<std::int32_t>(q, a, deps);
  }
  bool staged = mode == PanelMode::staged || (mode == PanelMode::on && !caps.cpu);
  if (mode == PanelMode::automatic) {
    if (!caps.cpu || !prefer_panel_cpu(caps, a.A.M, a.A.K, a.A.nnz, a.C, a.A.sorted_cols)) return std::nullopt;
    staged = false;
  }
  Launch l = spmm_panel_launch(caps, a, staged);
  if (l.local > caps.max_wg) return std::nullopt;  // a device with smaller work-groups: sparse kernels
  if (!staged)
    if (const long bk = panel_chunk_override()) l.chunk = bk;
  return submit(q, l, deps, a.A.rowptr, a.A.col, a.A.val, a.X, a.Y, long(a.A.M), long(a.A.K), long(a.C), long(l.chunk));
}

}  // namespace gnnsparse::sycl_rt
