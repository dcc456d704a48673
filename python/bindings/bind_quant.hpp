// The quantized-op functions every backend module (_cuda, _sycl) exports, in one shape (like
// bind_ops.hpp; contract and argument structs: gnnsparse/quant.hpp):
//
//   quantize  (exec, X, rows, C, bits, rounding, seed, Q, scale, work)
//   dequantize(exec, Q, scale, bits, rows, C, Y)
//   qspmm     (exec, A, X, x_scale, x_bits, C, reduce, W, H, identity_col, Y, arg[, out_q, out_bits,
//              out_rounding, out_seed, out_scale_in, out_scale, out_stats, out_decay, out_work,
//              out_work_size])
//   qspmm_out_work(exec, A, X, x_scale, x_bits, C, reduce, W, H, identity_col, out_bits) -> floats
//   requantize(exec, acc, rows, C, ld, sa, sb, out_q, out_bits, out_rounding, out_seed,
//              out_scale_in, out_scale, out_stats, out_decay, out_work)
//   qsddmm    (exec, A, op, X, x_scale, x_bits, Y, y_scale, y_bits, H, F, E)
//   qfusedmm  (exec, A, op, edge, slope, X, x_scale, x_bits, Y, y_scale, y_bits,
//              Z, z_scale, z_bits, H, F, D, out, E)
//   qgemm_tn  (exec, A, lda, B, ldb, K, M, N, scale, C, work, work_size)   (bind_qgemm)
//   qgemm_tn_work(exec, K, M, N) -> int32 elements of work
//
// exec is the backend's execution handle (CUDA: the stream as an int; SYCL: (queue, [events]));
// A is a gnnsparse._core.CsrView; codes are those of gnnsparse/ops.hpp (reduce, op, edge) and
// quant.hpp (rounding); arrays are device addresses as ints (0 = absent); a quantized operand is
// (data address, scale address, bits) with its feature count implied by the op (qspmm: C;
// qsddmm / qfusedmm: H * F for dot, H for add; Z: H * D). Validated by the Python layer
// (gnnsparse.quant), the only caller. QUANTIZE_WORK: floats of `work` quantize needs.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>

#include "bind_ops.hpp"
#include "gnnsparse/qgemm.hpp"
#include "gnnsparse/quant.hpp"

namespace gnnsparse::bindings {

inline QView qview(addr data, addr scale, int bits, std::int64_t C) {
  return QView{cptr(data), reinterpret_cast<const float *>(scale), bits, C};
}

// A delayed-scale quantized output (gnnsparse/quant.hpp QOut); out_scale == 0: none (float32 output).
inline QOut qout(addr q, int bits, int rounding, std::uint64_t seed, addr scale_in, addr scale, addr stats,
                 double decay, addr work, std::int64_t work_size) {
  QOut o;
  o.Q = mptr(q);
  o.bits = bits;
  o.rounding = Rounding(rounding);
  o.seed = seed;
  o.scale_in = reinterpret_cast<const float *>(scale_in);
  o.scale = static_cast<float *>(mptr(scale));
  o.stats = static_cast<float *>(mptr(stats));
  o.decay = float(decay);
  o.work = static_cast<float *>(mptr(work));
  o.work_size = work_size;
  return o;
}

// Backend: `using Exec = ...;` and static quantize / dequantize / qspmm / qsddmm / qfusedmm /
// requantize (Exec&, const XxxArgs&) that release the GIL around the launch, and qspmm_out_work.
template <class Backend>
void bind_quant(py::module_ &m) {
  using Exec = typename Backend::Exec;
  m.attr("QUANTIZE_WORK") = kQuantizeWork;
  m.def(
      "quantize",
      [](Exec exec, addr X, std::int64_t rows, std::int64_t C, int bits, int rounding, std::uint64_t seed, addr Q,
         addr scale, addr work) {
        const QuantizeArgs a{static_cast<const float *>(cptr(X)), rows, C, bits, Rounding(rounding), seed, mptr(Q),
                             static_cast<float *>(mptr(scale)), static_cast<float *>(mptr(work))};
        return Backend::quantize(exec, a);
      },
      py::arg("exec"), py::arg("X"), py::arg("rows"), py::arg("C"), py::arg("bits"), py::arg("rounding"),
      py::arg("seed"), py::arg("Q"), py::arg("scale"), py::arg("work"));
  m.def(
      "dequantize",
      [](Exec exec, addr Q, addr scale, int bits, std::int64_t rows, std::int64_t C, addr Y) {
        const DequantizeArgs a{qview(Q, scale, bits, C), rows, static_cast<float *>(mptr(Y))};
        return Backend::dequantize(exec, a);
      },
      py::arg("exec"), py::arg("Q"), py::arg("scale"), py::arg("bits"), py::arg("rows"), py::arg("C"), py::arg("Y"));
  m.def(
      "qspmm",
      [](Exec exec, const CsrView &A, addr X, addr xs, int xbits, std::int64_t C, int reduce, addr W, std::int64_t H,
         bool identity_col, addr Y, addr arg, addr out_q, int out_bits, int out_rounding, std::uint64_t out_seed,
         addr out_scale_in, addr out_scale, addr out_stats, double out_decay, addr out_work,
         std::int64_t out_work_size) {
        const QSpmmArgs a{A,
                          qview(X, xs, xbits, C),
                          Reduce(reduce),
                          static_cast<const float *>(cptr(W)),
                          H,
                          identity_col,
                          static_cast<float *>(mptr(Y)),
                          static_cast<std::int64_t *>(mptr(arg)),
                          qout(out_q, out_bits, out_rounding, out_seed, out_scale_in, out_scale, out_stats, out_decay,
                               out_work, out_work_size)};
        return Backend::qspmm(exec, a);
      },
      py::arg("exec"), py::arg("A"), py::arg("X"), py::arg("x_scale"), py::arg("x_bits"), py::arg("C"),
      py::arg("reduce"), py::arg("W"), py::arg("H"), py::arg("identity_col"), py::arg("Y"), py::arg("arg"),
      py::arg("out_q") = addr(0), py::arg("out_bits") = 8, py::arg("out_rounding") = 1,
      py::arg("out_seed") = std::uint64_t(0), py::arg("out_scale_in") = addr(0), py::arg("out_scale") = addr(0),
      py::arg("out_stats") = addr(0), py::arg("out_decay") = 0.0, py::arg("out_work") = addr(0),
      py::arg("out_work_size") = std::int64_t(0));
  m.def(
      "qspmm_out_work",
      [](Exec exec, const CsrView &A, addr X, addr xs, int xbits, std::int64_t C, int reduce, addr W, std::int64_t H,
         bool identity_col, int out_bits) {
        QSpmmArgs a{A, qview(X, xs, xbits, C), Reduce(reduce), static_cast<const float *>(cptr(W)), H, identity_col};
        a.out.bits = out_bits;
        return Backend::qspmm_out_work(exec, a);
      },
      py::arg("exec"), py::arg("A"), py::arg("X"), py::arg("x_scale"), py::arg("x_bits"), py::arg("C"),
      py::arg("reduce"), py::arg("W"), py::arg("H"), py::arg("identity_col"), py::arg("out_bits"));
  m.def(
      "requantize",
      [](Exec exec, addr acc, std::int64_t rows, std::int64_t C, std::int64_t ld, addr sa, addr sb, addr out_q,
         int out_bits, int out_rounding, std::uint64_t out_seed, addr out_scale_in, addr out_scale, addr out_stats,
         double out_decay, addr out_work) {
        const RequantizeArgs a{static_cast<const std::int32_t *>(cptr(acc)), rows, C, ld,
                               static_cast<const float *>(cptr(sa)), static_cast<const float *>(cptr(sb)),
                               qout(out_q, out_bits, out_rounding, out_seed, out_scale_in, out_scale, out_stats,
                                    out_decay, out_work, kQuantizeWork)};
        return Backend::requantize(exec, a);
      },
      py::arg("exec"), py::arg("acc"), py::arg("rows"), py::arg("C"), py::arg("ld"), py::arg("sa"), py::arg("sb"),
      py::arg("out_q"), py::arg("out_bits"), py::arg("out_rounding"), py::arg("out_seed"), py::arg("out_scale_in"),
      py::arg("out_scale"), py::arg("out_stats"), py::arg("out_decay"), py::arg("out_work"));
  m.def(
      "qsddmm",
      [](Exec exec, const CsrView &A, int op, addr X, addr xs, int xbits, addr Y, addr ys, int ybits, std::int64_t H,
         std::int64_t F, addr E) {
        const std::int64_t C = SddmmOp(op) == SddmmOp::add ? H : H * F;
        const QSddmmArgs a{A, SddmmOp(op), qview(X, xs, xbits, C), qview(Y, ys, ybits, C), H, F,
                           static_cast<float *>(mptr(E))};
        return Backend::qsddmm(exec, a);
      },
      py::arg("exec"), py::arg("A"), py::arg("op"), py::arg("X"), py::arg("x_scale"), py::arg("x_bits"),
      py::arg("Y"), py::arg("y_scale"), py::arg("y_bits"), py::arg("H"), py::arg("F"), py::arg("E"));
  m.def(
      "qfusedmm",
      [](Exec exec, const CsrView &A, int op, int edge, double slope, addr X, addr xs, int xbits, addr Y, addr ys,
         int ybits, addr Z, addr zs, int zbits, std::int64_t H, std::int64_t F, std::int64_t D, addr out, addr E) {
        const std::int64_t C = SddmmOp(op) == SddmmOp::add ? H : H * F;
        const QFusedArgs a{A,
                           SddmmOp(op),
                           EdgeFn(edge),
                           slope,
                           qview(X, xs, xbits, C),
                           qview(Y, ys, ybits, C),
                           qview(Z, zs, zbits, H * D),
                           H,
                           F,
                           D,
                           static_cast<float *>(mptr(out)),
                           static_cast<float *>(mptr(E))};
        return Backend::qfusedmm(exec, a);
      },
      py::arg("exec"), py::arg("A"), py::arg("op"), py::arg("edge"), py::arg("slope"), py::arg("X"),
      py::arg("x_scale"), py::arg("x_bits"), py::arg("Y"), py::arg("y_scale"), py::arg("y_bits"), py::arg("Z"),
      py::arg("z_scale"), py::arg("z_bits"), py::arg("H"), py::arg("F"), py::arg("D"), py::arg("out"),
      py::arg("E"));
}

// The int8 TN GEMM (gnnsparse/qgemm.hpp), for a backend with static qgemm_tn(Exec&, const
// QGemmTnArgs&) (GIL released) and qgemm_tn_work(Exec&, K, M, N); A, B: int8 addresses, rows
// lda / ldb bytes apart; scale: one float32; C: M x N float32; work: int32 scratch.
template <class Backend>
void bind_qgemm(py::module_ &m) {
  using Exec = typename Backend::Exec;
  m.def(
      "qgemm_tn",
      [](Exec exec, addr A, std::int64_t lda, addr B, std::int64_t ldb, std::int64_t K, std::int64_t M,
         std::int64_t N, addr scale, addr C, addr work, std::int64_t work_size) {
        QGemmTnArgs a;
        a.A = static_cast<const std::int8_t *>(cptr(A));
        a.B = static_cast<const std::int8_t *>(cptr(B));
        a.K = K;
        a.M = M;
        a.N = N;
        a.lda = lda;
        a.ldb = ldb;
        a.scale = static_cast<const float *>(cptr(scale));
        a.C = static_cast<float *>(mptr(C));
        a.work = static_cast<std::int32_t *>(mptr(work));
        a.work_size = work_size;
        return Backend::qgemm_tn(exec, a);
      },
      py::arg("exec"), py::arg("A"), py::arg("lda"), py::arg("B"), py::arg("ldb"), py::arg("K"), py::arg("M"),
      py::arg("N"), py::arg("scale"), py::arg("C"), py::arg("work"), py::arg("work_size"));
  m.def(
      "qgemm_tn_work",
      [](Exec exec, std::int64_t K, std::int64_t M, std::int64_t N) { return Backend::qgemm_tn_work(exec, K, M, N); },
      py::arg("exec"), py::arg("K"), py::arg("M"), py::arg("N"));
}

}  // namespace gnnsparse::bindings
