// FusedMM dispatch: ESIMD on devices that have it (when it covers the case), else the portable kernel.
#include "launch.hpp"

namespace gnnsparse::sycl_rt {

sycl::event fusedmm(sycl::queue &q, const FusedArgs &a, const Deps &deps) {
  const DeviceCaps &caps = caps_of(q);
  if (a.dtype == DType::f64 && !caps.fp64) throw std::invalid_argument("this SYCL device has no float64 support");
  if (a.A.M == 0 || a.H == 0) return q.ext_oneapi_submit_barrier(deps);
  if (caps.esimd)
    if (auto e = esimd_fusedmm(q, a, deps)) return *e;
  const long sg = long(caps.preferred_sg);
  const SubgroupPolicy p = subgroup_policy(caps, a.D);
  const std::string name = "gnnsparse::fusedmm_csr_sg<" + dtype_cpp(a.dtype) + ", " + itype_cpp(a.A.itype) + ", " +
                           std::to_string(int(a.op)) + ", " + std::to_string(int(a.edge)) + ", " +
                           tf(a.A.val != nullptr) + ", " + std::to_string(sg) + ", " + std::to_string(p.V) + ">";
  sycl::kernel k = KernelCache::instance().get(q, "fusedmm.hpp", name);
  const size_t global = size_t(a.A.M * a.H * p.ntiles) * size_t(sg);
  if (a.dtype == DType::f64)
    return submit(q, k, global, p.wg, deps, a.A.rowptr, a.A.col, a.A.val, a.X, a.Y, a.Z, a.out, a.E, long(a.A.M),
                  long(a.H), long(a.F), long(a.D), long(p.ntiles), double(a.slope));
  return submit(q, k, global, p.wg, deps, a.A.rowptr, a.A.col, a.A.val, a.X, a.Y, a.Z, a.out, a.E, long(a.A.M),
                long(a.H), long(a.F), long(a.D), long(p.ntiles), float(a.slope));
}

}  // namespace gnnsparse::sycl_rt
