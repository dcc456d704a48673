"""`gnnsparse bench`: argument errors, a tiny suite end to end on the CPU, the check that guards timing."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse.bench import cases, cli, measure, runner
from gnnsparse.bench.cases import Case, GraphSpec

sycl = pytest.mark.skipif(not gs.available_backends().get("sycl"), reason="no SYCL device in this build/machine")


def _spec(name, kind, **p):
    return GraphSpec(name, kind, tuple(sorted(p.items())), 0)


def tiny_cases():
    g = _spec("tiny uniform", "uniform", n=300, e=2400)
    w = _spec("tiny grid", "grid", M=64, K=96, density=0.2)
    return [Case(g, "spmm", 8, "sum", suite="quick"), Case(g, "spmm", 8, "mean", suite="quick"),
            Case(g, "spmm", 8, "max", suite="quick"), Case(w, "spmm", 5, "sum", suite="quick"),
            Case(g, "sddmm", 8, suite="quick"), Case(g, "sddmm", 1, sddmm_op="add", heads=2, suite="quick"),
            Case(g, "fusedmm", 8, suite="quick"),
            Case(g, "fusedmm", 8, sddmm_op="add", edge="softmax", heads=2, suite="quick")]


# ---------------------------------------------------------------- argument errors
@pytest.mark.parametrize("argv, message", [
    ([], "required"),
    (["frobnicate"], "invalid choice"),
    (["bench", "--ops", "spmm,spmv"], "invalid op 'spmv'"),
    (["bench", "--ops", ","], "empty op list"),
    (["bench", "--widths", "16,x"], "invalid width 'x'"),
    (["bench", "--widths", "0"], "widths must be positive"),
    (["bench", "--reduce", "prod"], "invalid reduction 'prod'"),
    (["bench", "--repeat", "0"], "--repeat must be a positive integer"),
    (["bench", "--repeat", "many"], "--repeat must be a positive integer"),
    (["bench", "--warmup", "-1"], "--warmup must be a non-negative integer"),
    (["bench", "--suite", "huge"], "invalid choice: 'huge'"),
    (["bench", "--device", "tpu"], "invalid choice: 'tpu'"),
    (["bench", "--stat", "mean"], "invalid choice: 'mean'"),
    (["bench", "--quick", "--suite", "graphs"], "--quick conflicts with --suite graphs"),
    (["bench", "--graph", "/no/such/graph.mtx"], "--graph /no/such/graph.mtx: no such file"),
    (["bench", "--device", "cpu", "--out", "/proc/gnnsparse-bench"], "--out /proc/gnnsparse-bench:"),
])
def test_argument_errors_exit_2(argv, message, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert len(err.strip().splitlines()) == 1 and "--help lists the options" in err, err  # one line, no usage dump


def test_device_cuda_without_gpu_exits_2(capsys):
    ok, _ = measure.cuda_usable()
    if ok:
        pytest.skip("a CUDA GPU is present: --device cuda is valid here")
    assert cli.main(["bench", "--device", "cuda"]) == 2
    assert "--device cuda:" in capsys.readouterr().err


def test_module_entry_point_help_and_error():
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "gnnsparse", "bench", "--help"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    for flag in ("--suite", "--quick", "--ops", "--widths", "--reduce", "--repeat", "--out", "--device"):
        assert flag in r.stdout
    r = subprocess.run([sys.executable, "-m", "gnnsparse", "bench", "--widths", "-3"], capture_output=True, text=True)
    assert r.returncode == 2 and "widths must be positive" in r.stderr


def test_selection_overrides_widths_and_reductions():
    cs = cases.select(cases.quick_suite(), ops=("spmm",), widths=(4, 8), reduces=("sum", "max"))
    assert cs and all(c.op == "spmm" for c in cs)
    assert {c.width for c in cs} == {4, 8} and {c.reduce for c in cs} == {"sum", "max"}
    assert len(cs) == len(set(cs))
    graphs = [c.graph for c in cs]  # each graph's cases are contiguous (built once)
    assert graphs == sorted(graphs, key=graphs.index)


def test_suites_cover_the_benchmark_cases():
    assert len(cases.grid72_suite()) == 72 * 3
    g = cases.graphs_suite()
    names = {c.graph.name for c in g}
    assert any("rmat" in n for n in names) and any("products" in n for n in names) and any("arxiv" in n for n in names)
    assert {c.op for c in g} == {"spmm", "sddmm", "fusedmm"}
    assert {1, 4, 16, 32, 64, 128, 256} <= {c.width for c in g if c.op == "spmm"}
    assert any(c.width % 2 for c in g if c.width > 1)  # an odd width
    assert {c.heads for c in g} >= {1, 4, 8}


# ---------------------------------------------------------------- the check that guards timing
def test_model_bytes_and_flops():
    A = gs.CSR(np.array([0, 2, 3], np.int32), np.array([0, 1, 1], np.int32), None, (2, 2))
    g = _spec("t", "uniform", n=2, e=3)
    nb, fl = measure.model(Case(g, "spmm", 4), A)
    assert fl == 2 * 3 * 4
    assert nb == (3 * 4 + 3 * 4) + 3 * 4 * 4 + 2 * 4 * 4
    nb, fl = measure.model(Case(g, "sddmm", 4), A)
    assert fl == 3 * (2 * 4 - 1)
    assert nb == (3 * 4 + 3 * 4) + 2 * 4 * 4 + 3 * 4 * 4 + 3 * 4


def test_sub_csr_matches_scipy_rows():
    from gnnsparse.bench.generators import uniform_random

    A = uniform_random(500, 4000, seed=3, weighted=True)
    rows = np.array([0, 7, 100, 499])
    S, pos = measure.sub_csr(A, rows)
    ref = A.to_scipy()[rows]
    assert (abs(S.to_scipy() - ref)).max() == 0
    np.testing.assert_array_equal(A.col[pos], S.col)


@pytest.mark.parametrize("op", ["spmm", "sddmm", "fusedmm"])
def test_check_rejects_a_wrong_result(op):
    from gnnsparse.bench.generators import uniform_random

    A = uniform_random(200, 1500, seed=1)
    case = Case(_spec("t", "uniform", n=200, e=1500), op, 6)
    inp = measure.make_inputs(case, A, 0)
    ref, _, _ = measure.expected(case, A, inp)
    good = ref.astype(np.float32)
    assert measure.check(case, A, inp, good)[0]
    bad = good.copy()
    bad.flat[5] += 1e-2 * (np.abs(bad).max() + 1)
    ok, err, msg = measure.check(case, A, inp, bad)
    assert not ok and err > 1e-4 and "relative error" in msg
    assert not measure.check(case, A, inp, np.zeros_like(good))[0]


@pytest.mark.parametrize("op, kw", [("spmm", {}), ("spmm", {"reduce": "max"}), ("sddmm", {}),
                                     ("sddmm", {"sddmm_op": "add", "heads": 3}), ("fusedmm", {"edge": "softmax"})])
def test_sampled_rows_reference_equals_the_full_one(op, kw):
    from gnnsparse.bench.generators import rmat

    A = rmat(3000, 30_000, seed=2)
    case = Case(_spec("t", "rmat", n=3000, e=30_000), op, 5, **kw)
    inp = measure.make_inputs(case, A, 1)
    rows = measure.sample_rows(A, 300, seed=0, full_nnz=0)
    assert rows is not None and len(rows) >= 300 and int(np.argmax(A.degrees())) in rows
    full, _, _ = measure.expected(case, A, inp)
    part, _, sel = measure.expected(case, A, inp, rows)
    np.testing.assert_allclose(part, full[sel], rtol=1e-12, atol=1e-12)
    assert measure.check(case, A, inp, full.astype(np.float32), rows)[0]


def test_check_refuses_all_zero_reference():
    A = gs.CSR(np.zeros(4, np.int32), np.zeros(0, np.int32), None, (3, 3))
    case = Case(_spec("t", "uniform", n=3, e=0), "spmm", 2)
    inp = measure.make_inputs(case, A, 0)
    ok, _, msg = measure.check(case, A, inp, np.zeros((3, 2), np.float32))
    assert not ok and "all zeros" in msg


@sycl
def test_run_cases_marks_a_wrong_kernel_and_skips_timing(monkeypatch):
    dev = measure.CPUDevice()
    real = measure.ours

    def broken(case):
        f = real(case)
        return lambda A, i: f(A, i) * 1.01
    monkeypatch.setattr(measure, "ours", broken)
    res = runner.run_cases(tiny_cases()[:1], dev, repeat=2, log=lambda m: None)
    assert res[0]["verified"] is False and "differs from gnnsparse.reference" in res[0]["error"]
    assert res[0]["ours_s"] is None and res[0]["refs"] == {}


# ---------------------------------------------------------------- end to end
@sycl
def test_tiny_suite_end_to_end(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(cases, "quick_suite", tiny_cases)
    out = tmp_path / "res"
    rc = cli.main(["bench", "--quick", "--device", "cpu", "--repeat", "2", "--out", str(out), "--plain",
                   "--no-progress"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "tiny uniform" in printed and "×scipy" in printed and "ok" in printed
    data = json.loads((out / "results.json").read_text())
    rows = data["results"]
    assert len(rows) == len(tiny_cases())
    assert all(r["verified"] is True for r in rows), [r["error"] for r in rows]
    assert all(r["ours_s"] > 0 and r["gbps"] > 0 and r["gflops"] > 0 for r in rows)
    assert data["meta"]["copy_bandwidth"]["device_gbps"] > 0
    assert data["meta"]["command"].startswith("gnnsparse bench --quick")
    spmm_sum = [r for r in rows if r["op"] == "spmm" and r["reduce"] == "sum"]
    assert all(r["refs"]["scipy"]["ratio"] > 0 and r["refs"]["scipy"]["agrees"] for r in spmm_sum)
    try:
        import torch
        have_torch = torch is not None
    except ImportError:
        have_torch = False
    if have_torch:
        for r in rows:
            assert "pyg" in r["refs"] and r["refs"]["pyg"]["agrees"], (r["case"], r["refs"])
        assert all(r["refs"]["torch.sparse"]["agrees"] for r in spmm_sum)
    fused = [r for r in rows if r["op"] == "fusedmm" and r["edge"] == "none"]
    assert fused and fused[0]["refs"]["unfused"]["agrees"]
    csv_lines = (out / "results.csv").read_text().splitlines()
    assert len(csv_lines) == len(rows) + 1 and "ours_s" in csv_lines[0]
    for png in ("speedup.png", "bandwidth.png"):
        b = (out / png).read_bytes()
        assert len(b) > 2000 and b[:8] == b"\x89PNG\r\n\x1a\n"


@sycl
def test_user_graph_file_end_to_end(tmp_path, capsys):
    rng = np.random.default_rng(0)
    path = tmp_path / "g.npz"
    np.savez(path, edge_index=rng.integers(0, 150, (2, 900)), num_nodes=np.int64(150))
    out = tmp_path / "o"
    rc = cli.main(["bench", "--graph", str(path), "--widths", "4", "--ops", "spmm", "--reduce", "sum,min",
                   "--repeat", "3", "--stat", "min", "--out", str(out), "--no-plots", "--no-progress"])
    assert rc == 0
    rows = json.loads((out / "results.json").read_text())["results"]
    assert [(r["graph"], r["reduce"], r["width"]) for r in rows] == [("g.npz", "sum", 4), ("g.npz", "min", 4)]
    assert all(r["verified"] for r in rows)
    assert all(r["stat"] == "min" and r["ours_s"] == r["ours_min_s"] <= r["ours_median_s"] for r in rows)
    assert all(v["s"] == v["s_min"] and v["ratio"] == v["s_min"] / r["ours_min_s"] for r in rows for v in r["refs"].values())
    assert not (out / "speedup.png").exists()


@sycl
def test_malformed_user_graph_is_reported_not_fatal(tmp_path, capsys):
    path = tmp_path / "bad.txt"
    path.write_text("0 1\n1 two\n")
    rc = cli.main(["bench", "--graph", str(path), "--repeat", "1", "--out", str(tmp_path / "o"), "--no-plots",
                   "--no-progress", "--plain"])
    assert rc == 1
    assert f"{path}:2" in capsys.readouterr().err
    rows = json.loads((tmp_path / "o" / "results.json").read_text())["results"]
    assert rows and all(f"{path}:2" in r["error"] for r in rows)


def _row(op, ratios, width=32, graph="uniform n=1M", nnz=10_000_000, ours=1.0, frac=0.5, reduce="sum"):
    variant = reduce if op == "spmm" else ("dot" if op == "sddmm" else "dot+none")
    return {"verified": True, "ours_s": ours, "op": op, "variant": variant, "reduce": reduce if op == "spmm" else None,
            "sddmm_op": "dot" if op != "spmm" else None, "heads": 1, "width": width, "graph": graph,
            "nnz": nnz, "frac_copy_bw": frac, "refs": {k: {"ratio": v} for k, v in ratios.items()}}


def test_targets_met_and_missed():
    rows = [_row("spmm", {"torch.sparse": 1.5, "scipy": 2.5}), _row("spmm", {"torch.sparse": 0.8, "scipy": 1.0})]
    cpu = runner.targets(runner.summarize(rows), rows, "cpu")
    by = {t["target"]: t for t in cpu}
    assert by["SpMM sum >= torch.sparse.mm (CPU)"]["met"] is True       # geomean sqrt(1.2) > 1
    assert by["SpMM sum >= 2x scipy.sparse"]["met"] is False            # geomean sqrt(2.5) < 2
    rows = [_row("spmm", {"torch.sparse": 5.0}, width=16, frac=0.97),
            _row("spmm", {"torch.sparse": 2.0}, width=32, ours=1.0, frac=0.96),
            _row("spmm", {"torch.sparse": 2.0}, width=32, graph="rmat n=1M", ours=1.3, frac=0.7),
            _row("fusedmm", {"unfused": 1.6})]
    by = {t["target"]: t for t in runner.targets(runner.summarize(rows), rows, "cuda")}
    assert by["SpMM sum >= torch.sparse.mm (cuSPARSE)"]["met"]
    assert by["FusedMM >= 1.3x our SDDMM + SpMM"]["met"]
    assert not by["power-law SpMM time <= 1.15x the uniform graph of equal nnz"]["met"]
    assert not by["SpMM >= 95% of the bytes-model floor (graphs with >= 5M edges)"]["met"]  # the R-MAT row: 70 %


def test_one_geomean_per_op_variant_and_reference():
    """spmm sum and spmm mean against scipy are two summary lines, and the --targets line for SpMM
    sum quotes the summary's own number (one run once printed 2.85x over 6 cases and 2.74x over 5
    for "SpMM vs scipy": sum and mean mixed in one, sum alone in the other)."""
    rows = [_row("spmm", {"scipy": r}) for r in (2.0, 3.0, 4.0)] + [_row("spmm", {"scipy": 9.0}, reduce="mean")]
    summary = runner.summarize(rows)
    assert set(summary) == {"spmm sum vs scipy", "spmm mean vs scipy"}
    s = summary["spmm sum vs scipy"]
    assert s["cases"] == 3 and s["geomean_ratio"] == pytest.approx(24 ** (1 / 3))
    goal = {t["target"]: t for t in runner.targets(summary, rows, "cpu")}["SpMM sum >= 2x scipy.sparse"]
    assert goal["cases"] == 3 and f"{s['geomean_ratio']:.2f}×" in goal["measured"]


@sycl
def test_bench_output_has_no_developer_targets_unless_asked(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cases, "quick_suite", lambda: tiny_cases()[:1])
    args = ["bench", "--quick", "--device", "cpu", "--repeat", "1", "--no-plots", "--no-progress"]
    assert cli.main(args + ["--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "goals" not in out and "MISSED" not in out and "gnnsparse" in out
    assert "targets" not in json.loads((tmp_path / "a" / "results.json").read_text())["meta"]
    assert cli.main(args + ["--out", str(tmp_path / "b"), "--targets"]) == 0
    assert "project goals" in capsys.readouterr().out


@sycl
def test_gpu_reference_set_with_torch_on_the_cpu():
    """The GPU run's reference set (torch.sparse, PyG-style, unfused) and input rotation, exercised
    with torch CPU tensors so the logic is tested on a machine without a GPU."""
    torch = pytest.importorskip("torch")

    class FakeGPU(measure.CPUDevice):
        kind = "cuda"
        l2_bytes = 1 << 16
        copies_for = measure.CUDADevice.copies_for

        def put(self, a, dtype="float32"):
            return torch.from_numpy(a.astype(dtype))

    dev = FakeGPU()
    assert dev.copies_for({"X": np.zeros(1000, np.float32)}) > 1
    res = runner.run_cases(tiny_cases(), dev, repeat=2, log=lambda m: None)
    for r in res:
        assert r["verified"], (r["case"], r["error"])
        assert "scipy" not in r["refs"]
        assert r["refs"]["pyg"]["agrees"], r["case"]
        assert r["rotated_inputs"] > 1
        assert all("error" not in v for v in r["refs"].values()), r["refs"]
    spmm = {r["reduce"]: r for r in res if r["op"] == "spmm" and r["graph"] == "tiny uniform"}
    assert spmm["sum"]["refs"]["torch.sparse"]["agrees"] and spmm["mean"]["refs"]["torch.sparse"]["agrees"]
    sd = [r for r in res if r["op"] == "sddmm" and r["sddmm_op"] == "dot"][0]
    assert sd["refs"]["torch.sparse"]["agrees"]
    fu = [r for r in res if r["op"] == "fusedmm" and r["edge"] == "none"][0]
    assert fu["refs"]["unfused"]["agrees"]


def test_plots_for_many_cases(tmp_path):
    pytest.importorskip("matplotlib")
    from gnnsparse.bench import plots

    rows = [{"verified": True, "op": op, "variant": "sum", "graph": "g", "width": 32, "nnz": 1000 * (i + 1),
             "gbps": 1.0 + i, "refs": {"scipy": {"ratio": 0.5 + i / 10}, "pyg": {"ratio": 3.0}}}
            for i in range(70) for op in ("spmm", "sddmm")]
    meta = {"device_name": "test", "copy_bandwidth": {"device_gbps": 50.0, "host_gbps": None}}
    paths = plots.write_plots(rows, meta, str(tmp_path))
    assert len(paths) == 2
    for p in paths:
        with open(p, "rb") as f:
            b = f.read()
        assert b[:4] == b"\x89PNG" and len(b) > 5000


def test_device_classes_share_the_interface_the_cli_uses():
    # the CUDA device class cannot run here; make sure it offers what the CLI reads from a device
    from gnnsparse.bench.measure import CPUDevice, CUDADevice

    for name in ("kind", "timing", "put", "put_csr", "host", "copy_bandwidth", "time_many"):
        for cls in (CPUDevice, CUDADevice):
            assert hasattr(cls, name), f"{cls.__name__} lacks {name}"


@pytest.mark.parametrize("n", [6, 80])
def test_plot_labels_are_not_cut_off(tmp_path, n):
    """Long case labels (the bar plots' y axis) fit in the PNG: its outer columns and rows are
    background, nothing drawn reaches the border."""
    pytest.importorskip("matplotlib")
    import matplotlib.image

    from gnnsparse.bench import plots

    rows = [{"verified": True, "op": "fusedmm", "variant": "add+leaky_relu_softmax H=8",
             "graph": f"products-sized generated graph {i}", "width": 128, "nnz": 1000 * (i + 1), "gbps": 1.0 + i,
             "refs": {"unfused": {"ratio": 0.5 + i / 10}, "pyg": {"ratio": 3.0}}} for i in range(n)]
    meta = {"device_name": "test", "copy_bandwidth": {"device_gbps": 50.0, "host_gbps": None}}
    for path in plots.write_plots(rows, meta, str(tmp_path)):
        img = matplotlib.image.imread(path)[..., :3]
        for edge in (img[:, :3], img[:, -3:], img[:3], img[-3:]):
            assert edge.min() > 0.95, (path, "something is drawn at the border: a label was cut off")
