"""One training run of `gnnsparse train`: the result record, the device, the tensors, the seeded
initial weights, and the loop (forward, loss on the training nodes, backward, Adam step, then
accuracy on every split; only the train step is timed)."""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import List, Optional

from .._cli import UsageError
from .data import NodeData
from .models import Net, with_self_loops

__all__ = ["RunResult", "pick_device", "prepare", "fresh_graph", "initial_state", "run_once"]


@dataclass
class RunResult:
    """One training run: per-epoch losses, times and accuracies, peak GPU memory, and the losses'
    bits (equal strings: bitwise identical runs)."""
    framework: str
    model: str
    device: str
    epochs: int
    losses: List[float] = field(default_factory=list)
    epoch_ms: List[float] = field(default_factory=list)
    train_acc: List[float] = field(default_factory=list)
    val_acc: List[float] = field(default_factory=list)
    test_acc: List[float] = field(default_factory=list)
    peak_mem: Optional[int] = None      # bytes, torch.cuda.max_memory_allocated over the run
    extra_mem: Optional[int] = None     # bytes above what was allocated before the run (data, model)
    loss_bits: str = ""                 # hex of the float32 losses: equal strings = identical runs
    quant_bits: Optional[int] = None    # --quant: the first layer's bit width (None: float)
    quant_errors: dict = field(default_factory=dict)  # --quant auto: Error_X of the first layer's output per width
    quant_scales: dict = field(default_factory=dict)  # --quant: the delayed scales' statistics per produced tensor
    seed: Optional[int] = None          # the training seed (weights, dropout, rounding)

    @property
    def median_epoch_ms(self) -> float:
        """Median train-step time, leaving out the warm-up epochs (the first 3 of more than 6, else
        the first)."""
        t = self.epoch_ms[3:] if len(self.epoch_ms) > 6 else self.epoch_ms[1:] or self.epoch_ms
        return statistics.median(t) if t else float("nan")

    @property
    def best_val_test(self) -> float:
        """Test accuracy at the epoch of the best validation accuracy (the earliest on ties)."""
        if not self.val_acc:
            return float("nan")
        i = max(range(len(self.val_acc)), key=lambda k: (self.val_acc[k], -k))
        return self.test_acc[i]

    def summary(self) -> dict:
        """Every field and the derived figures, as a dict for JSON."""
        d = asdict(self)
        d.update(median_epoch_ms=self.median_epoch_ms, best_val_test_acc=self.best_val_test,
                 final_test_acc=self.test_acc[-1] if self.test_acc else None)
        return d


# ---------------------------------------------------------------- setup
def pick_device(name: str):
    """The torch device `--device` names ("auto": CUDA when torch and gnnsparse's CUDA backend
    can use a GPU, else the CPU); UsageError for a device this machine does not have."""
    import torch

    if name != "auto":
        try:
            dev = torch.device(name)
        except RuntimeError as e:
            raise UsageError(f"--device {name}: not a device name ({e}); use auto, cpu, cuda or cuda:N") from None
        if dev.type == "cuda":
            import gnnsparse as gs

            if not torch.cuda.is_available():
                raise UsageError(f"--device {name}: torch sees no CUDA device here (torch {torch.__version__}); "
                                 "use --device cpu")
            if dev.index is not None and dev.index >= torch.cuda.device_count():
                raise UsageError(f"--device {name}: torch sees {torch.cuda.device_count()} CUDA device(s)")
            if not gs.available_backends().get("cuda"):
                raise UsageError(f"--device {name}: this gnnsparse was built without its CUDA backend "
                                 "(build it where nvcc is present, with GNNSPARSE_CUDA=ON)")
        elif dev.type != "cpu":
            raise UsageError(f"--device {name}: gnnsparse trains on cpu or cuda devices")
        return dev
    if torch.cuda.is_available():
        import gnnsparse as gs

        if gs.available_backends().get("cuda"):
            return torch.device("cuda")
    return torch.device("cpu")


def prepare(data: NodeData, device, model: str, edge_index: bool = True) -> dict:
    """Tensors on the device: features, labels, split, and the graph in both forms: a gnnsparse CSR
    (ours) and an edge_index (PyG); for GAT and GATv2 both with one self loop per node.
    edge_index=False: no edge_index on the device (None; only PyG's models read it: on the
    products-sized graph it is 1.8 GiB of int64), and the CSR keeps no edge_perm (the CSR position ->
    edge id map, for edge features, which these models have none of: another 0.9 GiB)."""
    import torch

    import gnnsparse as gs

    ei = torch.from_numpy(data.edge_index).to(device)
    n = data.num_nodes
    if model in ("gat", "gatv2"):
        ei = with_self_loops(ei, n)
    csr = gs.CSR.from_edge_index(ei, n)
    if not edge_index:
        del csr.edge_perm
        ei = None
    return dict(x=torch.from_numpy(data.x).to(device), y=torch.from_numpy(data.y).to(device),
                train=torch.from_numpy(data.train_idx).to(device), val=torch.from_numpy(data.val_idx).to(device),
                test=torch.from_numpy(data.test_idx).to(device), edge_index=ei, csr=csr,
                num_classes=data.num_classes)


def fresh_graph(t: dict) -> dict:
    """t with a new gnnsparse.CSR object over the same arrays (no copy): what a run derives from the
    graph (GraphTensors, normalized operators, device views) is kept on that object and goes with it,
    so a run neither starts with nor leaves behind another run's structures (whose memory would
    count in its peak)."""
    import gnnsparse as gs

    A = t["csr"]
    rowptr, col = A.rowptr, A.col
    if hasattr(rowptr, "detach"):  # torch tensors: new tensor objects (the caches are keyed on them)
        rowptr, col = rowptr.detach(), col.detach()
    B = gs.CSR(rowptr, col, A.val, A.shape, validate=False, copy=False)
    if getattr(A, "edge_perm", None) is not None:
        B.edge_perm = A.edge_perm
    return dict(t, csr=B)


def _sync(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def initial_state(model: str, t: dict, hidden: int, heads: int, seed: int, dropout: float, aggr: Optional[str]) -> dict:
    """Seeded initial weights (a state_dict) that gnnsparse's and PyG's models both load."""
    import torch

    torch.manual_seed(seed)
    net = Net(model, "gnnsparse", t["x"].shape[1], hidden, t["num_classes"], heads=heads, dropout=dropout, aggr=aggr)
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def run_once(t: dict, model: str, framework: str, *, epochs: int, hidden: int = 128, heads: int = 4, lr: float = 0.01,
             weight_decay: float = 0.0, dropout: float = 0.5, aggr: Optional[str] = None, seed: int = 0,
             init: Optional[dict] = None, on_epoch=None, quant: Optional[str] = None,
             attn_dropout: float = 0.0, quant_input: bool = True) -> RunResult:
    """Train one model from `init` (or seeded weights) for `epochs` full-graph epochs.

    quant ("auto", "8" or "4"; gnnsparse GCN / GAT only): the first layer quantized (gnnsparse.quant.nn),
    the second in float32. "auto": Tango's rule picks the first layer's width from its output on the
    initial weights (one int8 forward without gradients before training): the smallest of int4 / int8
    with Error_X < 0.3 (float32 when neither is), recorded in the result (quant_bits, quant_errors).
    quant_input (with a quantized first layer): the input features are quantized once, at that
    width (stochastic rounding seeded by `seed`), and t["x"] is replaced by the QTensor before
    training, so the run holds no float32 copy of them unless its caller does (`gnnsparse train`
    does not: cli.py); False quantizes them in every step, as before 2026-12-08."""
    import torch
    import torch.nn.functional as F

    from ..quant import QTensor, quantize

    x0 = t["x"]
    device = (x0.data if isinstance(x0, QTensor) else x0).device
    qbits = None if quant is None else (8 if quant == "auto" else int(quant))
    net = Net(model, framework, x0.shape[1], hidden, t["num_classes"], heads=heads, dropout=dropout, aggr=aggr,
              quant=qbits, attn_dropout=attn_dropout)
    net.load_state_dict(init if init is not None else initial_state(model, t, hidden, heads, seed, dropout, aggr))
    net = net.to(device)
    graph = t["csr"] if framework == "gnnsparse" else t["edge_index"]
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    res = RunResult(framework, model, str(device), epochs)
    res.quant_bits = qbits
    if device.type == "cuda":  # the run's memory from here on: the width rule's forward and the
        _sync(device)          # quantization of the features count too
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    if quant == "auto":  # Tango's bit-width rule on the first layer's output for the initial weights
        from ..quant import select_bits

        torch.manual_seed(seed)
        with torch.no_grad():
            o = net.conv1(x0, graph)
        res.quant_bits, res.quant_errors = select_bits(o, (4, 8), seed=seed)
        del o
        net.conv1.bits = res.quant_bits
        net.conv1._scales = type(net.conv1._scales)()  # the probe's delayed-scale history is not training's
    if quant is not None and quant_input and res.quant_bits is not None and not isinstance(x0, QTensor):
        t["x"] = quantize(x0, res.quant_bits, True, seed)  # the float32 features go with the last reference
    del x0
    x, y, tr = t["x"], t["y"], t["train"]
    torch.manual_seed(seed + 1)  # dropout masks: the same sequence in every run with this seed
    losses = []
    for epoch in range(epochs):
        _sync(device)
        t0 = time.perf_counter()
        net.train()
        opt.zero_grad(set_to_none=True)
        out = net(x, graph)
        loss = F.cross_entropy(out.index_select(0, tr), y.index_select(0, tr))
        del out  # (n, classes): not needed in the backward, whose peak it would add to
        loss.backward()
        opt.step()
        _sync(device)
        res.epoch_ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss.detach())
        del loss  # its graph (ctx attributes of the step's Functions) would live through eval and the next forward
        net.eval()
        with torch.no_grad():
            pred = net(x, graph).argmax(1)
            accs = [float((pred.index_select(0, t[k]) == y.index_select(0, t[k])).float().mean()) for k in
                    ("train", "val", "test")]
        res.train_acc.append(accs[0])
        res.val_acc.append(accs[1])
        res.test_acc.append(accs[2])
        res.losses.append(float(losses[-1]))
        if on_epoch is not None:
            on_epoch(res, epoch)
    if device.type == "cuda":
        _sync(device)
        res.peak_mem = int(torch.cuda.max_memory_allocated(device))
        res.extra_mem = res.peak_mem - int(base)
    scales = getattr(net.conv1, "_scales", None)
    if quant is not None and scales is not None:
        res.quant_scales = scales.statistics()
    if losses:
        res.loss_bits = torch.stack(losses).float().cpu().numpy().tobytes().hex()
    return res
