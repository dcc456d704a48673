// The quantized ops in gnnsparse._sycl: bind_quant.hpp's functions over sycl/quant_ops.hpp. exec
// is (dpctl.SyclQueue, [dpctl.SyclEvent, ...]); each returns the dpctl.SyclEvent of its last
// submission. Compile errors and SYCL errors become RuntimeError with their text, and the kernel
// loader's notes are handed to Python after the call, as in sycl_module.cpp, which calls
// bind_quant_sycl(m).
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sycl/sycl.hpp>

#include <string>
#include <utility>
#include <vector>

#include "bind_quant.hpp"
#include "dpctl4pybind11.hpp"
#include "quant_ops.hpp"
#include "runtime.hpp"
#include "sycl_notes.hpp"

namespace gnnsparse::bindings {

struct SyclQuantBackend {
  using Exec = std::pair<sycl::queue, std::vector<sycl::event>>;
  template <typename F>
  static sycl::event run(F &&f) {
    sycl::event ev = [&] {
      try {
        py::gil_scoped_release nogil;
        return f();
      } catch (sycl_rt::CompileError &e) {
        throw std::runtime_error(e.what());
      } catch (sycl::exception &e) {
        throw std::runtime_error(std::string("SYCL error: ") + e.what());
      }
    }();
    flush_notes();
    return ev;
  }
  static sycl::event quantize(Exec &x, const QuantizeArgs &a) {
    return run([&] { return sycl_rt::quantize(x.first, a, x.second); });
  }
  static sycl::event dequantize(Exec &x, const DequantizeArgs &a) {
    return run([&] { return sycl_rt::dequantize(x.first, a, x.second); });
  }
  static sycl::event qspmm(Exec &x, const QSpmmArgs &a) {
    return run([&] { return sycl_rt::qspmm(x.first, a, x.second); });
  }
  static std::int64_t qspmm_out_work(Exec &x, const QSpmmArgs &a) { return sycl_rt::qspmm_out_work(x.first, a); }
  static sycl::event requantize(Exec &x, const RequantizeArgs &a) {
    return run([&] { return sycl_rt::requantize(x.first, a, x.second); });
  }
  static sycl::event qsddmm(Exec &x, const QSddmmArgs &a) {
    return run([&] { return sycl_rt::qsddmm(x.first, a, x.second); });
  }
  static sycl::event qfusedmm(Exec &x, const QFusedArgs &a) {
    return run([&] { return sycl_rt::qfusedmm(x.first, a, x.second); });
  }
  static sycl::event qgemm_tn(Exec &x, const QGemmTnArgs &a) {
    return run([&] { return sycl_rt::qgemm_tn(x.first, a, x.second); });
  }
  static std::int64_t qgemm_tn_work(Exec &x, std::int64_t K, std::int64_t M, std::int64_t N) {
    return sycl_rt::qgemm_tn_work(x.first, K, M, N);
  }
};

inline void bind_quant_sycl(py::module_ &m) {
  bind_quant<SyclQuantBackend>(m);
  bind_qgemm<SyclQuantBackend>(m);
}

}  // namespace gnnsparse::bindings
