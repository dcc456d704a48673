"""gnnsparse.bench: the `gnnsparse bench` command, graph generators and loaders.

    from gnnsparse.bench import generators, loaders
    A = generators.rmat(1_000_000, 10_000_000, seed=0, a=0.65, b=0.15, c=0.15)   # hubs of degree > 1e5
    g = generators.sbm(169_343, 40, 13.8, seed=0)                                 # g.A, g.labels, g.features
    A = loaders.load_graph("web-Google.txt", relabel=True)
"""
from . import generators, loaders  # noqa: F401

__all__ = ["generators", "loaders"]
