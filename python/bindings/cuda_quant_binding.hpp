// The quantized ops in gnnsparse._cuda: bind_quant.hpp's functions over gnnsparse/cuda_quant.hpp.
// cuda_module.cpp calls bind_quant_cuda(m).
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>

#include "bind_quant.hpp"
#include "gnnsparse/cuda_quant.hpp"

namespace gnnsparse::bindings {

struct CudaQuantBackend {
  using Exec = std::uintptr_t;  // the stream
  static cudaStream_t stream(Exec s) { return reinterpret_cast<cudaStream_t>(s); }
  static void quantize(Exec &s, const QuantizeArgs &a) {
    py::gil_scoped_release nogil;
    cuda::quantize(a, stream(s));
  }
  static void dequantize(Exec &s, const DequantizeArgs &a) {
    py::gil_scoped_release nogil;
    cuda::dequantize(a, stream(s));
  }
  static void qspmm(Exec &s, const QSpmmArgs &a) {
    py::gil_scoped_release nogil;
    cuda::qspmm(a, stream(s));
  }
  static std::int64_t qspmm_out_work(Exec &, const QSpmmArgs &a) { return cuda::qspmm_out_work(a); }
  static void requantize(Exec &s, const RequantizeArgs &a) {
    py::gil_scoped_release nogil;
    cuda::requantize(a, stream(s));
  }
  static void qsddmm(Exec &s, const QSddmmArgs &a) {
    py::gil_scoped_release nogil;
    cuda::qsddmm(a, stream(s));
  }
  static void qfusedmm(Exec &s, const QFusedArgs &a) {
    py::gil_scoped_release nogil;
    cuda::qfusedmm(a, stream(s));
  }
  static void qgemm_tn(Exec &s, const QGemmTnArgs &a) {
    py::gil_scoped_release nogil;
    cuda::qgemm_tn(a, stream(s));
  }
  static std::int64_t qgemm_tn_work(Exec &, std::int64_t K, std::int64_t M, std::int64_t N) {
    return cuda::qgemm_tn_work(K, M, N);
  }
};

inline void bind_quant_cuda(py::module_ &m) {
  bind_quant<CudaQuantBackend>(m);
  bind_qgemm<CudaQuantBackend>(m);
}

}  // namespace gnnsparse::bindings
