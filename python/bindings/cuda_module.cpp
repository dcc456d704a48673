// pybind11 module `_cuda`: thin wrappers over gnnsparse/cuda.hpp. Arrays travel as integer
// device addresses (0 = absent), sizes as ints, dtype / index type / op codes as the ints of the
// enums in gnnsparse/ops.hpp, and the CUDA stream as an int handle (0 = legacy default stream).
// No Python array objects cross this boundary; the Python layer (gnnsparse/_cuda.py) owns them.
#include <pybind11/pybind11.h>

#include <cstdint>

#include "gnnsparse/cuda.hpp"

namespace py = pybind11;
namespace gs = gnnsparse;

namespace {
template <class P> P* ptr(std::uintptr_t p) { return reinterpret_cast<P*>(p); }
cudaStream_t stream_of(std::uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

gs::DType dtype_of(int v) {
  if (v < 0 || v > 3) throw std::invalid_argument("gnnsparse._cuda: dtype code must be 0..3");
  return static_cast<gs::DType>(v);
}
gs::IType itype_of(int v) {
  if (v < 0 || v > 1) throw std::invalid_argument("gnnsparse._cuda: index type code must be 0..1");
  return static_cast<gs::IType>(v);
}
}  // namespace

PYBIND11_MODULE(_cuda, m) {
  m.doc() = "gnnsparse CUDA kernels (pointer-based; see gnnsparse/_cuda.py for the array layer)";
  m.attr("DTYPE") = py::dict(py::arg("float32") = 0, py::arg("float64") = 1,
                             py::arg("float16") = 2, py::arg("bfloat16") = 3);
  m.attr("ITYPE") = py::dict(py::arg("int32") = 0, py::arg("int64") = 1);
  m.attr("REDUCE") = py::dict(py::arg("sum") = 0, py::arg("mean") = 1, py::arg("max") = 2,
                              py::arg("min") = 3);
  m.attr("OP") = py::dict(py::arg("dot") = 0, py::arg("add") = 1);
  m.attr("EDGE") = py::dict(py::arg("none") = 0, py::arg("leaky_relu") = 1, py::arg("exp") = 2,
                            py::arg("softmax") = 3);

  m.def("device_count", &gs::cuda::device_count,
        "Number of CUDA devices (0 without a driver or GPU).");
  m.def("device_name", &gs::cuda::device_name, py::arg("device"));

  m.def(
      "spmm",
      [](int dtype, int itype, int reduce, std::uintptr_t rowptr, std::uintptr_t col,
         std::uintptr_t val, std::uintptr_t X, std::uintptr_t Y, std::uintptr_t arg, int64_t M,
         int64_t K, int64_t C, int64_t nnz, std::uintptr_t stream, int64_t max_degree) {
        if (reduce < 0 || reduce > 3) throw std::invalid_argument("gnnsparse._cuda: reduce code must be 0..3");
        py::gil_scoped_release nogil;
        gs::cuda::spmm(dtype_of(dtype), itype_of(itype), static_cast<gs::Reduce>(reduce),
                       ptr<const void>(rowptr), ptr<const void>(col), ptr<const void>(val),
                       ptr<const void>(X), ptr<void>(Y), ptr<int64_t>(arg), M, K, C, nnz,
                       stream_of(stream), max_degree);
      },
      py::arg("dtype"), py::arg("itype"), py::arg("reduce"), py::arg("rowptr"), py::arg("col"),
      py::arg("val"), py::arg("X"), py::arg("Y"), py::arg("arg"), py::arg("M"), py::arg("K"),
      py::arg("C"), py::arg("nnz"), py::arg("stream") = 0, py::arg("max_degree") = -1);

  m.def(
      "sddmm",
      [](int dtype, int itype, int op, std::uintptr_t rowptr, std::uintptr_t col, std::uintptr_t X,
         std::uintptr_t Y, std::uintptr_t E, int64_t M, int64_t K, int64_t nnz, int64_t H,
         int64_t F, std::uintptr_t stream) {
        if (op < 0 || op > 1) throw std::invalid_argument("gnnsparse._cuda: op code must be 0..1");
        py::gil_scoped_release nogil;
        gs::cuda::sddmm(dtype_of(dtype), itype_of(itype), static_cast<gs::SddmmOp>(op),
                        ptr<const void>(rowptr), ptr<const void>(col), ptr<const void>(X),
                        ptr<const void>(Y), ptr<void>(E), M, K, nnz, H, F, stream_of(stream));
      },
      py::arg("dtype"), py::arg("itype"), py::arg("op"), py::arg("rowptr"), py::arg("col"),
      py::arg("X"), py::arg("Y"), py::arg("E"), py::arg("M"), py::arg("K"), py::arg("nnz"),
      py::arg("H"), py::arg("F"), py::arg("stream") = 0);

  m.def(
      "fusedmm",
      [](int dtype, int itype, int op, int edge, double slope, std::uintptr_t rowptr,
         std::uintptr_t col, std::uintptr_t val, std::uintptr_t X, std::uintptr_t Y,
         std::uintptr_t Z, std::uintptr_t Out, std::uintptr_t E, int64_t M, int64_t K,
         int64_t nnz, int64_t H, int64_t F, int64_t D, std::uintptr_t stream,
         int64_t max_degree) {
        if (op < 0 || op > 1) throw std::invalid_argument("gnnsparse._cuda: op code must be 0..1");
        if (edge < 0 || edge > 3) throw std::invalid_argument("gnnsparse._cuda: edge code must be 0..3");
        py::gil_scoped_release nogil;
        gs::cuda::fusedmm(dtype_of(dtype), itype_of(itype), static_cast<gs::SddmmOp>(op),
                          static_cast<gs::EdgeFn>(edge), slope,
                          ptr<const void>(rowptr), ptr<const void>(col), ptr<const void>(val),
                          ptr<const void>(X), ptr<const void>(Y), ptr<const void>(Z),
                          ptr<void>(Out), ptr<void>(E), M, K, nnz, H, F, D, stream_of(stream),
                          max_degree);
      },
      py::arg("dtype"), py::arg("itype"), py::arg("op"), py::arg("edge"), py::arg("slope"),
      py::arg("rowptr"), py::arg("col"), py::arg("val"), py::arg("X"), py::arg("Y"),
      py::arg("Z"), py::arg("Out"), py::arg("E"), py::arg("M"), py::arg("K"), py::arg("nnz"),
      py::arg("H"), py::arg("F"), py::arg("D"), py::arg("stream") = 0,
      py::arg("max_degree") = -1);
}
