#!/usr/bin/env python3
"""Full-graph training on 1 vs 2 GPUs (gnnsparse.distributed, NCCL): one table, JSON and CSV.

    python3 bench/train_multi_gpu.py --out DIR                 # 2 x H200: ~4-5 min
    python3 bench/train_multi_gpu.py --out DIR --smoke --device cpu   # a dry run of every path (gloo, CPU)

On the products-sized generated graph (2,449,029 nodes, ~120 M stored edges, 100 features, 47
classes; drawn on the GPU by gnnsparse.train.data.synthetic_torch), for GCN and GAT (hidden 128,
GAT 4 heads):
  1 GPU     the single-process trainer (gnnsparse.train.run_once): median epoch time (train step),
            peak GPU memory, test accuracy at the best validation epoch
  memory    the same model on the graph with half of its edges (2 epochs): peak memory, so that
            memory = per-node bytes x N + per-edge bytes x E separates (fit on the two runs)
  N GPUs    `gnnsparse train --nproc N`'s trainer (DDP + halo exchange by all_to_all_single), the
            halo exchanged as fp32 and as int8 (GCN also fp32 overlapped with the local product):
            median epoch time (slowest rank), speedup and scaling efficiency vs 1 GPU, peak memory
            per GPU, wire bytes per training step, accuracy
  exchange  the halo exchange alone (width 1 and 128, fp32): latency and seconds per byte
  plan      the largest graph of this model (same average degree) one GPU holds, the size that
            needs 2 GPUs (from the fits), and the edge cut at 8 and 64 parts (range partition)
  --big N   (a separate call) the graph of N nodes, products' degree, on --nproc GPUs: every rank
            draws it on its GPU and keeps its piece (local_graph_from_edges), 5 epochs; then the same
            graph on one GPU, expected to run out of memory
Results: <out>/train_multi_gpu.json (everything, per-epoch figures included) and <out>/train_multi_gpu.csv;
--big: <out>/train_multi_gpu_big.json.
"""
from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import sys
import time
import traceback

import numpy as np

GIB = 2**30
T0 = time.perf_counter()


def log(msg=""):
    print(f"[{time.perf_counter() - T0:6.1f} s] {msg}", flush=True)


def half_edges(data):
    """The graph with about half of its undirected edges (both directions of a pair kept or
    dropped together), same nodes, features and split."""
    from dataclasses import replace

    s, d = data.edge_index
    a, b = np.minimum(s, d), np.maximum(s, d)
    keep = (a + b) % 2 == 0  # about half of the pairs, deterministic
    return replace(data, edge_index=data.edge_index[:, keep], name=data.name + " (half the edges)")


def single(data, model, device, epochs, hidden, heads, seed):
    """The one-process run: gnnsparse.train.run_once on one device."""
    import torch

    from gnnsparse.train import initial_state, prepare, run_once

    t = prepare(data, device, model)
    init = initial_state(model, t, hidden, heads, seed, 0.5, "mean")
    r = run_once(t, model, "gnnsparse", epochs=epochs, hidden=hidden, heads=heads, seed=seed, init=init)
    del t
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return r


def variants(model):
    """(label, wire, overlap) of the distributed runs of a model: the exchange overlapped with the
    local product exists for GCN's sums."""
    v = [("fp32", "fp32", False), ("int8", "int8", False)]
    return v + [("fp32 overlap", "fp32", True)] if model == "gcn" else v


def rank_job(rank, world, cfg):
    """One rank: for every model, its piece; training with each wire format; the exchange alone."""
    import torch
    import torch.distributed as dist

    import gnnsparse.distributed as gd
    from gnnsparse.train.dist import fit, load_piece

    cuda = cfg["device"] == "cuda"
    dev = torch.device("cuda", rank) if cuda else torch.device("cpu")
    out = {}
    for model in cfg["models"]:
        inp = load_piece(cfg["pieces"], model, rank, world)
        runs = []
        for _, wire, overlap in variants(model):
            # an error ends the job on every rank (the others would wait in a collective): the parent
            # reports it with the single-GPU figures
            runs.append(fit(rank, world, dict(cfg, model=model), inp, wire, overlap))
        out[model] = runs
        if model == cfg["models"][0]:  # the exchange alone, on this model's plan
            dg = gd.DistGraph(inp["piece"], dev)
            xb = {}
            for width in (1, 128):
                x = torch.randn(dg.n_local, width, device=dev)
                for _ in range(3):
                    dg.halo(x)
                ts = []
                for _ in range(10):
                    if cuda:
                        torch.cuda.synchronize(dev)
                    dist.barrier(group=dg.group)
                    t0 = time.perf_counter()
                    dg.halo(x)
                    if cuda:
                        torch.cuda.synchronize(dev)
                    ts.append(time.perf_counter() - t0)
                xb[width] = dict(seconds=float(np.median(ts)), send_bytes=dg.n_send * width * 4,
                                 recv_bytes=dg.n_halo * width * 4)
            out["exchange"] = xb
            del dg
        del inp
        gc.collect()
    return out


def big_job(rank, world, cfg):
    """One rank of the too-big graph: draw the whole graph on this rank's GPU (every rank draws
    the same one: checked), keep this rank's piece (built on the GPU), free the rest, train."""
    import torch
    import torch.distributed as dist

    import gnnsparse.distributed as gd
    from gnnsparse.train.data import synthetic_torch
    from gnnsparse.train.dist import fit

    cuda = cfg["device"] == "cuda"
    dev = torch.device("cuda", rank) if cuda else torch.device("cpu")
    t0 = time.perf_counter()
    d = synthetic_torch(**cfg["sizes"], seed=cfg["seed"], device=dev, numpy=False)
    n, E = d.num_nodes, d.num_edges
    fp = (E, int(d.edge_index[0, ::9973].sum()), int(d.y.sum()))
    fps = [None] * world
    dist.all_gather_object(fps, fp)
    if any(f != fps[0] for f in fps):
        raise RuntimeError(f"the ranks drew different graphs: {fps}")
    gen_s = time.perf_counter() - t0
    w = torch.bincount(d.edge_index[1], minlength=n) + 1
    cum = torch.cumsum(w, 0).cpu().numpy()
    cuts = np.searchsorted(cum, cum[-1] * np.arange(1, world) / world)
    bounds = np.concatenate([[0], cuts, [n]]).astype(np.int64)
    for r in range(1, world):
        bounds[r] = min(max(bounds[r], bounds[r - 1] + 1), n - (world - r))
    piece = gd.local_graph_from_edges(d.edge_index, n, bounds, rank, self_loops=cfg["model"] == "gat")
    lo, hi = int(bounds[rank]), int(bounds[rank + 1])
    splits = {}
    for k, idx in zip(("train", "val", "test"), (d.train_idx, d.val_idx, d.test_idx)):
        splits[k] = idx[(idx >= lo) & (idx < hi)] - lo
    inp = dict(piece=piece, x=d.x[lo:hi].cpu().numpy(), y=d.y[lo:hi].cpu().numpy(), splits=splits,
               totals=dict(train=len(d.train_idx), val=len(d.val_idx), test=len(d.test_idx)),
               num_classes=int(d.y.max()) + 1)
    del d, w
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    piece_s = time.perf_counter() - t0 - gen_s
    out = fit(rank, world, cfg, inp, "fp32")
    out["info"].update(nodes=n, edges=E, generate_s=gen_s, piece_s=piece_s)
    return out


def big_run(args, report) -> int:
    """--big N: train the graph of N nodes (products' degree) on nproc GPUs, then try it on one."""
    import torch

    import gnnsparse.distributed as gd
    from gnnsparse.train.data import PRODUCTS, synthetic_torch

    cuda = args.device == "cuda"
    model = args.models.split(",")[0]
    N = int(args.big)
    sizes = dict(num_nodes=N, num_edges=int(N * PRODUCTS["num_edges"] / PRODUCTS["num_nodes"]),
                 num_features=PRODUCTS["num_features"], num_classes=PRODUCTS["num_classes"])
    epochs = args.epochs or (3 if args.smoke else 5)
    cfg = dict(device=args.device, model=model, sizes=sizes, epochs=epochs, hidden=32 if args.smoke else 128,
               heads=4, seed=0, lr=0.01, weight_decay=0.0, dropout=0.5, eval_every=epochs, log_every=0)
    b = report["big"] = dict(model=model, sizes=sizes, epochs=epochs)
    t = time.perf_counter()
    try:
        outs = gd.spawn(big_job, args.nproc, args=(cfg,), device=args.device, timeout=300)
    except Exception as e:  # noqa: BLE001
        report["errors"].append(f"big x{args.nproc}: {type(e).__name__}: {e}")
        traceback.print_exc()
        return 1
    info = [o["info"] for o in outs]
    r = outs[0]["result"]
    b["dist"] = dict(result=r.summary(), ranks=info, seconds=time.perf_counter() - t)
    log(f"big {model}: {info[0]['nodes']:,} nodes, {info[0]['edges']:,} edges on {args.nproc} "
        f"{'GPUs' if cuda else 'processes'}: {r.median_epoch_ms:.1f} ms/epoch, test {100 * r.best_val_test:.2f} % "
        f"after {epochs} epochs, peak per GPU {[round((q['peak_mem'] or 0) / GIB, 2) for q in info]} GiB "
        f"(drawn in {info[0]['generate_s']:.1f} s, piece in {info[0]['piece_s']:.1f} s)")
    if cuda and not args.no_single:
        # the same graph on one GPU: expected to run out of memory
        t = time.perf_counter()
        try:
            data = synthetic_torch(**sizes, seed=0, device=torch.device("cuda", 0))
            torch.cuda.empty_cache()
            s = single(data, model, torch.device("cuda", 0), 2, cfg["hidden"], 4, 0)
            b["single"] = dict(fits=True, peak_mem=s.peak_mem, median_epoch_ms=s.median_epoch_ms)
            log(f"big {model} on 1 GPU: it fits after all (peak {s.peak_mem / GIB:.1f} GiB)")
        except torch.OutOfMemoryError as e:
            b["single"] = dict(fits=False, error=str(e).splitlines()[0], seconds=time.perf_counter() - t)
            log(f"big {model} on 1 GPU: out of memory, as planned ({str(e).splitlines()[0][:160]})")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="train-multi-gpu", help="directory for train_multi_gpu.json / .csv")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: a dry run on gloo")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--models", default="gcn,gat")
    p.add_argument("--epochs", type=int, help="epochs per run (default 20; 3 with --smoke)")
    p.add_argument("--scale", type=float, help="fraction of the products sizes (default 1; 0.002 with --smoke)")
    p.add_argument("--smoke", action="store_true", help="tiny sizes: every path runs in a minute")
    p.add_argument("--cut-parts", default="8,64", help="edge cut of a range partition into these part counts")
    p.add_argument("--budget", type=float, default=330.0, help="seconds after which optional sections are skipped")
    p.add_argument("--big", metavar="NODES", help="only train a graph of NODES nodes (products' average degree, "
                   "the first of --models) on --nproc GPUs, each drawing the graph on its GPU and keeping its piece, "
                   "then try it on one GPU (the plan of a normal run prints the size that needs two)")
    p.add_argument("--no-single", action="store_true", help="--big: skip the one-GPU attempt")
    args = p.parse_args(argv)

    import torch

    import gnnsparse
    import gnnsparse.distributed as gd
    from gnnsparse.train.data import PRODUCTS, synthetic_torch
    from gnnsparse.train.dist import save_pieces

    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.makedirs(args.out, exist_ok=True)
    cuda = args.device == "cuda"
    if cuda and torch.cuda.device_count() < args.nproc:
        print(f"train_multi_gpu: {args.nproc} processes need {args.nproc} GPUs, torch sees {torch.cuda.device_count()}",
              file=sys.stderr)
        return 2
    epochs = args.epochs or (3 if args.smoke else 20)
    scale = args.scale or (0.002 if args.smoke else 1.0)
    models = [m for m in args.models.split(",") if m]
    hidden, heads, seed = (32 if args.smoke else 128), 4, 0
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    cap = torch.cuda.get_device_properties(0).total_memory if cuda else None
    report = dict(date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), argv=sys.argv, torch=torch.__version__,
                  gnnsparse=getattr(gnnsparse, "__version__", "?"), device=torch.cuda.get_device_name(0) if cuda else
                  "cpu", gpus=torch.cuda.device_count() if cuda else 0, gpu_memory=cap, nproc=args.nproc,
                  epochs=epochs, hidden=hidden, heads=heads, models={}, errors=[])
    log(f"{report['device']} x{report['gpus']}, torch {torch.__version__}, gnnsparse {report['gnnsparse']}, "
        f"NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE')}")

    if args.big:
        rc = big_run(args, report)
        with open(os.path.join(args.out, "train_multi_gpu_big.json"), "w") as f:
            json.dump(report, f, indent=1, default=str)
        for e in report["errors"]:
            print("ERROR", e)
        log(f"done; {os.path.join(args.out, 'train_multi_gpu_big.json')}")
        return rc or (1 if report["errors"] else 0)

    sizes = dict(num_nodes=max(200, int(PRODUCTS["num_nodes"] * scale)),
                 num_edges=max(1000, int(PRODUCTS["num_edges"] * scale)),
                 num_features=PRODUCTS["num_features"], num_classes=PRODUCTS["num_classes"])
    t = time.perf_counter()
    data = synthetic_torch(**sizes, seed=seed, device=dev, name="products-sized SBM" if scale == 1 else None)
    if cuda:
        torch.cuda.empty_cache()
    N, E = data.num_nodes, data.num_edges
    report["graph"] = dict(describe=data.describe(), nodes=N, edges=E, seconds=time.perf_counter() - t)
    log(f"graph: {data.describe()} ({time.perf_counter() - t:.1f} s)")
    half = half_edges(data)
    import tempfile

    pieces = tempfile.mkdtemp(prefix="gnnsparse-pieces-")  # the ranks' inputs (GBs): not under --out
    rows = []
    for model in models:
        m = report["models"].setdefault(model, {})
        try:
            r = single(data, model, dev, epochs, hidden, heads, seed)
            m["single"] = r.summary()
            log(f"{model} 1 {'GPU' if cuda else 'process'}: {r.median_epoch_ms:.1f} ms/epoch, test "
                f"{100 * r.best_val_test:.2f} %, peak {(r.peak_mem or 0) / GIB:.2f} GiB")
            if cuda:
                rh = single(half, model, dev, 2, hidden, heads, seed)
                m["half_edges"] = dict(edges=half.num_edges, peak_mem=rh.peak_mem)
                b_e = (r.peak_mem - rh.peak_mem) / max(E - half.num_edges, 1)
                b_n = (r.peak_mem - b_e * E) / N
                m["bytes_per_edge"], m["bytes_per_node"] = b_e, b_n
                log(f"{model} memory: {b_e:.1f} B per stored edge, {b_n:.1f} B per node (+ constant) from "
                    f"{rh.peak_mem / GIB:.2f} GiB at {half.num_edges:,} edges")
        except Exception as e:  # noqa: BLE001
            report["errors"].append(f"{model} single: {type(e).__name__}: {e}")
            traceback.print_exc()
        t = time.perf_counter()
        m["cut"] = save_pieces(data, model, args.nproc, pieces)
        m["partition_seconds"] = time.perf_counter() - t
        log(f"{model}: {args.nproc}-way partition and pieces in {m['partition_seconds']:.1f} s; halo rows per rank "
            f"{m['cut']['halo_rows']}, cut edges {m['cut']['cut_edges']:,} of {E + (N if model == 'gat' else 0):,}")
    del half
    gc.collect()

    cfg = dict(device=args.device, models=models, pieces=pieces, epochs=epochs, hidden=hidden, heads=heads, seed=seed,
               lr=0.01, weight_decay=0.0, dropout=0.5, eval_every=5, log_every=0)
    t = time.perf_counter()
    try:
        outs = gd.spawn(rank_job, args.nproc, args=(cfg,), device=args.device, timeout=150,
                        threads=None if cuda else max(1, (os.cpu_count() or 1) // args.nproc))
    except Exception as e:  # noqa: BLE001
        report["errors"].append(f"distributed: {type(e).__name__}: {e}")
        traceback.print_exc()
        outs = []
    log(f"distributed runs in {time.perf_counter() - t:.1f} s")
    for model in models:
        m = report["models"][model]
        s = m.get("single")
        for i, (wire, _, _) in enumerate(variants(model)):
            per = [o[model][i] for o in outs] if outs else []
            if not per or any("error" in q for q in per):
                err = next((q["error"] for q in per if "error" in q), "not run")
                report["errors"].append(f"{model} x{args.nproc} {wire}: {err}")
                continue
            res = per[0]["result"]
            info = [q["info"] for q in per]
            d = m.setdefault("dist", {})[wire] = dict(result=res.summary(), ranks=info)
            ms1 = s["median_epoch_ms"] if s else float("nan")
            d["speedup"] = ms1 / res.median_epoch_ms
            d["efficiency"] = d["speedup"] / args.nproc
            rows.append(dict(model=model, gpus=args.nproc, halo=wire, ms_epoch=res.median_epoch_ms,
                             speedup=d["speedup"], efficiency=d["efficiency"], test_acc=res.best_val_test,
                             peak_gib_max=max((q["peak_mem"] or 0) for q in info) / GIB,
                             wire_mib_step=max(q["wire_bytes_per_train_step"] for q in info) / 2**20,
                             halo_rows=max(q["halo"] for q in info)))
        if s:
            rows.insert(len(rows) - len(m.get("dist", {})), dict(
                model=model, gpus=1, halo="-", ms_epoch=s["median_epoch_ms"], speedup=1.0, efficiency=1.0,
                test_acc=s["best_val_test_acc"], peak_gib_max=(s["peak_mem"] or 0) / GIB, wire_mib_step=0.0,
                halo_rows=0))
    if outs and "exchange" in outs[0]:
        xb = [o["exchange"] for o in outs]
        lat = max(x[1]["seconds"] for x in xb)
        big = max(xb, key=lambda x: x[128]["seconds"])[128]
        per_byte = (big["seconds"] - lat) / max(big["send_bytes"], 1)
        report["exchange"] = dict(per_rank=xb, latency_s=lat, seconds_per_byte=per_byte,
                                  gbytes_per_s=1e-9 / per_byte if per_byte > 0 else None)
        log(f"exchange: latency {lat * 1e6:.0f} us, {per_byte * 1e12:.2f} ps/byte "
            f"({(1e-9 / per_byte) if per_byte > 0 else float('nan'):.1f} GB/s per rank) at width 128 fp32")

    # the plan: a graph that needs 2 GPUs
    for model in models:
        m = report["models"][model]
        if not cap or "bytes_per_edge" not in m or "dist" not in m:
            continue
        usable = 0.9 * cap
        per_node = m["bytes_per_node"] + m["bytes_per_edge"] * E / N  # at this graph's average degree
        n1 = usable / per_node
        peak2 = max(q["peak_mem"] for q in m["dist"]["fp32"]["ranks"])
        n2 = N * usable / peak2  # per-GPU memory grows with the graph (same degree, same partition)
        target = min(1.3 * n1, 0.9 * n2)
        m["plan"] = dict(usable_bytes=usable, max_nodes_1gpu=n1, max_nodes_2gpu=n2, fits_2_not_1=bool(n2 > n1 * 1.05),
                         target_nodes=target, target_edges=target * E / N, target_vs_this=target / N,
                         est_1gpu_bytes=target * per_node, est_2gpu_bytes_per_gpu=peak2 * target / N)
        log(f"{model} plan: one GPU holds up to {n1:,.0f} nodes ({n1 / N:.1f}x this graph); {args.nproc} GPUs up to "
            f"{n2:,.0f}; a graph of {target:,.0f} nodes / {target * E / N:,.0f} edges needs 2 GPUs "
            f"(1 GPU: {target * per_node / GIB:.0f} GiB > {usable / GIB:.0f}; 2 GPUs: {peak2 * target / N / GIB:.0f} "
            f"GiB each); train it: python3 bench/train_multi_gpu.py --out DIR --big {int(target)} --models {model}")
    if args.cut_parts and time.perf_counter() - T0 < args.budget:
        from gnnsparse.train.dist import graph_of

        A = graph_of(data, models[0])
        cuts = {}
        for P in [int(x) for x in args.cut_parts.split(",") if x]:
            if time.perf_counter() - T0 > args.budget:
                break
            c = gd.edge_cut(A, gd.partition(A, P))
            cuts[P] = dict(cut_edges=c["cut_edges"], halo_rows_max=max(c["halo_rows"]),
                           halo_rows_total=c["halo_rows_total"])
            log(f"range partition into {P}: cut edges {c['cut_edges']:,} ({c['cut_edges'] / c['edges']:.1%}), halo "
                f"rows per rank max {max(c['halo_rows']):,}, total {c['halo_rows_total']:,}")
        report["cuts"] = cuts

    # table
    head = ("model", "GPUs", "halo", "ms/epoch", "speedup", "effic.", "test %", "peak GiB/GPU", "MiB wire/step")
    print()
    print(" | ".join(head))
    for r in rows:
        print(" | ".join([r["model"], str(r["gpus"]), r["halo"], f"{r['ms_epoch']:.1f}", f"{r['speedup']:.2f}x",
                          f"{100 * r['efficiency']:.0f} %", f"{100 * r['test_acc']:.2f}", f"{r['peak_gib_max']:.2f}",
                          f"{r['wire_mib_step']:.1f}"]))
    with open(os.path.join(args.out, "train_multi_gpu.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    if rows:
        with open(os.path.join(args.out, "train_multi_gpu.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    import shutil

    shutil.rmtree(pieces, ignore_errors=True)
    for e in report["errors"]:
        print("ERROR", e)
    log(f"done; {os.path.join(args.out, 'train_multi_gpu.json')}")
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
