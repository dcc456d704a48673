// Host-only checks of the CUDA backend's plumbing (no GPU needed): every row of every code table
// dispatches to its own type or value and unknown codes throw std::invalid_argument naming the
// axis; the entry points reject bad codes, sizes and pointers before touching the device; the
// hub-pass sizing keeps its invariants; spmm_heads' vectors never straddle two heads; gatv2's
// groups cover a head's channels. Prints
// "N passed, M failed" and exits non-zero on failure.
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "dispatch.cuh"
#include "policy.cuh"
#include "gnnsparse/cuda.hpp"

namespace gs = gnnsparse;
namespace cd = gnnsparse::cuda_detail;

static int g_passed = 0, g_failed = 0;

static void check(bool ok, const std::string& what) {
  if (ok) {
    ++g_passed;
  } else {
    ++g_failed;
    std::printf("FAILED: %s\n", what.c_str());
  }
}

// f() throws std::invalid_argument whose message contains `needle`.
template <class F> static void check_invalid(F&& f, const std::string& needle, const std::string& what) {
  try {
    f();
    check(false, what + ": no exception");
  } catch (const std::invalid_argument& e) {
    check(std::string(e.what()).find(needle) != std::string::npos,
          what + ": message '" + e.what() + "' lacks '" + needle + "'");
  } catch (const std::exception& e) {
    check(false, what + ": wrong exception type: " + e.what());
  }
}

static void dispatch_tables() {
  // Each row reaches the case of its own code, with the type or value the row names.
#define GS_ROW_(name, code, np_name, bytes)                                                        \
  check(cd::dispatch_dtype(gs::DType(code), [](auto t) { return int(sizeof(typename decltype(t)::type)); }) == \
            gs::element_bytes(gs::DType::name),                                                    \
        "dtype " #np_name);                                                                        \
  check(cd::dispatch_dtype(gs::DType(code), [](auto t) {                                           \
          return std::is_same_v<typename decltype(t)::type, typename cd::FeatureType<gs::DType::name>::type>; \
        }),                                                                                        \
        "dtype " #np_name " type");
  GNNSPARSE_DTYPE_TABLE(GS_ROW_)
#undef GS_ROW_
#define GS_ROW_(name, code, np_name, bytes)                                                             \
  check(cd::dispatch_itype(gs::IType(code), [](auto t) { return int(sizeof(typename decltype(t)::type)); }) == \
            (bytes),                                                                                    \
        "itype " #np_name);
  GNNSPARSE_ITYPE_TABLE(GS_ROW_)
#undef GS_ROW_
#define GS_ROW_(Enum, fn, name, code) \
  check(cd::fn(gs::Enum(code), [](auto v) { return decltype(v)::value; }) == gs::Enum::name, #Enum " " #name);
#define GS_REDUCE_(name, code) GS_ROW_(Reduce, dispatch_reduce, name, code)
#define GS_OP_(name, code) GS_ROW_(SddmmOp, dispatch_sddmm_op, name, code)
#define GS_EDGE_(name, code) GS_ROW_(EdgeFn, dispatch_edge_fn, name, code)
  GNNSPARSE_REDUCE_TABLE(GS_REDUCE_)
  GNNSPARSE_SDDMM_OP_TABLE(GS_OP_)
  GNNSPARSE_EDGE_FN_TABLE(GS_EDGE_)
#undef GS_REDUCE_
#undef GS_OP_
#undef GS_EDGE_
#undef GS_ROW_
#define GS_PRECISION_(name, code)                                           \
  try {                                                                     \
    cd::check_precision(gs::Precision(code));                               \
    check(true, "precision " #name);                                        \
  } catch (const std::exception&) {                                         \
    check(false, "precision " #name " rejected");                           \
  }
  GNNSPARSE_PRECISION_TABLE(GS_PRECISION_)
#undef GS_PRECISION_

  auto none = [](auto) {};
  check_invalid([&] { cd::dispatch_dtype(gs::DType(99), none); }, "dtype code 99", "unknown dtype");
  check_invalid([&] { cd::dispatch_itype(gs::IType(-1), none); }, "index type code -1", "unknown itype");
  check_invalid([&] { cd::dispatch_reduce(gs::Reduce(7), none); }, "reduce code 7", "unknown reduce");
  check_invalid([&] { cd::dispatch_sddmm_op(gs::SddmmOp(2), none); }, "sddmm op code 2", "unknown op");
  check_invalid([&] { cd::dispatch_edge_fn(gs::EdgeFn(9), none); }, "edge function code 9", "unknown edge");
  check_invalid([] { cd::check_precision(gs::Precision(3)); }, "precision code 3", "unknown precision");
}

// The entry points validate before any CUDA call, so these run without a device.
static void entry_points() {
  const int32_t rowptr[3] = {0, 0, 0};  // host memory: only its address is looked at
  float buf[4] = {};
  gs::SpmmArgs s;
  s.A.rowptr = rowptr;
  s.A.M = 0;
  s.A.K = 2;
  s.X = buf;
  s.Y = buf;
  s.C = 4;
  gs::cuda::spmm(s, nullptr);  // M == 0: nothing to do
  check(true, "spmm M == 0");
  s.reduce = gs::Reduce(9);
  check_invalid([&] { gs::cuda::spmm(s, nullptr); }, "reduce code 9", "spmm checks reduce first");
  s.reduce = gs::Reduce::max;
  s.dtype = gs::DType(5);
  check_invalid([&] { gs::cuda::spmm(s, nullptr); }, "dtype code 5", "spmm dtype");
  s.dtype = gs::DType::bf16;
  s.A.itype = gs::IType(3);
  check_invalid([&] { gs::cuda::spmm(s, nullptr); }, "index type code 3", "spmm itype");
  s.A.itype = gs::IType::i64;
  s.precision = gs::Precision(8);
  check_invalid([&] { gs::cuda::spmm(s, nullptr); }, "precision code 8", "spmm precision");
  s.precision = gs::Precision::tf32;
  gs::cuda::spmm(s, nullptr);
  check(true, "spmm accepts every precision");
  s.C = -1;
  check_invalid([&] { gs::cuda::spmm(s, nullptr); }, "negative size", "spmm negative C");
  s.C = 4;
  s.A.M = 2;
  s.A.nnz = 3;
  s.A.col = nullptr;
  check_invalid([&] { gs::cuda::spmm(s, nullptr); }, "null pointer", "spmm null col");

  gs::SddmmArgs d;
  d.A.rowptr = rowptr;
  d.A.M = 2;
  d.A.nnz = 0;
  gs::cuda::sddmm(d, nullptr);  // nnz == 0
  check(true, "sddmm nnz == 0");
  d.op = gs::SddmmOp(5);
  check_invalid([&] { gs::cuda::sddmm(d, nullptr); }, "sddmm op code 5", "sddmm op");
  d.op = gs::SddmmOp::add;
  d.A.nnz = 3;
  check_invalid([&] { gs::cuda::sddmm(d, nullptr); }, "null pointer", "sddmm null E");
  d.H = -2;
  check_invalid([&] { gs::cuda::sddmm(d, nullptr); }, "negative size", "sddmm negative H");

  gs::FusedArgs f;
  f.A.rowptr = rowptr;
  f.A.M = 0;
  gs::cuda::fusedmm(f, nullptr);
  check(true, "fusedmm M == 0");
  f.edge = gs::EdgeFn(11);
  check_invalid([&] { gs::cuda::fusedmm(f, nullptr); }, "edge function code 11", "fusedmm edge");
  f.edge = gs::EdgeFn::softmax;
  f.A.M = 2;
  f.A.nnz = 3;
  f.D = 8;
  check_invalid([&] { gs::cuda::fusedmm(f, nullptr); }, "null pointer", "fusedmm null out");

  gs::SpmmHeadsArgs h;
  h.A.rowptr = rowptr;
  h.A.M = 0;
  h.H = 3;
  h.D = 5;
  gs::cuda::spmm_heads(h, nullptr);  // M == 0
  check(true, "spmm_heads M == 0");
  h.dtype = gs::DType(7);
  check_invalid([&] { gs::cuda::spmm_heads(h, nullptr); }, "dtype code 7", "spmm_heads dtype");
  h.dtype = gs::DType::f16;
  h.precision = gs::Precision(4);
  check_invalid([&] { gs::cuda::spmm_heads(h, nullptr); }, "precision code 4", "spmm_heads precision");
  h.precision = gs::Precision::fp32;
  h.A.M = 2;
  h.D = -1;
  check_invalid([&] { gs::cuda::spmm_heads(h, nullptr); }, "negative size", "spmm_heads negative D");
  h.D = 0;
  gs::cuda::spmm_heads(h, nullptr);  // D == 0: nothing to do
  check(true, "spmm_heads D == 0");
  h.D = 5;
  h.A.nnz = 3;
  h.out = buf;
  h.A.col = rowptr;
  h.Z = buf;
  check_invalid([&] { gs::cuda::spmm_heads(h, nullptr); }, "null pointer", "spmm_heads null W");
}

// gatv2_scores / gatv2_grad: codes, sizes and pointers are checked before any launch.
static void gatv2_entry_points() {
  const int32_t rowptr[3] = {0, 0, 0};
  float buf[4] = {};
  gs::Gatv2Args g;
  g.A.rowptr = rowptr;
  g.A.M = 0;
  g.H = 3;
  g.C = 5;
  gs::cuda::gatv2_scores(g, nullptr);  // M == 0
  gs::cuda::gatv2_grad(g, nullptr);
  check(true, "gatv2 M == 0");
  g.dtype = gs::DType(7);
  check_invalid([&] { gs::cuda::gatv2_scores(g, nullptr); }, "dtype code 7", "gatv2_scores dtype");
  g.dtype = gs::DType::f32;
  g.A.itype = gs::IType(5);
  check_invalid([&] { gs::cuda::gatv2_grad(g, nullptr); }, "index type code 5", "gatv2_grad itype");
  g.A.itype = gs::IType::i32;
  g.A.M = 2;
  g.C = -1;
  check_invalid([&] { gs::cuda::gatv2_scores(g, nullptr); }, "negative size", "gatv2_scores negative C");
  check_invalid([&] { gs::cuda::gatv2_grad(g, nullptr); }, "negative size", "gatv2_grad negative C");
  g.C = 0;
  gs::cuda::gatv2_grad(g, nullptr);  // C == 0: nothing to do
  check(true, "gatv2_grad C == 0");
  g.C = 5;
  gs::cuda::gatv2_scores(g, nullptr);  // no edges: no scores to write
  check(true, "gatv2_scores nnz == 0");
  g.X = buf;
  g.att = buf;
  check_invalid([&] { gs::cuda::gatv2_grad(g, nullptr); }, "null pointer", "gatv2_grad null dX");
  g.A.nnz = 3;
  g.A.col = rowptr;
  g.Y = buf;
  g.dX = buf;
  check_invalid([&] { gs::cuda::gatv2_grad(g, nullptr); }, "null pointer", "gatv2_grad null dS");
  check_invalid([&] { gs::cuda::gatv2_scores(g, nullptr); }, "null pointer", "gatv2_scores null S");
}

// plan_gatv2: a group of G lanes (a power of two, at most 32) covers C in one pass exactly when
// `one`, vectors only when C is a multiple of their width.
static void gatv2_plans() {
  for (int bytes : {2, 4, 8}) {
    const int V = 16 / bytes;
    for (int64_t C : {1, 2, 7, 8, 16, 32, 64, 65, 200, 256, 1000})
      for (bool aligned : {true, false}) {
        const cd::Gatv2Plan p = cd::plan_gatv2(1000, 8000, 3, C, 40, bytes, aligned, true, true);
        const bool pow2 = p.group > 0 && (p.group & (p.group - 1)) == 0 && p.group <= 32;
        const int64_t cover = int64_t(p.group) * p.vec;
        check(pow2 && p.vec == (aligned && C % V == 0 ? V : 1) && p.one == (cover >= C) &&
                  (p.one || p.group == 32) && p.blocks * (cd::Gatv2Tuning::kBlockThreads / p.group) >= 3000 &&
                  p.slot_width == 6 * C && p.hub.seg == 0,
              "plan_gatv2, bytes " + std::to_string(bytes) + " C " + std::to_string(C));
      }
  }
  // a hub row: segments cover nnz, a warp per (segment, head), the hub longer than a segment
  for (int64_t C : {1, 32, 200}) {
    const cd::Gatv2Plan p = cd::plan_gatv2(1000, 100000, 4, C, 20000, 4, true, true, false);
    check(p.hub.seg > 0 && p.hub.nsegments * p.hub.seg >= 100000 && p.hub.thr >= p.hub.seg &&
              p.segment_blocks * (cd::Gatv2Tuning::kBlockThreads / 32) >= p.hub.nsegments * 4 && p.slot_width == 4 * C,
          "plan_gatv2 hub, C " + std::to_string(C));
    const cd::Gatv2Plan q = cd::plan_gatv2(1000, 100000, 4, C, -1, 4, true, false, false);
    check(q.hub.seg > 0 && q.slot_width == 0, "plan_gatv2 scores hub, C " + std::to_string(C));
  }
}

// plan_spmm_heads: 16-byte vectors only when they cannot straddle two heads (D % V == 0).
static void heads_plans() {
  for (int bytes : {2, 4, 8}) {
    const int V = cd::spmm_vec(bytes);
    for (int64_t H : {1, 3, 4, 8})
      for (int64_t D : {1, 2, 7, 8, 16, 32, 64, 65}) {
        const cd::SpmmPlan p = cd::plan_spmm_heads(1000, 8000, H, D, 40, bytes, true);
        const cd::SpmmPlan q = cd::plan_spmm_heads(1000, 8000, H, D, 40, bytes, false);
        check(p.vec == (D % V == 0 ? V : 1) && q.vec == 1,
              "plan_spmm_heads vec, bytes " + std::to_string(bytes) + " H " + std::to_string(H) + " D " +
                  std::to_string(D));
      }
  }
}

// plan_spmm's scalar path: TL chosen from C (3, 4 or 5 columns per lane) keeps the lanes, edge
// parts and column blocks of TL = 5 (so the per-element order, and the bits, are those of TL = 5),
// covers C, and leaves at most one lane's worth of columns unreal outside tiny C.
static void scalar_plans() {
  for (int bytes : {2, 4, 8})
    for (int64_t avg : {1, 10, 50, 300})
      for (int64_t C = 1; C <= 700; ++C) {
        const cd::SpmmPlan p = cd::plan_spmm(1000, 1000 * avg, C, avg, bytes, false, false, true);
        const cd::SpmmPlan q = cd::plan_spmm(1000, 1000 * avg, C, avg, bytes, false, false, false);
        const int64_t tile = int64_t(p.col_lanes) * p.per_lane;
        const bool ok = p.vec == 1 && q.vec == 1 && q.per_lane == cd::SpmmTuning::kScalarColsPerLane &&
                        p.per_lane >= 3 && p.per_lane <= 5 && p.col_lanes == q.col_lanes &&
                        p.edge_parts == q.edge_parts && p.group == q.group && p.col_blocks == q.col_blocks &&
                        p.col_blocks * tile >= C && (C <= 3 || p.col_blocks > 1 || tile - C < p.col_lanes);
        check(ok, "plan_spmm scalar, bytes " + std::to_string(bytes) + " avg " + std::to_string(avg) + " C " +
                      std::to_string(C));
      }
  // the products-sized probe of docs/cuda_results.md (2026-12-02: SpMM at odd widths): 50 per row
  const cd::SpmmPlan p = cd::plan_spmm(2449029, 2449029 * int64_t(50), 47, 50, 4, true, false, true);
  check(p.vec == 1 && p.col_lanes == 16 && p.per_lane == 3 && p.edge_parts == 2 && p.col_blocks == 1,
        "plan_spmm C = 47");
}

// plan_segments: a hub is longer than a segment, the workspace is capped, the segments cover nnz.
static void segment_plans() {
  const int64_t Ms[] = {1, 7, 1000, 1 << 20};
  const int64_t nnzs[] = {0, 1, 255, 256, 257, 100000, 10000000, int64_t(3) << 31};
  const int64_t degs[] = {-1, 0, 300, 1 << 22};
  const int64_t slots[] = {1, 33, 2 * (128 + 2), 4096};
  int bad = 0, cases = 0;
  for (int64_t M : Ms)
    for (int64_t nnz : nnzs)
      for (int64_t deg : degs)
        for (int64_t sl : slots)
          for (int spmm = 0; spmm < 2; ++spmm) {
            const int64_t min_seg = spmm ? cd::hub_threshold(M, nnz) : cd::SegmentTuning::kMinSegment;
            const cd::SegmentPlan p = cd::plan_segments(M, nnz, deg, min_seg, sl);
            ++cases;
            const int64_t seg = p.seg;
            bool ok = p.thr >= cd::hub_threshold(M, nnz) && p.thr >= min_seg;
            ok = ok && (deg < 0 ? (seg > 0) == (nnz > p.thr) : (seg > 0) == (deg > p.thr));
            if (seg > 0) {
              ok = ok && p.thr >= seg && seg >= min_seg && (seg & (seg - 1)) == 0;
              ok = ok && p.nsegments * seg >= nnz && (p.nsegments - 1) * seg < nnz;
              ok = ok && (nnz / seg * 2 * sl <= cd::SegmentTuning::kWorkspaceElems || seg == min_seg);
              ok = ok && (nnz / (seg / 2) * 2 * sl > cd::SegmentTuning::kWorkspaceElems || seg == min_seg);
              ok = ok && p.row_limit() == p.thr;
              if (spmm) ok = ok && p.thr == seg;
            } else {
              ok = ok && p.nsegments == 0 && p.row_limit() == 0;
            }
            if (!ok) {
              ++bad;
              std::printf("  plan_segments(M=%lld, nnz=%lld, max_deg=%lld, min_seg=%lld, slot=%lld): seg %lld thr %lld n %lld\n",
                          (long long)M, (long long)nnz, (long long)deg, (long long)min_seg, (long long)sl,
                          (long long)p.seg, (long long)p.thr, (long long)p.nsegments);
            }
          }
  check(bad == 0, "plan_segments invariants (" + std::to_string(cases) + " cases)");
}

int main() {
  dispatch_tables();
  entry_points();
  heads_plans();
  scalar_plans();
  gatv2_entry_points();
  gatv2_plans();
  segment_plans();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
