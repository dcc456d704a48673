// _sycl: the SYCL backend's pybind11 module. The op functions have the shape every backend shares
// (python/bindings/bind_ops.hpp) with exec = (dpctl.SyclQueue, [dpctl.SyclEvent, ...]) and return
// the dpctl.SyclEvent of the submission. Array protocols live in Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sycl/sycl.hpp>

#include "bind_ops.hpp"
#include "dpctl4pybind11.hpp"
#include "ops.hpp"
#include "runtime.hpp"

namespace py = pybind11;
namespace rt = gnnsparse::sycl_rt;

namespace {

// SYCL errors become Python exceptions (RuntimeError carrying the message / compiler log).
template <typename F>
sycl::event guarded(F &&f) {
  try {
    py::gil_scoped_release nogil;
    return f();
  } catch (rt::CompileError &e) {
    throw std::runtime_error(e.what());
  } catch (sycl::exception &e) {
    throw std::runtime_error(std::string("SYCL error: ") + e.what());
  }
}

// The op functions of python/bindings/bind_ops.hpp: exec = (queue, [events to wait on]).
struct SyclBackend {
  using Exec = std::pair<sycl::queue, std::vector<sycl::event>>;
  static sycl::event spmm(Exec &e, const gnnsparse::SpmmArgs &a) {
    return guarded([&] { return rt::spmm(e.first, a, e.second); });
  }
  static sycl::event sddmm(Exec &e, const gnnsparse::SddmmArgs &a) {
    return guarded([&] { return rt::sddmm(e.first, a, e.second); });
  }
  static sycl::event fusedmm(Exec &e, const gnnsparse::FusedArgs &a) {
    return guarded([&] { return rt::fusedmm(e.first, a, e.second); });
  }
};

}  // namespace

PYBIND11_MODULE(_sycl, m) {
  m.doc() = "gnnsparse SYCL backend: run-time compiled kernels on dpctl queues";
  gnnsparse::bindings::bind_ops<SyclBackend>(m);

  m.def(
      "compile_only",
      [](sycl::queue &q, const std::string &entry, const std::vector<std::string> &names) {
        try {
          py::gil_scoped_release nogil;
          return rt::KernelCache::instance().compile_only(q, entry, names);
        } catch (rt::CompileError &e) {
          throw std::runtime_error(e.what());
        }
      },
      py::arg("queue"), py::arg("entry"), py::arg("names"),
      "Front end + device compile of the embedded source `entry` for the registered kernel `names`, without "
      "linking or running (how ESIMD kernels are checked on devices that cannot run them). Returns the log; "
      "raises RuntimeError carrying the compiler log on failure.");
  m.def(
      "build_kernel",
      [](sycl::queue &q, const std::string &entry, const std::string &name) {
        try {
          py::gil_scoped_release nogil;
          rt::KernelCache::instance().get(q, entry, name);
        } catch (rt::CompileError &e) {
          throw std::runtime_error(e.what());
        }
      },
      py::arg("queue"), py::arg("entry"), py::arg("name"), "Build (and cache) one kernel instance.");
  m.def("kernel_cache_size", [] { return rt::KernelCache::instance().size(); });
  m.def("kernel_sources", [] {
    std::vector<std::string> names;
    for (const auto &p : rt::kernel_sources()) names.push_back(p.first);
    return names;
  });
  m.def("device_caps", [](sycl::queue &q) {
    rt::DeviceCaps c = rt::device_caps(q.get_device());
    py::dict d;
    d["esimd"] = c.esimd;
    d["fp64"] = c.fp64;
    d["max_work_group_size"] = c.max_wg;
    d["sub_group_sizes"] = c.sg_sizes;
    d["preferred_sub_group_size"] = c.preferred_sg;
    d["usm_system_allocations"] = q.get_device().has(sycl::aspect::usm_system_allocations);
    d["name"] = q.get_device().get_info<sycl::info::device::name>();
    return d;
  });
}
