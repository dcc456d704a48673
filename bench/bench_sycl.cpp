// bench_sycl: the SYCL backend's kernels on any SYCL device, each case verified against a host
// reference before it is timed. Prints a table (µs, GB/s by the bytes model, GFLOP/s) and
// optionally writes CSV.
//
//   bench_sycl [--device cpu|gpu|default] [--suite quick|graphs|grid] [--repeat N] [--csv FILE]
//
// Bytes model: CSR read once (rowptr, col, val) + every gathered row + row-side inputs once +
// output written once. FLOPs: SpMM 2*nnz*C, SDDMM dot nnz*(2F-1), FusedMM SDDMM + 2*nnz*D.
// Timing: wall clock around submit + wait (median of --repeat calls after one untimed call),
// the kernel compiled before timing (first call).
#include <sycl/sycl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ops.hpp"
#include "runtime.hpp"

namespace rt = gnnsparse::sycl_rt;
using gnnsparse::DType;
using gnnsparse::EdgeFn;
using gnnsparse::IType;
using gnnsparse::Reduce;
using gnnsparse::SddmmOp;

namespace {

// The intel-opencl-rt wheel's ICD file is broken: point the loader at the CPU runtime that sits
// beside libsycl.so, unless the user already chose.
void point_icd_loader_at_cpu_runtime() {
  if (const char *v = std::getenv("OCL_ICD_FILENAMES"); v && *v) return;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    auto pos = line.find('/');
    auto lib = line.find("libsycl.so");
    if (pos == std::string::npos || lib == std::string::npos) continue;
    std::string dir = line.substr(pos, line.rfind('/') - pos);
    std::string ocl = dir + "/libintelocl.so";
    if (std::ifstream(ocl).good()) setenv("OCL_ICD_FILENAMES", ocl.c_str(), 0);
    return;
  }
}

struct Csr {
  long M = 0, K = 0;
  std::vector<int> rowptr, col;
  std::vector<float> val;
  long nnz() const { return long(col.size()); }
};

Csr uniform_graph(long n, long e, std::mt19937_64 &rng) {
  std::uniform_int_distribution<long> pick(0, n - 1);
  std::vector<std::pair<int, int>> edges(e);
  for (auto &p : edges) p = {int(pick(rng)), int(pick(rng))};
  std::sort(edges.begin(), edges.end());
  Csr A;
  A.M = A.K = n;
  A.rowptr.assign(n + 1, 0);
  for (auto &p : edges) A.rowptr[p.first + 1]++;
  for (long i = 0; i < n; ++i) A.rowptr[i + 1] += A.rowptr[i];
  for (auto &p : edges) A.col.push_back(p.second);
  std::normal_distribution<float> nd;
  A.val.resize(e);
  for (auto &v : A.val) v = nd(rng);
  return A;
}

Csr grid_matrix(long M, long K, double density, std::mt19937_64 &rng) {  // the ESIMD paper's grid: nnz = M * round(density * K)
  std::bernoulli_distribution keep(density);
  std::normal_distribution<float> nd;
  Csr A;
  A.M = M;
  A.K = K;
  A.rowptr.push_back(0);
  for (long i = 0; i < M; ++i) {
    for (long j = 0; j < K; ++j)
      if (keep(rng)) {
        A.col.push_back(int(j));
        A.val.push_back(nd(rng));
      }
    A.rowptr.push_back(int(A.col.size()));
  }
  return A;
}

template <typename T>
struct Usm {  // shared USM buffer with a host copy
  sycl::queue &q;
  T *p = nullptr;
  size_t n = 0;
  Usm(sycl::queue &q_, const std::vector<T> &h) : q(q_), n(h.size()) {
    p = sycl::malloc_shared<T>(std::max<size_t>(n, 1), q);
    std::copy(h.begin(), h.end(), p);
  }
  Usm(sycl::queue &q_, size_t n_) : q(q_), n(n_) { p = sycl::malloc_shared<T>(std::max<size_t>(n, 1), q); }
  ~Usm() { sycl::free(p, q); }
};

std::vector<float> randn(size_t n, std::mt19937_64 &rng) {
  std::normal_distribution<float> nd;
  std::vector<float> v(n);
  for (auto &x : v) x = nd(rng);
  return v;
}

double median_us(const std::function<void()> &f, int repeat) {
  f();  // untimed (compiles the kernel on the first case)
  std::vector<double> t;
  for (int r = 0; r < repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

// rows checked: all of them for small matrices, every step-th otherwise
long check_step(long M) { return std::max(1L, M / 2048); }

bool close(double got, double want, double scale) { return std::fabs(got - want) <= 1e-4 * std::max(1.0, scale); }

struct Row {
  std::string op, matrix;
  long width, nnz;
  double us, gbps, gflops;
  bool ok;
};

void print_row(const Row &r) {
  std::printf("%-16s %-28s %5ld %10ld %10.1f %9.2f %9.2f  %s\n", r.op.c_str(), r.matrix.c_str(), r.width, r.nnz, r.us,
              r.gbps, r.gflops, r.ok ? "ok" : "WRONG");
}

Row bench_spmm(sycl::queue &q, const Csr &A, const std::string &name, long C, Reduce red, int repeat,
               std::mt19937_64 &rng) {
  auto Xh = randn(size_t(A.K * C), rng);
  Usm<int> rp(q, A.rowptr), cl(q, A.col);
  Usm<float> vl(q, A.val), X(q, Xh), Y(q, size_t(A.M * C));
  Usm<long> arg(q, size_t(A.M * C));
  std::fill(Y.p, Y.p + Y.n, NAN);
  const bool want_arg = red == Reduce::max;
  gnnsparse::SpmmArgs a{{IType::i32, rp.p, cl.p, vl.p, A.M, A.K, A.nnz()}, DType::f32, red, X.p, Y.p,
                 want_arg ? arg.p : nullptr, C};
  rt::spmm(q, a, {}).wait_and_throw();
  bool ok = true;
  for (long i = 0; i < A.M && ok; i += check_step(A.M)) {
    for (long c = 0; c < C && ok; ++c) {
      double acc = 0, scale = 0, best = -INFINITY;
      for (int k = A.rowptr[i]; k < A.rowptr[i + 1]; ++k) {
        double m = double(A.val[k]) * Xh[size_t(A.col[k]) * C + c];
        acc += m;
        scale += std::fabs(m);
        best = std::max(best, m);
      }
      const long deg = A.rowptr[i + 1] - A.rowptr[i];
      double want = red == Reduce::max ? (deg ? best : 0.0) : acc;
      ok = close(Y.p[i * C + c], want, red == Reduce::max ? std::fabs(want) : scale);
    }
  }
  double us = median_us([&] { rt::spmm(q, a, {}).wait_and_throw(); }, repeat);
  double bytes = 4.0 * (A.M + 1 + 2 * A.nnz()) + 4.0 * A.nnz() * C + 4.0 * A.M * C * (want_arg ? 3 : 1);
  return {std::string("spmm_") + (red == Reduce::max ? "max" : "sum"), name, C, A.nnz(), us, bytes / us / 1e3,
          2.0 * A.nnz() * C / us / 1e3, ok};
}

Row bench_sddmm(sycl::queue &q, const Csr &A, const std::string &name, long F, int repeat, std::mt19937_64 &rng) {
  auto Xh = randn(size_t(A.M * F), rng), Yh = randn(size_t(A.K * F), rng);
  Usm<int> rp(q, A.rowptr), cl(q, A.col);
  Usm<float> X(q, Xh), Y(q, Yh), E(q, size_t(A.nnz()));
  std::fill(E.p, E.p + E.n, NAN);
  gnnsparse::SddmmArgs a{{IType::i32, rp.p, cl.p, nullptr, A.M, A.K, A.nnz()}, DType::f32, SddmmOp::dot, X.p, Y.p, E.p, 1,
                  F};
  rt::sddmm(q, a, {}).wait_and_throw();
  bool ok = true;
  for (long i = 0; i < A.M && ok; i += check_step(A.M))
    for (int k = A.rowptr[i]; k < A.rowptr[i + 1] && ok; ++k) {
      double s = 0, scale = 0;
      for (long f = 0; f < F; ++f) {
        double m = double(Xh[i * F + f]) * Yh[size_t(A.col[k]) * F + f];
        s += m;
        scale += std::fabs(m);
      }
      ok = close(E.p[k], s, scale);
    }
  double us = median_us([&] { rt::sddmm(q, a, {}).wait_and_throw(); }, repeat);
  double bytes = 4.0 * (A.M + 1 + A.nnz()) + 4.0 * A.nnz() * F + 4.0 * A.M * F + 4.0 * A.nnz();
  return {"sddmm_dot", name, F, A.nnz(), us, bytes / us / 1e3, double(A.nnz()) * (2 * F - 1) / us / 1e3, ok};
}

Row bench_fusedmm(sycl::queue &q, const Csr &A, const std::string &name, long F, int repeat, std::mt19937_64 &rng) {
  auto Xh = randn(size_t(A.M * F), rng), Yh = randn(size_t(A.K * F), rng), Zh = randn(size_t(A.K * F), rng);
  for (auto &x : Xh) x *= 0.2f;
  Usm<int> rp(q, A.rowptr), cl(q, A.col);
  Usm<float> X(q, Xh), Y(q, Yh), Z(q, Zh), O(q, size_t(A.M * F));
  std::fill(O.p, O.p + O.n, NAN);
  gnnsparse::FusedArgs a{{IType::i32, rp.p, cl.p, nullptr, A.M, A.K, A.nnz()},
                  DType::f32, SddmmOp::dot, EdgeFn::softmax, 0.2, X.p, Y.p, Z.p, O.p, nullptr, 1, F, F};
  rt::fusedmm(q, a, {}).wait_and_throw();
  bool ok = true;
  for (long i = 0; i < A.M && ok; i += check_step(A.M)) {
    std::vector<double> e;
    for (int k = A.rowptr[i]; k < A.rowptr[i + 1]; ++k) {
      double s = 0;
      for (long f = 0; f < F; ++f) s += double(Xh[i * F + f]) * Yh[size_t(A.col[k]) * F + f];
      e.push_back(s);
    }
    double mx = e.empty() ? 0 : *std::max_element(e.begin(), e.end()), den = 0;
    for (double &s : e) den += (s = std::exp(s - mx));
    for (long d = 0; d < F && ok; ++d) {
      double acc = 0;
      for (size_t t = 0; t < e.size(); ++t) acc += e[t] / den * Zh[size_t(A.col[A.rowptr[i] + t]) * F + d];
      ok = close(O.p[i * F + d], acc, 1.0);
    }
  }
  double us = median_us([&] { rt::fusedmm(q, a, {}).wait_and_throw(); }, repeat);
  double bytes = 4.0 * (A.M + 1 + A.nnz()) + 8.0 * A.nnz() * F + 8.0 * A.M * F;
  return {"fusedmm_softmax", name, F, A.nnz(), us, bytes / us / 1e3,
          (double(A.nnz()) * (2 * F - 1) + 2.0 * A.nnz() * F) / us / 1e3, ok};
}

}  // namespace

int main(int argc, char **argv) {
  point_icd_loader_at_cpu_runtime();
  std::string device = "cpu", suite = "quick", csv;
  int repeat = 10;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_sycl: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--device") device = next();
    else if (a == "--suite") suite = next();
    else if (a == "--repeat") repeat = std::max(1, std::atoi(next().c_str()));
    else if (a == "--csv") csv = next();
    else {
      std::fprintf(stderr, "usage: bench_sycl [--device cpu|gpu|default] [--suite quick|graphs|grid] "
                           "[--repeat N] [--csv FILE]\n");
      return 2;
    }
  }
  if (suite != "quick" && suite != "graphs" && suite != "grid") {
    std::fprintf(stderr, "bench_sycl: unknown suite '%s' (quick, graphs, grid)\n", suite.c_str());
    return 2;
  }
  sycl::queue q = device == "cpu"   ? sycl::queue{sycl::cpu_selector_v, sycl::property::queue::in_order{}}
                  : device == "gpu" ? sycl::queue{sycl::gpu_selector_v, sycl::property::queue::in_order{}}
                                    : sycl::queue{sycl::default_selector_v, sycl::property::queue::in_order{}};
  std::printf("bench_sycl on %s (%s), suite %s, median of %d; verified before timing\n",
              q.get_device().get_info<sycl::info::device::name>().c_str(),
              rt::device_caps(q.get_device()).esimd ? "ESIMD" : "portable SYCL kernels", suite.c_str(), repeat);
  std::printf("%-16s %-28s %5s %10s %10s %9s %9s  %s\n", "op", "matrix", "C/F", "nnz", "us", "GB/s", "GFLOP/s",
              "check");
  std::mt19937_64 rng(2026);
  std::vector<Row> rows;
  auto run = [&](Row r) {
    print_row(r);
    rows.push_back(r);
  };
  try {
    if (suite == "quick" || suite == "graphs") {
      const long n = suite == "quick" ? 50'000 : 169'343, e = suite == "quick" ? 500'000 : 2'330'000;
      const std::string name = "uniform n=" + std::to_string(n) + " e=" + std::to_string(e);
      Csr A = uniform_graph(n, e, rng);
      for (long C : {16L, 32L, 128L}) run(bench_spmm(q, A, name, C, Reduce::sum, repeat, rng));
      run(bench_spmm(q, A, name, 32, Reduce::max, repeat, rng));
      run(bench_sddmm(q, A, name, 32, repeat, rng));
      run(bench_fusedmm(q, A, name, 32, repeat, rng));
    }
    if (suite == "grid" || suite == "quick") {
      for (long K : suite == "quick" ? std::vector<long>{1024} : std::vector<long>{1024, 2048, 4096})
        for (double d : {0.1, 0.3}) {
          Csr A = grid_matrix(K, K, d, rng);
          const std::string name = "grid M=K=" + std::to_string(K) + " d=" + std::to_string(d).substr(0, 3);
          for (long N : {32L, 128L}) run(bench_spmm(q, A, name, N, Reduce::sum, repeat, rng));
          run(bench_sddmm(q, A, name, 32, repeat, rng));
        }
    }
  } catch (std::exception &ex) {
    std::fprintf(stderr, "bench_sycl: %s\n", ex.what());
    return 1;
  }
  if (!csv.empty()) {
    std::ofstream f(csv);
    f << "op,matrix,width,nnz,us,gbps,gflops,ok\n";
    for (auto &r : rows)
      f << r.op << ',' << r.matrix << ',' << r.width << ',' << r.nnz << ',' << r.us << ',' << r.gbps << ','
        << r.gflops << ',' << (r.ok ? 1 : 0) << '\n';
  }
  const bool all_ok = std::all_of(rows.begin(), rows.end(), [](const Row &r) { return r.ok; });
  std::printf("%s\n", all_ok ? "all cases verified" : "SOME CASES WRONG");
  return all_ok ? 0 : 1;
}
