// Dense-ish SpMM / SDDMM (host side): the method choices and the launchers of the portable tiled
// kernels (sycl/kernels/tiles.hpp), of the XMX (DPAS) kernel for Intel GPUs with ESIMD
// (sycl/kernels/esimd/tiles.hpp), and of the row-panel SpMM (sycl/kernels/panel.hpp and
// sycl/kernels/esimd/panel.hpp; launcher in sycl/panel.cpp). Host code only.
#pragma once
#include <sycl/sycl.hpp>

#include <optional>

#include "ops.hpp"

namespace gnnsparse::sycl_rt {

// The tiled SpMM when it covers the call and the method choice picks it, else std::nullopt (and
// nothing is submitted: the caller runs the sparse kernels).
// Covered: float32 features, sum or mean. Choice (environment variable GNNSPARSE_SYCL_TILES, read per
// call): "auto" or unset: the policy (CPU devices: the measured density threshold of
// prefer_tiles_cpu in sycl/policy.hpp; Intel GPUs: never, since nothing has been measured on one);
// "on" / "1": tiles for every covered call (tests, measurements; on ESIMD devices the XMX kernel,
// precision fp32 -> 3xTF32, tf32 -> one tf32 product, bf16 not covered); "off" / "0": never.
std::optional<sycl::event> tiled_spmm(sycl::queue &q, const SpmmArgs &a, const Deps &deps);

// The tiled SDDMM (dot, float32; portable kernel only, no XMX variant) under the same choice:
// "auto": prefer_sddmm_tiles_cpu on CPU devices, never elsewhere; "on": every covered call on
// devices without ESIMD; "off": never.
std::optional<sycl::event> tiled_sddmm(sycl::queue &q, const SddmmArgs &a, const Deps &deps);

// The row-panel SpMM when it covers the call (float32, sum or mean) and the method choice picks it,
// else std::nullopt (nothing submitted). Choice (environment variable GNNSPARSE_SYCL_PANEL, read per
// call): unset / "auto": the policy (CPU devices: prefer_panel_cpu in sycl/policy.hpp, which needs
// A.sorted_cols == 1; other devices: never, nothing has been measured on one); "on" / "1": every
// covered call (CPU devices: the cache schedule; devices with ESIMD: the ESIMD kernel; others: the
// staged schedule); "staged": the local-memory schedule on any device without ESIMD (tests);
// "off" / "0": never; anything else throws std::invalid_argument. The kernels are exact for any CSR
// (sorted or not). GNNSPARSE_SYCL_PANEL_BK (a positive integer, for measurements) overrides the chunk
// height of the cache schedule.
std::optional<sycl::event> panel_spmm(sycl::queue &q, const SpmmArgs &a, const Deps &deps);

}  // namespace gnnsparse::sycl_rt
