"""The halo exchange: a differentiable all_to_all_single over torch.distributed.

Forward: every rank sends the rows others read (plan.send_idx, grouped by destination rank) and
receives its halo rows (grouped by owner rank, ascending new id), one all_to_all_single per call.
Backward: the transposed exchange: the gradient of every halo row goes back to its owner, which
sums the copies of each of its rows in ascending order of the reading rank (a fixed-order
reduction, no atomics: the same inputs give the same bits).

Wire formats: "fp32" sends the features as they are (bitwise exchange); "int8" sends each row as
int8 with its own scale s = max|row| / 127 (four bytes appended to the row, one message per
exchange), rounded stochastically (unbiased: E[s q] = x; the uniforms come from a generator
seeded per rank and per exchange, so a seeded run is reproducible). Gradients of the backward
exchange use the same format as the forward.
"""
from __future__ import annotations

from typing import List, Optional

import torch
import torch.distributed as dist
from torch import Tensor

__all__ = ["WIRE_FORMATS", "encode_int8", "decode_int8", "exchange", "start"]

WIRE_FORMATS = ("fp32", "int8")


def encode_int8(x: Tensor, generator: Optional[torch.Generator]) -> Tensor:
    """(n, C) float -> (n, C + 4) int8: per-row symmetric int8 with stochastic rounding, then the
    row's float32 scale as four bytes. A zero row has scale 0 and zeros; a row holding NaN or
    infinity decodes to NaN (its scale is not finite)."""
    x = x.float()
    n, C = x.shape
    s = x.abs().amax(1, keepdim=True) / 127.0 if C else x.new_zeros((n, 1))
    inv = torch.where(s > 0, 1.0 / s, torch.zeros((), device=x.device))
    u = torch.rand((n, C), generator=generator, device=x.device, dtype=torch.float32)
    q = torch.floor(x * inv + u).clamp_(-127, 127).to(torch.int8)
    return torch.cat([q, s.contiguous().view(torch.int8)], 1)


def decode_int8(buf: Tensor, C: int, dtype: torch.dtype) -> Tensor:
    """The inverse of encode_int8 (up to the rounding): (n, C + 4) int8 -> (n, C) of dtype."""
    q = buf[:, :C]
    s = buf[:, C:].contiguous().view(torch.float32)  # (n, 1)
    return (q.to(torch.float32) * s).to(dtype)


class _Pending:
    """An exchange in flight (all_to_all_single with async_op=True); wait() -> the received rows.
    Holds the send buffer until then."""

    def __init__(self, work, buf, out, C, wire, dtype):
        self.work, self.buf, self.out, self.C, self.wire, self.dtype = work, buf, out, C, wire, dtype

    def wait(self) -> Tensor:
        self.work.wait()
        self.buf = None
        return decode_int8(self.out, self.C, self.dtype) if self.wire == "int8" else self.out


def start(x: Tensor, out_rows: int, out_splits: List[int], in_splits: List[int], group, wire: str,
          generator: Optional[torch.Generator], stats: Optional[dict] = None) -> _Pending:
    """Start the all_to_all_single of the (n, C) rows x in the given wire format (split sizes in
    rows); wait() gives the (out_rows, C) received rows in x's dtype. stats (a dict): adds the
    bytes this rank puts on the wire and counts the exchange."""
    C = x.shape[1]
    if stats is not None:
        stats["exchanges"] = stats.get("exchanges", 0) + 1
        stats["bytes"] = stats.get("bytes", 0) + x.shape[0] * (C + 4 if wire == "int8" else C * x.element_size())
    buf = encode_int8(x, generator) if wire == "int8" else x.contiguous()
    out = buf.new_empty((out_rows, buf.shape[1]))
    work = dist.all_to_all_single(out, buf, output_split_sizes=out_splits, input_split_sizes=in_splits, group=group,
                                  async_op=True)
    return _Pending(work, buf, out, C, wire, x.dtype)


def _send(x: Tensor, out_rows: int, out_splits, in_splits, group, wire: str, generator, stats=None) -> Tensor:
    return start(x, out_rows, out_splits, in_splits, group, wire, generator, stats).wait()


class _HaloExchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, dg) -> Tensor:
        ctx.dg = dg
        send = x.index_select(0, dg.send_idx)
        return _send(send, dg.n_halo, dg.recv_counts, dg.send_counts, dg.group, dg.wire, dg.generator,
                     dg.stats)

    @staticmethod
    def backward(ctx, dhalo: Tensor):
        dg = ctx.dg
        got = _send(dhalo.contiguous(), dg.n_send, dg.send_counts, dg.recv_counts, dg.group, dg.wire, dg.generator,
                    dg.stats)
        return dg.gather_sends(got), None


def exchange(dg, x: Tensor) -> Tensor:
    """The halo rows (n_halo, C) of the distributed features x (n_local, C) for DistGraph dg
    (differentiable; every rank must call it, in the same order)."""
    return _HaloExchange.apply(x, dg)
