// pybind11 module gnnsparse._cuda: the op functions of bind_ops.hpp over gnnsparse/cuda.hpp, plus
// device queries. The execution handle is the CUDA stream as an int (0 = the legacy default
// stream); the GIL is released for each launch. The code tables and the CsrView type come from
// gnnsparse._core.
#include <pybind11/pybind11.h>

#include <cstdint>

#include "bind_ops.hpp"
#include "cuda_quant_binding.hpp"
#include "gnnsparse/cuda.hpp"

namespace py = pybind11;
namespace gs = gnnsparse;

namespace {

struct CudaBackend {
  using Exec = std::uintptr_t;
  static cudaStream_t stream(Exec s) { return reinterpret_cast<cudaStream_t>(s); }
  static void spmm(Exec& s, const gs::SpmmArgs& a) {
    py::gil_scoped_release nogil;
    gs::cuda::spmm(a, stream(s));
  }
  static void spmm_heads(Exec& s, const gs::SpmmHeadsArgs& a) {
    py::gil_scoped_release nogil;
    gs::cuda::spmm_heads(a, stream(s));
  }
  static void gatv2_scores(Exec& s, const gs::Gatv2Args& a) {
    py::gil_scoped_release nogil;
    gs::cuda::gatv2_scores(a, stream(s));
  }
  static void gatv2_grad(Exec& s, const gs::Gatv2Args& a) {
    py::gil_scoped_release nogil;
    gs::cuda::gatv2_grad(a, stream(s));
  }
  static void sddmm(Exec& s, const gs::SddmmArgs& a) {
    py::gil_scoped_release nogil;
    gs::cuda::sddmm(a, stream(s));
  }
  static void fusedmm(Exec& s, const gs::FusedArgs& a) {
    py::gil_scoped_release nogil;
    gs::cuda::fusedmm(a, stream(s));
  }
};

}  // namespace

PYBIND11_MODULE(_cuda, m) {
  m.doc() = "gnnsparse CUDA kernels over device addresses (the array layer is the gnnsparse package)";
  gs::bindings::bind_ops<CudaBackend>(m);
  gs::bindings::bind_quant_cuda(m);
  m.def("device_count", &gs::cuda::device_count, "Number of CUDA devices (0 without a driver or GPU).");
  m.def("device_name", &gs::cuda::device_name, py::arg("device"), "Name of CUDA device `device`.");
}
