// FusedMM dispatch: ESIMD on devices that have it (when it covers the case), else the portable kernel.
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "launch.hpp"

namespace gnnsparse::sycl_rt {

// GNNSPARSE_SYCL_FUSEDMM: unset, "" or "auto" (the policy), "sg" (never fusedmm_dot_rows_sg: the
// kernel it replaced on CPU devices, for comparison in the bench and the tests). Read at every call.
static bool fused_rows_walk() {
  const char *e = std::getenv("GNNSPARSE_SYCL_FUSEDMM");
  if (e == nullptr || *e == '\0' || std::strcmp(e, "auto") == 0) return true;
  if (std::strcmp(e, "sg") == 0) return false;
  throw std::invalid_argument(std::string("gnnsparse sycl: GNNSPARSE_SYCL_FUSEDMM must be auto or sg, got '") + e +
                              "'");
}

sycl::event fusedmm(sycl::queue &q, const FusedArgs &a, const Deps &deps) {
  const DeviceCaps &caps = caps_of(q);
  check_dtype(caps, a.dtype);
  // D == 0 computes only the edge values: nothing to do without E
  if (a.A.M == 0 || a.H == 0 || (a.D == 0 && a.E == nullptr)) return q.ext_oneapi_submit_barrier(deps);
  if (caps.esimd)
    if (auto e = esimd_fusedmm(q, a, deps)) return *e;
  const Launch l = fusedmm_launch(caps, a, fused_rows_walk());
  // the slope in the feature type; each kernel's own tail of sizes
  auto go = [&](auto slope) {
    if (l.inst.kernel() == Kernel::fusedmm_dot_rows)
      return submit(q, l, deps, a.A.rowptr, a.A.col, a.A.val, a.X, a.Y, a.Z, a.out, a.E, long(a.A.M), long(a.D),
                    long(l.ntiles), long(l.rows), int(a.edge), slope);
    return submit(q, l, deps, a.A.rowptr, a.A.col, a.A.val, a.X, a.Y, a.Z, a.out, a.E, long(a.A.M), long(a.H),
                  long(a.F), long(a.D), long(l.ntiles), slope);
  };
  return a.dtype == DType::f64 ? go(double(a.slope)) : go(float(a.slope));
}

}  // namespace gnnsparse::sycl_rt
