"""The graph object: GraphMethods (A @ X, A.reduce, constructors from PyG / torch / torch_sparse,
to_dense, edge order) and GraphTensors."""
from __future__ import annotations

import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gnnsparse as gs  # noqa: E402
import gnnsparse.torch as gst  # noqa: E402
from gnnsparse import _graph  # noqa: E402
from gnnsparse._graph import GraphMethods  # noqa: E402


if issubclass(gs.CSR, GraphMethods):
    Graph = gs.CSR
else:
    class Graph(GraphMethods, gs.CSR):
        """gnnsparse.CSR with the graph methods (what CSR itself becomes)."""


D = torch.float64


@pytest.fixture
def edges(sycl):
    g = torch.Generator().manual_seed(3)
    n, e = 11, 40
    ei = torch.randint(0, n, (2, e), generator=g)
    ei[:, 0] = ei[:, 1]  # a duplicate edge
    return ei, n, torch.rand(e, generator=g, dtype=D)


def _dense(ei, n, w):
    return torch.zeros(n, n, dtype=D).index_put((ei[1], ei[0]), w, accumulate=True)


def test_matmul_and_reduce(edges):
    ei, n, w = edges
    A = Graph.from_edge_index(ei, n, w)
    X = torch.randn(n, 3, dtype=D, requires_grad=True)
    Y = A @ X
    torch.testing.assert_close(Y, _dense(ei, n, w) @ X)
    Y.sum().backward()
    torch.testing.assert_close(X.grad, _dense(ei, n, w).sum(0)[:, None].expand(n, 3))
    out, arg = A.reduce(X, "max")
    assert arg.dtype == torch.int64 and out.shape == arg.shape == (n, 3)
    ok = arg >= 0
    k = arg[ok]
    torch.testing.assert_close(out[ok], (A.val[k] * X.detach()[A.col[k], torch.nonzero(ok)[:, 1]]).to(D)
                               if isinstance(A.val, torch.Tensor) else
                               torch.tensor(A.val)[k] * X.detach()[torch.tensor(A.col).long()[k],
                                                                       torch.nonzero(ok)[:, 1]])
    mean = A.reduce(X, "mean")
    assert isinstance(mean, torch.Tensor)
    # NumPy in, NumPy out through the plain op
    Xn = X.detach().numpy()
    np.testing.assert_allclose(A @ Xn, Y.detach().numpy(), rtol=1e-12)
    r, a = A.reduce(Xn, "min")
    assert isinstance(r, np.ndarray) and a.dtype == np.int64


def test_constructors_agree(edges):
    ei, n, w = edges
    ref = _dense(ei, n, w)
    data = types.SimpleNamespace(edge_index=ei, num_nodes=n, edge_weight=w)  # what a PyG Data carries
    # torch 2.11 warns "implicitly disabled" for an uncoalesced tensor even with check_invariants=True
    # (from an inner construction); the context manager opts in explicitly
    with torch.sparse.check_sparse_tensor_invariants(enable=True):
        S = torch.sparse_coo_tensor(torch.stack([ei[1], ei[0]]), w, (n, n))
    A = Graph.from_edge_index(ei, n, w)

    class FakeStorage:  # torch_sparse.SparseTensor's storage interface
        def rowptr(self):
            return torch.tensor(A.rowptr.astype(np.int64))

        def col(self):
            return torch.tensor(A.col.astype(np.int64))

        def value(self):
            return torch.tensor(A.val)

    sparse_tensor = types.SimpleNamespace(storage=FakeStorage(), sparse_sizes=lambda: (n, n))
    for G in (A, Graph.from_pyg(data), Graph.from_torch_sparse(S), Graph.from_sparse_tensor(sparse_tensor),
              _graph.as_graph(data), _graph.as_graph(S), _graph.as_graph(A.to_scipy())):
        torch.testing.assert_close(torch.as_tensor(_graph.to_dense(G)).to(D), ref)
    assert isinstance(Graph.from_pyg(data), Graph)
    with pytest.raises(TypeError, match="edge_index"):
        _graph.from_pyg(types.SimpleNamespace(x=1))
    with pytest.raises(TypeError, match="cannot make a graph"):
        _graph.as_graph("graph.txt")


def test_pyg_objects(edges):
    pyg = pytest.importorskip("torch_geometric")
    from torch_geometric.data import Data

    ei, n, w = edges
    ref = _dense(ei, n, w)
    torch.testing.assert_close(torch.as_tensor(Graph.from_pyg(Data(edge_index=ei, edge_weight=w, num_nodes=n))
                                               .to_dense()).to(D), ref)
    E = pyg.EdgeIndex(ei, sparse_size=(n, n))
    torch.testing.assert_close(torch.as_tensor(Graph.from_pyg(E).to_dense()).to(D), _dense(ei, n, torch.ones_like(w)))


def test_torch_sparse_when_installed(edges):
    torch_sparse = pytest.importorskip("torch_sparse")
    ei, n, w = edges
    adj = torch_sparse.SparseTensor(row=ei[1], col=ei[0], value=w, sparse_sizes=(n, n))
    torch.testing.assert_close(torch.as_tensor(Graph.from_sparse_tensor(adj).to_dense()).to(D), _dense(ei, n, w))


def test_to_dense_sums_duplicates(edges):
    ei, n, w = edges
    A = Graph.from_edge_index(ei.numpy(), n, w.numpy())
    dense = A.to_dense()
    assert isinstance(dense, np.ndarray)
    np.testing.assert_allclose(dense, _dense(ei, n, w).numpy())
    torch.testing.assert_close(A.to_dense(torch.zeros(1)).to(D), _dense(ei, n, w))


def test_edge_outputs_in_the_callers_order(edges):
    ei, n, _ = edges
    A = Graph.from_edge_index(ei, n)
    X, Y = torch.randn(n, 4, dtype=D), torch.randn(n, 4, dtype=D)
    want = (X[ei[1]] * Y[ei[0]]).sum(1)  # edge e = (src, dst): <X[dst], Y[src]>
    torch.testing.assert_close(A.sddmm(X, Y, "dot", edge_order="input"), want)
    csr = A.sddmm(X, Y, "dot")
    torch.testing.assert_close(A.edges_to_input_order(csr), want)
    torch.testing.assert_close(A.edges_from_input_order(want), csr)
    a, b, Z = torch.randn(n, 2, dtype=D), torch.randn(n, 2, dtype=D), torch.randn(n, 2, 3, dtype=D)
    _, w_in = A.fusedmm(a, b, Z, "add", "exp", return_edges=True, edge_order="input")
    torch.testing.assert_close(w_in, torch.exp(a[ei[1]] + b[ei[0]]))
    # NumPy graph and arrays take the plain ops, same order rules
    An = Graph.from_edge_index(ei.numpy(), n)
    np.testing.assert_allclose(An.sddmm(X.numpy(), Y.numpy(), "dot", edge_order="input"), want.numpy(), rtol=1e-12)
    B = gs.CSR(np.array([0, 1]), np.array([0]), None, (1, 1))
    with pytest.raises(ValueError, match="no edge_perm"):
        _graph.edges_to_input_order(B, np.ones(1))


def test_graph_tensors_cached_per_device_and_checked(edges):
    ei, n, w = edges
    A = gs.CSR.from_edge_index(ei, n, w)
    g1, g2 = gst.graph_tensors(A, "cpu"), gst.graph_tensors(A, torch.zeros(1))
    assert g1.rowptr is g2.rowptr and g1.t_perm is g2.t_perm
    np.testing.assert_array_equal(g1.t_perm.numpy(), A.T.perm)  # the same transpose as CSR.T
    np.testing.assert_array_equal(g1.t_rowptr.numpy(), A.T.rowptr)
    torch.testing.assert_close(g1.val, torch.tensor(A.val))
    new = np.array(A.val)
    new[0] = 5.0
    A.val = new  # a CSR's host values are read-only: new values are a new array, seen at once
    assert float(gst.graph_tensors(A, "cpu").val[0]) == 5.0
    with pytest.raises(ValueError, match="shape"):
        g1.with_val(torch.ones(3))
    with pytest.raises(TypeError, match="gnnsparse.CSR or GraphTensors"):
        gst.graph_tensors(object(), "cpu")


def test_self_loops_follow_pyg(edges):
    ei, n, w = edges
    ei = ei.clone()
    ei[:, 1], ei[:, 2] = torch.tensor([4, 4]), torch.tensor([4, 4])  # two loops at node 4
    g = gst.from_edge_index(ei, n, w)
    last = torch.full((n,), 1.5, dtype=D)
    for k in range(ei.shape[1]):  # PyG: the last loop of a node (in edge order) keeps its weight
        if ei[0, k] == ei[1, k]:
            last[ei[0, k]] = w[k]
    assert float(last[4]) == float(w[2]) or bool(((ei[0] == 4) & (ei[1] == 4))[3:].any())
    for mode, want in (("replace", torch.full((n,), 1.5, dtype=D)), ("remaining", last)):
        h = gst.self_loops(g, mode, fill=1.5)
        dense = torch.zeros(n, n, dtype=D).index_put((h.rows.long(), h.col.long()), h.val, accumulate=True)
        assert h.nnz == int((ei[0] != ei[1]).sum()) + n
        torch.testing.assert_close(torch.diagonal(dense), want)
        # edge_perm: kept edges in the caller's order, then the loops
        order = torch.argsort(h.edge_perm)
        kept = ei[:, ei[0] != ei[1]]
        torch.testing.assert_close(h.col.long()[order][: kept.shape[1]], kept[0])
        torch.testing.assert_close(h.rows.long()[order][kept.shape[1]:], torch.arange(n))
