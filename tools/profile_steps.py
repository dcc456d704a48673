#!/usr/bin/env python3
"""Where a training step spends its time and memory on a CUDA GPU (torch.profiler tables).

    python tools/profile_steps.py quant    # one quantized GCN layer step against the float32 layer
                                           # (n = 1M nodes, 10M edges, C = 128; peak memory, top kernels)
    python tools/profile_steps.py models   # the GCN, GraphSAGE and GIN of examples/accelerate.py, PyG and
                                           # accelerated: ms / epoch, GPU time, top host-side ops
    python tools/profile_steps.py transformer  # TransformerConv 128 -> 4x32 forward + backward on a
                                           # random arxiv-sized graph, ours and PyG's: top GPU kernels
    python tools/profile_steps.py memory   # `gnnsparse train`'s GCN / GAT, float32 and int8, on the
                                           # arxiv-sized graph: peak memory of each phase of an epoch
                                           # (--size products: drawn on the GPU; --model gcn|gat)
    python tools/profile_steps.py model    # the per-tensor bytes model of the products-sized GCN's
                                           # peak (float32, int8 before / after issue 21's memory work),
                                           # with what one training forward saves for the backward,
                                           # measured by saved_tensors_hooks on a scaled-down graph of
                                           # products' degree and widths (runs on the CPU too)
    python tools/profile_steps.py epoch --size products  # `gnnsparse train`'s GCN epoch, float32 and
                                           # int8, on a generated graph of that size (drawn on the GPU:
                                           # synthetic_torch, another draw of the same model): ms / epoch,
                                           # top kernels, each launch of the sparse kernels in order;
                                           # --variant "GNNSPARSE_CUDA_HUB_FACTOR=8,..." compares settings
    python tools/profile_steps.py route    # the dense-ish route (gs.spmm on the grid's largest cells,
                                           # fp32 / tf32 / bf16) against the dense GEMM it calls, per
                                           # call: ms, then the profile's kernels and host-side ops
    python tools/profile_steps.py route-host  # a routed gs.spmm on a small, host-bound cell (2048^2,
                                           # d 0.3, N 32) against the kernels: host / wall us per call,
                                           # cProfile's top functions of the routed call
    python tools/profile_steps.py held     # `gnnsparse train`'s model (--model gat|gcn), float32 and
                                           # int8: what is alive when the backward starts, by tensor
                                           # and the function that saved it, scaled to products (CPU too)
    python tools/profile_steps.py peak --size products  # `gnnsparse train`'s model (--model gat|gcn),
                                           # float32 and int8: what is alive at the highest point
                                           # of one training step, by the line that allocated it
                                           # (torch.cuda.memory's history, replayed)
    python tools/profile_steps.py ops      # the aten ops one epoch dispatches, PyG's model vs accelerated
                                           # (examples/accelerate.py's GCN, GraphSAGE, GIN; CPU too)
    python tools/profile_steps.py host     # `gnnsparse train`'s GAT and GCN (--model), float32 and int8,
                                           # on the arxiv-sized graph: per step the host's launch time,
                                           # the wall time back to back and with a sync per step (what
                                           # `train` times), the host-device synchronizations (and
                                           # where), the aten ops dispatched (CPU too: --device cpu),
                                           # the kernels and GPU time of a synced step; --where N:
                                           # the N source lines dispatching the most ops
    python tools/profile_steps.py rss      # `train --model gcn --quant 8 --compare fp32` on a products-
                                           # like graph of --nodes nodes on the CPU: each run's peak RSS
                                           # (Linux; the peak is reset before each run)

Each table covers 5 steps after 3 warm-up steps. Needs torch with CUDA and the gnnsparse CUDA
build (`models` also torch_geometric; `model` runs anywhere).
"""
from __future__ import annotations

import argparse
import collections
import copy
import os
import runpy
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _table(prof, sort_by, rows=22):
    return prof.key_averages().table(sort_by=sort_by, row_limit=rows, max_name_column_width=60)


PROFILED = 5  # steps in each torch.profiler table


def _timed_profile(step, label, reps):
    """3 warm-up calls, the mean ms of `reps` timed calls (printed with `label`), then a profile of
    PROFILED calls (returned)."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        step()
    torch.cuda.synchronize()
    print(f"\n===== {label}: {(time.perf_counter() - t0) / reps * 1e3:.2f} ms")
    return _profile(step)


def _profile(step):
    """torch.profiler over PROFILED calls of step()."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILED):
            step()
        torch.cuda.synchronize()
    return prof


def quant(n=1_000_000, e=10_000_000, C=128):
    from gnnsparse.bench import generators
    from gnnsparse.quant import nn as qnn
    from gnnsparse.torch import nn as tnn

    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    G = generators.regular_random(n, e, 99, weighted=False)
    ei = torch.from_numpy(np.stack([np.repeat(np.arange(n), np.diff(G.rowptr)), np.asarray(G.col)])).to(dev)
    x = torch.randn(n, C, device=dev)
    layers = {"float32": tnn.GCNConv(C, C, cached=True).to(dev),
              "int8": qnn.GCNConv(C, C, cached=True, bits=8).to(dev)}
    layers["int8"].load_state_dict(layers["float32"].state_dict())
    for label, layer in layers.items():
        def step(layer=layer):
            layer.zero_grad(set_to_none=True)
            layer(x, ei).sum().backward()

        for _ in range(3):
            step()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step()
        torch.cuda.synchronize()
        print(f"\n===== {label}: peak above the inputs {(torch.cuda.max_memory_allocated() - base) / 2**20:.1f} MiB")
        print(_table(_profile(step), "cuda_time_total"))


def _example_epochs(dev, nodes, edges):
    """[(model, "pyg" | "ours", one training epoch, accelerate's report)]: the GCN, GraphSAGE and GIN
    of examples/accelerate.py (its widths; a node graph of `nodes` / `edges`, its 64-graph batch for
    GIN), PyG's and an accelerated copy with the same weights, each with its own Adam."""
    import gnnsparse.torch as gst

    ex = runpy.run_path(os.path.join(ROOT, "examples", "accelerate.py"), run_name="example")
    gen = torch.Generator().manual_seed(0)
    x, ei, y = ex["node_data"](nodes, edges, 128, 7, dev, gen)
    xb, eib, batch, yb = ex["graph_batch"](64, 30, 60, 128, 2, dev, gen)
    cases = {"GCN": (ex["GCN"](128, 16, 7), (x, ei), y), "GraphSAGE": (ex["SAGE"](128, 64, 7), (x, ei), y),
             "GIN": (ex["GIN"](128, 32, 2, num_layers=3), (xb, eib, batch, 64), yb)}
    runs = []
    for name, (m, args, yy) in cases.items():
        m = m.to(dev)
        mm = copy.deepcopy(m)
        report = gst.accelerate(mm)
        for tag, model in (("pyg", m), ("ours", mm)):
            opt = torch.optim.Adam(model.parameters(), lr=0.01)
            model.train()

            def ep(model=model, opt=opt, args=args, yy=yy):
                opt.zero_grad()
                F.cross_entropy(model(*args), yy).backward()
                opt.step()

            runs.append((name, tag, ep, report))
    return runs


def models():
    for name, tag, ep, report in _example_epochs(torch.device("cuda"), 169343, 1166243):
        if tag == "pyg":
            print(report)
        prof = _timed_profile(ep, f"{name} {tag}, per epoch", 20)
        # kernels and copies only (key_averages' totals also count annotated ranges such as the
        # optimizer step's, which double-counts their kernels)
        gpu = sum(e.device_time_total for e in prof.events() if e.device_type.name == "CUDA") / PROFILED
        print(f"GPU time / epoch {gpu / 1e3:.2f} ms (profiled)")
        print(_table(prof, "self_cpu_time_total", 25))
        print(_table(prof, "self_cuda_time_total", 15))


def _train_step(net, opt, t):
    """One training step of `gnnsparse train`'s loop on t (forward over t's CSR, cross entropy on the
    train split, backward, optimizer step), as a function of no arguments."""
    x, y, tr, graph = t["x"], t["y"], t["train"], t["csr"]

    def step():
        net.train()
        opt.zero_grad(set_to_none=True)
        out = net(x, graph)
        loss = F.cross_entropy(out.index_select(0, tr), y.index_select(0, tr))
        del out  # (n, classes): not needed by the backward
        loss.backward()
        del loss
        opt.step()

    return step


def _run_graph(t0, quant):
    """t0 for one run, as `gnnsparse train` gives it: a fresh graph object (gnnsparse.train.loop.fresh_graph)
    and, with quant (the first layer's bits), the input features quantized once (a QTensor, seed 0)."""
    from gnnsparse.quant import quantize
    from gnnsparse.train.loop import fresh_graph

    t = fresh_graph(t0)
    if quant:
        t["x"] = quantize(t0["x"], quant, True, 0)
    return t


def _train_net(model, t, init, quant):
    """`gnnsparse train`'s model (hidden 128, 4 heads, dropout 0.5; quant: None or the first layer's
    bits) with the weights `init`, on t's device, and its Adam optimizer."""
    from gnnsparse.train.models import Net

    net = Net(model, "gnnsparse", t["x"].shape[1], 128, t["num_classes"], heads=4, dropout=0.5, quant=quant)
    net.load_state_dict(init)
    net = net.to(t["y"].device)
    return net, torch.optim.Adam(net.parameters(), lr=0.01)


def memory(epochs=3, size="arxiv", models=None):
    import gc

    from gnnsparse.train import data as tdata
    from gnnsparse.train.loop import fresh_graph, initial_state, prepare

    dev = torch.device("cuda")
    nd = tdata.products_like(0, dev) if size == "products" else tdata.arxiv_like(0)
    for model in models or (("gcn",) if size == "products" else ("gcn", "gat")):
        t0 = prepare(nd, dev, model, edge_index=False)
        init = initial_state(model, t0, 128, 4, 0, 0.5, None)
        for quant in (None, 8):
            t = fresh_graph(t0)  # each run builds its own graph structures (as `gnnsparse train` does)
            net, opt = _train_net(model, t, init, quant)
            x, y, tr = t["x"], t["y"], t["train"]
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            phases = []
            for ep in range(epochs):
                for phase in ("forward", "backward", "step", "eval"):
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    before = torch.cuda.memory_allocated()
                    if phase == "forward":
                        net.train()
                        opt.zero_grad(set_to_none=True)
                        out = net(x, t["csr"])
                        loss = F.cross_entropy(out.index_select(0, tr), y.index_select(0, tr))
                    elif phase == "backward":
                        loss.backward()
                        del out, loss
                    elif phase == "step":
                        opt.step()
                    else:
                        net.eval()
                        with torch.no_grad():
                            net(x, t["csr"]).argmax(1)
                    torch.cuda.synchronize()
                    phases.append((ep, phase, (before - base) / 2**20, (torch.cuda.max_memory_allocated() - base) / 2**20))
            print(f"\n===== {model} {'int8' if quant else 'float32'} (MiB above data and model before the first epoch, "
                  f"{base / 2**20:.1f} MiB)")
            for ep, phase, b, pk in phases:
                print(f"  epoch {ep} {phase:9s} held before {b:8.1f}  peak {pk:8.1f}")
            del net, opt, t
            gc.collect()
            torch.cuda.empty_cache()


def epoch(size="arxiv", model="gcn", reps=5, runs=("float32", "int8"), variants=("",)):
    """ms / epoch of `gnnsparse train`'s model, float32 and int8, on a generated graph of `size`,
    once per variant ("NAME=VALUE,..." environment settings for the run, e.g. the CUDA tuning knobs;
    "" = as set): the first variant also prints the top kernels and each sparse launch in order."""
    from gnnsparse.train import data as tdata
    from gnnsparse.train.loop import initial_state, prepare

    dev = torch.device("cuda")
    sizes = tdata.PRODUCTS if size == "products" else tdata.ARXIV
    t1 = time.perf_counter()
    nd = tdata.synthetic_torch(**sizes, seed=0, device=dev)
    t0 = prepare(nd, dev, model, edge_index=False)
    del nd
    deg = torch.diff(t0["csr"].rowptr.to(torch.int64)).double()
    q = torch.quantile(deg[: 1 << 24], torch.tensor([0.5, 0.9, 0.99, 0.999], dtype=torch.float64, device=dev))
    print(f"graph of {size} size drawn and prepared in {time.perf_counter() - t1:.1f} s: {t0['csr'].shape[0]:,} nodes, "
          f"{t0['csr'].nnz:,} stored edges; degree mean {deg.mean():.1f}, median / 90 / 99 / 99.9 % "
          f"{' / '.join(f'{v:.0f}' for v in q.tolist())}, max {deg.max():.0f}")
    init = initial_state(model, t0, 128, 4, 0, 0.5, None)
    saved = dict(os.environ)
    for vi, variant in enumerate(variants):
        os.environ.clear()
        os.environ.update(saved)
        os.environ.update(dict(kv.split("=", 1) for kv in variant.split(",") if kv))
        for run in runs:
            quant = 8 if run == "int8" else None
            t = _run_graph(t0, quant)
            net, opt = _train_net(model, t, init, quant)

            def ep(net=net, opt=opt, x=t["x"], y=t["y"], tr=t["train"], A=t["csr"]):
                net.train()
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(net(x, A).index_select(0, tr), y.index_select(0, tr)).backward()
                opt.step()

            prof = _timed_profile(ep, f"{model} {run}, {size}-sized, per epoch [{variant or 'defaults'}]", reps)
            ev = [e for e in prof.events() if e.device_type.name == "CUDA"]
            sparse = [e for e in ev if any(k in e.name for k in ("spmm", "sddmm", "fused", "hub", "segment"))]
            print(f"GPU time / epoch {sum(e.device_time_total for e in ev) / PROFILED / 1e3:.2f} ms, sparse kernels "
                  f"{sum(e.device_time_total for e in sparse) / PROFILED / 1e3:.2f} ms (profiled)")
            if vi == 0:
                print(_table(prof, "self_cuda_time_total", 16))
                for e in sparse[: len(sparse) // PROFILED]:  # the first profiled epoch's launches, in order
                    print(f"  {e.device_time_total / 1e3:8.3f} ms  {e.name[:120]}")
            del net, opt, t
    os.environ.clear()
    os.environ.update(saved)


# products-sized generated graph (gnnsparse train --size products): nodes, stored edges, widths
PRODUCTS = dict(n=2_449_029, nnz=119_658_792, F=100, H=128, C=47, train=0.54)


def _model_rows(n, nnz, F, H, C, train):
    """[(run, part, tensor, bytes)]: what is live at each run's peak, by tensor. The peak moment
    modelled: the backward of the second layer's GEMM (dy = dh2 W2 just written, its input y not yet
    released), where the first layer's saved tensors, the ReLU / dropout state and two n x hidden
    float32 tensors meet; "build" is the epoch-0 graph build of the int8 run (its other candidate)."""
    nnz2 = nnz + n  # + one self loop per node (GCN normalization)
    U, U8, X4, X8, L = n * H * 4, n * H, n * F * 4, n * F, n * C * 4
    data = [("x float32", X4), ("y, split int64", 2 * n * 8), ("CSR rowptr, col int32", (n + 1) * 4 + nnz * 4)]
    pyg = [("edge_index int64 (PyG's input; unused by our models)", 2 * nnz * 8),
           ("CSR.edge_perm int64 (for edge features; unused)", nnz * 8)]
    graph_old = [("GraphTensors of A: t_col, t_perm, rows, eid int32", 4 * nnz * 4),
                 ("GraphTensors of A_norm: col, val, t_col, t_perm, rows, eid", 6 * nnz2 * 4),
                 ("A_norm edge_perm int64", nnz2 * 8), ("CSR kept by the degree SpMM: ones float32", nnz2 * 4)]
    head = [("logits (n x C, held by the loop) and dh2 = A^T dlogits", 2 * L)]
    fp32 = [("h1 = x W1^T (saved by the SpMM op, unused by its sum backward)", U), ("relu output (saved)", U),
            ("dropout output y = layer 2's input (saved)", U), ("dropout mask bool", U8), ("dy = dh2 W2", U)]
    old_q = [("_Operators: t_perm as int64 (unused by GCN)", nnz2 * 8), ("_Operators: A^T values", nnz2 * 4),
             ("q(x) int8 (saved)", X8), ("epoch 0: the first layer's output held for Error_X", U),
             ("relu output (saved)", U), ("dropout output y (saved)", U), ("dropout mask bool", U8),
             ("dy = dh2 W2", U)]
    ops = [("A_norm: rowptr, col int32, val float32", (n + 1) * 4 + nnz2 * 8),
           ("A_norm^T: rowptr, col int32, val float32", (n + 1) * 4 + nnz2 * 8)]
    new_q = [("q(x) int8 (saved)", X8), ("relu-dropout mask bool (saved)", U8),
             ("y = layer 2's input float32 (saved: Tango's float32 last layer)", U), ("dy = dh2 W2", U)]
    build = [("A_norm col, its COO rows, val (int32, int32, float32)", 3 * nnz2 * 4),
             ("stable argsort of the columns: int64 result and sort buffers (upper bound)", 4 * nnz2 * 8)]
    rows = []
    for run, parts in (("float32 (today)", [("data", data + pyg), ("graph", graph_old), ("live", fp32 + head)]),
                       ("int8 before", [("data", data + pyg), ("graph", graph_old), ("live", old_q + head)]),
                       ("int8 after", [("data", data), ("graph", ops), ("live", new_q + head)]),
                       ("int8 after, epoch-0 build", [("data", data), ("build", build)]),
                       ("float32 after (no edge_index / edge_perm)", [("data", data), ("graph", graph_old),
                                                                     ("live", fp32 + head)])):
        for part, items in parts:
            rows += [(run, part, name, b) for name, b in items]
    return rows


def _saved_per_node(n=20_000, seed=0):
    """Bytes one training forward of `gnnsparse train`'s GCN saves for the backward, per node, float32
    and int8, on a generated graph of products' degree and widths (saved_tensors_hooks; graph
    arrays counted separately: they belong to the graph)."""
    import gnnsparse as gs
    from gnnsparse.train import data as tdata
    from gnnsparse.train.models import Net

    P = PRODUCTS
    nd = tdata.synthetic(n, int(P["nnz"] / P["n"] * n / 2), P["F"], P["C"], seed=seed)
    x = torch.from_numpy(nd.x)
    A = gs.CSR.from_edge_index(torch.from_numpy(nd.edge_index), n)
    out = {}
    torch.manual_seed(0)
    f = Net("gcn", "gnnsparse", P["F"], P["H"], P["C"])
    q = Net("gcn", "gnnsparse", P["F"], P["H"], P["C"], quant=8)
    q.load_state_dict(f.state_dict())
    for tag, net in (("float32", f), ("int8", q)):
        seen = {}

        def pack(t):
            st = t.untyped_storage()
            seen[st.data_ptr()] = (t.dtype, st.nbytes(), t.shape[0] if t.dim() else 0)
            return t

        net.train()
        for _ in range(2):  # the second forward: delayed scales in use, graph structures built
            seen.clear()
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                y = net(x, A)
            y.sum().backward()
        node = sum(b for dt, b, rows in seen.values() if rows == n and dt != torch.int32 and dt != torch.int64)
        out[tag] = (node / n, sum(b for _, b, _ in seen.values()) - node, x.nbytes / n)
    return out, n, nd.num_edges


def held(kind="gat", n=20_000, seed=0):
    """What is alive when a training step's backward starts, by tensor, for `gnnsparse train`'s
    model (float32 and int8) on a generated graph of products' degree and widths (runs on the CPU):
    the storages a forward saves for the backward (saved_tensors_hooks, with the gnnsparse function
    that saved each) and every other live storage (gc: data, parameters, the graph's structures),
    each scaled to products by its rows (node-sized x n_products / n, edge-sized x nnz_products /
    nnz; the rest unscaled). The backward's own transients are not here (see `memory`)."""
    import gc
    import traceback
    import warnings

    from gnnsparse.train import data as tdata
    from gnnsparse.train.loop import fresh_graph, prepare
    from gnnsparse.train.models import Net

    P = PRODUCTS
    nd = tdata.synthetic(n, int(P["nnz"] / P["n"] * n / 2), P["F"], P["C"], seed=seed)
    t = prepare(nd, torch.device("cuda" if torch.cuda.is_available() else "cpu"), kind, edge_index=False)
    x, nnz = t["x"], t["csr"].nnz
    gib = 2**30

    def scale(rows):  # node-sized, edge-sized, edge-sized with a self loop per node (GCN's A_norm)
        return {n: P["n"] / n, nnz: P["nnz"] / nnz, nnz + n: (P["nnz"] + P["n"]) / (nnz + n)}.get(rows, 1.0)

    def origin():
        for f in reversed(traceback.extract_stack()[:-2]):
            if "gnnsparse" in f.filename and "profile_steps" not in f.filename:
                return f"{os.path.basename(f.filename)}:{f.name}"
        return "torch"

    for quant in (None, 8):
        A = fresh_graph(t)["csr"]  # as `train` does: each run derives its own structures
        torch.manual_seed(0)
        net = Net(kind, "gnnsparse", P["F"], P["H"], P["C"], quant=quant).to(x.device)
        net.train()
        saved = {}

        def pack(tt):
            st = tt.untyped_storage()
            saved.setdefault(st.data_ptr(), (str(tt.dtype)[6:], st.nbytes(), tt.shape[0] if tt.dim() else 0, origin()))
            return tt

        for _ in range(2):  # the second step: delayed scales in use, structures built and cached
            saved.clear()
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda tt: tt):
                out = net(x, A)
            loss = out.sum()
            del out
            live = {}
            with warnings.catch_warnings():  # isinstance on some of gc's objects warns (deprecated names)
                warnings.simplefilter("ignore")
                tensors = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]
            for o in tensors:
                if not o.is_meta and o.device == x.device:
                    st = o.untyped_storage()
                    if st.data_ptr() not in saved and st.nbytes():
                        live.setdefault(st.data_ptr(), (str(o.dtype)[6:], st.nbytes(), o.shape[0] if o.dim() else 0))
            del tensors
            loss.backward()
            net.zero_grad(set_to_none=True)
        rows = [("saved", dt, r, org, b * scale(r)) for dt, b, r, org in saved.values()]
        rows += [("alive", dt, r, "", b * scale(r)) for dt, b, r in live.values()]
        total = sum(r[-1] for r in rows)
        print(f"\n===== {kind} {'float32' if quant is None else f'int{quant}'}: {total / gib:.2f} GiB alive when the "
              f"backward starts, scaled to products ({n:,} nodes, {nnz:,} entries here)")
        groups = {}
        for what, dt, r, org, b in rows:
            cls = "node" if r == n else "edge" if r in (nnz, nnz + n) else "other"
            key = (what, cls, dt, org)
            c, tot = groups.get(key, (0, 0.0))
            groups[key] = (c + 1, tot + b)
        for (what, cls, dt, org), (c, b) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
            if b >= 2**20:
                print(f"  {what:5s} {cls:5s}-sized {dt:9s} x{c:<3d} {b / gib:6.2f} GiB  {org}")


def model():
    gib = 2**30
    rows = _model_rows(**PRODUCTS)
    totals = {}
    for run, part, name, b in rows:
        totals.setdefault(run, {}).setdefault(part, 0)
        totals[run][part] += b
    print("per-tensor model of the products-sized GCN's peak (GiB; n = 2,449,029, nnz = 119,658,792, 100 -> 128 -> 47)")
    cur = None
    for run, part, name, b in rows:
        if run != cur:
            cur = run
            print(f"\n== {run}: {sum(totals[run].values()) / gib:.2f} GiB "
                  + ", ".join(f"{p} {v / gib:.2f}" for p, v in totals[run].items()))
        print(f"  {part:12s} {name:70s} {b / gib:6.2f}")
    t = {r: sum(v.values()) for r, v in totals.items()}
    print(f"\nmodel: float32 {t['float32 (today)'] / gib:.2f} GiB (measured 20.49), int8 before "
          f"{t['int8 before'] / gib:.2f} (measured 17.92); int8 after / float32 today "
          f"{t['int8 after'] / t['float32 (today)']:.2f}x (against the measured 20.49 GiB: "
          f"{t['int8 after'] / gib / 20.49:.2f}x); int8 after / float32 after "
          f"{t['int8 after'] / t['float32 after (no edge_index / edge_perm)']:.2f}x")
    saved, n, e = _saved_per_node()
    print(f"\nsaved for the backward by one training forward (saved_tensors_hooks, {n:,} nodes, {e:,} edges, CPU):")
    for tag, (per_node, other, xb) in saved.items():
        print(f"  {tag:8s} node-sized tensors {per_node:7.1f} B per node (x is {xb:.0f}): products "
              f"{per_node * PRODUCTS['n'] / gib:5.2f} GiB; other saved tensors {other / 2**20:.2f} MiB")


def rss(nodes=300_000, epochs=3):
    import gc

    from gnnsparse.train import cli, loop
    from gnnsparse.train import data as tdata

    def status(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))

    P = tdata.PRODUCTS
    tdata.products_like = lambda seed=0, device=None: tdata.synthetic(
        nodes, int(P["num_edges"] * nodes / P["num_nodes"]), P["num_features"], P["num_classes"], seed=seed,
        name=f"products-like, {nodes:,} nodes")
    orig, out = loop.run_once, []

    def run_once(t, *a, **k):
        gc.collect()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets the peak RSS (VmHWM)
        base = status("VmRSS")
        r = orig(t, *a, **k)
        out.append(("int8" if k.get("quant") else "float32", base, status("VmHWM")))
        return r

    loop.run_once = run_once
    cli.train(cli.build_parser().parse_args(["--model", "gcn", "--quant", "8", "--compare", "fp32", "--size",
                                             "products", "--epochs", str(epochs), "--device", "cpu", "--plain"]))
    for tag, base, peak in out:
        print(f"peak RSS {tag}: {peak / 2**30:.3f} GiB ({base / 2**30:.3f} before the run, {(peak - base) / 2**30:.3f} "
              "above)")


def transformer(n=169_343, e=1_166_243):
    import gnnsparse as gs
    import torch_geometric.nn as pnn
    from gnnsparse.torch import nn as gnn

    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(3)
    ei = torch.randint(0, n, (2, e), generator=g).to(dev)
    x = torch.randn(n, 128, generator=g).to(dev).requires_grad_()
    for tag, lib in (("ours", gnn), ("pyg", pnn)):
        torch.manual_seed(0)
        layer = lib.TransformerConv(128, 32, heads=4).to(dev)
        graph = gs.CSR.from_edge_index(ei, n) if tag == "ours" else ei

        def step(layer=layer, graph=graph):
            x.grad = None
            layer.zero_grad(set_to_none=True)
            y = layer(x, graph)
            y.backward(torch.ones_like(y))

        prof = _timed_profile(step, f"TransformerConv {tag}, forward + backward", 10)
        print(_table(prof, "self_cuda_time_total", 25))


def route_host(calls=200):
    """A small grid cell (M = K = 2048, d = 0.3, N = 32) where a routed gs.spmm is host-bound:
    host and wall us per call back to back, routed (GNNSPARSE_DENSE=on) and by the kernels (off),
    then cProfile's top functions of `calls` routed calls: where its ~100-250 us of host work go."""
    import cProfile
    import io
    import pstats

    import gnnsparse as gs
    from gnnsparse.bench import timing

    ns = runpy.run_path(os.path.join(ROOT, "bench", "grid_dense.py"))
    dev = torch.device("cuda")
    A = ns["grid_csr"](2048, 2048, 0.3, 0, torch, dev)
    X = torch.randn(2048, 32, device=dev)
    for mode in ("on", "off"):
        with timing.environ({"GNNSPARSE_DENSE": mode}):
            for _ in range(20):
                gs.spmm(A, X)
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(calls):
                gs.spmm(A, X)
            h = (time.perf_counter() - t) / calls
            torch.cuda.synchronize()
            w = (time.perf_counter() - t) / calls
            print(f"GNNSPARSE_DENSE={mode}: host {h * 1e6:.1f} us per call, wall {w * 1e6:.1f} us (back to back)")
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(calls):
                gs.spmm(A, X)
            pr.disable()
            torch.cuda.synchronize()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(20)
        print("\n".join(x for x in s.getvalue().splitlines()[6:] if x.strip()))


def route(reps=50):
    """Per precision, a routed gs.spmm against the GEMM it runs (cuBLAS on a dense copy made once),
    on two GPU-bound cells of the grid (M = 4K, K = 8192, d = 0.3, N = 32 / 128): where the
    routed call's time beyond the GEMM goes (the dense copy's cache lookup, X's conversions, the
    finiteness check, the output)."""
    import gnnsparse as gs
    from gnnsparse import _dense

    runpy_ns = runpy.run_path(os.path.join(ROOT, "bench", "grid_dense.py"))
    dev = torch.device("cuda")
    M, K, d = 32768, 8192, 0.3
    A = runpy_ns["grid_csr"](M, K, d, 0, torch, dev)
    Dd = torch.sparse_csr_tensor(*(torch.as_tensor(t, device=dev) for t in (A.rowptr, A.col, A.val)),
                                 size=(M, K)).to_dense()
    for N in (32, 128):
        X = torch.randn(K, N, device=dev)
        for p in ("fp32", "tf32", "bf16"):
            Dp = Dd.to(torch.bfloat16) if p == "bf16" else Dd
            gs.spmm(A, X, precision=p)  # builds the route's copy
            ours = _timed_profile(lambda: gs.spmm(A, X, precision=p), f"routed gs.spmm {p}, N = {N}", reps)
            print(_table(ours, "self_cuda_time_total", 12))
            print(_table(ours, "self_cpu_time_total", 12))
            gemm = _timed_profile(lambda: runpy_ns["_gemm"](torch, Dp, X, p), f"dense GEMM {p}, N = {N}", reps)
            print(_table(gemm, "self_cuda_time_total", 8))
            A.invalidate()
    pol = _dense.SPMM_CROSSOVER
    print(f"(the route's SpMM policy: {dict(pol)}, from {pol.min_elements} elements and nnz x N >= {pol.min_work:g})")


def _frame(frames, depth=2):
    """The innermost `depth` gnnsparse frames of an allocation (file:line function, innermost first),
    else the innermost frame."""
    mine = [f"{os.path.basename(f.get('filename', ''))}:{f.get('line')} {f.get('name')}" for f in frames
            if "gnnsparse" in f.get("filename", "") and "profile_steps" not in f.get("filename", "")]
    if mine:
        return " < ".join(mine[:depth])
    return f"{os.path.basename(frames[0].get('filename', '?'))}:{frames[0].get('line')}" if frames else "?"


def peak(size="products", model="gat", top=16):
    """What is alive at the peak of one training step (the second: structures built, delayed scales
    in use), float32 and int8: torch.cuda.memory's allocation history replayed to its highest point,
    the live blocks grouped by the gnnsparse line that allocated them, and the line whose allocation
    reached the peak."""
    import gc

    from gnnsparse.train import data as tdata
    from gnnsparse.train.loop import initial_state, prepare

    dev = torch.device("cuda")
    nd = tdata.products_like(0, dev) if size == "products" else tdata.arxiv_like(0)
    t0 = prepare(nd, dev, model, edge_index=False)
    init = initial_state(model, t0, 128, 4, 0, 0.5, None)
    mib = 2**20
    for quant in (None, 8):
        t = _run_graph(t0, quant)
        host_x = None
        if quant:  # as `gnnsparse train --quant`: the float32 features off the device during the run
            host_x, t0["x"] = t0["x"].cpu(), None
        net, opt = _train_net(model, t, init, quant)
        step = _train_step(net, opt, t)
        step()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
        live = {}  # what is allocated before the recorded step: one group
        base = torch.cuda.memory_allocated()
        step()
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        events = snap["device_traces"][torch.cuda.current_device()]
        cur, best, at, best_live = base, base, "(before the step)", None
        highest = {}  # the line of an allocation -> the highest point one of its allocations reached
        for ev in events:
            a = ev["action"]
            if a == "alloc":
                live[ev["addr"]] = (ev["size"], _frame(ev.get("frames", [])))
                cur += ev["size"]
                fr = live[ev["addr"]][1]
                highest[fr] = max(highest.get(fr, 0), cur)
                if cur > best:
                    best, at, best_live = cur, fr, dict(live)
            elif a == "free_completed" and ev["addr"] in live:
                cur -= live.pop(ev["addr"])[0]
        peak_alloc = torch.cuda.max_memory_allocated()
        print(f"\n===== {model} {'int8' if quant else 'float32'} on {size}: replayed peak {best / mib:,.0f} MiB "
              f"(torch's peak counter {peak_alloc / mib:,.0f}); {base / mib:,.0f} MiB allocated before the step "
              f"(data, model, graph, optimizer state, saved scales)")
        print(f"  reached by an allocation at {at}")
        groups = {}
        for size_b, fr in (best_live or {}).values():
            c, b = groups.get(fr, (0, 0))
            groups[fr] = (c + 1, b + size_b)
        for fr, (c, b) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:top]:
            print(f"  {b / mib:9,.0f} MiB  x{c:<3d} {fr}")
        print("  the next highest points, by the line whose allocation reached them (MiB allocated then):")
        for fr, v in sorted(highest.items(), key=lambda kv: -kv[1])[1:8]:
            print(f"  {v / mib:9,.0f} MiB  {fr}")
        del net, opt, t, snap, events, live, best_live
        gc.collect()
        torch.cuda.empty_cache()
        if host_x is not None:
            t0["x"] = host_x.to(dev)


def ops(top=8):
    """The aten ops one training epoch dispatches (forward, backward, Adam's step), PyG's model against
    the accelerated one, for the GCN, GraphSAGE and GIN of examples/accelerate.py on small generated
    graphs (CPU or GPU: the counts are the host's work, which these small models are bound by)."""
    import collections

    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.c = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.c[str(func).replace("aten.", "")] += 1
            return func(*args, **(kwargs or {}))

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    for name, tag, ep, _ in _example_epochs(dev, 2000, 12000):
        for _ in range(3):
            ep()
        with Count() as c:
            ep()
        print(f"{name:9s} {tag:4s} {sum(c.c.values()):4d} ops per epoch; "
              + ", ".join(f"{k} {v}" for k, v in c.c.most_common(top)))


def host(models=("gat", "gcn"), device="cuda", steps=20, lines=0):
    """Per training step of `gnnsparse train`'s models, float32 and int8: host launch time (steps
    back to back, no sync), wall time back to back, wall time with a sync around each step (as
    `train` times an epoch), the synchronizations of one step under
    torch.cuda.set_sync_debug_mode("warn") with the frames that led to each, and the aten ops one
    step dispatches; on CUDA also the kernels (and memsets) one synced step runs and their summed
    GPU time (torch.profiler over 3 steps). A step whose synced time exceeds its back-to-back time
    by about its host time is host-bound: the GPU waits for launches. lines > 0: the `lines` source
    lines (gnnsparse's or this tool's innermost frame) that dispatch the most aten ops, with the ops."""
    import traceback
    import warnings

    from torch.utils._python_dispatch import TorchDispatchMode

    from gnnsparse.train import data as tdata
    from gnnsparse.train.loop import initial_state, prepare

    dev = torch.device(device)
    cuda = dev.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(dev)) if cuda else (lambda: None)
    nd = tdata.arxiv_like(0) if cuda else tdata.synthetic(3000, 20000, 128, 40, seed=0, name="small")
    print(f"{nd.name}: {nd.x.shape[0]:,} nodes, {nd.edge_index.shape[1]:,} edges, on {dev}")

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.c = collections.Counter()
            self.at = collections.defaultdict(collections.Counter)  # source line -> ops (lines > 0)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            op = str(func.overloadpacket).replace("aten.", "")
            self.c[op] += 1
            if lines:
                fr = [f for f in traceback.extract_stack()[:-1]
                      if "gnnsparse" in f.filename or f.filename == os.path.abspath(__file__)]
                self.at[f"{fr[-1].filename.split('/')[-1]}:{fr[-1].lineno} {fr[-1].name}" if fr else "?"][op] += 1
            return func(*args, **(kwargs or {}))

    for model in models:
        t0 = prepare(nd, dev, model, edge_index=False)
        init = initial_state(model, t0, 128, 4, 0, 0.5, None)
        for quant in (None, 8):
            t = _run_graph(t0, quant)
            net, opt = _train_net(model, t, init, quant)
            step = _train_step(net, opt, t)
            for _ in range(4):
                step()
            sync()
            where = collections.Counter()

            def show(message, category, filename, lineno, file=None, line=None):
                if "prototype" in str(message):
                    return
                st = [f for f in traceback.extract_stack()[:-1]
                      if "site-packages/torch/" not in f.filename and "warnings.py" not in f.filename]
                where[tuple(f"{f.filename.split('/')[-1]}:{f.lineno}" for f in st[-4:])] += 1

            with warnings.catch_warnings():
                warnings.simplefilter("always")
                warnings.showwarning = show
                if cuda:
                    torch.cuda.set_sync_debug_mode("warn")
                try:
                    step()
                finally:
                    if cuda:
                        torch.cuda.set_sync_debug_mode(0)
            sync()
            t1 = time.perf_counter()
            for _ in range(steps):
                step()
            launched = (time.perf_counter() - t1) / steps
            sync()
            wall = (time.perf_counter() - t1) / steps
            each = []
            for _ in range(steps):
                sync()
                t2 = time.perf_counter()
                step()
                sync()
                each.append(time.perf_counter() - t2)
            with Count() as c:
                step()
            name = f"{model} {'int8' if quant else 'float32'}"
            print(f"{name:12s} ms per step: host launch {1e3 * launched:.2f}, back to back {1e3 * wall:.2f}, "
                  f"synced each step (as train) {1e3 * statistics.median(each):.2f}; "
                  f"{sum(where.values())} syncs; {sum(c.c.values())} aten ops: "
                  + ", ".join(f"{k} {v}" for k, v in c.c.most_common(8)))
            for k, v in where.most_common(6):
                print(f"    sync x{v}: {' < '.join(reversed(k))}")
            if cuda:  # the kernels of one synced step and their GPU time
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(3):
                        sync()
                        step()
                        sync()
                kern = [e for e in prof.events() if e.device_type.name == "CUDA"]
                print(f"    GPU per step: {len(kern) / 3:.0f} kernels and memsets, "
                      f"{sum(e.device_time_total for e in kern) / 3e3:.2f} ms busy")
            for loc, ops in sorted(c.at.items(), key=lambda kv: -sum(kv[1].values()))[:lines]:
                print(f"    {sum(ops.values()):4d} {loc}: " + ", ".join(f"{k} {v}" for k, v in ops.most_common(6)))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("quant", "models", "memory", "transformer", "model", "rss", "epoch", "route",
                                    "held", "peak", "ops", "host", "route-host"))
    p.add_argument("--size", choices=("arxiv", "products"), default="arxiv", help="memory, epoch: the graph (default arxiv)")
    p.add_argument("--nodes", type=int, default=300_000, help="rss: nodes of the products-like graph")
    p.add_argument("--runs", default="float32,int8", help="epoch: which runs (float32, int8)")
    p.add_argument("--reps", type=int, default=5, help="epoch: timed epochs per run")
    p.add_argument("--model", choices=("gcn", "gat"), default=None,
                   help="memory, epoch: the model (default: epoch gcn; memory gcn and gat, products gcn)")
    p.add_argument("--device", default="cuda", help="host: cuda (default) or cpu")
    p.add_argument("--where", type=int, default=0, metavar="N",
                   help="host: the N source lines that dispatch the most aten ops per step, with the ops")
    p.add_argument("--variant", action="append", default=None,
                   help='epoch: environment settings of one variant, "NAME=VALUE,..." (repeatable; default: as set)')
    a = p.parse_args()
    if a.what == "model":
        return model()
    if a.what == "rss":
        return rss(a.nodes)
    if a.what == "held":
        return held(a.model or "gat")
    if a.what == "ops":
        return ops()
    if a.what == "host":
        return host(models=(a.model,) if a.model else ("gat", "gcn"), device=a.device, lines=a.where)
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    if a.what == "memory":
        return memory(size=a.size, models=(a.model,) if a.model else None)
    if a.what == "peak":
        return peak(size=a.size, model=a.model or "gat")
    if a.what == "epoch":
        return epoch(size=a.size, model=a.model or "gcn", reps=a.reps, runs=tuple(a.runs.split(",")), variants=tuple(a.variant or ("",)))
    {"quant": quant, "models": models, "transformer": transformer, "route": route, "route-host": route_host}[a.what]()


if __name__ == "__main__":
    main()
