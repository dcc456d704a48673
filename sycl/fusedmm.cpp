// FusedMM dispatch: ESIMD on devices that have it (when it covers the case), else the portable kernel.
#include "launch.hpp"

namespace gnnsparse::sycl_rt {

sycl::event fusedmm(sycl::queue &q, const FusedArgs &a, const Deps &deps) {
  const DeviceCaps &caps = caps_of(q);
  check_dtype(caps, a.dtype);
  // D == 0 computes only the edge values: nothing to do without E
  if (a.A.M == 0 || a.H == 0 || (a.D == 0 && a.E == nullptr)) return q.ext_oneapi_submit_barrier(deps);
  if (caps.esimd)
    if (auto e = esimd_fusedmm(q, a, deps)) return *e;
  const Launch l = fusedmm_launch(caps, a);
  if (a.dtype == DType::f64)
    return submit(q, l, deps, a.A.rowptr, a.A.col, a.A.val, a.X, a.Y, a.Z, a.out, a.E, long(a.A.M), long(a.H),
                  long(a.F), long(a.D), long(l.ntiles), double(a.slope));
  return submit(q, l, deps, a.A.rowptr, a.A.col, a.A.val, a.X, a.Y, a.Z, a.out, a.E, long(a.A.M), long(a.H), long(a.F),
                long(a.D), long(l.ntiles), float(a.slope));
}

}  // namespace gnnsparse::sycl_rt
