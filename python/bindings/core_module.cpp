// _core: what every backend module shares, built whatever backends are on.
//   - the code tables of gnnsparse/ops.hpp (and quant.hpp's rounding) as dicts (name -> code), so Python spells no code itself;
//   - CsrView, the device-side description of a CSR that the backend modules' op functions take
//     (built once per graph, device and value dtype by gnnsparse.CSR and kept).
#include <pybind11/pybind11.h>

#include <cstdint>

#include "gnnsparse/args.hpp"
#include "gnnsparse/quant.hpp"

namespace py = pybind11;
namespace gs = gnnsparse;

PYBIND11_MODULE(_core, m) {
  m.doc() = "gnnsparse code tables (include/gnnsparse/ops.hpp) and the CsrView type the backends take";

#define GS_ROW_(name, code, ...) d[#name] = code;
#define GS_TABLE_(key, TABLE) \
  {                            \
    py::dict d;                \
    TABLE(GS_ROW_)             \
    m.attr(key) = d;           \
  }
  GS_TABLE_("REDUCE", GNNSPARSE_REDUCE_TABLE)
  GS_TABLE_("SDDMM_OP", GNNSPARSE_SDDMM_OP_TABLE)
  GS_TABLE_("EDGE_FN", GNNSPARSE_EDGE_FN_TABLE)
  GS_TABLE_("PRECISION", GNNSPARSE_PRECISION_TABLE)
  GS_TABLE_("ROUNDING", GNNSPARSE_ROUNDING_TABLE)  // gnnsparse/quant.hpp
#undef GS_ROW_
  // dtypes by the name NumPy and torch give them ("float32" -> code, bytes)
#define GS_ROW_(name, code, np_name, bytes) d[#np_name] = py::make_tuple(code, bytes);
  GS_TABLE_("DTYPE", GNNSPARSE_DTYPE_TABLE)
  GS_TABLE_("ITYPE", GNNSPARSE_ITYPE_TABLE)
#undef GS_ROW_
#undef GS_TABLE_

  // The address of a buffer-protocol object's memory (NumPy arrays): a fraction of the cost of
  // ndarray.ctypes.data on the per-call path.
  m.def(
      "address",
      [](py::handle obj) {
        Py_buffer view;
        if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_SIMPLE) != 0) throw py::error_already_set();
        const auto p = reinterpret_cast<std::uintptr_t>(view.buf);
        PyBuffer_Release(&view);
        return p;
      },
      py::arg("array"), "Address of a C-contiguous buffer-protocol object's memory.");

  py::class_<gs::CsrView>(m, "CsrView", py::dynamic_attr(),
                          "A CSR matrix on one device as raw addresses (what the backend modules take).")
      .def(py::init([](int itype, std::uintptr_t rowptr, std::uintptr_t col, std::uintptr_t val, std::int64_t M,
                       std::int64_t K, std::int64_t nnz, std::int64_t max_degree) {
             return gs::CsrView{gs::IType(itype), reinterpret_cast<const void *>(rowptr),
                                reinterpret_cast<const void *>(col), reinterpret_cast<const void *>(val),
                                M, K, nnz, max_degree};
           }),
           py::arg("itype"), py::arg("rowptr"), py::arg("col"), py::arg("val"), py::arg("M"), py::arg("K"),
           py::arg("nnz"), py::arg("max_degree") = -1)
      .def_property_readonly("itype", [](const gs::CsrView &v) { return int(v.itype); })
      .def_property_readonly("rowptr", [](const gs::CsrView &v) { return reinterpret_cast<std::uintptr_t>(v.rowptr); })
      .def_property_readonly("col", [](const gs::CsrView &v) { return reinterpret_cast<std::uintptr_t>(v.col); })
      .def_property_readonly("val", [](const gs::CsrView &v) { return reinterpret_cast<std::uintptr_t>(v.val); })
      .def_readonly("M", &gs::CsrView::M)
      .def_readonly("K", &gs::CsrView::K)
      .def_readonly("nnz", &gs::CsrView::nnz)
      .def_readonly("max_degree", &gs::CsrView::max_degree)
      .def_readwrite("sorted_cols", &gs::CsrView::sorted_cols,
                     "1: every row's columns are non-decreasing, 0: not, -1: unknown (set by gnnsparse.CSR)")
      .def("__repr__", [](const gs::CsrView &v) {
        return "CsrView(M=" + std::to_string(v.M) + ", K=" + std::to_string(v.K) + ", nnz=" + std::to_string(v.nnz) +
               ", itype=" + std::to_string(int(v.itype)) + ", max_degree=" + std::to_string(v.max_degree) +
               ", sorted_cols=" + std::to_string(v.sorted_cols) + ")";
      });
}
