// Shared launch plumbing for the portable kernels: the kernel of a Launch, submitted after deps.
#pragma once
#include "ops.hpp"
#include "runtime.hpp"

namespace gnnsparse::sycl_rt {

template <typename... Args>
sycl::event submit(sycl::queue &q, const Launch &l, const Deps &deps, Args... args) {
  const sycl::kernel k = KernelCache::instance().get(q, l.inst);
  return q.submit([&](sycl::handler &h) {
    if (!deps.empty()) h.depends_on(deps);
    h.set_args(args...);
    h.parallel_for(sycl::nd_range<1>{l.global, l.local}, k);
  });
}

// The SYCL kernels take float32 and float64 features; float64 only where the device has it.
inline void check_dtype(const DeviceCaps &caps, DType t) {
  if (t != DType::f32 && t != DType::f64)
    throw std::invalid_argument("the SYCL backend supports float32 and float64 features");
  if (t == DType::f64 && !caps.fp64) throw std::invalid_argument("this SYCL device has no float64 support");
}

}  // namespace gnnsparse::sycl_rt
