"""The output projection through oneDNN with its weight packed once (fp32 inference on CPU).

    logits = states W_out^T        W_out: (vocab, d_model), e.g. 8,192 x 256 in `small`

is the largest matmul of a decoding step (about 40% of a step's multiply-adds in `small`), and it
runs on few rows: one per live hypothesis, fewer as sentences finish. nn.Linear hands it to
MKL's sgemm, which copies the whole weight into its blocked layout again on every call; oneDNN
can keep the weight in that layout (`_reorder_linear_weight`, what torch.compile's CPU backend
does for frozen weights), so a step only multiplies. Measured on AMD Zen 3, one thread, MKL's
time over oneDNN's by rows: 1.1 (1 row), 3.8 (4), 1.4-1.9 (8-48), 1.2-1.4 (64-256), 1.1
(1,024); whole translations 1.17x (greedy) and 1.06x (beam 5) faster, the same text
(docs/benchmarks.md). The decoder's other, smaller layers were as fast or faster in MKL, so only
the output projection is packed, and only where it was measured to win (see
`nmt.precision.packed_output_is_faster`).
"""

from __future__ import annotations

import torch
from torch import nn


def onednn_linear_available() -> bool:
    """Whether this torch build has oneDNN and its prepacked linear ops."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        torch.ops.mkldnn._reorder_linear_weight, torch.ops.mkldnn._linear_pointwise  # noqa: B018 - lookups raise if absent
    except (AttributeError, RuntimeError):
        return False
    return True


class PackedLinear(nn.Module):
    """An nn.Linear for inference whose matmul runs in oneDNN on a copy of the weight packed once.

    weight and bias are the original layer's parameters (a tied embedding stays tied, and the
    state dict keeps nn.Linear's keys). For frozen weights only: no gradient flows through the
    packed copy, so a weight that requires grad is refused, and a weight changed in place since
    packing (e.g. by load_state_dict) is packed again before use.
    """

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        self.register_buffer("packed", self._pack(), persistent=False)

    def _pack(self) -> torch.Tensor:
        self.packed_version = self.weight._version  # bumped by every in-place change of the weight
        return torch.ops.mkldnn._reorder_linear_weight(self.weight.detach())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.requires_grad:
            raise RuntimeError("PackedLinear is for frozen weights: unpack_output_projection(model) before training")
        if self.weight._version != self.packed_version:
            self.packed = self._pack()
        rows = x.reshape(-1, self.in_features).contiguous()  # (rows, in_features)
        y = torch.ops.mkldnn._linear_pointwise(rows, self.packed, self.bias, "none", [], "")
        return y.view(*x.shape[:-1], self.out_features)

    def unpacked(self) -> nn.Linear:
        """A plain nn.Linear over the same parameters (e.g. to quantise it)."""
        linear = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None, device="meta")
        linear.weight, linear.bias = self.weight, self.bias
        return linear

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def pack_output_projection(model: nn.Module) -> nn.Module:
    """Put `model.output` (the vocabulary projection) on a PackedLinear, in place; idempotent.

    Only an fp32 CPU layer whose weight is frozen (requires_grad False) is packed.
    """
    output, frozen = model.output, not model.output.weight.requires_grad
    if (
        type(output) is nn.Linear
        and frozen
        and output.weight.device.type == "cpu"
        and output.weight.dtype == torch.float32
    ):
        model.output = PackedLinear(output)
    return model


def unpack_output_projection(model: nn.Module) -> nn.Module:
    """Undo `pack_output_projection`, in place."""
    if isinstance(model.output, PackedLinear):
        model.output = model.output.unpacked()
    return model
