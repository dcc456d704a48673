// _sycl: the SYCL backend's pybind11 module. The op functions come from bind_ops.hpp (one shape for
// every backend): exec is (dpctl.SyclQueue, [dpctl.SyclEvent, ...]) -- the queue to submit on and
// the events to wait for, converted by dpctl4pybind11 -- and each returns the dpctl.SyclEvent of
// its submission. Codes are those of gnnsparse/ops.hpp, arrays are USM (or, on devices that read
// host memory, host) addresses. SYCL errors and kernel compile errors become RuntimeError carrying
// the message and the compiler log; unsupported dtypes and devices become ValueError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sycl/sycl.hpp>

#include <utility>
#include <vector>

#include "bind_ops.hpp"
#include "dpctl4pybind11.hpp"
#include "ops.hpp"
#include "runtime.hpp"

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

struct SyclBackend {
  using Exec = std::pair<sycl::queue, std::vector<sycl::event>>;
  static sycl::event spmm(Exec &x, const gnnsparse::SpmmArgs &a) {
    return guarded([&] { return rt::spmm(x.first, a, x.second); });
  }
  static sycl::event sddmm(Exec &x, const gnnsparse::SddmmArgs &a) {
    return guarded([&] { return rt::sddmm(x.first, a, x.second); });
  }
  static sycl::event fusedmm(Exec &x, const gnnsparse::FusedArgs &a) {
    return guarded([&] { return rt::fusedmm(x.first, a, x.second); });
  }
};

}  // namespace

PYBIND11_MODULE(_sycl, m) {
  m.doc() = "gnnsparse SYCL backend: run-time compiled kernels on dpctl queues";
  py::module_::import("gnnsparse._core");  // CsrView
  gnnsparse::bindings::bind_ops<SyclBackend>(m);

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
