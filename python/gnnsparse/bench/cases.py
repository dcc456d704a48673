"""Benchmark cases and suites: graphs are built lazily from a spec, shared by the
cases that use them, and the suites list (graph, op, widths, variants)."""
from __future__ import annotations

from dataclasses import dataclass, replace

from .. import _core
from . import generators as gen

OPS = ("spmm", "sddmm", "fusedmm")
SUITES = ("quick", "grid72", "graphs", "all")
REDUCES = tuple(_core.REDUCE)
DTYPES = ("float32", "float64", "float16", "bfloat16")  # feature dtypes a case may ask for
SHORT_DTYPE = {"float64": "fp64", "float16": "fp16", "bfloat16": "bf16"}  # in variants; float32 says nothing


@dataclass(frozen=True)
class GraphSpec:
    """A named, seeded matrix recipe; build() runs the generator (or loader)."""
    name: str                      # short label, e.g. "uniform n=1000000 e=10000000"
    kind: str                      # uniform | rmat | sbm | grid | file
    params: tuple = ()             # sorted (key, value) pairs passed to the generator
    seed: int = 0

    def build(self):
        p = dict(self.params)
        if self.kind == "uniform":
            return gen.uniform_random(seed=self.seed, **p)
        if self.kind == "rmat":
            return gen.rmat(seed=self.seed, **p)
        if self.kind == "sbm":
            return gen.sbm(seed=self.seed, **p).A
        if self.kind == "grid":
            return gen.grid_matrix(seed=self.seed, **p)
        if self.kind == "file":
            from .loaders import load_graph

            return load_graph(p["path"])
        raise ValueError(f"unknown graph kind {self.kind!r}")


def _spec(name, kind, seed=0, **params):
    return GraphSpec(name, kind, tuple(sorted(params.items())), seed)


@dataclass(frozen=True)
class Case:
    """One measured configuration. width: SpMM C, SDDMM/FusedMM feature width F (FusedMM's Z width
    is also `width`). heads > 1: multi-head SDDMM/FusedMM (X is (M, H, F) for dot, (M, H) for add).
    dtype: the dense inputs' dtype (float32 unless named; the backend must take it, else the case is
    skipped with the reason). arg: SpMM max/min also returns the winning entries (return_arg=True).
    y_is_z: FusedMM dot with Z the same array as Y (fusedmm(A, X, Y, Y): one gathered row feeds the
    score and the sum; D = F = width)."""
    graph: GraphSpec
    op: str
    width: int
    reduce: str = "sum"            # spmm
    sddmm_op: str = "dot"          # sddmm / fusedmm
    edge: str = "none"             # fusedmm
    heads: int = 1
    suite: str = ""
    dtype: str = "float32"
    arg: bool = False              # spmm max / min
    y_is_z: bool = False           # fusedmm dot

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {self.dtype!r}")
        if self.arg and (self.op != "spmm" or self.reduce not in ("max", "min")):
            raise ValueError("arg is for spmm with reduce max or min")
        if self.y_is_z and (self.op != "fusedmm" or self.sddmm_op != "dot"):
            raise ValueError("y_is_z is for fusedmm with sddmm_op 'dot' (Z takes Y's place: D = F)")

    @property
    def variant(self) -> str:
        if self.op == "spmm":
            v = self.reduce + ("+arg" if self.arg else "")
        else:
            v = self.sddmm_op if self.op == "sddmm" else f"{self.sddmm_op}+{self.edge}"
            v += " Y=Z" if self.y_is_z else ""
            v += f" H={self.heads}" if self.heads > 1 else ""
        return v + (f" {SHORT_DTYPE[self.dtype]}" if self.dtype != "float32" else "")

    @property
    def label(self) -> str:
        return f"{self.op} {self.variant} {self.graph.name} C={self.width}"


# ---------------------------------------------------------------- graphs
def quick_graphs():
    return {
        "uniform": _spec("uniform n=50k e=500k", "uniform", n=50_000, e=500_000),
        "rmat": _spec("rmat n=65536 e=500k", "rmat", n=65_536, e=500_000, a=0.57, b=0.19, c=0.19),
        "cora": _spec("cora-sized n=2708 e=10556", "uniform", n=2708, e=10_556, symmetric=True),
        "pubmed": _spec("pubmed-sized n=19717 e=88648", "uniform", n=19_717, e=88_648, symmetric=True),
        "grid": _spec("grid M=K=1024 d=0.1", "grid", M=1024, K=1024, density=0.1),
    }


def graph_suite_graphs():
    return {
        "uniform": _spec("uniform n=1M e=10M", "uniform", n=1_000_000, e=10_000_000),
        "powerlaw": _spec("rmat n=1M e=10M hubs", "rmat", n=1_000_000, e=10_000_000, a=0.65, b=0.15, c=0.15),
        "arxiv": _spec("arxiv-sized n=169343 e=2.33M", "uniform", n=169_343, e=2_332_486, symmetric=True),
        "products": _spec("products-sized n=2.45M e=61.9M", "uniform", n=2_449_029, e=61_859_140, symmetric=True),
        "cora": _spec("cora-sized n=2708 e=10556", "uniform", n=2708, e=10_556, symmetric=True),
        "pubmed": _spec("pubmed-sized n=19717 e=88648", "uniform", n=19_717, e=88_648, symmetric=True),
    }


def grid_spec(M, K, d):
    return _spec(f"grid M={M} K={K} d={d}", "grid", M=M, K=K, density=d)


def file_spec(path):
    import os

    return _spec(os.path.basename(path), "file", path=str(path))


# ---------------------------------------------------------------- suites
def _expand(graph, op, widths, suite, reduces=("sum",), **kw):
    out = []
    for w in widths:
        if op == "spmm":
            out += [Case(graph, op, w, reduce=r, suite=suite, **kw) for r in reduces]
        else:
            out.append(Case(graph, op, w, suite=suite, **kw))
    return out


def quick_suite():
    g = quick_graphs()
    s = "quick"
    return (_expand(g["uniform"], "spmm", (16, 32), s)
            + _expand(g["uniform"], "spmm", (32,), s, reduces=("mean", "max"))
            + _expand(g["rmat"], "spmm", (32,), s)
            + _expand(g["cora"], "spmm", (16,), s)
            + _expand(g["grid"], "spmm", (32,), s)
            + _expand(g["uniform"], "sddmm", (32,), s)
            + _expand(g["grid"], "sddmm", (32,), s)
            + _expand(g["pubmed"], "fusedmm", (32,), s)
            + _expand(g["pubmed"], "fusedmm", (32,), s, edge="softmax"))


def graphs_suite():
    g = graph_suite_graphs()
    s = "graphs"
    return (_expand(g["uniform"], "spmm", (16, 32, 128), s)
            + _expand(g["uniform"], "spmm", (32,), s, reduces=("mean", "max"))
            # odd widths against the next multiple of 32, max with arg against sum
            + _expand(g["uniform"], "spmm", (33, 64, 65, 96, 129, 160), s)
            + _expand(g["uniform"], "spmm", (16, 32, 128), s, reduces=("max",), arg=True)
            # bfloat16 features against our float32 sum of the same graph (reference "ours_fp32")
            + _expand(g["uniform"], "spmm", (32, 128), s, dtype="bfloat16")
            + _expand(g["powerlaw"], "spmm", (32, 128), s)
            + _expand(g["powerlaw"], "spmm", (32, 128), s, reduces=("max",), arg=True)
            + _expand(g["arxiv"], "spmm", (1, 4, 16, 32, 33, 64, 128, 256), s)
            + _expand(g["products"], "spmm", (16, 32, 128), s)
            + _expand(g["cora"], "spmm", (16, 64), s)
            + _expand(g["pubmed"], "spmm", (16, 64), s)
            + _expand(g["uniform"], "sddmm", (32, 128), s)
            # FusedMM against our SDDMM + SpMM (reference "unfused"), Z its own array and Z = Y
            + _expand(g["uniform"], "fusedmm", (32, 128), s)
            + _expand(g["uniform"], "fusedmm", (32, 128), s, y_is_z=True)
            + _expand(g["uniform"], "fusedmm", (32,), s, edge="softmax", y_is_z=True)
            + _expand(g["arxiv"], "sddmm", (32, 128), s)
            + _expand(g["arxiv"], "sddmm", (32,), s, heads=4)
            + _expand(g["arxiv"], "fusedmm", (32,), s)
            + _expand(g["arxiv"], "fusedmm", (32,), s, edge="softmax")
            + _expand(g["arxiv"], "fusedmm", (32,), s, sddmm_op="add", edge="softmax", heads=4)
            + _expand(g["arxiv"], "fusedmm", (32,), s, sddmm_op="add", edge="softmax", heads=8))


def grid72_suite():
    out = []
    for M, K, d, N in gen.grid72_shapes():
        g = grid_spec(M, K, d)
        out += [Case(g, op, N, suite="grid72") for op in ("spmm", "sddmm", "fusedmm")]
    return out


def suite_cases(name: str):
    if name == "quick":
        return quick_suite()
    if name == "grid72":
        return grid72_suite()
    if name == "graphs":
        return graphs_suite()
    if name == "all":
        return grid72_suite() + graphs_suite()
    raise ValueError(f"unknown suite {name!r}; choose from {', '.join(SUITES)}")


def file_cases(paths, widths=(32,)):
    out = []
    for p in paths:
        g = file_spec(p)
        out += _expand(g, "spmm", widths, "file") + _expand(g, "sddmm", widths, "file")
    return out


def select(cases, ops=None, widths=None, reduces=None):
    """Filter by ops; replace every case's width by `widths` and every SpMM's reduction by `reduces`
    (deduplicated, order kept). A case with arg keeps it for max / min and drops it for sum / mean."""
    out, seen = [], set()
    for c in cases:
        if ops and c.op not in ops:
            continue
        ws = widths or (c.width,)
        rs = (reduces or (c.reduce,)) if c.op == "spmm" else (c.reduce,)
        for w in ws:
            for r in rs:
                nc = replace(c, width=w, reduce=r, arg=c.arg and r in ("max", "min"))
                if nc not in seen:
                    seen.add(nc)
                    out.append(nc)
    # keep cases of one graph together so each graph is built once
    order = {}
    for c in out:
        order.setdefault(c.graph, len(order))
    return sorted(out, key=lambda c: order[c.graph])


__all__ = ["Case", "GraphSpec", "OPS", "SUITES", "REDUCES", "DTYPES", "suite_cases", "file_cases", "select",
           "quick_graphs", "graph_suite_graphs", "grid_spec"]
