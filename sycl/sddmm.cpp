// SDDMM dispatch: the tiled kernel for dense-ish inputs where the method choice picks it; else
// ESIMD on devices that have it (when it covers the case), else the portable kernel.
#include "launch.hpp"
#include "tiles.hpp"

namespace gnnsparse::sycl_rt {

sycl::event sddmm(sycl::queue &q, const SddmmArgs &a, const Deps &deps) {
  const DeviceCaps &caps = caps_of(q);
  check_dtype(caps, a.dtype);
  if (a.A.nnz == 0 || a.H == 0) return q.ext_oneapi_submit_barrier(deps);
  // dense-ish inputs: the tiled kernel where the method choice (sycl/tiles.hpp) picks it
  if (auto e = tiled_sddmm(q, a, deps)) return *e;
  if (caps.esimd)
    if (auto e = esimd_sddmm(q, a, deps)) return *e;
  const Launch l = sddmm_launch(caps, a);
  if (l.inst.kernel() == Kernel::sddmm_dot_sg)
    return submit(q, l, deps, a.A.rowptr, a.A.col, a.X, a.Y, a.E, long(a.A.M), long(a.A.nnz * a.H), long(a.H),
                  long(a.F), long(l.chunk));
  return submit(q, l, deps, a.A.rowptr, a.A.col, a.X, a.Y, a.E, long(a.A.M), long(a.A.nnz), long(a.H), long(a.F));
}

}  // namespace gnnsparse::sycl_rt
