"""accelerate(model): every torch_geometric conv of a model that gnnsparse.torch.nn implements is
replaced, in place, by the gnnsparse layer; the rest of the model is left as it is.

    model = GCN(dataset.num_features, 16, dataset.num_classes)     # written with PyG's convs
    report = gnnsparse.torch.accelerate(model)                     # GCNConv -> gnnsparse's GCNConv
    print(report)                                                  # what was replaced, what was not
    out = model(data.x, data.edge_index)                           # forward unchanged

A conv is replaced when its class is torch_geometric's own class of a name in
gnnsparse.torch.nn.__all__ whose class has `from_pyg`; the new layer takes the options, dtype,
device and training mode of the old one and its very Parameter objects (an optimizer built before
the call keeps training the model). A conv is skipped, with the reason in the report, when it has
no gnnsparse counterpart, is a subclass (its methods may differ), uses an option the layer lacks
(from_pyg's ValueError: another aggr, flow, decomposed_layers, ...), carries hooks, or is in
explain mode. torch_geometric is imported by the call, not by `import gnnsparse.torch`.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch

__all__ = ["accelerate", "AccelerateReport"]

# PyG MessagePassing's own hook tables: propagate / message / aggregate / edge_update hooks
_PYG_HOOKS = ("_propagate_forward_pre_hooks", "_propagate_forward_hooks", "_message_forward_pre_hooks",
              "_message_forward_hooks", "_aggregate_forward_pre_hooks", "_aggregate_forward_hooks",
              "_message_and_aggregate_forward_pre_hooks", "_message_and_aggregate_forward_hooks",
              "_edge_update_forward_pre_hooks", "_edge_update_forward_hooks")
_TORCH_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


class AccelerateReport:
    """What accelerate() did: `replaced`, a list of (module name, PyG class name); `skipped`, a list
    of (module name, class name, reason). str() / repr() print them as a table."""

    def __init__(self, replaced: List[Tuple[str, str]], skipped: List[Tuple[str, str, str]]):
        self.replaced = replaced
        self.skipped = skipped

    def __str__(self):
        rows = ([("replaced", n, c, "") for n, c in self.replaced]
                + [("skipped", n, c, why) for n, c, why in self.skipped])
        head = f"gnnsparse.torch.accelerate: {len(self.replaced)} replaced, {len(self.skipped)} skipped"
        if not rows:
            return head + " (no torch_geometric conv in the model)"
        w = [max(len(r[i]) for r in rows) for i in range(3)]
        lines = [f"  {a:<{w[0]}}  {b or '(model)':<{w[1]}}  {c:<{w[2]}}  {d}".rstrip() for a, b, c, d in rows]
        return "\n".join([head] + lines)

    __repr__ = __str__


def _counterparts() -> dict:
    from . import nn as gnn

    return {name: getattr(gnn, name) for name in gnn.__all__
            if isinstance(getattr(gnn, name, None), type) and hasattr(getattr(gnn, name), "from_pyg")}


def _why_not(name: str, module, counterparts: dict):
    """None when `module` can be handed to its counterpart's from_pyg, else the reason."""
    cls = type(module)
    if cls.__name__ not in counterparts or not cls.__module__.startswith("torch_geometric."):
        base = next((k for k in cls.__mro__[1:] if k.__name__ in counterparts
                     and k.__module__.startswith("torch_geometric.")), None)
        if base is not None:
            return f"a subclass of torch_geometric's {base.__name__} (its methods may differ)"
        return "no gnnsparse counterpart"
    if not name:
        return f"the model itself: use gnnsparse.torch.nn.{cls.__name__}.from_pyg(model)"
    if any(getattr(module, h, None) for h in _TORCH_HOOKS):
        return "it has module hooks (register them on the new layer)"
    if any(getattr(module, h, None) for h in _PYG_HOOKS):
        return "it has message passing hooks"
    if getattr(module, "_explain", None) or getattr(module, "explain", None):
        return "it is in explain mode"
    return None


def _shareable(new: torch.nn.Module, old: torch.nn.Module) -> Optional[str]:
    """Why `new` cannot take over `old`'s Parameter objects (None: it can): the names, shapes,
    dtypes and devices of parameters must agree throughout, else an optimizer built on the old
    model would go on training tensors the model no longer uses."""
    mine = dict(new.named_parameters(remove_duplicate=False))
    theirs = dict(old.named_parameters(remove_duplicate=False))
    if mine.keys() != theirs.keys():
        return (f"its parameters ({', '.join(sorted(theirs))}) are not the gnnsparse layer's "
                f"({', '.join(sorted(mine))})")
    for k, a in mine.items():
        b = theirs[k]
        if (a.shape, a.dtype, a.device) != (b.shape, b.dtype, b.device):
            return f"its parameter {k} ({tuple(b.shape)}, {b.dtype}) differs from the gnnsparse layer's"
    return None


def _share_parameters(new: torch.nn.Module, old: torch.nn.Module) -> None:
    """Make `new` hold `old`'s Parameter objects (checked by _shareable) and its buffers where they
    agree: optimizers and anything else holding the old parameters keep working on the model."""
    for kind in ("parameters", "buffers"):
        mine = dict(getattr(new, f"named_{kind}")(remove_duplicate=False))
        theirs = dict(getattr(old, f"named_{kind}")(remove_duplicate=False))
        if mine.keys() != theirs.keys() or any(
                (a.shape, a.dtype, a.device) != (theirs[k].shape, theirs[k].dtype, theirs[k].device)
                for k, a in mine.items()):
            continue
        for key, t in theirs.items():
            owner, _, leaf = key.rpartition(".")
            table = getattr(new.get_submodule(owner), f"_{kind}")
            table[leaf] = t


def accelerate(model: torch.nn.Module, *, strict: bool = False, verbose: bool = False) -> AccelerateReport:
    """Replace, in place, every torch_geometric conv of `model` that gnnsparse.torch.nn implements
    by the gnnsparse layer (same options, weights, dtype, device, training mode; the model's
    forward is unchanged) and return an AccelerateReport of what was replaced and what was not.

    strict: raise ValueError, leaving the model untouched, when any torch_geometric conv would be
    skipped. verbose: print the report."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"accelerate takes a torch.nn.Module, got {type(model).__name__}")
    try:
        from torch_geometric.nn.conv import MessagePassing
    except ImportError:  # without PyG a model holds no PyG conv
        report = AccelerateReport([], [])
    else:
        counterparts = _counterparts()
        replaced, skipped, new_of = [], [], {}
        for name, module in model.named_modules():
            if not isinstance(module, MessagePassing):
                continue
            cls = type(module)
            why = _why_not(name, module, counterparts)
            if why is None:
                try:
                    new = counterparts[cls.__name__].from_pyg(module)
                except (ValueError, TypeError, NotImplementedError) as e:
                    why = str(e)
                else:
                    why = _shareable(new, module)
            if why is not None:
                skipped.append((name, cls.__name__, why))
                continue
            _share_parameters(new, module)
            new_of[id(module)] = new
            replaced.append((name, cls.__name__))
        report = AccelerateReport(replaced, skipped)
        if strict and skipped:
            raise ValueError(f"{len(skipped)} torch_geometric convs cannot be replaced (the model is unchanged):\n"
                             f"{report}")
        # every place the old module is referenced from (a module used twice is replaced twice)
        for parent in list(model.modules()):
            for key, child in list(parent._modules.items()):
                if child is not None and id(child) in new_of:
                    setattr(parent, key, new_of[id(child)])
    if verbose:
        print(report)
    return report
