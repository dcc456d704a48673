// SpMM dispatch: ESIMD on devices that have it (when it covers the case), else the portable kernel.
#include "launch.hpp"

namespace gnnsparse::sycl_rt {

sycl::event spmm(sycl::queue &q, const SpmmArgs &a, const Deps &deps) {
  const DeviceCaps &caps = caps_of(q);
  if (a.dtype == DType::f64 && !caps.fp64) throw std::invalid_argument("this SYCL device has no float64 support");
  if (a.A.M == 0 || a.C == 0) return q.ext_oneapi_submit_barrier(deps);
  if (caps.esimd)
    if (auto e = esimd_spmm(q, a, deps)) return *e;
  const std::string head = dtype_cpp(a.dtype) + ", " + itype_cpp(a.A.itype) + ", " + std::to_string(int(a.reduce)) +
                           ", " + tf(a.A.val != nullptr) + ", " + tf(a.arg != nullptr) + ", ";
  const long sg = long(caps.preferred_sg);
  if (a.C < sg) {  // narrow rows: lanes over edges
    int V = 1;
    while (V < a.C) V *= 2;
    const std::string name =
        "gnnsparse::spmm_csr_narrow<" + head + std::to_string(sg) + ", " + std::to_string(V) + ">";
    sycl::kernel k = KernelCache::instance().get(q, "spmm.hpp", name);
    const size_t wg = std::min<size_t>(caps.max_wg, size_t(sg) * 4);
    return submit(q, k, size_t(a.A.M) * size_t(sg), wg, deps, a.A.rowptr, a.A.col, a.A.val, a.X, a.Y,
                  a.arg, long(a.A.M), long(a.C));
  }
  const SubgroupPolicy p = subgroup_policy(caps, a.C);  // lanes over features
  const std::string name = "gnnsparse::spmm_csr_sg<" + head + std::to_string(sg) + ", " + std::to_string(p.V) + ">";
  sycl::kernel k = KernelCache::instance().get(q, "spmm.hpp", name);
  return submit(q, k, size_t(a.A.M * p.ntiles) * size_t(sg), p.wg, deps, a.A.rowptr, a.A.col, a.A.val, a.X, a.Y,
                a.arg, long(a.A.M), long(a.C), long(p.ntiles));
}

}  // namespace gnnsparse::sycl_rt
