// ESIMD launchers (host code, g++ without -fsycl): the hooks esimd_spmm / esimd_sddmm /
// esimd_fusedmm of sycl/ops.hpp. Each picks the kernel instance and nd_range with the shared
// policy (sycl/esimd_policy.hpp: the ESIMD paper's NT rule, VLC, feature tile), gets the kernel
// from the KernelCache (compiled once per context/device from the embedded esimd/*.hpp), and
// submits it on the caller's queue after `deps`. A case the ESIMD kernels do not cover returns
// std::nullopt and the dispatcher runs the portable kernel:
//   * a device without aspect::ext_intel_esimd, or features that are not float32;
//   * spmm max / min (and any arg output); sddmm / fusedmm with op add; fusedmm edge softmax;
//   * empty launches (M == 0, a zero feature width, H == 0) and sizes whose 32-bit in-message byte
//     offsets could overflow (H * 4 bytes per lane of a chunk store beyond 2^26).
#include <sycl/sycl.hpp>

#include <cstdint>
#include <optional>

#include "esimd_policy.hpp"
#include "ops.hpp"
#include "runtime.hpp"

namespace gnnsparse::sycl_rt {
namespace {

namespace pol = gnnsparse::esimd_policy;
using i64 = std::int64_t;

bool esimd_device(const sycl::queue &q) { return q.get_device().has(sycl::aspect::ext_intel_esimd); }

template <typename... Args>
sycl::event submit(sycl::queue &q, Instance in, const pol::Launch &l, const Deps &deps, Args... args) {
  const sycl::kernel k = KernelCache::instance().get(q, in);
  return q.submit([&](sycl::handler &h) {
    if (!deps.empty()) h.depends_on(deps);
    h.set_args(args...);
    h.parallel_for(sycl::nd_range<1>{sycl::range<1>(size_t(l.global)), sycl::range<1>(size_t(l.local))}, k);
  });
}

template <typename I>
sycl::event launch_spmm(sycl::queue &q, const SpmmArgs &a, const Deps &deps) {
  const pol::Launch l = pol::spmm_launch(a.A.M, a.A.nnz, a.C);
  const bool has_val = a.A.val != nullptr;
  return submit(q, pol::spmm_instance(sizeof(I) == 8, l.vlc, l.n, has_val), l, deps,
                   static_cast<const I *>(a.A.rowptr), static_cast<const I *>(a.A.col),
                   static_cast<const float *>(a.A.val), static_cast<const float *>(a.X), static_cast<float *>(a.Y),
                   i64(a.A.M), i64(a.C), a.reduce);
}

template <typename I>
sycl::event launch_sddmm(sycl::queue &q, const SddmmArgs &a, const Deps &deps) {
  const pol::Launch l = pol::sddmm_launch(a.A.M, a.A.nnz, a.H, a.F);
  return submit(q, pol::sddmm_instance(sizeof(I) == 8, l.nt, l.vlc, l.n), l, deps,
                   static_cast<const I *>(a.A.rowptr), static_cast<const I *>(a.A.col),
                   static_cast<const float *>(a.X), static_cast<const float *>(a.Y), static_cast<float *>(a.E),
                   i64(a.H), i64(a.F));
}

template <typename I>
sycl::event launch_fusedmm(sycl::queue &q, const FusedArgs &a, const Deps &deps) {
  const pol::Launch l = pol::fusedmm_launch(a.A.M, a.A.nnz, a.H, a.F, a.D);
  const bool has_val = a.A.val != nullptr;
  return submit(q, pol::fusedmm_instance(sizeof(I) == 8, l.vlc, l.n, l.n2, has_val), l, deps,
                   static_cast<const I *>(a.A.rowptr), static_cast<const I *>(a.A.col),
                   static_cast<const float *>(a.A.val), static_cast<const float *>(a.X),
                   static_cast<const float *>(a.Y), static_cast<const float *>(a.Z), static_cast<float *>(a.out),
                   static_cast<float *>(a.E), i64(a.A.M), i64(a.H), i64(a.F), i64(a.D), a.edge, float(a.slope));
}

constexpr i64 kMaxHeads = i64(1) << 24;  // chunk stores scatter at byte offsets lane * H * 4 (32-bit)

}  // namespace

std::optional<sycl::event> esimd_spmm(sycl::queue &q, const SpmmArgs &a, const Deps &deps) {
  if (!esimd_device(q) || a.dtype != DType::f32) return std::nullopt;
  if (a.reduce != Reduce::sum && a.reduce != Reduce::mean) return std::nullopt;
  if (a.A.M <= 0 || a.C <= 0) return std::nullopt;
  return a.A.itype == IType::i64 ? launch_spmm<std::int64_t>(q, a, deps) : launch_spmm<std::int32_t>(q, a, deps);
}

std::optional<sycl::event> esimd_sddmm(sycl::queue &q, const SddmmArgs &a, const Deps &deps) {
  if (!esimd_device(q) || a.dtype != DType::f32 || a.op != SddmmOp::dot) return std::nullopt;
  if (a.A.M <= 0 || a.A.nnz <= 0 || a.H <= 0 || a.H > kMaxHeads || a.F < 0) return std::nullopt;
  return a.A.itype == IType::i64 ? launch_sddmm<std::int64_t>(q, a, deps) : launch_sddmm<std::int32_t>(q, a, deps);
}

std::optional<sycl::event> esimd_fusedmm(sycl::queue &q, const FusedArgs &a, const Deps &deps) {
  if (!esimd_device(q) || a.dtype != DType::f32 || a.op != SddmmOp::dot) return std::nullopt;
  if (a.edge != EdgeFn::none && a.edge != EdgeFn::leaky_relu && a.edge != EdgeFn::exp) return std::nullopt;
  if (a.A.M <= 0 || a.H <= 0 || a.H > kMaxHeads || a.F < 0 || a.D <= 0) return std::nullopt;
  return a.A.itype == IType::i64 ? launch_fusedmm<std::int64_t>(q, a, deps)
                                 : launch_fusedmm<std::int32_t>(q, a, deps);
}

}  // namespace gnnsparse::sycl_rt
