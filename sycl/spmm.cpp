// SpMM dispatch: the tiled or row-panel kernels for dense-ish inputs where their method choice picks
// them; else ESIMD on devices that have it (when it covers the case), else the portable kernel.
#include "launch.hpp"
#include "tiles.hpp"

namespace gnnsparse::sycl_rt {

sycl::event spmm(sycl::queue &q, const SpmmArgs &a, const Deps &deps) {
  const DeviceCaps &caps = caps_of(q);
  check_dtype(caps, a.dtype);
  if (a.A.M == 0 || a.C == 0) return q.ext_oneapi_submit_barrier(deps);
  // dense-ish inputs: the tiled kernels where the method choice (sycl/tiles.hpp) picks them
  if (auto e = tiled_spmm(q, a, deps)) return *e;
  // dense-ish inputs: the row-panel kernels where their method choice (sycl/tiles.hpp) picks them
  if (auto e = panel_spmm(q, a, deps)) return *e;
  if (caps.esimd)
    if (auto e = esimd_spmm(q, a, deps)) return *e;
  const Launch l = spmm_launch(caps, a);
  const std::int64_t *arg = has_arg(a.reduce) ? a.arg : nullptr;
  if (l.inst.kernel() == Kernel::spmm_narrow)
    return submit(q, l, deps, a.A.rowptr, a.A.col, a.A.val, a.X, a.Y, arg, long(a.A.M), long(a.C));
  return submit(q, l, deps, a.A.rowptr, a.A.col, a.A.val, a.X, a.Y, arg, long(a.A.M), long(a.C), long(l.ntiles),
                long(l.rows));
}

}  // namespace gnnsparse::sycl_rt
