"""`gnnsparse train`: the generated graph, the .npz loader, short seeded training runs (bitwise
reproducible, better than chance), the command line and (where PyG is installed) --compare pyg."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gnnsparse.__main__ import main as cli  # noqa: E402
from gnnsparse.train import data as D  # noqa: E402
from gnnsparse.train import initial_state, prepare, run_once  # noqa: E402


def test_generator_is_seeded_symmetric_and_loop_free():
    a, b = D.quick(1), D.quick(1)
    for f in ("edge_index", "x", "y", "train_idx", "val_idx", "test_idx"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert not np.array_equal(D.quick(2).y, a.y)
    ei = a.edge_index
    assert (ei[0] != ei[1]).all()
    pairs = set(map(tuple, ei.T.tolist()))
    assert len(pairs) == ei.shape[1] and all((d, s) in pairs for s, d in pairs)  # no duplicates, both directions
    n = a.num_nodes
    split = np.concatenate([a.train_idx, a.val_idx, a.test_idx])
    assert np.array_equal(np.sort(split), np.arange(n))
    deg = np.bincount(ei[1], minlength=n)
    assert deg.max() > 5 * np.median(deg)  # heavy-tailed degrees
    assert a.x.dtype == np.float32 and a.x.shape == (n, D.QUICK["num_features"])


def test_arxiv_sizes_are_arxiv_like():
    # the full generator at a tenth of the size: same model, seconds
    d = D.synthetic(16_934, 116_624, 128, 40, seed=0)
    assert d.num_classes == 40 and 0.16e6 < d.num_edges < 0.26e6
    same = (d.y[d.edge_index[0]] == d.y[d.edge_index[1]]).mean()
    assert 0.3 < same < 0.8  # homophilous, not strictly


def test_torch_draw_is_seeded_symmetric_and_homophilous():
    # synthetic_torch (the GPU draw of --size products), here on the CPU at a small size: the same
    # model as synthetic, bitwise the same graph for a seed, both directions, no loops
    a = D.synthetic_torch(20_000, 100_000, 16, 7, seed=1, device="cpu")
    b = D.synthetic_torch(20_000, 100_000, 16, 7, seed=1, device="cpu")
    for f in ("edge_index", "x", "y", "train_idx"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    ei = a.edge_index
    assert (ei[0] != ei[1]).all() and 150_000 < ei.shape[1] <= 200_000
    pairs = set(map(tuple, ei.T.tolist()))
    assert len(pairs) == ei.shape[1] and all((d, s) in pairs for s, d in pairs)
    assert 0.3 < (a.y[ei[0]] == a.y[ei[1]]).mean() < 0.8
    assert not np.array_equal(D.synthetic_torch(20_000, 100_000, 16, 7, seed=2, device="cpu").edge_index, ei)


def test_products_graph_is_drawn_on_the_gpu_when_training_there(monkeypatch):
    # --size products on a CUDA device draws the graph there (synthetic_torch, seconds) instead of
    # NumPy's two minutes; elsewhere NumPy's draw. The generators are stubbed: only the routing is checked.
    calls = []
    monkeypatch.setattr(D, "synthetic", lambda **kw: calls.append(("numpy", kw)) or "numpy-graph")
    monkeypatch.setattr(D, "synthetic_torch", lambda **kw: calls.append(("torch", kw)) or "torch-graph")
    assert D.products_like(3) == "numpy-graph"
    assert D.products_like(3, torch.device("cpu")) == "numpy-graph"
    assert D.products_like(3, torch.device("cuda", 1)) == "torch-graph"
    assert D.products_like(3, "cuda") == "torch-graph"
    assert [c[0] for c in calls] == ["numpy", "numpy", "torch", "torch"]
    kw = calls[2][1]
    assert kw["seed"] == 3 and str(kw["device"]) == "cuda:1" and kw["num_nodes"] == D.PRODUCTS["num_nodes"]


def test_npz_loader(tmp_path):
    d = D.quick(0)
    p = tmp_path / "g.npz"
    np.savez(p, edge_index=d.edge_index, x=d.x, y=d.y, train_mask=np.isin(np.arange(d.num_nodes), d.train_idx),
             val_idx=d.val_idx, test_idx=d.test_idx)
    e = D.load_npz(p)
    np.testing.assert_array_equal(e.train_idx, d.train_idx)
    np.testing.assert_array_equal(e.edge_index, d.edge_index)
    np.savez(tmp_path / "nosplit.npz", edge_index=d.edge_index, features=d.x, labels=d.y)
    f = D.load_npz(tmp_path / "nosplit.npz")
    assert len(f.train_idx) + len(f.val_idx) + len(f.test_idx) == d.num_nodes
    np.savez(tmp_path / "bad.npz", edge_index=d.edge_index, x=d.x)
    with pytest.raises(ValueError, match="missing key.*y"):
        D.load_npz(tmp_path / "bad.npz")
    np.savez(tmp_path / "range.npz", edge_index=np.array([[0, 5000]]).T, x=d.x, y=d.y)
    with pytest.raises(ValueError, match="edge 0 .* outside"):
        D.load_npz(tmp_path / "range.npz")
    np.savez(tmp_path / "part.npz", edge_index=d.edge_index, x=d.x, y=d.y, train_idx=d.train_idx)
    with pytest.raises(ValueError, match="all three"):
        D.load_npz(tmp_path / "part.npz")


@pytest.fixture(scope="module")
def quick_tensors():
    from conftest import sycl_or_skip

    sycl_or_skip()
    return D.quick(0)


@pytest.mark.parametrize("model, epochs, attn_dropout", [("gcn", 12, 0.0), ("gat", 4, 0.0), ("sage", 4, 0.0),
                                                         ("gat", 4, 0.6), ("gatv2", 4, 0.0), ("transformer", 4, 0.6),
                                                         ("gin", 4, 0.0), ("graphconv", 4, 0.0)])
def test_seeded_training_is_bitwise_reproducible(quick_tensors, model, epochs, attn_dropout):
    t = prepare(quick_tensors, torch.device("cpu"), model)
    kw = dict(epochs=epochs, hidden=16, heads=4, seed=0, attn_dropout=attn_dropout)
    r1, r2 = run_once(t, model, "gnnsparse", **kw), run_once(t, model, "gnnsparse", **kw)
    assert r1.loss_bits == r2.loss_bits and len(r1.losses) == epochs
    assert all(np.isfinite(r1.losses)) and r1.losses[-1] < r1.losses[0]
    if model == "gcn":
        chance = 1.0 / quick_tensors.num_classes
        assert r1.best_val_test > 2 * chance


def test_train_command(tmp_path, capsys, quick_tensors):
    out = tmp_path / "r.json"
    assert cli(["train", "--model", "sage", "--aggr", "max", "--quick", "--epochs", "3", "--runs", "2",
                "--device", "cpu", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "training summary" in text and "bitwise" in text and "loss" in text
    r = json.loads(out.read_text())
    runs = r["results"]["gnnsparse"]
    assert len(runs) == 2 and runs[0]["losses"] == runs[1]["losses"] and len(runs[0]["epoch_ms"]) == 3
    assert cli(["train", "--data", str(tmp_path / "missing.npz")]) == 2
    assert cli(["train", "--model", "gcn", "--attn-dropout", "0.6", "--quick", "--device", "cpu"]) == 2
    assert cli(["train", "--model", "gat", "--attn-dropout", "1.5", "--quick", "--device", "cpu"]) == 2
    assert cli(["train", "--model", "gat", "--attn-dropout", "0.5", "--nproc", "2", "--quick", "--device", "cpu"]) == 2
    assert "--attn-dropout" in capsys.readouterr().err


@pytest.mark.parametrize("model", ["gat", "gatv2", "transformer", "gin", "graphconv"])
def test_compare_with_pyg(quick_tensors, model):
    pytest.importorskip("torch_geometric")
    t = prepare(quick_tensors, torch.device("cpu"), model)
    init = initial_state(model, t, 16, 4, 0, 0.5, "mean")
    a = run_once(t, model, "gnnsparse", epochs=3, hidden=16, init=init)
    b = run_once(t, model, "pyg", epochs=3, hidden=16, init=init)
    # the same model from the same weights and dropout masks: the same losses up to rounding
    np.testing.assert_allclose(a.losses, b.losses, rtol=1e-4)
