"""gnnsparse for PyTorch: differentiable ops (torch.library custom ops), the graph as tensors, and
PyG-compatible layers (gnnsparse.torch.nn: GCNConv, GATConv, SAGEConv, TransformerConv, GATv2Conv,
GINConv, GINEConv, GraphConv, SGConv, APPNP).

    import gnnsparse as gs, gnnsparse.torch as gst
    A = gs.CSR.from_edge_index(edge_index, num_nodes)       # one row per target node
    y = gst.spmm(A, x, "mean")                               # y.backward(...) reaches x
    y, arg = gst.spmm(A, x, "max", return_arg=True)
    out = gst.fusedmm(A, a_dst, a_src, z, op="add", edge="leaky_relu_softmax")   # GAT attention

CPU tensors run on the SYCL CPU device (float32/float64), CUDA tensors on the CUDA kernels
(float32/float64/float16/bfloat16, fp16/bf16 accumulated in fp32). Every op is deterministic,
backward included: repeated runs give the same bits. The ops are registered as torch.ops.gnnsparse.*
and run under torch.compile(fullgraph=True).

    gnnsparse.torch.accelerate(model)    # a PyG model's GCNConv / GATConv / ... -> gnnsparse's layers
"""
from .. import _ops as _frontend
from . import functional as _functional
from ._library import EDGE_FUNCTIONS, fusedmm_backward_mode, kernel_has_edge, set_fusedmm_backward
from .accelerate import AccelerateReport, accelerate
from .functional import edge_softmax, fusedmm, gatv2_scores, gcn_norm, sddmm, spmm, spmm_heads
from .graph import GraphTensors, as_graph_tensors, from_edge_index, graph_tensors, self_loops

# The core's frontend (gnnsparse._ops) hands torch calls that need a backward node (or run under
# torch.compile) to this layer's ops: registered here, so the core never imports this package.
_frontend.register_torch_layer(_functional)

__all__ = ["spmm", "sddmm", "fusedmm", "spmm_heads", "gatv2_scores", "edge_softmax", "gcn_norm", "GraphTensors", "graph_tensors",
           "as_graph_tensors", "from_edge_index", "self_loops", "set_fusedmm_backward", "fusedmm_backward_mode",
           "kernel_has_edge", "EDGE_FUNCTIONS", "accelerate", "AccelerateReport", "nn"]


def __getattr__(name):
    if name == "nn":
        import importlib

        return importlib.import_module(".nn", __name__)
    raise AttributeError(name)
