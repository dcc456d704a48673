"""bench/bench_sycl (the C++ benchmark executable) builds against the same SYCL runtime and runs
its quick suite with every case verified."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import sycl_or_skip

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def bench_sycl(tmp_path_factory):
    sycl_or_skip()
    pybind11 = pytest.importorskip("pybind11")
    if shutil.which("cmake") is None:
        pytest.skip("cmake not found")
    build = tmp_path_factory.mktemp("bench_sycl_build")
    cfg = ["cmake", "-S", ROOT, "-B", str(build), "-DCMAKE_BUILD_TYPE=Release", "-DGNNSPARSE_CUDA=OFF",
           "-DGNNSPARSE_BENCH=ON", f"-DPython_EXECUTABLE={sys.executable}", f"-Dpybind11_DIR={pybind11.get_cmake_dir()}"]
    subprocess.run(cfg, check=True, capture_output=True, text=True)
    r = subprocess.run(["cmake", "--build", str(build), "--target", "bench_sycl", "-j", str(os.cpu_count() or 2)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return build / "bench_sycl"


def test_quick_suite_verifies_and_writes_csv(bench_sycl, tmp_path):
    csv = tmp_path / "bench.csv"
    r = subprocess.run([str(bench_sycl), "--suite", "quick", "--repeat", "1", "--csv", str(csv)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all cases verified" in r.stdout
    lines = csv.read_text().splitlines()
    assert lines[0] == "op,matrix,width,nnz,us,gbps,gflops,ok"
    assert len(lines) > 8 and all(line.endswith(",1") for line in lines[1:])


def test_bad_arguments_exit_2(bench_sycl):
    r = subprocess.run([str(bench_sycl), "--suite", "nope"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown suite" in r.stderr
    r = subprocess.run([str(bench_sycl), "--repeat"], capture_output=True, text=True)
    assert r.returncode == 2 and "needs a value" in r.stderr
