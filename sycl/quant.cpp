// Launchers of the portable quantized kernels (host code, g++ without -fsycl): each picks the
// instance by name (sycl/kernels/quant*.hpp), gets it from the KernelCache (compiled once per
// context and device) and submits it after `deps`. Contract: gnnsparse/quant.hpp.
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

#include "quant_ops.hpp"
#include "runtime.hpp"

namespace gnnsparse::sycl_rt {
namespace {

constexpr int kReduceWG = 256;  // absmax / scale work-groups
constexpr long kMinPerItem = 16; // elements per work-item of the absmax pass (fewer groups when small)

std::string idx_name(IType t) { return t == IType::i64 ? "long" : "int"; }

template <typename... Args>
sycl::event submit_named(sycl::queue &q, const char *entry, const std::string &name, std::size_t global,
                         std::size_t local, const QDeps &deps, Args... args) {
  const sycl::kernel k = KernelCache::instance().get(q, entry, name);
  global = std::max<std::size_t>(local, (global + local - 1) / local * local);
  return q.submit([&](sycl::handler &h) {
    if (!deps.empty()) h.depends_on(deps);
    h.set_args(args...);
    h.parallel_for(sycl::nd_range<1>{global, local}, k);
  });
}

// Work-group size of element-wise launches: four sub-groups on GPUs; on CPUs larger groups (the
// OpenCL CPU runtime schedules each group as one task).
std::size_t elementwise_wg(const DeviceCaps &c, std::size_t global) {
  std::size_t wg = c.preferred_sg * 4;
  if (c.cpu) {
    const std::size_t want = global / (4 * std::max<std::size_t>(c.compute_units, 1));
    while (wg * 2 <= std::min<std::size_t>(c.max_wg, 1024) && wg * 2 <= want) wg *= 2;
  }
  return std::min(wg, c.max_wg);
}

int sg_of(const DeviceCaps &c) { return int(c.preferred_sg); }

void check_bits(const char *op, int bits) {
  if (bits != 4 && bits != 8)
    throw std::invalid_argument(std::string("gnnsparse sycl ") + op + ": bits must be 4 or 8, got " +
                                std::to_string(bits));
}

}  // namespace

sycl::event quantize(sycl::queue &q, const QuantizeArgs &a, const QDeps &deps) {
  check_bits("quantize", a.bits);
  if (a.rows < 0 || a.C < 0) throw std::invalid_argument("gnnsparse sycl quantize: negative size");
  const long n = long(a.rows * a.C);
  if (a.scale == nullptr || a.work == nullptr || (n > 0 && (a.X == nullptr || a.Q == nullptr)))
    throw std::invalid_argument("gnnsparse sycl quantize: null pointer");
  const DeviceCaps &caps = caps_of(q);
  const long wg = std::min<long>(kReduceWG, long(caps.max_wg));
  long P = std::min<long>(kQuantizeWork, (n + wg * kMinPerItem - 1) / (wg * kMinPerItem));
  P = std::max<long>(P, n > 0 ? 1 : 0);
  const long chunk = P > 0 ? (n + P - 1) / P : 0;
  const std::string wgs = std::to_string(wg);
  QDeps d = deps;
  if (P > 0) {
    std::optional<sycl::event> ea;
    if (caps.esimd) ea = esimd_absmax_pass(q, a, P, chunk, d);
    d = {ea ? *ea
            : submit_named(q, "quant.hpp", "gnnsparse::quant_absmax<" + wgs + ">", std::size_t(P * wg),
                           std::size_t(wg), d, a.X, n, chunk, a.work)};
  }
  sycl::event e = submit_named(q, "quant.hpp", "gnnsparse::quant_scale<" + wgs + ">", std::size_t(wg),
                               std::size_t(wg), d, static_cast<const float *>(a.work), long(P),
                               int(qmax_for_bits(a.bits)), a.scale);
  if (n == 0) return e;
  if (caps.esimd)
    if (auto ee = esimd_quantize_pass(q, a, {e})) return *ee;
  const long row_bytes = a.bits == 8 ? long(a.C) : long((a.C + 1) / 2);
  const bool quads = n % 4 == 0 && (a.bits == 8 || a.C % 2 == 0);
  const std::size_t items = std::size_t(quads ? n / 4 : long(a.rows) * row_bytes);
  const int stochastic = a.rounding == Rounding::stochastic ? 1 : 0;
  return submit_named(q, "quant.hpp", "gnnsparse::quant_quantize<" + std::to_string(a.bits) + ">", items,
                      elementwise_wg(caps, items), {e}, a.X, long(a.rows), long(a.C), row_bytes, stochastic,
                      static_cast<unsigned long>(a.seed), static_cast<const float *>(a.scale),
                      static_cast<unsigned char *>(a.Q), quads ? 1 : 0);
}

sycl::event dequantize(sycl::queue &q, const DequantizeArgs &a, const QDeps &deps) {
  check_bits("dequantize", a.X.bits);
  const long n = long(a.rows * a.X.C);
  if (n == 0) return q.ext_oneapi_submit_barrier(deps);
  if (a.X.data == nullptr || a.X.scale == nullptr || a.Y == nullptr)
    throw std::invalid_argument("gnnsparse sycl dequantize: null pointer");
  const DeviceCaps &caps = caps_of(q);
  return submit_named(q, "quant.hpp", "gnnsparse::quant_dequantize<" + std::to_string(a.X.bits) + ">",
                      std::size_t(n), elementwise_wg(caps, std::size_t(n)), deps,
                      static_cast<const unsigned char *>(a.X.data), a.X.scale, long(a.rows), long(a.X.C),
                      long(a.X.row_bytes()), a.Y);
}

sycl::event qspmm(sycl::queue &q, const QSpmmArgs &a, const QDeps &deps) {
  check_bits("qspmm", a.X.bits);
  if (a.reduce != Reduce::sum && a.reduce != Reduce::mean && a.reduce != Reduce::max && a.reduce != Reduce::min)
    throw std::invalid_argument("gnnsparse sycl qspmm: reduction code " + std::to_string(int(a.reduce)) +
                                " is not implemented for quantized inputs");
  if (a.A.M < 0 || a.A.nnz < 0 || a.X.C < 0 || a.H <= 0 || a.X.C % a.H != 0)
    throw std::invalid_argument("gnnsparse sycl qspmm: bad sizes");
  if (a.A.M == 0 || a.X.C == 0) return q.ext_oneapi_submit_barrier(deps);
  const DeviceCaps &caps = caps_of(q);
  const int sg = sg_of(caps);
  const long tile = long(sg) * 4;  // kQV columns per lane
  const long ntiles = std::max<long>(1, (long(a.X.C) + tile - 1) / tile);
  const std::size_t global = std::size_t(a.A.M * ntiles) * std::size_t(sg);
  const float *w = a.W != nullptr ? a.W : static_cast<const float *>(a.A.val);
  const std::string name = "gnnsparse::qspmm_sg<" + idx_name(a.A.itype) + ", " + std::to_string(sg) + ">";
  return submit_named(q, "quant_spmm.hpp", name, global, elementwise_wg(caps, global), deps, a.A.rowptr, a.A.col, w,
                      static_cast<const unsigned char *>(a.X.data), a.X.scale, a.Y,
                      has_arg(a.reduce) ? a.arg : nullptr, long(a.A.M), long(a.X.C), long(a.X.row_bytes()),
                      long(a.W != nullptr ? a.H : 1), long(a.X.C / a.H), a.X.bits, int(a.reduce),
                      a.identity_col ? 1 : 0, ntiles);
}

sycl::event qsddmm(sycl::queue &q, const QSddmmArgs &a, const QDeps &deps) {
  check_bits("qsddmm", a.X.bits);
  check_bits("qsddmm", a.Y.bits);
  if (a.A.M < 0 || a.A.nnz < 0 || a.H < 0 || a.F < 0) throw std::invalid_argument("gnnsparse sycl qsddmm: negative size");
  if (a.A.nnz == 0 || a.H == 0 || a.A.M == 0) return q.ext_oneapi_submit_barrier(deps);
  const DeviceCaps &caps = caps_of(q);
  const int sg = sg_of(caps);
  const std::size_t global = std::size_t(a.A.M * a.H) * std::size_t(sg);
  const std::string name = "gnnsparse::qsddmm_sg<" + idx_name(a.A.itype) + ", " + std::to_string(sg) + ">";
  const long F = a.op == SddmmOp::add ? 1 : long(a.F);
  return submit_named(q, "quant_sddmm.hpp", name, global, elementwise_wg(caps, global), deps, a.A.rowptr, a.A.col,
                      int(a.op), static_cast<const unsigned char *>(a.X.data), a.X.scale, a.X.bits,
                      static_cast<const unsigned char *>(a.Y.data), a.Y.scale, a.Y.bits, a.E, long(a.A.M), long(a.H), F,
                      long(a.X.row_bytes()), long(a.Y.row_bytes()));
}

sycl::event qfusedmm(sycl::queue &q, const QFusedArgs &a, const QDeps &deps) {
  check_bits("qfusedmm", a.X.bits);
  check_bits("qfusedmm", a.Y.bits);
  check_bits("qfusedmm", a.Z.bits);
  if (a.A.M < 0 || a.A.nnz < 0 || a.H < 0 || a.F < 0 || a.D < 0)
    throw std::invalid_argument("gnnsparse sycl qfusedmm: negative size");
  if (a.edge != EdgeFn::none && a.edge != EdgeFn::leaky_relu && a.edge != EdgeFn::exp && !row_softmax(a.edge))
    throw std::invalid_argument("gnnsparse sycl qfusedmm: edge function code " + std::to_string(int(a.edge)) +
                                " is not implemented for quantized inputs");
  if (a.A.M == 0 || a.H == 0) return q.ext_oneapi_submit_barrier(deps);
  const DeviceCaps &caps = caps_of(q);
  const int sg = sg_of(caps);
  const long tile = long(sg) * 4;
  const long ntiles = std::max<long>(1, (long(a.D) + tile - 1) / tile);
  const std::size_t global = std::size_t(a.A.M * a.H * ntiles) * std::size_t(sg);
  const std::string name = "gnnsparse::qfusedmm_sg<" + idx_name(a.A.itype) + ", " + std::to_string(sg) + ">";
  const long F = a.op == SddmmOp::add ? 1 : long(a.F);
  return submit_named(q, "quant_sddmm.hpp", name, global, elementwise_wg(caps, global), deps, a.A.rowptr, a.A.col,
                      static_cast<const float *>(a.A.val), int(a.op), int(a.edge), float(a.slope),
                      static_cast<const unsigned char *>(a.X.data), a.X.scale, a.X.bits,
                      static_cast<const unsigned char *>(a.Y.data), a.Y.scale, a.Y.bits,
                      static_cast<const unsigned char *>(a.Z.data), a.Z.scale, a.Z.bits, a.out, a.E, long(a.A.M),
                      long(a.H), F, long(a.D), long(a.X.row_bytes()), long(a.Y.row_bytes()), long(a.Z.row_bytes()),
                      ntiles);
}

}  // namespace gnnsparse::sycl_rt
