// _sycl: the SYCL backend's pybind11 module. Functions take a dpctl.SyclQueue (converted to
// sycl::queue by dpctl4pybind11), USM pointers as integers, sizes and type codes, and the events to
// wait on; they return the dpctl.SyclEvent of the submission. Array protocols live in Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sycl/sycl.hpp>

#include "dpctl4pybind11.hpp"
#include "ops.hpp"
#include "runtime.hpp"

namespace py = pybind11;
namespace rt = gnnsparse::sycl_rt;
using gnnsparse::DType;
using gnnsparse::IType;

namespace {

DType dtype_of(const std::string &s) {
  if (s == "float32") return DType::f32;
  if (s == "float64") return DType::f64;
  throw py::type_error("the SYCL backend supports float32 and float64 features, got " + s);
}
IType itype_of(const std::string &s) {
  if (s == "int32") return IType::i32;
  if (s == "int64") return IType::i64;
  throw py::type_error("CSR indices must be int32 or int64, got " + s);
}
template <typename E>
E enum_of(int v, int n, const char *what) {
  if (v < 0 || v >= n) throw py::value_error(std::string("bad ") + what + " code " + std::to_string(v));
  return E(v);
}
const void *cptr(std::uintptr_t p) { return reinterpret_cast<const void *>(p); }
void *mptr(std::uintptr_t p) { return reinterpret_cast<void *>(p); }

gnnsparse::CsrView csr(const std::string &itype, std::uintptr_t rowptr, std::uintptr_t col, std::uintptr_t val,
                        std::int64_t M, std::int64_t K, std::int64_t nnz) {
  return gnnsparse::CsrView{itype_of(itype), cptr(rowptr), cptr(col), cptr(val), M, K, nnz};
}

// Run a submission with the GIL released; SYCL errors become Python exceptions.
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

}  // namespace

PYBIND11_MODULE(_sycl, m) {
  m.doc() = "gnnsparse SYCL backend: run-time compiled kernels on dpctl queues";

  m.def(
      "spmm",
      [](sycl::queue &q, const std::string &itype, std::uintptr_t rowptr, std::uintptr_t col, std::uintptr_t val,
         std::int64_t M, std::int64_t K, std::int64_t nnz, const std::string &dtype, int reduce, std::uintptr_t X,
         std::uintptr_t Y, std::uintptr_t arg, std::int64_t C, const std::vector<sycl::event> &deps) {
        gnnsparse::SpmmArgs a{csr(itype, rowptr, col, val, M, K, nnz), dtype_of(dtype),
                       enum_of<gnnsparse::Reduce>(reduce, 4, "reduce"), cptr(X), mptr(Y), static_cast<std::int64_t *>(mptr(arg)), C};
        return guarded([&] { return rt::spmm(q, a, deps); });
      },
      py::arg("queue"), py::arg("itype"), py::arg("rowptr"), py::arg("col"), py::arg("val"), py::arg("M"),
      py::arg("K"), py::arg("nnz"), py::arg("dtype"), py::arg("reduce"), py::arg("X"), py::arg("Y"), py::arg("arg"),
      py::arg("C"), py::arg("depends") = std::vector<sycl::event>{});

  m.def(
      "sddmm",
      [](sycl::queue &q, const std::string &itype, std::uintptr_t rowptr, std::uintptr_t col, std::int64_t M,
         std::int64_t K, std::int64_t nnz, const std::string &dtype, int op, std::uintptr_t X, std::uintptr_t Y,
         std::uintptr_t E, std::int64_t H, std::int64_t F, const std::vector<sycl::event> &deps) {
        gnnsparse::SddmmArgs a{csr(itype, rowptr, col, 0, M, K, nnz), dtype_of(dtype),
                        enum_of<gnnsparse::SddmmOp>(op, 2, "sddmm op"), cptr(X), cptr(Y), mptr(E), H, F};
        return guarded([&] { return rt::sddmm(q, a, deps); });
      },
      py::arg("queue"), py::arg("itype"), py::arg("rowptr"), py::arg("col"), py::arg("M"), py::arg("K"),
      py::arg("nnz"), py::arg("dtype"), py::arg("op"), py::arg("X"), py::arg("Y"), py::arg("E"), py::arg("H"),
      py::arg("F"), py::arg("depends") = std::vector<sycl::event>{});

  m.def(
      "fusedmm",
      [](sycl::queue &q, const std::string &itype, std::uintptr_t rowptr, std::uintptr_t col, std::uintptr_t val,
         std::int64_t M, std::int64_t K, std::int64_t nnz, const std::string &dtype, int op, int edge, double slope,
         std::uintptr_t X, std::uintptr_t Y, std::uintptr_t Z, std::uintptr_t out, std::uintptr_t E, std::int64_t H,
         std::int64_t F, std::int64_t D, const std::vector<sycl::event> &deps) {
        gnnsparse::FusedArgs a{csr(itype, rowptr, col, val, M, K, nnz),
                        dtype_of(dtype),
                        enum_of<gnnsparse::SddmmOp>(op, 2, "sddmm op"),
                        enum_of<gnnsparse::EdgeFn>(edge, 4, "edge function"),
                        slope,
                        cptr(X),
                        cptr(Y),
                        cptr(Z),
                        mptr(out),
                        mptr(E),
                        H,
                        F,
                        D};
        return guarded([&] { return rt::fusedmm(q, a, deps); });
      },
      py::arg("queue"), py::arg("itype"), py::arg("rowptr"), py::arg("col"), py::arg("val"), py::arg("M"),
      py::arg("K"), py::arg("nnz"), py::arg("dtype"), py::arg("op"), py::arg("edge"), py::arg("slope"), py::arg("X"),
      py::arg("Y"), py::arg("Z"), py::arg("out"), py::arg("E"), py::arg("H"), py::arg("F"), py::arg("D"),
      py::arg("depends") = std::vector<sycl::event>{});

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
