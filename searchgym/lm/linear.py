"""Linear layers that stay memory-bound when a decode step feeds them a few rows.

A decode step multiplies every weight matrix by one row per live sequence. On a CPU
that is memory-bound work (each weight is read once), but the BLAS kernel that
``torch.nn.functional.linear`` reaches for ``x @ W.T`` with a handful of rows is not: on
the 2-core AVX2 machine this project is developed on, SmolLM2's weights multiplied by 5
rows took twice as long as by 1 row, and its 49,152-word output layer 37 ms instead of
~11 ms. Computing the same product as ``(W @ x.T).T`` reaches a kernel that reads ``W``
once, and stays faster than ``linear`` up to a few hundred rows (``benchmarks/linear.py``).

:class:`RowLinear` is an ``nn.Linear`` whose forward takes that route for at most
:attr:`RowLinear.max_rows` rows on the CPU when no gradient is recorded (generation,
log-probability passes); everything else (training forward passes, GPUs, long prompts)
calls ``linear`` as before. Parameters, state dicts and ``isinstance(m, nn.Linear)`` are
unchanged. :func:`use_row_linear` switches a model's plain ``nn.Linear`` modules to it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class RowLinear(nn.Linear):
    """``nn.Linear`` computing few-row products on the CPU as ``(W @ x.T).T``."""

    #: Most rows (tokens over the whole batch) that take the ``W @ x.T`` route.
    max_rows = 256

    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002 (nn.Linear's name)
        weight = self.weight
        if input.dim() == 0 or input.device.type != "cpu" or input.dtype != weight.dtype or torch.is_grad_enabled():
            return nn.functional.linear(input, weight, self.bias)
        rows = input.numel() // max(input.shape[-1], 1)
        if not 0 < rows <= self.max_rows:
            return nn.functional.linear(input, weight, self.bias)
        out = torch.matmul(weight, input.reshape(rows, input.shape[-1]).t()).t()  # [rows, out]
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*input.shape[:-1], weight.shape[0])


def use_row_linear(model: Any) -> int:
    """Switch every plain ``nn.Linear`` of ``model`` to :class:`RowLinear` (in place;
    subclasses such as adapter layers are left alone). Returns how many were switched.

    The kernel's rounding depends on where ``W`` lies in memory, so weights that do not
    start on a 64-byte boundary (a safetensors file mapped into memory) are copied to
    one: the same weights then give the same outputs however they were loaded.
    """
    switched = 0
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = RowLinear
            switched += 1
            for param in module.parameters(recurse=False):
                if param.device.type == "cpu" and param.data_ptr() % _ALIGNMENT:
                    param.data = param.data.clone()  # tied weights share the Parameter, so stay tied
    return switched


#: Byte alignment of PyTorch's CPU allocations.
_ALIGNMENT = 64
