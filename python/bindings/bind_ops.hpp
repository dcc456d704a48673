// The op functions every backend module (_cuda, _sycl) exports, in one shape:
//
//   spmm   (exec, A, dtype, reduce, X, Y, arg, C, precision, skip)
//   spmm_heads(exec, A, dtype, W, Z, out, H, D, precision)
//   gatv2_scores(exec, A, dtype, X, Y, att, S, H, C, slope)
//   gatv2_grad(exec, A, dtype, X, Y, att, dS, dX, dAtt, H, C, slope)
//   sddmm  (exec, A, dtype, op, X, Y, E, H, F, precision)
//   fusedmm(exec, A, dtype, op, edge, slope, X, Y, Z, out, E, H, F, D, precision)
//
// exec is the backend's execution handle (CUDA: the stream as an int; SYCL: (queue, [events to
// wait on])); A is a gnnsparse._core.CsrView; dtype / reduce / op / edge / precision are codes of the tables in
// gnnsparse/ops.hpp (validated by the Python layer, which is the only caller); arrays are device
// addresses as ints (0 = absent). Each returns what the backend's launcher returns (CUDA: None;
// SYCL: the dpctl.SyclEvent of the submission). No Python array object crosses this boundary.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>

#include "gnnsparse/args.hpp"

namespace gnnsparse::bindings {

namespace py = pybind11;
using addr = std::uintptr_t;

inline const void *cptr(addr p) { return reinterpret_cast<const void *>(p); }
inline void *mptr(addr p) { return reinterpret_cast<void *>(p); }

// Backend: `using Exec = ...;` and static spmm / spmm_heads / gatv2_scores / gatv2_grad / sddmm / fusedmm(Exec&, const XxxArgs&) that
// release the GIL around the launch.
template <class Backend>
void bind_ops(py::module_ &m) {
  using Exec = typename Backend::Exec;
  m.def(
      "spmm",
      [](Exec exec, const CsrView &A, int dtype, int reduce, addr X, addr Y, addr arg, std::int64_t C,
         int precision, addr skip) {
        const SpmmArgs a{A, DType(dtype), Reduce(reduce), cptr(X), mptr(Y),
                         static_cast<std::int64_t *>(mptr(arg)), C, Precision(precision),
                         static_cast<const bool *>(cptr(skip))};
        return Backend::spmm(exec, a);
      },
      py::arg("exec"), py::arg("A"), py::arg("dtype"), py::arg("reduce"), py::arg("X"), py::arg("Y"),
      py::arg("arg"), py::arg("C"), py::arg("precision") = 0, py::arg("skip") = 0);
  m.def(
      "spmm_heads",
      [](Exec exec, const CsrView &A, int dtype, addr W, addr Z, addr out, std::int64_t H, std::int64_t D,
         int precision) {
        const SpmmHeadsArgs a{A, DType(dtype), cptr(W), cptr(Z), mptr(out), H, D, Precision(precision)};
        return Backend::spmm_heads(exec, a);
      },
      py::arg("exec"), py::arg("A"), py::arg("dtype"), py::arg("W"), py::arg("Z"), py::arg("out"), py::arg("H"),
      py::arg("D"), py::arg("precision") = 0);
  m.def(
      "gatv2_scores",
      [](Exec exec, const CsrView &A, int dtype, addr X, addr Y, addr att, addr S, std::int64_t H, std::int64_t C,
         double slope) {
        Gatv2Args a;
        a.A = A, a.dtype = DType(dtype), a.X = cptr(X), a.Y = cptr(Y), a.att = cptr(att), a.slope = slope;
        a.S = mptr(S), a.H = H, a.C = C;
        return Backend::gatv2_scores(exec, a);
      },
      py::arg("exec"), py::arg("A"), py::arg("dtype"), py::arg("X"), py::arg("Y"), py::arg("att"), py::arg("S"),
      py::arg("H"), py::arg("C"), py::arg("slope"));
  m.def(
      "gatv2_grad",
      [](Exec exec, const CsrView &A, int dtype, addr X, addr Y, addr att, addr dS, addr dX, addr dAtt, std::int64_t H,
         std::int64_t C, double slope) {
        Gatv2Args a;
        a.A = A, a.dtype = DType(dtype), a.X = cptr(X), a.Y = cptr(Y), a.att = cptr(att), a.slope = slope;
        a.dS = cptr(dS), a.dX = mptr(dX), a.dAtt = mptr(dAtt), a.H = H, a.C = C;
        return Backend::gatv2_grad(exec, a);
      },
      py::arg("exec"), py::arg("A"), py::arg("dtype"), py::arg("X"), py::arg("Y"), py::arg("att"), py::arg("dS"),
      py::arg("dX"), py::arg("dAtt"), py::arg("H"), py::arg("C"), py::arg("slope"));
  m.def(
      "sddmm",
      [](Exec exec, const CsrView &A, int dtype, int op, addr X, addr Y, addr E, std::int64_t H, std::int64_t F,
         int precision) {
        const SddmmArgs a{A, DType(dtype), SddmmOp(op), cptr(X), cptr(Y), mptr(E), H, F, Precision(precision)};
        return Backend::sddmm(exec, a);
      },
      py::arg("exec"), py::arg("A"), py::arg("dtype"), py::arg("op"), py::arg("X"), py::arg("Y"), py::arg("E"),
      py::arg("H"), py::arg("F"), py::arg("precision") = 0);
  m.def(
      "fusedmm",
      [](Exec exec, const CsrView &A, int dtype, int op, int edge, double slope, addr X, addr Y, addr Z, addr out,
         addr E, std::int64_t H, std::int64_t F, std::int64_t D, int precision) {
        const FusedArgs a{A, DType(dtype), SddmmOp(op), EdgeFn(edge), slope, cptr(X), cptr(Y), cptr(Z),
                          mptr(out), mptr(E), H, F, D, Precision(precision)};
        return Backend::fusedmm(exec, a);
      },
      py::arg("exec"), py::arg("A"), py::arg("dtype"), py::arg("op"), py::arg("edge"), py::arg("slope"),
      py::arg("X"), py::arg("Y"), py::arg("Z"), py::arg("out"), py::arg("E"), py::arg("H"), py::arg("F"),
      py::arg("D"), py::arg("precision") = 0);
}

}  // namespace gnnsparse::bindings
