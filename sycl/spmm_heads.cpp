// SpMM with per-(edge, head) weights: the portable kernels (sycl/kernels/spmm_heads.hpp) on every
// device.
#include "launch.hpp"

namespace gnnsparse::sycl_rt {

sycl::event spmm_heads(sycl::queue &q, const SpmmHeadsArgs &a, const Deps &deps) {
  const DeviceCaps &caps = caps_of(q);
  check_dtype(caps, a.dtype);
  if (a.A.M < 0 || a.A.nnz < 0 || a.H < 0 || a.D < 0)
    throw std::invalid_argument("gnnsparse sycl spmm_heads: negative size");
  if (a.A.M == 0 || a.H == 0 || a.D == 0) return q.ext_oneapi_submit_barrier(deps);
  const Launch l = spmm_heads_launch(caps, a);
  if (l.inst.kernel() == Kernel::spmm_heads_narrow)
    return submit(q, l, deps, a.A.rowptr, a.A.col, a.W, a.Z, a.out, long(a.A.M), long(a.H), long(a.D));
  return submit(q, l, deps, a.A.rowptr, a.A.col, a.W, a.Z, a.out, long(a.A.M), long(a.H), long(a.D), long(l.ntiles),
                long(l.rows));
}

}  // namespace gnnsparse::sycl_rt
