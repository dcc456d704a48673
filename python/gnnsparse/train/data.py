"""Node-classification data for `gnnsparse train`: an embedded graph generator and a .npz loader.

The generated graph is a degree-corrected stochastic block model the size of ogbn-arxiv (169,343
nodes, ~2.3 M stored edges after symmetrization, 128 features, 40 classes) whose labels are
learnable but not trivial: class sizes are skewed, degrees are heavy-tailed (most nodes have few
neighbours), edges are homophilous but not strictly (like arxiv's ~0.65), node features carry only
a weak class signal, and a share of the labels is independent of both graph and features. A
2-layer GCN reaches ~70 % test accuracy on it; an MLP on the features alone stays far below.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass
class NodeData:
    """A graph with node features, labels and a train/val/test split (NumPy arrays)."""
    name: str
    edge_index: np.ndarray      # (2, E) int64, row 0 source, row 1 target (both directions stored)
    x: np.ndarray               # (N, F) float32
    y: np.ndarray               # (N,) int64
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray

    @property
    def num_nodes(self) -> int:
        """Nodes (rows of x)."""
        return int(self.x.shape[0])

    @property
    def num_edges(self) -> int:
        """Directed edges (columns of edge_index)."""
        return int(self.edge_index.shape[1])

    @property
    def num_classes(self) -> int:
        """Classes: the largest label + 1."""
        return int(self.y.max()) + 1 if self.y.size else 0

    def describe(self) -> str:
        """One line: name, sizes and split."""
        return (f"{self.name}: {self.num_nodes:,} nodes, {self.num_edges:,} edges, {self.x.shape[1]} features, "
                f"{self.num_classes} classes, split {len(self.train_idx):,}/{len(self.val_idx):,}/"
                f"{len(self.test_idx):,}")


# arxiv-like defaults (ogbn-arxiv: 169,343 nodes, 1,166,243 citation edges, 128 features, 40 classes)
ARXIV = dict(num_nodes=169_343, num_edges=1_166_243, num_features=128, num_classes=40)
# ogbn-products' sizes (2,449,029 nodes, 61,859,140 co-purchase edges, 100 features, 47 classes)
PRODUCTS = dict(num_nodes=2_449_029, num_edges=61_859_140, num_features=100, num_classes=47)
QUICK = dict(num_nodes=3_000, num_edges=15_000, num_features=32, num_classes=8)


def _split(rng, n, train=0.54, val=0.18):
    perm = rng.permutation(n)
    a, b = int(round(train * n)), int(round((train + val) * n))
    return np.sort(perm[:a]), np.sort(perm[a:b]), np.sort(perm[b:])


def synthetic(num_nodes: int, num_edges: int, num_features: int, num_classes: int, seed: int = 0, *,
              homophily: float = 0.65, signal: float = 0.4, label_noise: float = 0.15, degree_tail: float = 2.2,
              name: Optional[str] = None) -> NodeData:
    """Degree-corrected SBM. num_edges undirected draws are stored in both directions (duplicates
    and self loops removed). Each draw picks a node with probability proportional to its weight
    theta (Pareto with exponent degree_tail, so degrees are heavy-tailed); with probability
    `homophily` its partner comes from the same class (theta-weighted), else from anywhere.
    Features: signal * mu[class] + N(0, I) with mu ~ N(0, I / sqrt(F)) per class; a `label_noise`
    share of nodes then gets a uniformly random label (features and edges follow the original).
    Deterministic for a seed; vectorized (about a second at arxiv size)."""
    if num_nodes <= 0 or num_classes <= 0 or num_features <= 0 or num_edges < 0:
        raise ValueError("synthetic graph needs positive sizes")
    rng = np.random.default_rng(seed)
    n, C = int(num_nodes), int(num_classes)
    # skewed class sizes (a few large classes, many small ones, as in arxiv)
    p_class = rng.dirichlet(np.full(C, 1.5))
    cls = rng.choice(C, size=n, p=p_class)
    theta = (1.0 - rng.random(n)) ** (-1.0 / (degree_tail - 1.0))  # Pareto(tail - 1), min 1
    theta = np.minimum(theta, np.quantile(theta, 0.9995))  # no single node takes a visible share of edges
    order = np.argsort(cls, kind="stable")
    counts = np.bincount(cls, minlength=C)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    th_sorted = theta[order]
    # per-class cumulative weights for theta-weighted sampling inside a class
    cum_in = np.cumsum(th_sorted)
    base = np.concatenate([[0.0], cum_in])[start]
    tot = np.add.reduceat(th_sorted, start) if n else np.zeros(C)
    cum_all = np.cumsum(theta)
    m = int(num_edges)
    u = np.searchsorted(cum_all, rng.random(m) * cum_all[-1], side="right")
    u = np.minimum(u, n - 1)
    same = rng.random(m) < homophily
    cu = cls[u]
    r = base[cu] + rng.random(m) * tot[cu]
    v_same = order[np.minimum(np.searchsorted(cum_in, r, side="right"), n - 1)]
    v_any = np.minimum(np.searchsorted(cum_all, rng.random(m) * cum_all[-1], side="right"), n - 1)
    v = np.where(same, v_same, v_any)
    keep = u != v
    a, b = np.minimum(u[keep], v[keep]), np.maximum(u[keep], v[keep])
    pairs = np.unique(a.astype(np.int64) * n + b)
    a, b = pairs // n, pairs % n
    edge_index = np.stack([np.concatenate([a, b]), np.concatenate([b, a])]).astype(np.int64)
    mu = rng.standard_normal((C, num_features)) / np.sqrt(np.sqrt(num_features))
    x = (signal * mu[cls] + rng.standard_normal((n, num_features))).astype(np.float32)
    y = cls.astype(np.int64)
    noisy = rng.random(n) < label_noise
    y[noisy] = rng.integers(0, C, int(noisy.sum()))
    tr, va, te = _split(rng, n)
    return NodeData(name or f"synthetic-{n}", edge_index, x, y, tr, va, te)


def synthetic_torch(num_nodes: int, num_edges: int, num_features: int, num_classes: int, seed: int = 0, *,
                    device="cuda", homophily: float = 0.65, signal: float = 0.4, label_noise: float = 0.15,
                    degree_tail: float = 2.2, name: Optional[str] = None, numpy: bool = True) -> NodeData:
    """The model of `synthetic`, drawn with torch on `device` (a GPU draws a products-sized graph in
    seconds; NumPy takes minutes). Its random streams differ from `synthetic`'s, so the graph is
    another draw of the same model; deterministic for a seed on a given device model (torch's CUDA
    generator sizes its launch by the GPU, so two GPU models may draw different graphs). NumPy arrays, or
    with numpy=False edge_index, x and y as torch tensors left on the device (the split is NumPy)."""
    import torch

    if num_nodes <= 0 or num_classes <= 0 or num_features <= 0 or num_edges < 0:
        raise ValueError("synthetic graph needs positive sizes")
    dev = torch.device(device)
    g = torch.Generator(device=dev)
    g.manual_seed(int(seed))
    n, C, m = int(num_nodes), int(num_classes), int(num_edges)
    f64 = dict(dtype=torch.float64, device=dev)

    def rand(k):
        return torch.rand(k, generator=g, **f64)

    # skewed class sizes: Dirichlet(1.5) through normalized Gamma draws (torch's sampler has no generator)
    p_class = torch.from_numpy(np.random.default_rng(seed).dirichlet(np.full(C, 1.5))).to(dev)
    cls = torch.searchsorted(torch.cumsum(p_class, 0), rand(n) * p_class.sum()).clamp_(max=C - 1)
    theta = (1.0 - rand(n)) ** (-1.0 / (degree_tail - 1.0))
    theta = torch.minimum(theta, torch.quantile(theta[: min(n, 1 << 23)], 0.9995))  # quantile has a size limit
    order = torch.argsort(cls, stable=True)
    counts = torch.bincount(cls, minlength=C)
    start = torch.cumsum(counts, 0) - counts
    th_sorted = theta[order]
    cum_in = torch.cumsum(th_sorted, 0)
    cum0 = torch.cat([th_sorted.new_zeros(1), cum_in])
    base = cum0[start]
    # per-class totals from the class-sorted cumulative sum (index_add_ of float64 on CUDA uses
    # atomics: its last bits could differ run to run and move a searchsorted boundary)
    tot = cum0[start + counts] - base
    del cum0
    cum_all = torch.cumsum(theta, 0)
    u = torch.searchsorted(cum_all, rand(m) * cum_all[-1], right=True).clamp_(max=n - 1)
    same = rand(m) < homophily
    cu = cls[u]
    r = base[cu] + rand(m) * tot[cu]
    v_same = order[torch.searchsorted(cum_in, r, right=True).clamp_(max=n - 1)]
    v_any = torch.searchsorted(cum_all, rand(m) * cum_all[-1], right=True).clamp_(max=n - 1)
    v = torch.where(same, v_same, v_any)
    del same, cu, r, v_same, v_any
    keep = u != v
    a, b = torch.minimum(u[keep], v[keep]), torch.maximum(u[keep], v[keep])
    del u, v, keep
    pairs = torch.unique(a * n + b)
    a, b = pairs // n, pairs % n
    del pairs
    edge_index = torch.stack([torch.cat([a, b]), torch.cat([b, a])])
    del a, b
    gx = torch.Generator(device=dev)
    gx.manual_seed(int(seed) + 1)
    mu = torch.randn(C, num_features, generator=gx, dtype=torch.float32, device=dev)
    mu = mu / float(np.sqrt(np.sqrt(num_features)))
    x = signal * mu[cls] + torch.randn(n, num_features, generator=gx, dtype=torch.float32, device=dev)
    y = cls.clone()
    noisy = rand(n) < label_noise
    y[noisy] = torch.randint(0, C, (int(noisy.sum()),), generator=g, device=dev)
    tr, va, te = _split(np.random.default_rng(seed), n)
    name = name or f"synthetic-{n} (torch)"
    if not numpy:
        return NodeData(name, edge_index, x, y, tr, va, te)
    return NodeData(name, edge_index.cpu().numpy().astype(np.int64), x.cpu().numpy(), y.cpu().numpy().astype(np.int64),
                    tr, va, te)


def arxiv_like(seed: int = 0) -> NodeData:
    """The default graph of `gnnsparse train`: ogbn-arxiv's sizes, generated (no download)."""
    return synthetic(**ARXIV, seed=seed, name="arxiv-sized SBM")


def products_like(seed: int = 0, device=None) -> NodeData:
    """An ogbn-products-sized graph of the same model (about 120 M stored edges): with NumPy about two
    minutes on one core; with `device` a CUDA device (torch.device or its name), drawn there by
    `synthetic_torch` in seconds -- another draw of the same model, so the CPU and GPU graphs of a
    seed differ (the GPU draw is deterministic for its seed on a given GPU model). `gnnsparse train
    --nproc N` draws with NumPy on every rank, so its graph is the CPU one."""
    if device is not None and str(device).startswith("cuda"):
        import torch

        d = synthetic_torch(**PRODUCTS, seed=seed, device=device, name="products-sized SBM (drawn on the GPU)")
        torch.cuda.empty_cache()  # the draw's scratch (GBs) back to the driver: the kernels' own
        return d                  # workspaces (cudaMallocAsync) cannot use torch's cache

    return synthetic(**PRODUCTS, seed=seed, name="products-sized SBM")


def quick(seed: int = 0) -> NodeData:
    """A small graph of the same model for --quick (CI, seconds on a CPU)."""
    return synthetic(**QUICK, seed=seed, name="small SBM (--quick)")


def _key(z, *names):
    for k in names:
        if k in z.files:
            return k
    return None


def load_npz(path, seed: int = 0) -> NodeData:
    """A user's node-classification dataset saved with numpy.savez: 'edge_index' (2, E) ints (row 0
    source, row 1 target), 'x' (or 'features') (N, F) floats, 'y' (or 'labels') (N,) ints; optional
    split as 'train_mask'/'val_mask'/'test_mask' (N,) bools or 'train_idx'/'val_idx'/'test_idx'
    (else a random 54/18/28 split). OGB and Planetoid data exported this way load as they are.
    Edges are used as given (store both directions for an undirected graph)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    try:
        z = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise ValueError(f"{path}: not a readable .npz file ({e})") from e
    if not hasattr(z, "files"):
        raise ValueError(f"{path}: a single .npy array, not an .npz archive")
    with z:
        kx, ky = _key(z, "x", "features", "feat"), _key(z, "y", "labels", "label")
        missing = [n for n, k in (("edge_index", _key(z, "edge_index")), ("x", kx), ("y", ky)) if k is None]
        if missing:
            raise ValueError(f"{path}: missing key(s) {', '.join(missing)} (found: {', '.join(z.files) or 'none'})")
        ei, x, y = z["edge_index"], z[kx], z[ky]
        if ei.ndim != 2 or ei.shape[0] != 2 or not np.issubdtype(ei.dtype, np.integer):
            raise ValueError(f"{path}: 'edge_index' must be (2, E) integers, got {ei.shape} {ei.dtype}")
        if x.ndim != 2 or not np.issubdtype(x.dtype, np.number):
            raise ValueError(f"{path}: '{kx}' must be an (N, F) numeric array, got {x.shape} {x.dtype}")
        y = y.reshape(-1) if y.ndim == 2 and y.shape[1] == 1 else y
        n = x.shape[0]
        if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
            raise ValueError(f"{path}: '{ky}' must be ({n},) integers (one class per node), got {y.shape} {y.dtype}")
        if ei.size and (ei.min() < 0 or ei.max() >= n):
            bad = int(np.flatnonzero(((ei < 0) | (ei >= n)).any(0))[0])
            raise ValueError(f"{path}: edge {bad} = ({ei[0, bad]}, {ei[1, bad]}) is outside the {n} nodes of '{kx}'")
        if y.size and y.min() < 0:
            raise ValueError(f"{path}: '{ky}' holds negative classes (unlabeled nodes are not supported)")
        split = []
        for part in ("train", "val", "test"):
            km, ki = _key(z, f"{part}_mask"), _key(z, f"{part}_idx", f"{part}_index")
            if km is not None:
                mask = z[km].astype(bool).reshape(-1)
                if mask.shape != (n,):
                    raise ValueError(f"{path}: '{km}' must have shape ({n},), got {mask.shape}")
                split.append(np.flatnonzero(mask))
            elif ki is not None:
                idx = z[ki].astype(np.int64).reshape(-1)
                if idx.size and (idx.min() < 0 or idx.max() >= n):
                    raise ValueError(f"{path}: '{ki}' has node ids outside [0, {n})")
                split.append(np.sort(idx))
        if split and len(split) != 3:
            raise ValueError(f"{path}: give all three of train/val/test (as masks or index arrays) or none")
        if not split:
            split = list(_split(np.random.default_rng(seed), n))
    return NodeData(os.path.basename(path), ei.astype(np.int64), x.astype(np.float32), y.astype(np.int64), *split)
