"""torch.ao's dynamic int8 linear layer, with a cheaper call (int8 inference on CPU).

    y = dequantise(quantise(x) W_int8^T) + b      x quantised per call, W once (see nmt.inference.precision)

`torch.ao.nn.quantized.dynamic.Linear.forward` calls `torch.ops.quantized.linear_dynamic`, an
overload packet that looks up its overload in Python on every call, then converts the fp32 result
to fp32 again. A decoding step calls every linear layer once (19 in `small`), so at a few rows
that lookup is a noticeable part of the step. Calling the resolved overload gives the same
numbers, faster for small batches (docs/benchmarks-log.md). Imported only by
`nmt.inference.precision.quantize_int8`: fp32 users never load torch.ao.
"""

from __future__ import annotations

import torch
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

_LINEAR_DYNAMIC = torch.ops.quantized.linear_dynamic.default


class Int8Linear(DynamicQuantizedLinear):
    """A dynamically quantized qint8 nn.Linear (built by `quantize_dynamic(..., dtype=torch.qint8)` with this
    class in its mapping, as `nmt.inference.precision.quantize_int8` does).

    Only forward differs from torch.ao's: the same operator with the same arguments (reduce_range, as
    torch.ao passes for its qint8 layers: fbgemm's AVX2 kernels need 7-bit activations to avoid
    overflow), called directly.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _LINEAR_DYNAMIC(x, self._packed_params._packed_params, True)

    def select_outputs(self, ids: torch.Tensor) -> Int8Linear:
        """This layer restricted to output rows `ids` (a lexical shortlist), packed once.

        The rows keep their int8 values and their scale, and the input is quantised per row of the
        call as before, so each output equals the whole layer's.
        """
        weight, bias = self.weight(), self.bias()  # (out, in) qint8; (out,) fp32 or None
        rows = Int8Linear(self.in_features, ids.numel(), bias_=bias is not None, dtype=torch.qint8)
        rows.set_weight_bias(weight.index_select(0, ids), None if bias is None else bias[ids])
        return rows
