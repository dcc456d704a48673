// FusedMM dispatch: ESIMD on devices that have it (when it covers the case), else the portable kernel.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

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

// (context, device) as a hash key (SYCL objects hash and compare equal, but have no order)
struct PlaceHash {
  std::size_t operator()(const std::pair<sycl::context, sycl::device> &x) const {
    return std::hash<sycl::context>{}(x.first) * 31 + std::hash<sycl::device>{}(x.second);
  }
};

sycl::event fusedmm(sycl::queue &q, const FusedArgs &a, const Deps &deps) {
  const DeviceCaps &caps = caps_of(q);
  check_dtype(caps, a.dtype);
  // D == 0 computes only the edge values: nothing to do without E
  if (a.A.M == 0 || a.H == 0 || (a.D == 0 && a.E == nullptr)) return q.ext_oneapi_submit_barrier(deps);
  if (caps.esimd)
    if (auto e = esimd_fusedmm(q, a, deps)) return *e;
  const Launch l = fusedmm_launch(caps, a, fused_rows_walk());
  // the slope in the feature type; each kernel's own tail of sizes
  auto go = [&](void *E, const Deps &d, auto slope) {
    if (l.inst.kernel() == Kernel::fusedmm_dot_rows)
      return submit(q, l, d, a.A.rowptr, a.A.col, a.A.val, a.X, a.Y, a.Z, a.out, E, long(a.A.M), long(a.H),
                    long(a.D), long(l.rows), int(a.edge), slope);
    return submit(q, l, d, a.A.rowptr, a.A.col, a.A.val, a.X, a.Y, a.Z, a.out, E, long(a.A.M), long(a.H),
                  long(a.F), long(a.D), long(l.ntiles), slope);
  };
  auto run = [&](void *E, const Deps &d) {
    return a.dtype == DType::f64 ? go(E, d, double(a.slope)) : go(E, d, float(a.slope));
  };
  if (l.inst.kernel() != Kernel::fusedmm_dot_rows || a.E != nullptr || a.A.nnz == 0) return run(a.E, deps);
  // the rows walk meets its two phases in E; without the caller's, in a workspace of nnz x H values
  // (what the unfused SDDMM + SpMM would write and read back; here its entries stay in cache
  // between the phases), one per context and device, grown to the largest call and kept until the
  // process ends. Calls that share it are ordered by its last user's event. (Allocating and
  // freeing it per call, by a host task, cost ~0.5 ms on the 2-core CPU device: half a
  // Pubmed-sized call.)
  struct Workspace {
    void *p = nullptr;
    std::size_t bytes = 0;
    sycl::event last;
  };
  static std::mutex mu;
  // never destroyed: SYCL objects must not outlive the runtime in static destructors at exit
  static auto *spaces = new std::unordered_map<std::pair<sycl::context, sycl::device>, Workspace, PlaceHash>();
  const std::size_t need =
      std::size_t(a.A.nnz) * std::size_t(a.H) * (a.dtype == DType::f64 ? sizeof(double) : sizeof(float));
  std::lock_guard<std::mutex> lock(mu);
  Workspace &w = (*spaces)[{q.get_context(), q.get_device()}];
  if (w.bytes < need) {
    w.last.wait();
    if (w.p != nullptr) sycl::free(w.p, q.get_context());
    w.p = nullptr;
    w.bytes = 0;
    w.p = sycl::malloc_device(need, q);
    if (w.p == nullptr)
      throw std::runtime_error("gnnsparse sycl: fusedmm could not allocate its " + std::to_string(need) +
                               "-byte workspace for the edge values");
    w.bytes = need;
  }
  Deps d = deps;
  d.push_back(w.last);
  w.last = run(w.p, d);
  return w.last;
}

}  // namespace gnnsparse::sycl_rt
