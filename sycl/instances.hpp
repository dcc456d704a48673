// Kernel instances of the SYCL backend, named by small integers (host code only, plain C++17).
//
// Every kernel template the launchers submit is one row of kKernels: the embedded source that
// defines it, its qualified C++ name and the kinds of its template arguments. An Instance packs a
// kernel and its template arguments into 64 bits (byte 0 the kernel, byte i + 1 argument i: a code
// of gnnsparse/ops.hpp, a bool, a size below 256 or a power of two as its exponent), so the kernel
// cache is keyed by one integer computed once per call, and the C++ name the run-time compiler needs
//   gnnsparse::spmm_csr_sg<float, int, gnnsparse::Reduce::mean, true, false, 16, 4>
// is built from it only when a kernel is not cached yet. The launchers, the kernel cache, the
// ahead-of-time build tool and the ESIMD tests all name instances through this file.
#pragma once
#include <cstdint>
#include <string>

#include "gnnsparse/ops.hpp"

namespace gnnsparse::sycl_rt {

// How a template argument is spelled in C++.
// pow2: a power of two (a work-group size), stored as its exponent (pow2_arg) and spelled 1 << v.
enum class ArgKind : std::uint8_t { dtype, itype, reduce, sddmm_op, edge_fn, boolean, integer, pow2 };

enum class Kernel : std::uint8_t {
  spmm_sg,        // spmm.hpp
  spmm_narrow,    // spmm.hpp
  sddmm_csr,      // sddmm.hpp
  sddmm_dot_sg,   // sddmm.hpp
  fusedmm_sg,     // fusedmm.hpp
  esimd_sddmm,    // esimd/sddmm.hpp
  esimd_spmm,     // esimd/spmm.hpp
  esimd_fusedmm,  // esimd/fusedmm.hpp
  spmm_tiles,     // tiles.hpp (dense-ish inputs)
  esimd_spmm_xmx, // esimd/tiles.hpp (dense-ish inputs, DPAS)
  sddmm_tiles,    // tiles.hpp (dense-ish inputs)
  spmm_heads_sg,      // spmm_heads.hpp
  spmm_heads_narrow,  // spmm_heads.hpp
  // quantized kernels (sycl/quant_policy.hpp lists their instances)
  quant_absmax,        // quant.hpp
  quant_scale,         // quant.hpp
  quant_quantize,      // quant.hpp
  quant_dequantize,    // quant.hpp
  qspmm_sg,            // quant_spmm.hpp
  qsddmm_sg,           // quant_sddmm.hpp
  qfusedmm_sg,         // quant_sddmm.hpp
  esimd_quant_absmax,  // esimd/quantize.hpp
  esimd_quantize,      // esimd/quantize.hpp
  gatv2_scores_sg,    // gatv2.hpp
  gatv2_grad_sg,      // gatv2.hpp
  quant_requantize,   // quant.hpp
  spmm_panel,         // panel.hpp (dense-ish inputs, row panels)
  esimd_spmm_panel,   // esimd/panel.hpp (dense-ish inputs, row panels staged in SLM)
  qgemm_tn_partial,   // qgemm.hpp (int8 A^T B: segment sums)
  qgemm_tn_combine,   // qgemm.hpp (int8 A^T B: int64 combine and scale)
  fusedmm_dot_rows,   // fusedmm.hpp (dot, F = NF * SG: runs of rows, scores then rows)
  esimd_qspmm,        // esimd/qspmm.hpp (quantized SpMM sum / mean, quantized output optional)
  esimd_requantize,   // esimd/quantize.hpp (the int8 GEMM's scale pass, delayed scale)
};
inline constexpr int kKernelCount = 32;

struct KernelSpec {
  Kernel id;
  const char *entry;     // embedded source file, relative to sycl/kernels/
  const char *cpp_name;  // qualified template name
  int nargs;
  ArgKind args[7];
};

namespace detail {
using A = ArgKind;
inline constexpr KernelSpec kKernels[kKernelCount] = {
    {Kernel::spmm_sg, "spmm.hpp", "gnnsparse::spmm_csr_sg", 7,
     {A::dtype, A::itype, A::reduce, A::boolean, A::boolean, A::integer, A::integer}},  // T I R W ARG SG V
    {Kernel::spmm_narrow, "spmm.hpp", "gnnsparse::spmm_csr_narrow", 7,
     {A::dtype, A::itype, A::reduce, A::boolean, A::boolean, A::integer, A::integer}},  // T I R W ARG SG V
    {Kernel::sddmm_csr, "sddmm.hpp", "gnnsparse::sddmm_csr", 3, {A::dtype, A::itype, A::sddmm_op}},  // T I OP
    {Kernel::sddmm_dot_sg, "sddmm.hpp", "gnnsparse::sddmm_dot_sg", 5,
     {A::dtype, A::itype, A::integer, A::integer, A::boolean}},  // T I SG NF ONE_HEAD
    {Kernel::fusedmm_sg, "fusedmm.hpp", "gnnsparse::fusedmm_csr_sg", 7,
     {A::dtype, A::itype, A::sddmm_op, A::edge_fn, A::boolean, A::integer, A::integer}},  // T I OP EF W SG V
    {Kernel::esimd_sddmm, "esimd/sddmm.hpp", "gnnsparse::esimd::sddmm", 5,
     {A::dtype, A::itype, A::integer, A::integer, A::integer}},  // T I NT VLC N
    {Kernel::esimd_spmm, "esimd/spmm.hpp", "gnnsparse::esimd::spmm", 5,
     {A::dtype, A::itype, A::integer, A::integer, A::boolean}},  // T I VLC N HAS_VAL
    {Kernel::esimd_fusedmm, "esimd/fusedmm.hpp", "gnnsparse::esimd::fusedmm", 6,
     {A::dtype, A::itype, A::integer, A::integer, A::integer, A::boolean}},  // T I VLC NF ND HAS_VAL
    {Kernel::spmm_tiles, "tiles.hpp", "gnnsparse::spmm_tiles", 6,
     {A::dtype, A::itype, A::reduce, A::boolean, A::integer, A::integer}},  // T I R W SG V
    {Kernel::esimd_spmm_xmx, "esimd/tiles.hpp", "gnnsparse::esimd::spmm_xmx", 5,
     {A::dtype, A::itype, A::integer, A::boolean, A::boolean}},  // T I NB SPLIT HAS_VAL
    {Kernel::sddmm_tiles, "tiles.hpp", "gnnsparse::sddmm_tiles", 3, {A::dtype, A::itype, A::integer}},  // T I SG
    {Kernel::spmm_heads_sg, "spmm_heads.hpp", "gnnsparse::spmm_heads_sg", 4,
     {A::dtype, A::itype, A::integer, A::integer}},  // T I SG V
    {Kernel::spmm_heads_narrow, "spmm_heads.hpp", "gnnsparse::spmm_heads_narrow", 4,
     {A::dtype, A::itype, A::integer, A::integer}},  // T I SG V
    // quantized kernels
    {Kernel::quant_absmax, "quant.hpp", "gnnsparse::quant_absmax", 1, {A::pow2}},              // WG
    {Kernel::quant_scale, "quant.hpp", "gnnsparse::quant_scale", 1, {A::pow2}},                // WG
    {Kernel::quant_quantize, "quant.hpp", "gnnsparse::quant_quantize", 1, {A::integer}},       // BITS
    {Kernel::quant_dequantize, "quant.hpp", "gnnsparse::quant_dequantize", 1, {A::integer}},   // BITS
    {Kernel::qspmm_sg, "quant_spmm.hpp", "gnnsparse::qspmm_sg", 4,
     {A::itype, A::integer, A::reduce, A::boolean}},  // I SG R W
    {Kernel::qsddmm_sg, "quant_sddmm.hpp", "gnnsparse::qsddmm_sg", 2, {A::itype, A::integer}},  // I SG
    {Kernel::qfusedmm_sg, "quant_sddmm.hpp", "gnnsparse::qfusedmm_sg", 2, {A::itype, A::integer}},  // I SG
    {Kernel::esimd_quant_absmax, "esimd/quantize.hpp", "gnnsparse::esimd::quant_absmax", 1, {A::integer}},  // 0
    {Kernel::esimd_quantize, "esimd/quantize.hpp", "gnnsparse::esimd::quantize", 3,
     {A::integer, A::boolean, A::integer}},  // BITS STOCH NQ
    {Kernel::gatv2_scores_sg, "gatv2.hpp", "gnnsparse::gatv2_scores_sg", 3, {A::dtype, A::itype, A::integer}},  // T I SG
    {Kernel::gatv2_grad_sg, "gatv2.hpp", "gnnsparse::gatv2_grad_sg", 4,
     {A::dtype, A::itype, A::integer, A::integer}},  // T I SG V
    {Kernel::quant_requantize, "quant.hpp", "gnnsparse::quant_requantize", 1, {A::integer}},  // BITS
    {Kernel::spmm_panel, "panel.hpp", "gnnsparse::spmm_panel", 7,
     {A::dtype, A::itype, A::reduce, A::boolean, A::integer, A::integer, A::boolean}},  // T I R W SG V STAGE
    {Kernel::esimd_spmm_panel, "esimd/panel.hpp", "gnnsparse::esimd::spmm_panel", 4,
     {A::dtype, A::itype, A::integer, A::boolean}},  // T I BN HAS_VAL
    {Kernel::qgemm_tn_partial, "qgemm.hpp", "gnnsparse::qgemm_tn_partial", 3,
     {A::integer, A::integer, A::integer}},  // SG TM VN
    {Kernel::qgemm_tn_combine, "qgemm.hpp", "gnnsparse::qgemm_tn_combine", 1, {A::integer}},  // U
    {Kernel::fusedmm_dot_rows, "fusedmm.hpp", "gnnsparse::fusedmm_dot_rows_sg", 6,
     {A::dtype, A::itype, A::integer, A::integer, A::integer, A::boolean}},  // T I SG NF V ONE_HEAD
    {Kernel::esimd_qspmm, "esimd/qspmm.hpp", "gnnsparse::esimd::qspmm", 3,
     {A::itype, A::integer, A::boolean}},  // I BITS W
    {Kernel::esimd_requantize, "esimd/quantize.hpp", "gnnsparse::esimd::requantize", 3,
     {A::integer, A::boolean, A::integer}},  // BITS STOCH NQ
};
constexpr bool table_in_order() {
  for (int i = 0; i < kKernelCount; ++i)
    if (int(kKernels[i].id) != i) return false;
  return true;
}
static_assert(table_in_order(), "kKernels is indexed by Kernel");
}  // namespace detail

inline const KernelSpec &spec(Kernel k) { return detail::kKernels[int(k)]; }

// One kernel instance: the kernel and its template arguments, as one 64-bit key.
class Instance {
 public:
  constexpr Instance() = default;
  // Arguments in template order: enums of gnnsparse/ops.hpp, bools, or ints in [0, 256).
  template <typename... Args>
  static constexpr Instance of(Kernel k, Args... args) {
    static_assert(sizeof...(Args) <= 7, "at most 7 template arguments");
    std::uint64_t key = std::uint64_t(k);
    int shift = 8;
    ((key |= std::uint64_t(std::uint8_t(int(args))) << shift, shift += 8), ...);
    return Instance(key);
  }
  static constexpr Instance from_key(std::uint64_t key) { return Instance(key); }
  constexpr std::uint64_t key() const { return key_; }
  constexpr Kernel kernel() const { return Kernel(key_ & 0xff); }
  constexpr int arg(int i) const { return int((key_ >> (8 * (i + 1))) & 0xff); }
  const KernelSpec &spec() const { return sycl_rt::spec(kernel()); }
  constexpr bool operator==(Instance o) const { return key_ == o.key_; }
  constexpr bool operator!=(Instance o) const { return key_ != o.key_; }

 private:
  explicit constexpr Instance(std::uint64_t key) : key_(key) {}
  std::uint64_t key_ = 0;
};

// The key byte of an ArgKind::pow2 argument: the exponent of n (a power of two below 2^63).
constexpr int pow2_arg(std::uint64_t n) {
  int e = 0;
  while ((std::uint64_t(1) << e) < n) ++e;
  return e;
}

// Spelling of one template argument in C++. Feature types: the SYCL kernels take float and double.
inline std::string cpp_arg(ArgKind kind, int v) {
  switch (kind) {
    case ArgKind::dtype: return DType(v) == DType::f64 ? "double" : "float";
    case ArgKind::itype: return IType(v) == IType::i64 ? "long" : "int";
    case ArgKind::reduce: return cpp_name(Reduce(v));
    case ArgKind::sddmm_op: return cpp_name(SddmmOp(v));
    case ArgKind::edge_fn: return cpp_name(EdgeFn(v));
    case ArgKind::boolean: return v ? "true" : "false";
    case ArgKind::integer: return std::to_string(v);
    case ArgKind::pow2: return std::to_string(1L << v);
  }
  return "";
}

// The registered name of an instance, as the run-time compiler takes it.
inline std::string instance_name(Instance in) {
  const KernelSpec &s = in.spec();
  std::string name = std::string(s.cpp_name) + "<";
  for (int i = 0; i < s.nargs; ++i) name += (i ? ", " : "") + cpp_arg(s.args[i], in.arg(i));
  return name + ">";
}

}  // namespace gnnsparse::sycl_rt
