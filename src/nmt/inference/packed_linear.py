"""The output projection through oneDNN with its weight packed once (fp32 inference on CPU).

    logits = states W_out^T        W_out: (vocab, d_model), e.g. 8,192 x 256 in `small`

is the largest matmul of a decoding step (about 40% of a step's multiply-adds in `small`), and it
runs on few rows: one per live hypothesis, fewer as sentences finish. nn.Linear hands it to
MKL's sgemm, which copies the whole weight into its blocked layout again on every call; oneDNN
can keep the weight in that layout (`_reorder_linear_weight`, what torch.compile's CPU backend
does for frozen weights), so a step only multiplies. The gain is largest at the few rows of a
decoding step (benchmarks/linear_kernels.py; figures in docs/benchmarks-log.md). The decoder's other,
smaller layers ran faster in MKL, so only the output projection is packed, and only on the CPUs
where that was measured (see `nmt.inference.precision.packed_output_is_faster`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
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
    state dict keeps nn.Linear's keys). The packed copy is only a cache of the weight: it is made
    again when the weight is replaced or changed in place, and any call it cannot serve (a
    gradient to compute, another device or dtype) runs as plain F.linear.
    """

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        # (which weight, packed copy), replaced as one value: parallel decoding threads read it. A
        # plain attribute, not a buffer: .to() must not move a oneDNN-layout tensor.
        self._packed: tuple[tuple, torch.Tensor] | None = None

    def _weight_key(self) -> tuple:
        """What identifies the weight's current values: the tensor, its memory and its in-place version."""
        w = self.weight
        version = None if w.is_inference() else w._version  # inference tensors keep no version counter
        return id(w), w.data_ptr(), version

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        wants_grad = torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)
        if wants_grad or w.device.type != "cpu" or w.dtype != torch.float32 or x.dtype != torch.float32:
            return F.linear(x, w, self.bias)
        key = self._weight_key()
        packed = self._packed
        if packed is None or packed[0] != key:
            packed = self._packed = (key, torch.ops.mkldnn._reorder_linear_weight(w.detach()))
        rows = x.reshape(-1, self.in_features).contiguous()  # (rows, in_features)
        y = torch.ops.mkldnn._linear_pointwise(rows, packed[1], self.bias, "none", [], "")
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

    Only an fp32 CPU layer whose weight is frozen (requires_grad False, as `Translator.load` leaves
    it) is packed: a model in training, translated between steps for validation, keeps its
    nn.Linear (the module graph that torch.compile, DDP and FSDP hold stays as it was).
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
