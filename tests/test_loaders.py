"""Loaders: round trips through Matrix Market, SNAP edge lists and .npz; malformed files name the
file and the line or key."""
import gzip
import warnings

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import gnnsparse as gs
from gnnsparse.bench import loaders


def _dense(A):
    return A.to_scipy().toarray()


def test_mtx_round_trip(tmp_path):
    S = sp.random(40, 30, density=0.1, format="csr", random_state=0, dtype=np.float64)
    p = tmp_path / "a.mtx"
    with warnings.catch_warnings():  # scipy's notices about its own API, not gnnsparse's
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        scipy.io.mmwrite(p, S)
    A = loaders.load_mtx(p)
    assert A.shape == (40, 30) and A.nnz == S.nnz and A.val.dtype == np.float32
    np.testing.assert_allclose(_dense(A), S.toarray(), rtol=1e-6)
    assert loaders.load_graph(p).nnz == S.nnz


def test_mtx_pattern_and_symmetric(tmp_path):
    p = tmp_path / "p.mtx"
    p.write_text("%%MatrixMarket matrix coordinate pattern symmetric\n% a comment\n3 3 2\n2 1\n3 3\n")
    A = loaders.load_mtx(p)
    assert A.val is None and A.nnz == 3
    np.testing.assert_array_equal(_dense(A), [[0, 1, 0], [1, 0, 0], [0, 0, 1]])


@pytest.mark.parametrize("body, where", [
    ("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n2 x 2.0\n", ":4"),
    ("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n5 1 2.0\n", ":4"),
    ("not a matrix\n1 2\n", ":1"),
    ("%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1.0\n2 1 2.0\n", ""),
])
def test_mtx_malformed(tmp_path, body, where):
    p = tmp_path / "bad.mtx"
    p.write_text(body)
    with pytest.raises(ValueError) as e:
        loaders.load_mtx(p)
    assert f"{p}{where}" in str(e.value)


def test_mtx_dense_array_rejected(tmp_path):
    p = tmp_path / "d.mtx"
    scipy.io.mmwrite(p, np.eye(3))
    with pytest.raises(ValueError, match="dense"):
        loaders.load_mtx(p)


def test_snap_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    ei = rng.integers(0, 50, (2, 300))
    p = tmp_path / "g.txt"
    lines = ["# Directed graph: test", "# FromNodeId\tToNodeId"] + [f"{u}\t{v}" for u, v in ei.T]
    lines.insert(100, "")
    lines.insert(150, "% another comment")
    p.write_text("\n".join(lines) + "\n")
    A = loaders.load_snap(p)
    B = gs.CSR.from_edge_index(ei, 50)
    assert A.shape == (50, 50) and np.array_equal(A.rowptr, B.rowptr) and np.array_equal(A.col, B.col)
    assert A.val is None
    # gzip, num_nodes, undirected
    gz = tmp_path / "g.txt.gz"
    with gzip.open(gz, "wt") as f:
        f.write(p.read_text())
    C = loaders.load_graph(gz, num_nodes=60, undirected=True)
    assert C.shape == (60, 60) and C.nnz == 600
    D = C.to_scipy()
    assert abs(D - D.T).max() == 0


def test_snap_weights_and_relabel(tmp_path):
    p = tmp_path / "w.edges"
    p.write_text("10 20 0.5\n20 30 1.5\n30 10 2\n")
    A = loaders.load_snap(p, relabel=True)
    assert A.shape == (3, 3)
    np.testing.assert_allclose(_dense(A), [[0, 0, 2], [0.5, 0, 0], [0, 1.5, 0]])
    B = loaders.load_snap(p)
    assert B.shape == (31, 31) and B.nnz == 3


def test_snap_empty_file(tmp_path):
    p = tmp_path / "e.txt"
    p.write_text("# nothing\n")
    A = loaders.load_snap(p, num_nodes=4)
    assert A.shape == (4, 4) and A.nnz == 0


@pytest.mark.parametrize("body, line, message", [
    ("0 1\n1 two\n", 2, "node ids must be integers"),
    ("# c\n0 1\n\n3\n", 4, "expected 'src dst'"),
    ("0 1\n1 2 0.5\n", 2, "fields but earlier lines have 2"),
    ("0 1\n1 2 x\n2 3 y\n", 2, "fields but earlier lines have 2"),
    ("0 1 1\n1 2 x\n", 2, "edge weight must be a number"),
    ("0 1\n# c\n2 -3\n", 3, "negative node id"),
    ("0 1\n1.5 2\n", 2, "node ids must be integers"),
])
def test_snap_malformed_names_the_line(tmp_path, body, line, message):
    p = tmp_path / "bad.txt"
    p.write_text(body)
    with pytest.raises(ValueError) as e:
        loaders.load_snap(p)
    assert f"{p}:{line}:" in str(e.value) and message in str(e.value)


def test_snap_id_beyond_num_nodes(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("0 1\n# x\n1 9\n")
    with pytest.raises(ValueError, match=rf"{p}:3: .*num_nodes=5"):
        loaders.load_snap(p, num_nodes=5)


def test_npz_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    ei = rng.integers(0, 40, (2, 200))
    w = rng.random(200).astype(np.float32)
    p = tmp_path / "g.npz"
    np.savez(p, edge_index=ei, num_nodes=np.int64(45), edge_weight=w)
    A = loaders.load_npz(p)
    B = gs.CSR.from_edge_index(ei, 45, w)
    assert A.shape == (45, 45)
    np.testing.assert_array_equal(A.col, B.col)
    np.testing.assert_allclose(A.val, B.val)
    q = tmp_path / "h.npz"
    np.savez_compressed(q, edge_index=ei.astype(np.int32))
    C = loaders.load_graph(q)
    assert C.shape == (int(ei.max()) + 1,) * 2 and C.val is None


@pytest.mark.parametrize("arrays, message", [
    ({"edges": np.zeros((2, 3), np.int64)}, "missing key 'edge_index' (found: edges)"),
    ({"edge_index": np.zeros((3, 3), np.int64)}, "key 'edge_index' must have shape (2, E)"),
    ({"edge_index": np.zeros((2, 3), np.float32)}, "key 'edge_index' must hold integers"),
    ({"edge_index": np.array([[0, -1], [1, 1]])}, "negative node id at edge 1"),
    ({"edge_index": np.array([[0, 1], [1, 7]]), "num_nodes": np.int64(5)}, "edge 1 = (1, 7) is outside num_nodes=5"),
    ({"edge_index": np.zeros((2, 3), np.int64), "num_nodes": np.array([1, 2])}, "key 'num_nodes'"),
    ({"edge_index": np.zeros((2, 3), np.int64), "edge_weight": np.ones(4)}, "key 'edge_weight' must have shape (3,)"),
])
def test_npz_malformed_names_the_key(tmp_path, arrays, message):
    p = tmp_path / "bad.npz"
    np.savez(p, **arrays)
    with pytest.raises(ValueError) as e:
        loaders.load_npz(p)
    assert str(p) in str(e.value) and message in str(e.value)


def test_npz_not_an_archive(tmp_path):
    p = tmp_path / "x.npz"
    p.write_bytes(b"garbage, not a zip")
    with pytest.raises(ValueError, match="not a readable .npz"):
        loaders.load_npz(p)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        loaders.load_graph(tmp_path / "nope.mtx")
