// SDDMM dispatch: ESIMD on devices that have it (when it covers the case), else the portable kernel.
#include "launch.hpp"

namespace gnnsparse::sycl_rt {

sycl::event sddmm(sycl::queue &q, const SddmmArgs &a, const Deps &deps) {
  const DeviceCaps &caps = caps_of(q);
  if (a.dtype == DType::f64 && !caps.fp64) throw std::invalid_argument("this SYCL device has no float64 support");
  if (a.A.nnz == 0 || a.H == 0) return q.ext_oneapi_submit_barrier(deps);
  if (caps.esimd)
    if (auto e = esimd_sddmm(q, a, deps)) return *e;
  const long sg = long(caps.preferred_sg);
  if (a.op == SddmmOp::dot && sg >= 2 && a.F >= sg / 2) {  // sub-group per (row, head), lanes over F
    const std::string name =
        "gnnsparse::sddmm_dot_sg<" + dtype_cpp(a.dtype) + ", " + itype_cpp(a.A.itype) + ", " + std::to_string(sg) + ">";
    sycl::kernel k = KernelCache::instance().get(q, "sddmm.hpp", name);
    const size_t wg = std::min<size_t>(caps.max_wg, size_t(sg) * 4);
    return submit(q, k, size_t(a.A.M * a.H) * size_t(sg), wg, deps, a.A.rowptr, a.A.col, a.X, a.Y, a.E, long(a.A.M),
                  long(a.H), long(a.F));
  }
  const std::string name = "gnnsparse::sddmm_csr<" + dtype_cpp(a.dtype) + ", " + itype_cpp(a.A.itype) + ", " +
                           std::to_string(int(a.op)) + ">";
  sycl::kernel k = KernelCache::instance().get(q, "sddmm.hpp", name);
  const size_t wg = std::min<size_t>(caps.max_wg, caps.preferred_sg * 4);
  return submit(q, k, size_t(a.A.nnz * a.H), wg, deps, a.A.rowptr, a.A.col, a.X, a.Y, a.E, long(a.A.M),
                long(a.A.nnz), long(a.H), long(a.F));
}

}  // namespace gnnsparse::sycl_rt
