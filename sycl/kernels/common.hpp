// Device-side helpers shared by the portable SYCL kernels: reductions as a policy
// (init / update / write, as pytorch_scatter's reducer), so kernels never branch on the reduction.
// Read by the run-time kernel_compiler (as an include file) and by icpx (ahead of time).
#pragma once
#include <sycl/ext/oneapi/free_function_queries.hpp>
#include <sycl/ext/oneapi/kernel_properties/properties.hpp>

#include <limits>

#include "gnnsparse/ops.hpp"  // Reduce, SddmmOp, EdgeFn: the template parameters of every kernel

namespace gnnsparse {
namespace syclexp = sycl::ext::oneapi::experimental;

inline size_t global_id() { return sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0); }

// Where a work-item sits among the sub-groups of the launch: the global sub-group index (uniform
// across the sub-group, so indices derived from it stay scalar) and the lane within it.
struct SubgroupSlot {
  sycl::sub_group sg;
  long id;
  long lane;
};
inline SubgroupSlot subgroup_slot() {
  const auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  const sycl::sub_group sg = it.get_sub_group();
  return {sg, long(it.get_group(0)) * long(sg.get_group_linear_range()) + long(sg.get_group_linear_id()),
          long(sg.get_local_linear_id())};
}

template <typename T>
inline bool is_nan(T v) { return v != v; }  // kernels are built with -fno-fast-math

// Reducer<T, R, ARG>: acc starts at init(); update() folds message v of edge k; write() gives the
// output for a row with deg entries (empty rows give 0 and arg -1 whatever the reduction).
// ARG: max/min also track the winning edge (only instantiated when the caller wants arg).
template <typename T, Reduce R, bool ARG = true>
struct Reducer {
  static constexpr bool extremum = ::gnnsparse::has_arg(R);  // max or min
  static constexpr bool has_arg = extremum && ARG;
  static T init() {
    if constexpr (extremum && !ARG)
      return R == Reduce::max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    return T(0);
  }
  // max/min: a strict comparison keeps the first of equal values (ties -> smallest k);
  // NaN wins over any number and, once held, is kept (numpy.max / numpy.argmax semantics).
  // Branch-free selects, so the update vectorizes across lanes.
  static void update(T &acc, long &arg, T v, long k) {
    if constexpr (!extremum) {
      acc += v;
    } else if constexpr (has_arg) {
      const bool better = (R == Reduce::max) ? (v > acc) : (v < acc);
      const bool take = (arg < 0) | better | (is_nan(v) & !is_nan(acc));
      acc = take ? v : acc;
      arg = take ? k : arg;
    } else {
      const bool take = ((R == Reduce::max) ? (v > acc) : (v < acc)) | is_nan(v);
      acc = take ? v : acc;
    }
  }
  static T write(T acc, long deg) {
    if (deg == 0) return T(0);
    if constexpr (R == Reduce::mean) return acc / T(deg);
    return acc;
  }
};

// Row containing edge k: the last r with rowptr[r] <= k (rows may be empty). A branch-free binary
// search whose trip count depends only on M (the answer lies in [base, base + n)), so the loop
// branch is predictable and each step is a load and a select.
template <typename I>
inline long row_of_edge(const I *rowptr, long M, long k) {
  long base = 0, n = M;
  while (n > 1) {
    const long half = n / 2;
    base = long(rowptr[base + half]) <= k ? base + half : base;
    n -= half;
  }
  return base;
}

}  // namespace gnnsparse
