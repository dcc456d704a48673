// ESIMD launchers (placeholder until the ESIMD kernels land): no case covered yet.
#include "ops.hpp"
namespace gnnsparse::sycl_rt {
std::optional<sycl::event> esimd_spmm(sycl::queue &, const SpmmArgs &, const Deps &) { return std::nullopt; }
std::optional<sycl::event> esimd_sddmm(sycl::queue &, const SddmmArgs &, const Deps &) { return std::nullopt; }
std::optional<sycl::event> esimd_fusedmm(sycl::queue &, const FusedArgs &, const Deps &) { return std::nullopt; }
}  // namespace gnnsparse::sycl_rt
