// _sycl: the SYCL backend's pybind11 module. The op functions come from bind_ops.hpp (one shape for
// every backend): exec is (dpctl.SyclQueue, [dpctl.SyclEvent, ...]) -- the queue to submit on and
// the events to wait for, converted by dpctl4pybind11 -- and each returns the dpctl.SyclEvent of
// its submission. Codes are those of gnnsparse/ops.hpp, arrays are USM (or, on devices that read
// host memory, host) addresses. SYCL errors and kernel compile errors become RuntimeError carrying
// the message and the compiler log; unsupported dtypes and devices become ValueError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sycl/sycl.hpp>

#include <algorithm>
#include <stdexcept>
#include <unordered_set>
#include <utility>
#include <vector>

#include "bind_ops.hpp"
#include "dpctl4pybind11.hpp"
#include "kernel_store.hpp"
#include "ops.hpp"
#include "quant_policy.hpp"
#include "runtime.hpp"
#include "sycl_notes.hpp"
#include "sycl_quant_binding.hpp"

namespace py = pybind11;
namespace rt = gnnsparse::sycl_rt;

namespace {

// Run with the GIL released; SYCL and compile errors become RuntimeError with their text.
template <typename F>
auto guarded(F &&f) {
  try {
    py::gil_scoped_release nogil;
    return f();
  } catch (rt::CompileError &e) {
    throw std::runtime_error(e.what());
  } catch (sycl::exception &e) {
    throw std::runtime_error(std::string("SYCL error: ") + e.what());
  }
}

using gnnsparse::bindings::flush_notes;

template <typename F>
sycl::event submit_and_notify(F &&f) {
  sycl::event ev = guarded(std::forward<F>(f));
  flush_notes();
  return ev;
}

struct SyclBackend {
  using Exec = std::pair<sycl::queue, std::vector<sycl::event>>;
  static sycl::event spmm(Exec &x, const gnnsparse::SpmmArgs &a) {
    if (a.skip != nullptr) throw std::invalid_argument("gnnsparse sycl spmm: skip (a device flag) is CUDA-only");
    return submit_and_notify([&] { return rt::spmm(x.first, a, x.second); });
  }
  static sycl::event spmm_heads(Exec &x, const gnnsparse::SpmmHeadsArgs &a) {
    return submit_and_notify([&] { return rt::spmm_heads(x.first, a, x.second); });
  }
  static sycl::event gatv2_scores(Exec &x, const gnnsparse::Gatv2Args &a) {
    return submit_and_notify([&] { return rt::gatv2_scores(x.first, a, x.second); });
  }
  static sycl::event gatv2_grad(Exec &x, const gnnsparse::Gatv2Args &a) {
    return submit_and_notify([&] { return rt::gatv2_grad(x.first, a, x.second); });
  }
  static sycl::event sddmm(Exec &x, const gnnsparse::SddmmArgs &a) {
    return submit_and_notify([&] { return rt::sddmm(x.first, a, x.second); });
  }
  static sycl::event fusedmm(Exec &x, const gnnsparse::FusedArgs &a) {
    return submit_and_notify([&] { return rt::fusedmm(x.first, a, x.second); });
  }
};

}  // namespace

PYBIND11_MODULE(_sycl, m) {
  m.doc() = "gnnsparse SYCL backend: run-time compiled kernels on dpctl queues";
  py::module_::import("gnnsparse._core");  // CsrView
  gnnsparse::bindings::bind_ops<SyclBackend>(m);
  gnnsparse::bindings::bind_quant_sycl(m);
  rt::set_note_sink(gnnsparse::bindings::queue_note);

  m.def(
      "compile_only",
      [](sycl::queue &q, const std::string &entry, const std::vector<std::string> &names) {
        return guarded([&] { return rt::KernelCache::instance().compile_only(q, entry, names); });
      },
      py::arg("queue"), py::arg("entry"), py::arg("names"),
      "Front end + device compile of the embedded source `entry` for the registered kernel `names`, without "
      "linking or running (how ESIMD kernels are checked on devices that cannot run them). Returns the log; "
      "raises RuntimeError carrying the compiler log on failure.");
  m.def(
      "build_kernel",
      [](sycl::queue &q, const std::string &entry, const std::string &name) {
        guarded([&] { rt::KernelCache::instance().get(q, entry, name); });
      },
      py::arg("queue"), py::arg("entry"), py::arg("name"), "Build (and cache) one kernel instance by name.");
  m.def("kernel_cache_size", [] { return rt::KernelCache::instance().size(); },
        "Number of kernels built in this process (all contexts and devices).");
  m.def("kernel_sources", [] {
    std::vector<std::string> names;
    for (const auto &p : rt::kernel_sources()) names.push_back(p.first);
    return names;
  });
  m.def("kernel_loads", [] {
    py::list out;
    for (const auto &r : rt::load_records()) out.append(py::make_tuple(r.name, rt::origin_name(r.origin), r.ms));
    return out;
  }, "(instance name, where it came from, milliseconds) for every kernel this process loaded.");
  m.def(
      "native_binary_check",
      [](const std::string &arch, std::uint64_t key) {
        return guarded([&] { return rt::native_binary_check(arch, key); });
      },
      py::arg("arch"), py::arg("key"),
      "Load a shipped native binary (<kernel_dir>/<arch>.gnnbin) through the Level Zero loader with null "
      "handles (a stand-in loader, GNNSPARSE_ZE_LOADER, on machines without an Intel GPU). '' on success.");
  m.def("aot_info", [] {
    py::dict d;
    d["kernel_dir"] = rt::kernel_dir();
    d["cache_dir"] = rt::cache_dir();
    d["shipped_spirv"] = rt::shipped_spirv().size();
    d["source_hash"] = rt::source_hash();
    return d;
  }, "Where shipped kernels and the persistent kernel cache are, and how many instances ship as SPIR-V.");
  m.def(
      "launch_policy_outliers",
      [](int sg) {
        // the launch functions over a grid of shapes and arguments, against the list the build compiles
        std::unordered_set<std::uint64_t> listed;
        rt::for_each_portable_instance(sg, [&](rt::Instance in) { listed.insert(in.key()); });
        rt::DeviceCaps caps;
        caps.preferred_sg = std::size_t(sg);
        caps.max_wg = 1024;
        std::vector<std::string> out;
        auto check = [&](const rt::Launch &l) {
          if (!listed.count(l.inst.key())) out.push_back(rt::instance_name(l.inst));
        };
        static int dummy;
        for (gnnsparse::DType t : {gnnsparse::DType::f32, gnnsparse::DType::f64})
          for (gnnsparse::IType it : {gnnsparse::IType::i32, gnnsparse::IType::i64})
            for (bool w : {false, true})
              for (long width : {1L, 2L, 3L, 5L, 8L, 9L, 15L, 16L, 17L, 31L, 32L, 33L, 64L, 100L, 128L, 129L, 256L, 300L,
                                 1000L}) {
                gnnsparse::CsrView A{it, &dummy, &dummy, w ? &dummy : nullptr, 7, 7, 20};
                for (gnnsparse::Reduce r : rt::kReduces)
                  for (bool arg : {false, true}) {
                    gnnsparse::SpmmArgs a{A, t, r, &dummy, &dummy, arg ? (std::int64_t *)&dummy : nullptr,
                                          width};
                    check(rt::spmm_launch(caps, a));
                    if (t == gnnsparse::DType::f32 && (r == gnnsparse::Reduce::sum || r == gnnsparse::Reduce::mean) && !arg) {
                      check(rt::spmm_tiles_launch(caps, a));  // the dense-ish paths (sycl/tiles.cpp, sycl/panel.cpp)
                      check(rt::spmm_panel_launch(caps, a, false));
                      check(rt::spmm_panel_launch(caps, a, true));
                    }
                  }
                for (long h : {1L, 3L, 4L}) {  // width = D
                  gnnsparse::SpmmHeadsArgs a{A, t, &dummy, &dummy, &dummy, h, width};
                  check(rt::spmm_heads_launch(caps, a));
                  gnnsparse::Gatv2Args g;  // width = C
                  g.A = A, g.dtype = t, g.H = h, g.C = width;
                  check(rt::gatv2_launch(caps, g, false));
                  check(rt::gatv2_launch(caps, g, true));
                }
                for (gnnsparse::SddmmOp op : rt::kSddmmOps) {
                  for (long h : {1L, 2L}) {  // one head: the register-resident X instances of sddmm_dot_sg
                    gnnsparse::SddmmArgs a{A, t, op, &dummy, &dummy, &dummy, h, width};
                    check(rt::sddmm_launch(caps, a));
                    if (t == gnnsparse::DType::f32 && op == gnnsparse::SddmmOp::dot) check(rt::sddmm_tiles_launch(caps, a));
                  }
                  for (gnnsparse::EdgeFn e : rt::kEdgeFns) {
                    gnnsparse::FusedArgs f{A, t, op, e, 0.2, &dummy, &dummy,
                                           &dummy, &dummy, nullptr, 2, 3, width};
                    check(rt::fusedmm_launch(caps, f));
                  }
                }
              }
        return out;
      },
      py::arg("sg"), "Instance names the launch policy picks that the ahead-of-time list lacks (should be none).");
  m.def(
      "quant_launch_policy_outliers",
      [](int sg) {
        // the quantized launch functions (sycl/quant_policy.hpp) over a grid of devices, shapes and
        // arguments, against the lists the build compiles (portable and ESIMD quantizer)
        std::unordered_set<std::uint64_t> listed;
        auto add = [&](rt::Instance in) { listed.insert(in.key()); };
        rt::for_each_quant_instance(sg, add);
        rt::for_each_esimd_quant_instance(add);
        std::vector<std::string> out;
        auto check = [&](rt::Instance in) {
          if (!listed.count(in.key())) out.push_back(rt::instance_name(in));
        };
        static int dummy;
        for (bool cpu : {false, true})
          for (std::size_t max_wg : {std::size_t(256), std::size_t(1024), std::size_t(8192)})
            for (std::size_t cus : {std::size_t(1), std::size_t(2), std::size_t(56)}) {
              rt::DeviceCaps caps;
              caps.cpu = cpu;
              caps.max_wg = max_wg;
              caps.compute_units = cus;
              caps.preferred_sg = std::size_t(sg);
              for (int bits : {4, 8})
                for (long rows : {0L, 1L, 3L, 7L, 100L, 2708L, 100000L})
                  for (long C : {0L, 1L, 2L, 3L, 5L, 16L, 33L, 64L, 100L, 129L, 1000L}) {
                    for (gnnsparse::Rounding r : {gnnsparse::Rounding::nearest, gnnsparse::Rounding::stochastic}) {
                      gnnsparse::QuantizeArgs a;
                      a.rows = rows;
                      a.C = C;
                      a.bits = bits;
                      a.rounding = r;
                      const rt::QuantizePlan p = rt::quantize_plan(caps, a);
                      if (p.P > 0) check(p.absmax.inst);
                      check(p.scale.inst);
                      if (p.n > 0) check(p.quantize.inst);
                      check(rt::esimd_quant_absmax_instance());  // sycl/esimd_quant.cpp
                      check(rt::esimd_quantize_instance(bits, r));
                      gnnsparse::RequantizeArgs ra;  // the int8 GEMM's delayed-scale scale pass
                      ra.rows = rows;
                      ra.C = ra.ld = C;
                      ra.out.bits = bits;
                      ra.out.rounding = r;
                      const rt::RequantizePlan rp = rt::requantize_plan(caps, ra);
                      if (rp.P > 0) check(rp.pass.inst);
                      check(rp.scale.inst);
                      rt::DeviceCaps ecaps = caps;  // the same call on an Intel GPU
                      ecaps.esimd = true;
                      if (const auto ep = rt::esimd_requantize_plan(ecaps, ra)) check(ep->inst);
                    }
                    for (long N : {1L, 3L, 16L, 17L, 33L, 128L, 130L}) {  // the int8 TN GEMM (K = rows, M = C)
                      const rt::QGemmPlan gp = rt::qgemm_tn_plan(caps, rows, C, N);
                      if (gp.nseg > 0) check(gp.partial.inst);
                      check(gp.combine.inst);
                    }
                    if (rows == 0 || C == 0) continue;
                    gnnsparse::QView X{&dummy, reinterpret_cast<const float *>(&dummy), bits, C};
                    check(rt::dequantize_launch(caps, gnnsparse::DequantizeArgs{X, rows, nullptr}).inst);
                    for (gnnsparse::IType it : {gnnsparse::IType::i32, gnnsparse::IType::i64})
                      for (long H : {1L, 2L, 4L}) {
                        gnnsparse::CsrView A{it, &dummy, &dummy, nullptr, rows, rows, 3 * rows};
                        for (gnnsparse::Reduce red : rt::kQuantReduces)
                          for (int weights : {0, 1, 2}) {  // none, A's values, per-head W
                            gnnsparse::QSpmmArgs q;
                            q.A = A;
                            q.A.val = weights == 1 ? &dummy : nullptr;
                            q.W = weights == 2 ? reinterpret_cast<const float *>(&dummy) : nullptr;
                            q.X = X;
                            q.reduce = red;
                            q.H = H;
                            check(rt::qspmm_launch(caps, q).inst);
                            rt::DeviceCaps ecaps = caps;  // the same call on an Intel GPU
                            ecaps.esimd = true;
                            if (const auto el = rt::esimd_qspmm_launch(ecaps, q)) check(el->inst);
                          }
                        for (gnnsparse::SddmmOp op : rt::kSddmmOps) {
                          gnnsparse::QSddmmArgs q;
                          q.A = A;
                          q.op = op;
                          q.X = q.Y = X;
                          q.H = H;
                          q.F = C;
                          check(rt::qsddmm_launch(caps, q).inst);
                          for (gnnsparse::EdgeFn e : rt::kEdgeFns) {
                            gnnsparse::QFusedArgs f;
                            f.A = A;
                            f.op = op;
                            f.edge = e;
                            f.X = f.Y = f.Z = X;
                            f.H = H;
                            f.F = f.D = C;
                            check(rt::qfusedmm_launch(caps, f).inst);
                          }
                        }
                      }
                  }
            }
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
        return out;
      },
      py::arg("sg"),
      "Instance names the quantized launch policy picks that the ahead-of-time lists lack (should be none; "
      "devices with max_work_group_size < 256 are outside the lists).");
  m.def("device_caps", [](sycl::queue &q) {
    const rt::DeviceCaps c = rt::device_caps(q.get_device());
    py::dict d;
    d["esimd"] = c.esimd;
    d["fp64"] = c.fp64;
    d["cpu"] = c.cpu;
    d["max_work_group_size"] = c.max_wg;
    d["compute_units"] = c.compute_units;
    d["sub_group_sizes"] = c.sg_sizes;
    d["preferred_sub_group_size"] = c.preferred_sg;
    d["usm_system_allocations"] = q.get_device().has(sycl::aspect::usm_system_allocations);
    d["name"] = q.get_device().get_info<sycl::info::device::name>();
    return d;
  });
}
