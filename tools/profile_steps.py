#!/usr/bin/env python3
"""Where a training step spends its time and memory on a CUDA GPU (torch.profiler tables).

    python tools/profile_steps.py quant    # one quantized GCN layer step against the float32 layer
                                           # (n = 1M nodes, 10M edges, C = 128; peak memory, top kernels)
    python tools/profile_steps.py models   # the GCN and GIN of examples/accelerate.py, PyG and
                                           # accelerated: ms / epoch, GPU time, top host-side ops
    python tools/profile_steps.py transformer  # TransformerConv 128 -> 4x32 forward + backward on a
                                           # random arxiv-sized graph, ours and PyG's: top GPU kernels
    python tools/profile_steps.py memory   # `gnnsparse train`'s GCN / GAT, float32 and int8, on the
                                           # arxiv-sized graph: peak memory of each phase of an epoch

Each table covers 5 steps after 3 warm-up steps. Needs torch with CUDA and the gnnsparse CUDA
build (`models` also torch_geometric).
"""
from __future__ import annotations

import argparse
import copy
import os
import runpy
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _table(prof, sort_by, rows=22):
    return prof.key_averages().table(sort_by=sort_by, row_limit=rows, max_name_column_width=60)


def _timed_profile(step, label, reps):
    """3 warm-up calls, the mean ms of `reps` timed calls (printed with `label`), then a profile of
    5 calls (returned)."""
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
    """torch.profiler over 5 calls of step()."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
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


def models():
    import gnnsparse.torch as gst

    ex = runpy.run_path(os.path.join(ROOT, "examples", "accelerate.py"), run_name="example")
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(0)
    x, ei, y = ex["node_data"](169343, 1166243, 128, 40, dev, gen)
    xb, eib, batch, yb = ex["graph_batch"](64, 30, 60, 128, 10, dev, gen)
    cases = {"GCN": (ex["GCN"](128, 16, 40), (x, ei), y), "GIN": (ex["GIN"](128, 64, 10, 3), (xb, eib, batch, 64), yb)}
    for name, (m, args, yy) in cases.items():
        m = m.to(dev)
        mm = copy.deepcopy(m)
        print(gst.accelerate(mm))
        for tag, model in (("pyg", m), ("ours", mm)):
            opt = torch.optim.Adam(model.parameters(), lr=0.01)
            model.train()

            def ep(model=model, opt=opt, args=args, yy=yy):
                opt.zero_grad()
                F.cross_entropy(model(*args), yy).backward()
                opt.step()

            prof = _timed_profile(ep, f"{name} {tag}, per epoch", 20)
            gpu = sum(k.self_device_time_total for k in prof.key_averages()) / 5
            print(f"GPU time / epoch {gpu / 1e3:.2f} ms (profiled)")
            print(_table(prof, "self_cpu_time_total", 25))
            print(_table(prof, "self_cuda_time_total", 15))


def memory(epochs=3):
    from gnnsparse.train import data as tdata
    from gnnsparse.train.loop import initial_state, prepare
    from gnnsparse.train.models import Net

    dev = torch.device("cuda")
    nd = tdata.arxiv_like(0)
    for model in ("gcn", "gat"):
        t = prepare(nd, dev, model)
        init = initial_state(model, t, 128, 4, 0, 0.5, None)
        for quant in (None, 8):
            net = Net(model, "gnnsparse", t["x"].shape[1], 128, t["num_classes"], heads=4, dropout=0.5, quant=quant)
            net.load_state_dict(init)
            net = net.to(dev)
            opt = torch.optim.Adam(net.parameters(), lr=0.01)
            x, y, tr = t["x"], t["y"], t["train"]
            torch.cuda.synchronize()
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
            print(f"\n===== {model} {'int8' if quant else 'float32'} (MiB above data and model before the first epoch)")
            for ep, phase, b, pk in phases:
                print(f"  epoch {ep} {phase:9s} held before {b:8.1f}  peak {pk:8.1f}")
            del net, opt


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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("quant", "models", "memory", "transformer"))
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    {"quant": quant, "models": models, "memory": memory, "transformer": transformer}[a.what]()


if __name__ == "__main__":
    main()
