// Launcher of the portable int8 TN GEMM C = scale * A^T B (host code, g++ without -fsycl):
// contract gnnsparse/qgemm.hpp, kernels sycl/kernels/qgemm.hpp, plan sycl/quant_policy.hpp
// (qgemm_tn_plan). Two submissions, no host round trip: the segment sums, then the combine.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "launch.hpp"
#include "quant_ops.hpp"
#include "quant_policy.hpp"

namespace gnnsparse::sycl_rt {
namespace {

// GNNSPARSE_SYCL_QGEMM_TILE=TMxVN (a tuning knob for measurements; unset or empty: the plan's).
// Instances outside the shipped list compile from source at first use.
bool tile_override(int sg, int &tm, int &vn) {
  const char *v = std::getenv("GNNSPARSE_SYCL_QGEMM_TILE");
  if (!v || !*v) return false;
  char *stop = nullptr;
  const long a = std::strtol(v, &stop, 10);
  long b = 0;
  if (*stop == 'x') b = std::strtol(stop + 1, &stop, 10);
  if (*stop != '\0' || a < 1 || a > sg || b < 1 || b > 8)
    throw std::invalid_argument(std::string("GNNSPARSE_SYCL_QGEMM_TILE must be TMxVN with 1 <= TM <= ") +
                                std::to_string(sg) + " and 1 <= VN <= 8, got '" + v + "'");
  tm = int(a);
  vn = int(b);
  return true;
}

}  // namespace

long qgemm_tn_work(sycl::queue &q, long K, long M, long N) {
  if (K < 0 || M < 0 || N < 0) throw std::invalid_argument("gnnsparse sycl qgemm_tn: negative size");
  const QGemmPlan p = qgemm_tn_plan(caps_of(q), K, M, N);
  return p.nseg * M * N;
}

sycl::event qgemm_tn(sycl::queue &q, const QGemmTnArgs &a, const QDeps &deps) {
  const std::string where = "gnnsparse sycl qgemm_tn: ";
  if (a.K < 0 || a.M < 0 || a.N < 0) throw std::invalid_argument(where + "negative size");
  if (a.lda < a.M || a.ldb < a.N)
    throw std::invalid_argument(where + "row strides lda = " + std::to_string(a.lda) + ", ldb = " +
                                std::to_string(a.ldb) + " are shorter than the rows (M = " + std::to_string(a.M) +
                                ", N = " + std::to_string(a.N) + ")");
  if (a.M == 0 || a.N == 0) return q.ext_oneapi_submit_barrier(deps);
  const DeviceCaps &caps = caps_of(q);
  QGemmPlan p = qgemm_tn_plan(caps, a.K, a.M, a.N);
  {
    int tm = p.tm, vn = p.vn;
    if (tile_override(p.sg, tm, vn)) {  // the plan's segments, another tile
      p.tm = tm;
      p.vn = vn;
      p.tiles_m = (a.M + tm - 1) / tm;
      p.tiles_n = (a.N + long(p.sg) * vn - 1) / (long(p.sg) * vn);
      p.partial.inst = Instance::of(Kernel::qgemm_tn_partial, p.sg, tm, vn);
      const long per_wg = long(p.partial.local) / p.sg;
      p.partial.global = std::size_t((p.nseg * p.tiles() + per_wg - 1) / per_wg) * p.partial.local;
    }
  }
  const long need = p.nseg * a.M * a.N;
  if (a.scale == nullptr || a.C == nullptr || (a.K > 0 && (a.A == nullptr || a.B == nullptr)) ||
      (need > 0 && a.work == nullptr))
    throw std::invalid_argument(where + "null pointer");
  if (a.work_size < need)
    throw std::invalid_argument(where + "work holds " + std::to_string(a.work_size) + " int32, the launch needs " +
                                std::to_string(need));
  Deps d = deps;
  if (p.nseg > 0)
    d = {submit(q, p.partial, deps, static_cast<const signed char *>(a.A), long(a.lda),
                static_cast<const signed char *>(a.B), long(a.ldb), long(a.K), long(a.M), long(a.N), long(p.seg),
                long(p.nseg), long(p.tiles_n), static_cast<int *>(a.work))};
  return submit(q, p.combine, d, static_cast<const int *>(a.work), long(p.nseg), long(a.M * a.N), a.scale, a.C);
}

}  // namespace gnnsparse::sycl_rt
