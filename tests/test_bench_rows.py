"""`gnnsparse bench` rows of issue 19 on small graphs, on the CPU: bfloat16 SpMM (skipped with its
reason where the backend takes float32/float64 only; compared with our float32 SpMM where it runs),
FusedMM with Y = Z (the same array passed twice), SpMM max with arg on a power-law graph."""
import dataclasses
import json

import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import reference
from gnnsparse.bench import cases, cli, measure, refs, report, runner
from gnnsparse.bench.cases import Case, GraphSpec

sycl = pytest.mark.skipif(not gs.available_backends().get("sycl"), reason="no SYCL device in this build/machine")


def _spec(name, kind, **p):
    return GraphSpec(name, kind, tuple(sorted(p.items())), 0)


def small_graphs():
    """graphs_suite()'s graphs, small: same names' kinds, a few thousand edges."""
    return {
        "uniform": _spec("small uniform", "uniform", n=600, e=6000),
        "powerlaw": _spec("small rmat hubs", "rmat", n=1024, e=12_000, a=0.65, b=0.15, c=0.15),
        "arxiv": _spec("small arxiv", "uniform", n=300, e=2400, symmetric=True),
        "products": _spec("small products", "uniform", n=500, e=3000, symmetric=True),
        "cora": _spec("small cora", "uniform", n=200, e=800, symmetric=True),
        "pubmed": _spec("small pubmed", "uniform", n=250, e=1000, symmetric=True),
    }


def issue19_rows():
    """The graphs suite's bf16, Y=Z and max-with-arg rows, and the ordinary FusedMM on the uniform
    graph (read against the same unfused pair as the Y=Z rows)."""
    return [c for c in cases.graphs_suite() if c.dtype != "float32" or c.y_is_z or c.arg
            or (c.op == "fusedmm" and c.graph.name.startswith("uniform"))]


# ---------------------------------------------------------------- the cases
def test_case_fields_name_the_row():
    u = _spec("u", "uniform", n=10, e=20)
    assert Case(u, "spmm", 32, dtype="bfloat16").label == "spmm sum bf16 u C=32"
    assert Case(u, "spmm", 32, reduce="max", arg=True).variant == "max+arg"
    assert Case(u, "fusedmm", 32, y_is_z=True).label == "fusedmm dot+none Y=Z u C=32"
    assert Case(u, "fusedmm", 32, edge="softmax", y_is_z=True).variant == "dot+softmax Y=Z"
    assert Case(u, "fusedmm", 32).variant == "dot+none" and Case(u, "spmm", 32).variant == "sum"
    assert Case(u, "sddmm", 8, dtype="float64").variant == "dot fp64"
    with pytest.raises(ValueError, match="arg is for spmm"):
        Case(u, "spmm", 8, reduce="sum", arg=True)
    with pytest.raises(ValueError, match="y_is_z is for fusedmm"):
        Case(u, "fusedmm", 8, sddmm_op="add", y_is_z=True)
    with pytest.raises(ValueError, match="dtype must be one of"):
        Case(u, "spmm", 8, dtype="int8")


def test_graphs_suite_has_the_issue_19_rows():
    g = cases.graphs_suite()
    uni = [c for c in g if c.graph.name.startswith("uniform n=1M")]
    pl = [c for c in g if c.graph.name.startswith("rmat")]
    assert {(c.width, c.reduce) for c in uni if c.dtype == "bfloat16"} == {(32, "sum"), (128, "sum")}
    assert all(c.op == "spmm" for c in g if c.dtype == "bfloat16")
    # the fp32 SpMM sum the bf16 rows are read against is in the suite too, same graph
    assert {32, 128} <= {c.width for c in uni if c.op == "spmm" and c.reduce == "sum" and c.dtype == "float32"}
    yz = {(c.width, c.edge) for c in uni if c.op == "fusedmm" and c.y_is_z}
    assert yz == {(32, "none"), (128, "none"), (32, "softmax")}
    assert {c.width for c in uni if c.op == "fusedmm" and not c.y_is_z and c.edge == "none"} == {32, 128}
    assert {c.width for c in pl if c.op == "spmm" and c.reduce == "max" and c.arg} == {32, 128}
    assert len(g) == len(set(g))


def test_quick_suite_is_float32_without_the_new_rows():
    q = cases.quick_suite()
    assert all(c.dtype == "float32" and not c.arg and not c.y_is_z for c in q)
    assert [c.label for c in q] == [
        "spmm sum uniform n=50k e=500k C=16", "spmm sum uniform n=50k e=500k C=32",
        "spmm mean uniform n=50k e=500k C=32", "spmm max uniform n=50k e=500k C=32",
        "spmm sum rmat n=65536 e=500k C=32", "spmm sum cora-sized n=2708 e=10556 C=16",
        "spmm sum grid M=K=1024 d=0.1 C=32", "sddmm dot uniform n=50k e=500k C=32",
        "sddmm dot grid M=K=1024 d=0.1 C=32", "fusedmm dot+none pubmed-sized n=19717 e=88648 C=32",
        "fusedmm dot+softmax pubmed-sized n=19717 e=88648 C=32"]


def test_select_keeps_the_new_fields_and_drops_arg_for_sum():
    rows = issue19_rows()
    sel = cases.select(rows, widths=(8,))
    assert {c.dtype for c in sel} == {"float32", "bfloat16"} and any(c.y_is_z for c in sel) and any(c.arg for c in sel)
    summed = cases.select(rows, ops=("spmm",), reduces=("sum",))
    assert summed and not any(c.arg for c in summed)  # sum has no arg: the flag goes, the case stays valid
    assert any(c.dtype == "bfloat16" for c in summed)


# ---------------------------------------------------------------- inputs, model, check
def test_bf16_inputs_are_bf16_values():
    torch = pytest.importorskip("torch")
    from gnnsparse.bench.generators import uniform_random

    A = uniform_random(50, 300, seed=1)
    case = Case(_spec("t", "uniform", n=50, e=300), "spmm", 16, dtype="bfloat16")
    X = measure.make_inputs(case, A, 3)["X"]
    assert X.dtype == np.float32
    X32 = measure.make_inputs(dataclasses.replace(case, dtype="float32"), A, 3)["X"]
    want = torch.from_numpy(X32).to(torch.bfloat16).float().numpy()  # torch rounds to nearest even
    np.testing.assert_array_equal(X, want)
    assert not np.array_equal(X, X32)
    # what the CUDA device puts on the GPU: a bfloat16 tensor holding exactly those values
    fake = type("D", (), {"torch": torch, "torch_device": "cpu"})()
    t = measure.CUDADevice.put(fake, X, "bfloat16")
    assert t.dtype == torch.bfloat16 and np.array_equal(t.float().numpy(), X)
    assert measure.CUDADevice.put(fake, X, "float32").dtype == torch.float32


def test_round_to_bf16_ties_to_even():
    # 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: to even (1); 1 + 3 * 2^-8: to 1 + 2^-6
    a = np.array([1 + 2**-8, 1 + 3 * 2**-8, -2.5, 1e-3], np.float32)
    r = measure.round_to(a, "bfloat16")
    assert r[0] == 1.0 and r[1] == 1 + 2**-6 and r[2] == -2.5
    assert abs(r[3] - 1e-3) <= 2**-9 * 1e-3 and (r.view(np.uint32) & 0xFFFF == 0).all()


def test_model_counts_2_byte_elements_one_gather_and_the_arg():
    A = gs.CSR(np.array([0, 2, 3], np.int32), np.array([0, 1, 1], np.int32), None, (2, 2))
    g = _spec("t", "uniform", n=2, e=3)
    csr = 3 * 4 + 3 * 4
    nb32, fl32 = measure.model(Case(g, "spmm", 4), A)
    nb16, fl16 = measure.model(Case(g, "spmm", 4, dtype="bfloat16"), A)
    assert nb32 == csr + 3 * 4 * 4 + 2 * 4 * 4 and nb16 == csr + 3 * 4 * 2 + 2 * 4 * 2 and fl16 == fl32
    nba, _ = measure.model(Case(g, "spmm", 4, reduce="max", arg=True), A)
    assert nba == nb32 + 2 * 4 * 8
    nbf, flf = measure.model(Case(g, "fusedmm", 4), A)
    nbz, flz = measure.model(Case(g, "fusedmm", 4, y_is_z=True), A)
    assert nbf - nbz == 3 * 4 * 4 and flf == flz  # one gathered row per edge instead of two


def test_check_rejects_a_wrong_arg_and_a_bf16_result_off_by_more_than_bf16():
    from gnnsparse.bench.generators import rmat

    A = rmat(512, 6000, seed=2, a=0.65, b=0.15, c=0.15)
    case = Case(_spec("t", "rmat", n=512, e=6000), "spmm", 6, reduce="max", arg=True)
    inp = measure.make_inputs(case, A, 0)
    Y, arg = reference.spmm(A, inp["X"], "max", return_arg=True)
    assert measure.check(case, A, inp, Y.astype(np.float32), arg_host=arg)[0]
    rows = measure.sample_rows(A, 64, seed=0, full_nnz=0)
    assert measure.check(case, A, inp, Y.astype(np.float32), rows, arg_host=arg)[0]  # sampled: positions in A
    bad = arg.copy()
    i = int(np.argmax(A.degrees()))
    bad[i, 0] = A.rowptr[i + 1] - 1 if bad[i, 0] != A.rowptr[i + 1] - 1 else A.rowptr[i]
    ok, _, msg = measure.check(case, A, inp, Y.astype(np.float32), arg_host=bad)
    assert not ok and "arg differs" in msg

    b = Case(_spec("t", "rmat", n=512, e=6000), "spmm", 6, dtype="bfloat16")
    inp = measure.make_inputs(b, A, 0)
    ref = reference.spmm(A, inp["X"], "sum")
    as_bf16 = measure.round_to(ref.astype(np.float32), "bfloat16")  # the output rounded to bf16: passes
    ok, err, _ = measure.check(b, A, inp, as_bf16)
    assert ok and 0 < err <= 2**-8
    assert not measure.check(dataclasses.replace(b, dtype="float32"), A, inp, as_bf16)[0]  # fp32's tolerance: not
    worse = as_bf16 * np.float32(1 + 2**-5)
    assert not measure.check(b, A, inp, worse)[0]


# ---------------------------------------------------------------- Y = Z: the same array
def test_y_is_z_passes_one_array_as_y_and_z(monkeypatch):
    from gnnsparse.bench.generators import uniform_random

    A = uniform_random(40, 200, seed=0)
    seen = []

    def spy(A, X, Y, Z, op="dot", edge="none", **kw):
        seen.append((Y is Z, edge))
        return np.zeros((A.shape[0], np.shape(Z)[-1]), np.float32)
    monkeypatch.setattr(gs, "fusedmm", spy)
    g = _spec("t", "uniform", n=40, e=200)
    for case in (Case(g, "fusedmm", 8, y_is_z=True), Case(g, "fusedmm", 8, edge="softmax", y_is_z=True),
                 Case(g, "fusedmm", 8)):
        inp = measure.make_inputs(case, A, 0)
        assert ("Z" in inp) is not case.y_is_z
        measure.ours(case)(A, inp)
    assert seen == [(True, "none"), (True, "softmax"), (False, "none")]


@sycl
def test_y_is_z_row_through_the_runner(monkeypatch):
    """Every call of ours for a Y=Z row gets Y is Z (the rotated copies included); the unfused pair
    aggregates Y; the result is checked against the reference with Z = Y."""
    calls = []
    real = gs.fusedmm

    def spy(A, X, Y, Z, *a, **kw):
        calls.append(Y is Z)
        ys.append(Y)
        return real(A, X, Y, Z, *a, **kw)
    monkeypatch.setattr(gs, "fusedmm", spy)
    ys, spmm_operands = [], []
    real_spmm = gs.spmm

    def spmm_spy(A, X, *a, **kw):
        spmm_operands.append(X)
        return real_spmm(A, X, *a, **kw)
    monkeypatch.setattr(gs, "spmm", spmm_spy)
    g = small_graphs()["uniform"]
    case = Case(g, "fusedmm", 16, y_is_z=True)
    res = runner.run_cases([case], measure.CPUDevice(), repeat=3, ref_names=("unfused",), log=lambda m: None)[0]
    assert res["verified"] and res["y_is_z"] is True and res["variant"] == "dot+none Y=Z", res["error"]
    assert calls and all(calls)
    assert res["refs"]["unfused"]["agrees"] and res["refs"]["unfused"]["ratio"] > 0
    # the unfused pair's SpMM aggregates the very arrays ours got as Y (and Z)
    assert spmm_operands and all(any(x is y for y in ys) for x in spmm_operands)


# ---------------------------------------------------------------- the suite, small, on the CPU
def small_issue19_cases():
    """The graphs suite's new rows with its graphs replaced by small ones of the same kinds."""
    small = small_graphs()
    by_name = {spec.name: small[key] for key, spec in cases.graph_suite_graphs().items()}
    sel = [dataclasses.replace(c, graph=by_name[c.graph.name]) for c in issue19_rows()]
    return cases.select(sel, widths=(8,))


@sycl
def test_issue_19_rows_on_the_cpu_device():
    res = runner.run_cases(small_issue19_cases(), measure.CPUDevice(), repeat=2, log=lambda m: None)
    by = {r["case"]: r for r in res}
    bf = [r for r in res if r["dtype"] == "bfloat16"]
    assert bf and all(r["skipped"] and r.get("skip_kind") == "dtype" and not r["error"] for r in bf)
    assert all("bfloat16" in r["skipped"] and "float32 and float64 only" in r["skipped"] for r in bf)
    assert all(not r["verified"] and r["ours_s"] is None for r in bf)
    rest = [r for r in res if r["dtype"] != "bfloat16"]
    assert rest and all(r["verified"] and r["ours_s"] > 0 for r in rest), [(r["case"], r["error"]) for r in rest]
    yz = by["fusedmm dot+none Y=Z small uniform C=8"]
    assert yz["refs"]["unfused"]["agrees"] and "ratio" in yz["refs"]["unfused"]
    assert "unfused" not in by["fusedmm dot+softmax Y=Z small uniform C=8"]["refs"]  # the pair is edge none
    mx = by["spmm max+arg small rmat hubs C=8"]
    assert mx["arg"] is True and mx["max_degree"] > 5 * 12_000 / 1024
    pl = small_graphs()["powerlaw"]
    assert mx["bytes"] == measure.model(Case(pl, "spmm", 8, reduce="max", arg=True), pl.build())[0]
    summary = runner.summarize(res)
    assert "fusedmm dot+none Y=Z vs unfused" in summary and "fusedmm dot+none vs unfused" in summary
    assert summary["fusedmm dot+none vs unfused"]["cases"] == 1  # the Y=Z row is not in this geomean
    assert not any("bf16" in k for k in summary)
    lines = report.skipped_lines(res)
    assert lines == [f"skipped {r['case']}: {r['skipped']}" for r in bf]


@sycl
def test_float64_row_against_ours_fp32():
    """A dtype the SYCL device runs (float64) takes the path of the GPU's bf16 rows: inputs put in
    the case's dtype, the reference "ours_fp32" on float32 copies, its own geomean."""
    g = small_graphs()["uniform"]
    rows = [Case(g, "spmm", 8, dtype="float64"), Case(g, "spmm", 8)]
    res = runner.run_cases(rows, measure.CPUDevice(), repeat=2, log=lambda m: None)
    r64, r32 = res
    assert r64["verified"] and r64["variant"] == "sum fp64"
    assert set(r64["refs"]) == {"ours_fp32"} and r64["refs"]["ours_fp32"]["agrees"]
    assert "ours_fp32" not in r32["refs"] and "scipy" in r32["refs"]
    s = runner.summarize(res)
    assert s["spmm sum fp64 vs ours_fp32"]["cases"] == 1 and "spmm sum vs scipy" in s


@sycl
def test_bf16_row_on_a_device_that_runs_it(monkeypatch):
    """The GPU's path for a bfloat16 row, with torch CPU tensors: a fake device that takes bfloat16
    (ours for that dtype is a stand-in: float32 SpMM rounded to bfloat16). The inputs reach ours as
    bfloat16, the check uses the bf16 tolerance, ours_fp32 runs on float32 copies, agrees, and gives
    the ratio; the --targets goal reads it."""
    torch = pytest.importorskip("torch")
    got_dtypes = []

    class FakeGPU(measure.CPUDevice):
        kind = "cuda"
        l2_bytes = 1 << 16
        copies_for = measure.CUDADevice.copies_for

        def __init__(self):
            super().__init__()
            self.dtypes = frozenset(self.dtypes | {"bfloat16"})

        def put(self, a, dtype="float32"):
            return torch.from_numpy(a.copy()).to(getattr(torch, dtype))

    real = measure.ours

    def ours(case):
        if case.dtype != "bfloat16":
            return real(case)
        f32 = real(dataclasses.replace(case, dtype="float32"))

        def run(A, i):
            got_dtypes.append(i["X"].dtype)
            return f32(A, {"X": i["X"].float()}).to(torch.bfloat16)
        return run
    monkeypatch.setattr(measure, "ours", ours)
    g = small_graphs()["uniform"]
    case = Case(g, "spmm", 128, dtype="bfloat16")
    res = runner.run_cases([case], FakeGPU(), repeat=2, log=lambda m: None)[0]
    assert res["verified"], res["error"]
    assert got_dtypes and set(got_dtypes) == {torch.bfloat16}
    assert 0 < res["max_rel_err"] <= measure.RTOL["bfloat16"]
    assert set(res["refs"]) == {"ours_fp32"}
    ref = res["refs"]["ours_fp32"]
    assert ref["agrees"] and ref["ratio"] > 0
    assert res["bytes"] == measure.model(case, g.build())[0]
    goals = {t["target"]: t for t in runner.targets(runner.summarize([res]), [res], "cuda")}
    assert goals["SpMM bf16 >= 1.8x our fp32 SpMM at C=128"]["cases"] == 1
    assert "SpMM >= 95% of the bytes-model floor (graphs with >= 5M edges)" not in goals  # bf16 rows not in it


@sycl
def test_graphs_suite_small_end_to_end(tmp_path, monkeypatch, capsys):
    """`gnnsparse bench --suite graphs` over the new rows on small graphs: the bf16 rows are skipped
    with the reason printed, the others are in the table, the CSV and the JSON."""
    small = small_issue19_cases()
    monkeypatch.setattr(cases, "graphs_suite", lambda: small)
    out = tmp_path / "o"
    rc = cli.main(["bench", "--suite", "graphs", "--device", "cpu", "--repeat", "2", "--out", str(out),
                   "--no-plots", "--no-progress", "--plain"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "skipped spmm sum bf16 small uniform C=8: bfloat16 features: the sycl backend" in printed
    assert "dot+none Y=Z" in printed and "max+arg" in printed and "×unfused" in printed
    assert "fusedmm dot+none Y=Z vs unfused:" in printed
    data = json.loads((out / "results.json").read_text())
    bf = [r for r in data["results"] if r["dtype"] == "bfloat16"]
    assert bf and all("bfloat16" in r["skipped"] for r in bf)
    assert "unfused" in data["meta"]["references"] and "ours_fp32" not in data["meta"]["references"]  # none ran
    md = (out / "table.md").read_text()
    assert "- skipped spmm sum bf16 small uniform C=8: bfloat16 features" in md and "| floor |" in md
    csv = (out / "results.csv").read_text().splitlines()
    head = csv[0].split(",")
    assert {"dtype", "arg", "y_is_z", "frac_copy_bw", "unfused_ratio"} <= set(head)
    yz = [line for line in csv[1:] if "Y=Z" in line]
    assert len(yz) == 2 and all(line.split(",")[head.index("y_is_z")] == "True" for line in yz)


def test_ours_fp32_reference_is_only_for_other_dtypes():
    g = _spec("t", "uniform", n=10, e=20)
    with pytest.raises(refs.Unsupported):
        refs.fp32_setup(Case(g, "spmm", 8), None, None, None, None)
    for name in ("scipy", "torch.sparse", "pyg"):
        with pytest.raises(refs.Unsupported):
            refs.REFERENCES[name][1](Case(g, "spmm", 8, dtype="bfloat16"), None, None, None, None)


def test_targets_keep_y_is_z_and_bf16_rows_to_their_own_goals():
    def row(variant, ratio, ref="unfused", op="fusedmm", y_is_z=False, dtype="float32", width=32, reduce=None):
        return {"verified": True, "ours_s": 1.0, "op": op, "variant": variant, "reduce": reduce, "width": width,
                "graph": "uniform n=1M", "nnz": 10_000_000, "dtype": dtype, "y_is_z": y_is_z, "frac_copy_bw": 0.5,
                "refs": {ref: {"ratio": ratio}}}
    rows = [row("dot+none", 1.4), row("dot+none Y=Z", 1.5, y_is_z=True),
            row("sum bf16", 1.9, ref="ours_fp32", op="spmm", dtype="bfloat16", width=128, reduce="sum"),
            row("sum bf16", 1.2, ref="ours_fp32", op="spmm", dtype="bfloat16", width=32, reduce="sum")]
    summary = runner.summarize(rows)
    assert summary["fusedmm dot+none vs unfused"]["cases"] == 1
    assert summary["spmm sum bf16 vs ours_fp32"]["cases"] == 2
    by = {t["target"]: t for t in runner.targets(summary, rows, "cuda")}
    assert by["FusedMM >= 1.3x our SDDMM + SpMM"]["met"] and by["FusedMM >= 1.3x our SDDMM + SpMM"]["cases"] == 1
    yz = by["FusedMM with Y = Z >= 1.7x our SDDMM + SpMM"]
    assert not yz["met"] and yz["cases"] == 1 and "1.50" in yz["measured"]
    bf = by["SpMM bf16 >= 1.8x our fp32 SpMM at C=128"]
    assert bf["met"] and bf["cases"] == 1
    assert "SpMM >= 95% of the bytes-model floor (graphs with >= 5M edges)" not in by  # no fp32 SpMM sum row
