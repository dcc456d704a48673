// Shared launch plumbing for the portable kernels: instance names and the nd_range submission.
#pragma once
#include <string>

#include "ops.hpp"
#include "runtime.hpp"

namespace gnnsparse::sycl_rt {

// Launch shape of the sub-group kernels: a sub-group of SG lanes covers SG * V features of one row
// per tile; V is the smallest power of two (at most 8) covering the row, wider rows take ntiles
// tiles (each tile's sub-group walks the row's edges again).
struct SubgroupPolicy {
  int V = 1;
  long ntiles = 1;
  size_t wg = 64;  // four sub-groups per work-group
};
inline SubgroupPolicy subgroup_policy(const DeviceCaps &caps, long C) {
  SubgroupPolicy p;
  const long sg = long(caps.preferred_sg);
  while (p.V < 8 && long(p.V) * sg < C) p.V *= 2;
  p.ntiles = std::max(1L, (C + sg * p.V - 1) / (sg * p.V));
  p.wg = std::min<size_t>(caps.max_wg, size_t(sg) * 4);
  return p;
}

inline const char *tf(bool b) { return b ? "true" : "false"; }

template <typename... Args>
sycl::event submit(sycl::queue &q, const sycl::kernel &k, size_t global, size_t local, const Deps &deps,
                   Args... args) {
  return q.submit([&](sycl::handler &h) {
    h.depends_on(deps);
    h.set_args(args...);
    h.parallel_for(sycl::nd_range<1>{round_up(global, local), local}, k);
  });
}

inline const DeviceCaps &caps_of(const sycl::queue &q) {
  // Device queries are cheap but not free; keep the last device's answers.
  thread_local sycl::device last;
  thread_local DeviceCaps caps;
  thread_local bool have = false;
  if (!have || last != q.get_device()) {
    last = q.get_device();
    caps = device_caps(last);
    have = true;
  }
  return caps;
}

}  // namespace gnnsparse::sycl_rt
