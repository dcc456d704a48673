// SYCL backend entry points: the shared argument structs (gnnsparse/args.hpp: USM pointers, sizes,
// type codes), the caller's queue and the events to wait on; each returns the event of its last
// submission. Semantics: include/gnnsparse/ops.hpp.
#pragma once
#include <sycl/sycl.hpp>

#include <optional>
#include <vector>

#include "gnnsparse/args.hpp"

namespace gnnsparse::sycl_rt {

using Deps = std::vector<sycl::event>;

sycl::event spmm(sycl::queue &q, const SpmmArgs &a, const Deps &deps);
sycl::event spmm_heads(sycl::queue &q, const SpmmHeadsArgs &a, const Deps &deps);
sycl::event gatv2_scores(sycl::queue &q, const Gatv2Args &a, const Deps &deps);
sycl::event gatv2_grad(sycl::queue &q, const Gatv2Args &a, const Deps &deps);
sycl::event sddmm(sycl::queue &q, const SddmmArgs &a, const Deps &deps);
sycl::event fusedmm(sycl::queue &q, const FusedArgs &a, const Deps &deps);

// ESIMD paths (sycl/esimd.cpp), taken when the device has aspect::ext_intel_esimd.
// Each returns std::nullopt when it does not cover the case (dtype, reduction, edge function),
// and the dispatcher then uses the portable kernels.
std::optional<sycl::event> esimd_spmm(sycl::queue &q, const SpmmArgs &a, const Deps &deps);
std::optional<sycl::event> esimd_sddmm(sycl::queue &q, const SddmmArgs &a, const Deps &deps);
std::optional<sycl::event> esimd_fusedmm(sycl::queue &q, const FusedArgs &a, const Deps &deps);

}  // namespace gnnsparse::sycl_rt
