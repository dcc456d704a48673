// The quantized ops in gnnsparse._cuda: bind_quant.hpp's functions over gnnsparse/cuda_quant.hpp,
// and (CUDA only, bound here) the pieces of GAT's edge softmax that the quantized GAT backward
// uses (gnnsparse/gat_softmax.hpp; Python: gnnsparse._gat_softmax):
//
//   gat_softmax_stats    (stream, A, long_rows, n_long, fd, fs, H, slope, m, inv, ld_m, ld_inv)
//   gat_softmax_weights_t(stream, AT, fd, fs, m, inv, ld_m, ld_inv, H, slope, aT, ld_fd=-1)
//                        (inv = 0: m holds the rows' log-sum-exp, the LSE form)
//   gat_softmax_grad     (stream, A, long_rows, n_long, fd, fs, m, inv, ld_m, ld_inv, H, slope, t)
//   GAT_LONG_ROW: entries from which a row is long (must be in long_rows)
//   (ld_m / ld_inv: row strides of m / inv in floats)
// and ReLU / ELU + dropout with the mask as bits (gnnsparse/act_dropout.hpp; Python:
// gnnsparse.quant.autograd relu_dropout / elu_dropout_, through CudaBackend.act_dropout):
//   act_dropout         (stream, act, n, h, out, bits, p, seed)     act: 0 relu, 1 elu
//   act_dropout_backward(stream, act, n, g, y, bits, p, dh)         y: the forward's output (elu)
//
// A is a gnnsparse._core.CsrView of A (AT: of its transpose, t_rowptr / t_col, K rows); arrays
// are device addresses as ints; validated by gnnsparse._gat_softmax, the only caller.
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
  static void gat_softmax_stats(Exec &s, const GatSoftmaxArgs &a) {
    py::gil_scoped_release nogil;
    cuda::gat_softmax_stats(a, stream(s));
  }
  static void gat_softmax_weights_t(Exec &s, const GatSoftmaxArgs &a) {
    py::gil_scoped_release nogil;
    cuda::gat_softmax_weights_t(a, stream(s));
  }
  static void gat_softmax_grad(Exec &s, const GatSoftmaxArgs &a) {
    py::gil_scoped_release nogil;
    cuda::gat_softmax_grad(a, stream(s));
  }
  static void act_dropout(Exec &s, const ActDropoutArgs &a) {
    py::gil_scoped_release nogil;
    cuda::act_dropout(a, stream(s));
  }
  static void act_dropout_backward(Exec &s, const ActDropoutArgs &a) {
    py::gil_scoped_release nogil;
    cuda::act_dropout_backward(a, stream(s));
  }
};

inline GatSoftmaxArgs gat_softmax_args(const CsrView &A, addr long_rows, std::int64_t n_long, addr fd, addr fs,
                                       addr m, addr inv, std::int64_t ld_m, std::int64_t ld_inv, std::int64_t H,
                                       double slope, addr E) {
  GatSoftmaxArgs a;
  a.ld_m = ld_m;
  a.ld_inv = ld_inv;
  a.A = A;
  a.long_rows = cptr(long_rows);
  a.n_long = n_long;
  a.H = H;
  a.slope = slope;
  a.fd = static_cast<const float *>(cptr(fd));
  a.fs = static_cast<const float *>(cptr(fs));
  a.m = static_cast<float *>(mptr(m));
  a.inv = static_cast<float *>(mptr(inv));
  a.E = static_cast<float *>(mptr(E));
  return a;
}

inline void bind_gat_softmax_cuda(py::module_ &m) {
  using B = CudaQuantBackend;
  using Exec = B::Exec;
  m.attr("GAT_LONG_ROW") = kGatLongRow;
  m.def(
      "gat_softmax_stats",
      [](Exec exec, const CsrView &A, addr long_rows, std::int64_t n_long, addr fd, addr fs, std::int64_t H,
         double slope, addr mo, addr inv, std::int64_t ld_m, std::int64_t ld_inv) {
        return B::gat_softmax_stats(
            exec, gat_softmax_args(A, long_rows, n_long, fd, fs, mo, inv, ld_m, ld_inv, H, slope, 0));
      },
      py::arg("exec"), py::arg("A"), py::arg("long_rows"), py::arg("n_long"), py::arg("fd"), py::arg("fs"),
      py::arg("H"), py::arg("slope"), py::arg("m"), py::arg("inv"), py::arg("ld_m"), py::arg("ld_inv"));
  m.def(
      "gat_softmax_weights_t",
      [](Exec exec, const CsrView &AT, addr fd, addr fs, addr mi, addr inv, std::int64_t ld_m, std::int64_t ld_inv,
         std::int64_t H, double slope, addr aT, std::int64_t ld_fd) {
        GatSoftmaxArgs a = gat_softmax_args(AT, 0, 0, fd, fs, mi, inv, ld_m, ld_inv, H, slope, aT);
        a.ld_fd = ld_fd;
        return B::gat_softmax_weights_t(exec, a);
      },
      py::arg("exec"), py::arg("AT"), py::arg("fd"), py::arg("fs"), py::arg("m"), py::arg("inv"), py::arg("ld_m"),
      py::arg("ld_inv"), py::arg("H"), py::arg("slope"), py::arg("aT"), py::arg("ld_fd") = -1);
  m.def(
      "gat_softmax_grad",
      [](Exec exec, const CsrView &A, addr long_rows, std::int64_t n_long, addr fd, addr fs, addr mi, addr inv,
         std::int64_t ld_m, std::int64_t ld_inv, std::int64_t H, double slope, addr t) {
        return B::gat_softmax_grad(
            exec, gat_softmax_args(A, long_rows, n_long, fd, fs, mi, inv, ld_m, ld_inv, H, slope, t));
      },
      py::arg("exec"), py::arg("A"), py::arg("long_rows"), py::arg("n_long"), py::arg("fd"), py::arg("fs"),
      py::arg("m"), py::arg("inv"), py::arg("ld_m"), py::arg("ld_inv"), py::arg("H"), py::arg("slope"), py::arg("t"));
}

inline ActDropoutArgs act_dropout_args(int act, std::int64_t n, double p) {
  if (act != 0 && act != 1) throw std::invalid_argument("act_dropout: act must be 0 (relu) or 1 (elu)");
  if (!(p >= 0.0 && p < 1.0)) throw std::invalid_argument("act_dropout: p must be in [0, 1)");
  ActDropoutArgs a;
  a.act = static_cast<Act>(act);
  a.n = n;
  a.threshold = dropout_threshold(p);
  a.scale = static_cast<float>(1.0 / (1.0 - p));
  return a;
}

inline void bind_act_dropout_cuda(py::module_ &m) {
  using B = CudaQuantBackend;
  using Exec = B::Exec;
  m.def(
      "act_dropout",
      [](Exec exec, int act, std::int64_t n, addr h, addr out, addr bits, double p, std::uint64_t seed) {
        ActDropoutArgs a = act_dropout_args(act, n, p);
        a.h = static_cast<const float *>(cptr(h));
        a.out = static_cast<float *>(mptr(out));
        a.bits = static_cast<std::uint32_t *>(mptr(bits));
        a.seed = seed;
        return B::act_dropout(exec, a);
      },
      py::arg("exec"), py::arg("act"), py::arg("n"), py::arg("h"), py::arg("out"), py::arg("bits"), py::arg("p"),
      py::arg("seed"));
  m.def(
      "act_dropout_backward",
      [](Exec exec, int act, std::int64_t n, addr g, addr y, addr bits, double p, addr dh) {
        ActDropoutArgs a = act_dropout_args(act, n, p);
        a.g = static_cast<const float *>(cptr(g));
        a.y = static_cast<const float *>(cptr(y));
        a.bits = static_cast<std::uint32_t *>(mptr(bits));
        a.dh = static_cast<float *>(mptr(dh));
        return B::act_dropout_backward(exec, a);
      },
      py::arg("exec"), py::arg("act"), py::arg("n"), py::arg("g"), py::arg("y"), py::arg("bits"), py::arg("p"),
      py::arg("dh"));
}

inline void bind_quant_cuda(py::module_ &m) {
  bind_quant<CudaQuantBackend>(m);
  bind_qgemm<CudaQuantBackend>(m);
  bind_gat_softmax_cuda(m);
  bind_act_dropout_cuda(m);
}

}  // namespace gnnsparse::bindings
