"""`gnnsparse train --nproc N`: full-graph GCN / GAT training over N processes (torch.distributed).

Each process generates (or loads) the same graph, keeps its partition's rows (features, labels,
split) and its piece of the graph (gnnsparse.distributed), and trains the model wrapped in
DistributedDataParallel: the forward pass exchanges halo rows with all_to_all_single (NCCL on
GPUs, gloo on the CPU), every rank computes the loss on its own training rows, scaled so that
DDP's gradient average is the gradient of the mean loss over all training nodes (the
single-process loss). Dropout masks differ from the single-process run (each rank draws its
own), so the trajectories differ within the noise; accuracy is counted over all ranks.
"""
from __future__ import annotations

import time
from typing import Optional

import numpy as np

from . import RunResult


def load_data(cfg: dict):
    from .data import arxiv_like, load_npz, products_like, quick

    if cfg.get("data"):
        return load_npz(cfg["data"], cfg["seed"])
    if cfg.get("quick"):
        return quick(cfg["seed"])
    if cfg.get("size") == "products":
        return products_like(cfg["seed"])
    return arxiv_like(cfg["seed"])


def graph_of(data, model: str):
    """The host CSR the training uses (GAT: one self loop per node, as the single-process path)."""
    import gnnsparse as gs

    ei = data.edge_index
    n = data.num_nodes
    if model == "gat":
        keep = ei[0] != ei[1]
        loops = np.arange(n, dtype=np.int64)
        ei = np.concatenate([ei[:, keep], np.stack([loops, loops])], 1)
    return gs.CSR.from_edge_index(ei, n)


def _local_positions(idx: np.ndarray, part, rank: int) -> np.ndarray:
    """Local row ids of the nodes of `idx` (original ids) that rank owns, in local order."""
    lo, hi = int(part.bounds[rank]), int(part.bounds[rank + 1])
    new = np.sort(part.inv[idx])
    new = new[(new >= lo) & (new < hi)]
    return new - lo


def worker(rank: int, world: int, cfg: dict, data=None) -> dict:
    """One rank of a distributed training run (called by gnnsparse.distributed.spawn)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    import gnnsparse.distributed as gd
    from gnnsparse.distributed.nn import DistNet

    from .models import Net

    cuda = cfg["device"].startswith("cuda")
    dev = torch.device("cuda", rank) if cuda else torch.device("cpu")
    t_setup = time.perf_counter()
    if data is None:
        data = load_data(cfg)
    model = cfg["model"]
    A = graph_of(data, model)
    part = gd.partition(A, world, cfg.get("partition", "range"))
    piece = gd.local_graph(A, part, rank)
    nodes = torch.from_numpy(part.nodes(rank))
    x = torch.from_numpy(data.x).index_select(0, nodes).to(dev)
    y = torch.from_numpy(data.y).index_select(0, nodes).to(dev)
    splits = {k: torch.from_numpy(_local_positions(getattr(data, f"{k}_idx"), part, rank)).to(dev)
              for k in ("train", "val", "test")}
    totals = {k: int(getattr(data, f"{k}_idx").shape[0]) for k in ("train", "val", "test")}
    num_classes, in_ch = data.num_classes, data.x.shape[1]
    del data, A
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
    dg = gd.DistGraph(piece, dev, wire=cfg.get("wire", "fp32"), seed=cfg["seed"])
    graph = gd.gcn_norm(dg) if model == "gcn" else dg
    hidden, heads = cfg["hidden"], cfg["heads"]
    torch.manual_seed(cfg["seed"])  # the single-process run's initial weights (train.initial_state)
    net = Net(model, "gnnsparse", in_ch, hidden, num_classes, heads=heads, dropout=cfg["dropout"])
    ddp = DDP(DistNet(net).to(dev), device_ids=[rank] if cuda else None)
    opt = torch.optim.Adam(ddp.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    setup_s = time.perf_counter() - t_setup
    torch.manual_seed(cfg["seed"] + 1 + 1000 * rank)  # dropout: each rank its own masks
    tr = splits["train"]
    scale = world / max(totals["train"], 1)
    res = RunResult(f"gnnsparse x{world} ({dg.wire} halo)", model, str(dev), cfg["epochs"])
    losses = []
    bytes_start, res_bytes = dg.stats["bytes"], None

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    for epoch in range(cfg["epochs"]):
        sync()
        dist.barrier(group=dg.group)
        t0 = time.perf_counter()
        ddp.train()
        opt.zero_grad(set_to_none=True)
        out = ddp(x, graph)
        loss = F.cross_entropy(out.index_select(0, tr), y.index_select(0, tr), reduction="sum") * scale
        loss.backward()
        opt.step()
        sync()
        ms = torch.tensor([(time.perf_counter() - t0) * 1e3], dtype=torch.float64)
        if res_bytes is None:  # the exchanges of one training step, forward and backward
            res_bytes = dg.stats["bytes"] - bytes_start
        dist.all_reduce(ms, dist.ReduceOp.MAX)  # an epoch lasts as long as the slowest rank
        ddp.eval()
        with torch.no_grad():
            pred = ddp(x, graph).argmax(1)
            cnt = torch.tensor([float((pred.index_select(0, splits[k]) == y.index_select(0, splits[k])).sum())
                                for k in ("train", "val", "test")] + [float(loss.detach()) / world],
                               dtype=torch.float64)
        dist.all_reduce(cnt)
        res.epoch_ms.append(float(ms))
        res.train_acc.append(float(cnt[0]) / max(totals["train"], 1))
        res.val_acc.append(float(cnt[1]) / max(totals["val"], 1))
        res.test_acc.append(float(cnt[2]) / max(totals["test"], 1))
        res.losses.append(float(cnt[3]))
        losses.append(float(cnt[3]))
        if rank == 0 and cfg.get("log_every") and ((epoch + 1) % cfg["log_every"] == 0 or epoch == 0
                                                    or epoch + 1 == cfg["epochs"]):
            print(f"x{world} {epoch + 1:4d}  loss {res.losses[-1]:.4f}  acc train {100 * res.train_acc[-1]:4.1f} "
                  f"val {100 * res.val_acc[-1]:4.1f} test {100 * res.test_acc[-1]:4.1f}  {res.epoch_ms[-1]:7.1f} ms",
                  flush=True)
    if cuda:
        sync()
        res.peak_mem = int(torch.cuda.max_memory_allocated(dev))
        res.extra_mem = res.peak_mem - int(base)
    res.loss_bits = np.asarray(losses, dtype=np.float32).tobytes().hex()
    return dict(result=res, rank=rank, rows=piece.n_local, edges=piece.nnz, halo=piece.n_halo,
                sends=int(piece.send_counts.sum()), wire_bytes_per_train_step=int(res_bytes or 0),
                peak_mem=res.peak_mem, setup_s=setup_s)


def train_distributed(cfg: dict, *, data=None) -> dict:
    """Spawn cfg['nproc'] ranks and train; returns {'result': rank 0's RunResult, 'ranks': [...]}.
    data (optional NodeData): passed to every rank instead of generating it there (small graphs)."""
    import gnnsparse.distributed as gd

    nproc = cfg["nproc"]
    threads = cfg.get("threads")
    if threads is None and not cfg["device"].startswith("cuda"):
        import os

        threads = max(1, (os.cpu_count() or 1) // nproc)
    outs = gd.spawn(worker, nproc, args=(cfg, data), device=cfg["device"], threads=threads)
    return dict(result=outs[0]["result"], ranks=[{k: v for k, v in o.items() if k != "result"} for o in outs])
