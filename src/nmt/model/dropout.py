"""Dropout that is cheap on CPU.

torch's CPU dropout draws one Bernoulli sample per element, and on a 2-core machine that
costs about a fifth of a Transformer training step. Here one 64-bit random integer feeds
four elements: it is viewed as four int16 values, and an element is kept when its value
is at least the p-quantile of the int16 range. The keep probability is exact to 1/65536
(ceil(p * 65536) / 65536 dropped), the kept values are scaled by 1 / (1 - p), and the draws come from
torch's global generator, so torch.manual_seed makes them reproducible. On other devices
torch's own fused dropout is used.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def cpu_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Zero each element with probability p (to 1/65536) and scale the rest by 1 / (1 - p)."""
    n = x.numel()
    words = torch.randint(-(2**63), 2**63 - 1, ((n + 3) // 4,), dtype=torch.int64, device=x.device)
    draws = words.view(torch.int16)[:n].view(x.shape)  # uniform over [-32768, 32767]
    threshold = -32768 + math.ceil(p * 65536)
    keep = draws >= threshold
    # where() reads the mask as it is; x * keep would first widen it to x's type, a pass of its own
    return torch.where(keep, x, 0).mul_(1.0 / (1.0 - p))


class Dropout(nn.Module):
    """nn.Dropout with the cheap CPU path above."""

    def __init__(self, p: float):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type == "cpu":
            return cpu_dropout(x, self.p)
        return F.dropout(x, self.p, training=True)

    def extra_repr(self) -> str:
        return f"p={self.p}"
