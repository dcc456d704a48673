// SYCL backend entry points: raw USM pointers, sizes, type codes, the caller's queue and the events
// to wait on; each returns the event of its last submission. Semantics: include/gnnsparse/ops.hpp.
#pragma once
#include <sycl/sycl.hpp>

#include <cstdint>
#include <optional>
#include <vector>

#include "gnnsparse/ops.hpp"

namespace gnnsparse::sycl_rt {

struct CsrArgs {
  IType itype = IType::i32;
  const void *rowptr = nullptr;  // M + 1 entries
  const void *col = nullptr;     // nnz entries
  const void *val = nullptr;     // nnz entries of the feature dtype, or nullptr (all ones)
  std::int64_t M = 0, K = 0, nnz = 0;
};

struct SpmmArgs {
  CsrArgs A;
  DType dtype = DType::f32;
  Reduce reduce = Reduce::sum;
  const void *X = nullptr;  // K x C
  void *Y = nullptr;        // M x C
  void *arg = nullptr;      // M x C int64, or nullptr (max/min only)
  std::int64_t C = 0;
};

struct SddmmArgs {
  CsrArgs A;  // val unused
  DType dtype = DType::f32;
  SddmmOp op = SddmmOp::dot;
  const void *X = nullptr;  // dot: M x H x F; add: M x H
  const void *Y = nullptr;  // dot: K x H x F; add: K x H
  void *E = nullptr;        // nnz x H
  std::int64_t H = 1, F = 1;
};

struct FusedArgs {
  CsrArgs A;
  DType dtype = DType::f32;
  SddmmOp op = SddmmOp::dot;
  EdgeFn edge = EdgeFn::none;
  double slope = 0.2;
  const void *X = nullptr, *Y = nullptr;  // as SddmmArgs
  const void *Z = nullptr;                // K x H x D
  void *out = nullptr;                    // M x H x D
  void *E = nullptr;                      // nnz x H, or nullptr (edge values not written)
  std::int64_t H = 1, F = 1, D = 1;
};

using Deps = std::vector<sycl::event>;

sycl::event spmm(sycl::queue &q, const SpmmArgs &a, const Deps &deps);
sycl::event sddmm(sycl::queue &q, const SddmmArgs &a, const Deps &deps);
sycl::event fusedmm(sycl::queue &q, const FusedArgs &a, const Deps &deps);

// ESIMD paths (sycl/esimd.cpp), taken when the device has aspect::ext_intel_esimd.
// Each returns std::nullopt when it does not cover the case (dtype, reduction, edge function),
// and the dispatcher then uses the portable kernels.
std::optional<sycl::event> esimd_spmm(sycl::queue &q, const SpmmArgs &a, const Deps &deps);
std::optional<sycl::event> esimd_sddmm(sycl::queue &q, const SddmmArgs &a, const Deps &deps);
std::optional<sycl::event> esimd_fusedmm(sycl::queue &q, const FusedArgs &a, const Deps &deps);

}  // namespace gnnsparse::sycl_rt
