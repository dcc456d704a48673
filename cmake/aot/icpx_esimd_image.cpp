// Ahead-of-time image of every ESIMD kernel instance the launchers can pick, for pvc (Intel Data
// Center GPU Max 1550). Compiled ONLY by icpx through cmake/SyclAot.cmake (GNNSPARSE_SYCL_AOT=ON):
//   icpx -fsycl -fsycl-targets=spir64_gen -Xs "-device pvc" -shared -fPIC -I sycl/kernels -I sycl -I include
// The kernel headers are the same files the run-time kernel_compiler reads (sycl/kernels/esimd/).
// The instance set is enumerated from sycl/esimd_policy.hpp (kNT, kVLC, kN), and each kernel is
// filed under the exact registered name the launcher asks for (sycl/instances.hpp's
// instance_name), so the run-time and AOT paths cannot disagree on what exists.
//
// Exported: gnnsparse_esimd_aot_kernel(name, context, device, out) -> true and *out set when the
// image holds the instance; the runtime may try it before the kernel_compiler (see docs/esimd.md).
#include <sycl/sycl.hpp>

#include <map>
#include <string>
#include <utility>

#include "esimd/fusedmm.hpp"
#include "esimd/sddmm.hpp"
#include "esimd/spmm.hpp"
#include "esimd/tiles.hpp"
#include "esimd_policy.hpp"

namespace {
namespace syclexp = sycl::ext::oneapi::experimental;
namespace ge = gnnsparse::esimd;
namespace gp = gnnsparse::esimd_policy;
using Table = std::map<std::string, sycl::kernel_id>;
using gnnsparse::sycl_rt::instance_name;
std::string name(gnnsparse::sycl_rt::Instance in) { return instance_name(in); }

template <const auto &Arr, typename F, std::size_t... Is>
void each(F &&f, std::index_sequence<Is...>) {
  (f(std::integral_constant<int, Arr[Is]>{}), ...);
}
template <const auto &Arr, typename F>
void each(F &&f) {
  each<Arr>(f, std::make_index_sequence<sizeof(Arr) / sizeof(Arr[0])>{});
}

template <typename I>
void add_all(Table &t) {
  constexpr bool i64 = sizeof(I) == 8;
  each<gp::kVLC>([&](auto VLC) {
    each<gp::kN>([&](auto N) {
      each<gp::kNT>([&](auto NT) {
        t.emplace(name(gp::sddmm_instance(i64, NT, VLC, N)),
                  syclexp::get_kernel_id<ge::sddmm<float, I, NT.value, VLC.value, N.value>>());
      });
      t.emplace(name(gp::spmm_instance(i64, VLC, N, false)), syclexp::get_kernel_id<ge::spmm<float, I, VLC.value, N.value, false>>());
      t.emplace(name(gp::spmm_instance(i64, VLC, N, true)), syclexp::get_kernel_id<ge::spmm<float, I, VLC.value, N.value, true>>());
      each<gp::kN>([&](auto ND) {
        t.emplace(name(gp::fusedmm_instance(i64, VLC, N, ND, false)),
                  syclexp::get_kernel_id<ge::fusedmm<float, I, VLC.value, N.value, ND.value, false>>());
        t.emplace(name(gp::fusedmm_instance(i64, VLC, N, ND, true)),
                  syclexp::get_kernel_id<ge::fusedmm<float, I, VLC.value, N.value, ND.value, true>>());
      });
    });
  });
  each<gp::kXmxNB>([&](auto NB) {
    t.emplace(name(gp::spmm_xmx_instance(i64, NB, true, false)),
              syclexp::get_kernel_id<ge::spmm_xmx<float, I, NB.value, true, false>>());
    t.emplace(name(gp::spmm_xmx_instance(i64, NB, true, true)),
              syclexp::get_kernel_id<ge::spmm_xmx<float, I, NB.value, true, true>>());
    t.emplace(name(gp::spmm_xmx_instance(i64, NB, false, false)),
              syclexp::get_kernel_id<ge::spmm_xmx<float, I, NB.value, false, false>>());
    t.emplace(name(gp::spmm_xmx_instance(i64, NB, false, true)),
              syclexp::get_kernel_id<ge::spmm_xmx<float, I, NB.value, false, true>>());
  });
}

const Table &table() {
  static const Table t = [] {
    Table r;
    add_all<int>(r);
    add_all<long>(r);
    return r;
  }();
  return t;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) bool gnnsparse_esimd_aot_kernel(const char *name,
                                                                                   const sycl::context &ctx,
                                                                                   const sycl::device &dev,
                                                                                   sycl::kernel *out) {
  const auto it = table().find(name);
  if (it == table().end() || !dev.has(sycl::aspect::ext_intel_esimd)) return false;
  if (!sycl::has_kernel_bundle<sycl::bundle_state::executable>(ctx, {dev}, {it->second})) return false;
  auto kb = sycl::get_kernel_bundle<sycl::bundle_state::executable>(ctx, {dev}, {it->second});
  *out = kb.get_kernel(it->second);
  return true;
}
