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

from .loop import RunResult


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


def rank_inputs(rank: int, world: int, cfg: dict, data=None) -> dict:
    """This rank's piece of the graph and its rows' features, labels and split: from the data
    (generated or loaded here when not given), or from the files save_pieces wrote
    (cfg['pieces']: a directory)."""
    import gnnsparse.distributed as gd

    if cfg.get("pieces"):
        return load_piece(cfg["pieces"], cfg["model"], rank, world)
    if data is None:
        data = load_data(cfg)
    A = graph_of(data, cfg["model"])
    part = gd.partition(A, world, cfg.get("partition", "range"))
    piece = gd.local_graph(A, part, rank)
    return _inputs(data, part, piece)


def _inputs(data, part, piece) -> dict:
    nodes = piece.nodes
    return dict(piece=piece, x=data.x[nodes], y=data.y[nodes],
                splits={k: _local_positions(getattr(data, f"{k}_idx"), part, piece.rank)
                        for k in ("train", "val", "test")},
                totals={k: int(getattr(data, f"{k}_idx").shape[0]) for k in ("train", "val", "test")},
                num_classes=data.num_classes)


_PIECE_FIELDS = ("nodes", "rowptr", "col", "halo", "recv_counts", "send_counts", "send_idx")


def save_pieces(data, model: str, world: int, directory: str, method: str = "range") -> dict:
    """Partition once (here) and write every rank's inputs to directory/<model>_rank<r>.npz, so
    the ranks only load their part; returns the partition's edge cut (gnnsparse.distributed.edge_cut)."""
    import os

    import gnnsparse.distributed as gd

    A = graph_of(data, model)
    part = gd.partition(A, world, method)
    os.makedirs(directory, exist_ok=True)
    for piece in gd.local_graphs(A, part):
        inp = _inputs(data, part, piece)
        np.savez(os.path.join(directory, f"{model}_rank{piece.rank}.npz"),
                 **{f: getattr(piece, f) for f in _PIECE_FIELDS}, lo=piece.lo, hi=piece.hi, x=inp["x"], y=inp["y"],
                 **{f"split_{k}": v for k, v in inp["splits"].items()},
                 totals=np.array([inp["totals"][k] for k in ("train", "val", "test")]),
                 num_classes=inp["num_classes"])
    return gd.edge_cut(A, part)


def load_piece(directory: str, model: str, rank: int, world: int) -> dict:
    import os

    from gnnsparse.distributed import LocalGraph

    with np.load(os.path.join(directory, f"{model}_rank{rank}.npz")) as z:
        f = {k: z[k] for k in z.files}
    if f["recv_counts"].shape[0] != world:
        raise ValueError(f"{directory}: pieces of a {f['recv_counts'].shape[0]}-part partition, not {world}")
    empty = np.zeros(0, dtype=np.int64)
    piece = LocalGraph(rank, world, int(f["lo"]), int(f["hi"]), f["nodes"], f["rowptr"], f["col"], None, empty,
                       f["halo"], empty, f["recv_counts"], f["send_counts"], f["send_idx"])
    t = f["totals"]
    return dict(piece=piece, x=f["x"], y=f["y"], splits={k: f[f"split_{k}"] for k in ("train", "val", "test")},
                totals=dict(train=int(t[0]), val=int(t[1]), test=int(t[2])), num_classes=int(f["num_classes"]))


def fit(rank: int, world: int, cfg: dict, inp: dict, wire: str, overlap: Optional[bool] = None) -> dict:
    """Train from the seeded initial weights for cfg['epochs'] epochs with halo wire format `wire`
    (GCN: the exchange overlapped with the local product when `overlap`, default cfg['overlap']);
    rank 0's RunResult (figures over all ranks) and this rank's sizes, bytes and memory."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    import gnnsparse.distributed as gd
    from gnnsparse.distributed.nn import DistNet

    from .models import Net

    cuda = cfg["device"].startswith("cuda")
    dev = torch.device("cuda", rank) if cuda else torch.device("cpu")
    model = cfg["model"]
    piece = inp["piece"]
    if cuda:
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
    x = torch.from_numpy(inp["x"]).to(dev)
    y = torch.from_numpy(inp["y"]).to(dev)
    splits = {k: torch.from_numpy(v).to(dev) for k, v in inp["splits"].items()}
    totals = inp["totals"]
    overlap = bool(cfg.get("overlap")) if overlap is None else bool(overlap)
    dg = gd.DistGraph(piece, dev, wire=wire, seed=cfg["seed"], overlap=overlap and model == "gcn")
    graph = gd.gcn_norm(dg) if model == "gcn" else dg
    torch.manual_seed(cfg["seed"])  # the single-process run's initial weights (train.initial_state)
    net = Net(model, "gnnsparse", x.shape[1], cfg["hidden"], inp["num_classes"], heads=cfg["heads"],
              dropout=cfg["dropout"])
    ddp = DDP(DistNet(net).to(dev), device_ids=[rank] if cuda else None)
    opt = torch.optim.Adam(ddp.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    torch.manual_seed(cfg["seed"] + 1 + 1000 * rank)  # dropout: each rank its own masks
    tr = splits["train"]
    scale = world / max(totals["train"], 1)
    res = RunResult(f"gnnsparse x{world} ({wire} halo{', overlapped' if dg.overlap else ''})", model, str(dev),
                    cfg["epochs"])
    bytes_start, step_bytes = dg.stats["bytes"], None
    eval_every = cfg.get("eval_every") or 1

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
        ms = torch.tensor([(time.perf_counter() - t0) * 1e3], dtype=torch.float64, device=x.device)  # NCCL: on the GPU
        if step_bytes is None:  # the exchanges of one training step, forward and backward
            step_bytes = dg.stats["bytes"] - bytes_start
        dist.all_reduce(ms, dist.ReduceOp.MAX)  # an epoch lasts as long as the slowest rank
        res.epoch_ms.append(float(ms))
        last = epoch + 1 == cfg["epochs"]
        if (epoch + 1) % eval_every and not last:
            continue
        ddp.eval()
        with torch.no_grad():
            pred = ddp(x, graph).argmax(1)
            cnt = torch.tensor([float((pred.index_select(0, splits[k]) == y.index_select(0, splits[k])).sum())
                                for k in ("train", "val", "test")] + [float(loss.detach()) / world],
                               dtype=torch.float64, device=x.device)
        dist.all_reduce(cnt)
        res.train_acc.append(float(cnt[0]) / max(totals["train"], 1))
        res.val_acc.append(float(cnt[1]) / max(totals["val"], 1))
        res.test_acc.append(float(cnt[2]) / max(totals["test"], 1))
        res.losses.append(float(cnt[3]))
        le = cfg.get("log_every")
        if rank == 0 and le and ((epoch + 1) % le == 0 or epoch == 0 or last):
            print(f"x{world} {wire} {epoch + 1:4d}  loss {res.losses[-1]:.4f}  "
                  f"acc train {100 * res.train_acc[-1]:4.1f} "
                  f"val {100 * res.val_acc[-1]:4.1f} test {100 * res.test_acc[-1]:4.1f}  {res.epoch_ms[-1]:7.1f} ms",
                  flush=True)
    if cuda:
        sync()
        res.peak_mem = int(torch.cuda.max_memory_allocated(dev))
        res.extra_mem = res.peak_mem - int(base)
    res.loss_bits = np.asarray(res.losses, dtype=np.float32).tobytes().hex()
    info = dict(rank=rank, wire=wire, overlap=dg.overlap, rows=piece.n_local, edges=piece.nnz, halo=piece.n_halo,
                sends=int(piece.send_counts.sum()), wire_bytes_per_train_step=int(step_bytes or 0),
                peak_mem=res.peak_mem, median_epoch_ms=res.median_epoch_ms)
    del ddp, opt, net, graph, dg, x, y, out, loss
    if cuda:
        torch.cuda.empty_cache()
    return dict(result=res, info=info)


def worker(rank: int, world: int, cfg: dict, data=None) -> list:
    """One rank of a distributed run (under gnnsparse.distributed.spawn): one training per wire
    format in cfg['wires'] (default [cfg['wire']]) on the same piece of the graph."""
    t0 = time.perf_counter()
    inp = rank_inputs(rank, world, cfg, data)
    setup_s = time.perf_counter() - t0
    outs = []
    for wire in cfg.get("wires") or [cfg.get("wire", "fp32")]:
        o = fit(rank, world, cfg, inp, wire)
        o["info"]["setup_s"] = setup_s
        outs.append(o)
    return outs


def train_distributed(cfg: dict, *, data=None) -> dict:
    """Spawn cfg['nproc'] ranks and train; returns {'result': rank 0's RunResult, 'ranks': [per-rank
    info]} (a list of those, one per wire format, when cfg['wires'] lists several).
    data (optional NodeData): passed to every rank instead of generating it there (small graphs)."""
    import gnnsparse.distributed as gd

    nproc = cfg["nproc"]
    threads = cfg.get("threads")
    if threads is None and not cfg["device"].startswith("cuda"):
        import os

        threads = max(1, (os.cpu_count() or 1) // nproc)
    outs = gd.spawn(worker, nproc, args=(cfg, data), device=cfg["device"], threads=threads)
    runs = [dict(result=outs[0][i]["result"], ranks=[o[i]["info"] for o in outs]) for i in range(len(outs[0]))]
    return runs[0] if len(runs) == 1 else runs
