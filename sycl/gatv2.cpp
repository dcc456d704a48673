// GATv2 scores and their backward pass: the portable kernels (sycl/kernels/gatv2.hpp) on every
// device.
#include "launch.hpp"

namespace gnnsparse::sycl_rt {

namespace {

// Checks sizes and pointers; false when there is nothing to compute.
bool gatv2_has_work(const Gatv2Args &a, bool grad) {
  const std::string op = grad ? "gnnsparse sycl gatv2_grad: " : "gnnsparse sycl gatv2_scores: ";
  if (a.A.M < 0 || a.A.K < 0 || a.A.nnz < 0 || a.H < 0 || a.C < 0) throw std::invalid_argument(op + "negative size");
  if (a.A.M == 0 || a.H == 0 || a.C == 0 || (!grad && a.A.nnz == 0)) return false;
  const bool edges = a.A.nnz > 0;
  bool ok = a.A.rowptr != nullptr && a.X != nullptr && a.att != nullptr &&
            (!edges || (a.A.col != nullptr && a.Y != nullptr));
  ok = ok && (grad ? (a.dX != nullptr && (!edges || a.dS != nullptr)) : a.S != nullptr);
  if (!ok) throw std::invalid_argument(op + "null pointer");
  return true;
}

template <typename T>
sycl::event gatv2_submit(sycl::queue &q, const Launch &l, const Gatv2Args &a, bool grad, const Deps &deps) {
  const T slope = T(a.slope);
  if (grad)
    return submit(q, l, deps, a.A.rowptr, a.A.col, a.X, a.Y, a.att, a.dS, a.dX, a.dAtt, long(a.A.M), long(a.H),
                  long(a.C), slope);
  return submit(q, l, deps, a.A.rowptr, a.A.col, a.X, a.Y, a.att, a.S, long(a.A.M), long(a.H), long(a.C), slope);
}

sycl::event gatv2_run(sycl::queue &q, const Gatv2Args &a, bool grad, const Deps &deps) {
  const DeviceCaps &caps = caps_of(q);
  check_dtype(caps, a.dtype);
  if (!grad && a.C == 0 && a.A.M >= 0 && a.A.nnz > 0 && a.H > 0 && a.S != nullptr) {  // empty sums: 0
    const std::size_t bytes = std::size_t(a.A.nnz * a.H) * (a.dtype == DType::f64 ? 8 : 4);
    return q.submit([&](sycl::handler &h) {
      h.depends_on(deps);
      h.memset(a.S, 0, bytes);
    });
  }
  if (!gatv2_has_work(a, grad)) return q.ext_oneapi_submit_barrier(deps);
  const Launch l = gatv2_launch(caps, a, grad);
  return a.dtype == DType::f64 ? gatv2_submit<double>(q, l, a, grad, deps) : gatv2_submit<float>(q, l, a, grad, deps);
}

}  // namespace

sycl::event gatv2_scores(sycl::queue &q, const Gatv2Args &a, const Deps &deps) { return gatv2_run(q, a, false, deps); }
sycl::event gatv2_grad(sycl::queue &q, const Gatv2Args &a, const Deps &deps) { return gatv2_run(q, a, true, deps); }

}  // namespace gnnsparse::sycl_rt
