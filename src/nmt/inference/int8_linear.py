"""torch.ao's dynamic int8 linear layer, with a cheaper call (int8 inference on CPU).

    y = dequantise(quantise(x) W_int8^T) + b      x quantised per call, W once (see nmt.inference.precision)

`torch.ao.nn.quantized.dynamic.Linear.forward` calls `torch.ops.quantized.linear_dynamic`, an
overload packet that looks up its overload in Python on every call, then converts the fp32 result
to fp32 again. A decoding step calls every linear layer once (19 in `small`), so at a few rows
that lookup is a noticeable part of the step. Calling the resolved overload gives the same
numbers, faster for small batches (docs/benchmarks-log.md). Imported only by
`nmt.inference.precision.quantize_int8`: fp32 users never load torch.ao.

Two kernel libraries, chosen per call on CPUs with AMX. torch packs a dynamic int8 weight for
fbgemm, whose kernels stop at AVX-512 VNNI; oneDNN's use AMX tiles. Per call (CPU time, one
thread, `small`'s layers: benchmarks/linear_kernels.py --int8), oneDNN was 1.2-5x faster on big
calls and 1.5-2.5x slower on small ones, and the crossover sat at about the same work for every
layer shape: rows x in x out = 16-21 million multiply-adds (10 rows of the 256 -> 8,192 output
projection, about 80 of a 256 -> 1,024 feed-forward layer). So a layer on such a CPU keeps both
packings of its one int8 weight and sends a call to oneDNN from `ONEDNN_MIN_MACS` on. Both
compute int8's numbers: usually the same to float rounding; where an activation, or the zero point
of a call's activation scale, falls on a rounding tie they round it apart, and both stay as close
to fp32 as int8 is (tests/test_inference_int8_linear.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

# The resolved overload's own C++ function. An overload taking a ScriptObject (the packed weight)
# first walks its arguments in Python for the fake objects of torch.compile's tracing
# (torch._ops.TorchBindOpOverload), about 5 us a call that eager calls, holding real ones, need not
# pay: 1.5-2% of a decoding step at 1-16 rows (docs/benchmarks-log.md). The overload where that
# private attribute is missing.
_LINEAR_DYNAMIC = getattr(torch.ops.quantized.linear_dynamic.default, "_op", torch.ops.quantized.linear_dynamic.default)
_PREPACK = torch.ops.quantized.linear_prepack.default

# Multiply-adds of a call (rows x in x out) from which oneDNN's AMX kernels beat fbgemm's (2^24;
# see the module docstring).
ONEDNN_MIN_MACS = 1 << 24


@contextlib.contextmanager
def packing_for(engine: str) -> Iterator[None]:
    """Pack int8 weights for `engine`'s kernels ("onednn", "fbgemm", torch's default "x86") inside the block.

    torch packs for the process-wide quantized engine; a call runs the kernels its weight was
    packed for, whatever the engine is then, so layers packed both ways live side by side.
    """
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = engine
    try:
        yield
    finally:
        torch.backends.quantized.engine = before


class Int8Linear(DynamicQuantizedLinear):
    """A dynamically quantized qint8 nn.Linear (built by `quantize_dynamic(..., dtype=torch.qint8)` with this
    class in its mapping, as `nmt.inference.precision.quantize_int8` does).

    Only forward differs from torch.ao's: the same operator with the same arguments (reduce_range, as
    torch.ao passes for its qint8 layers: fbgemm's AVX2 kernels need 7-bit activations to avoid
    overflow), called directly. After `add_onednn_kernels` (CPUs with AMX), calls of at least
    `onednn_rows` rows run oneDNN's packing of the same weight (see the module docstring).
    """

    onednn_packed: torch.ScriptObject | None = None
    onednn_rows: int = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        packed = self._packed_params._packed_params
        if self.onednn_packed is not None and x.numel() >= self.onednn_rows * self.in_features:
            packed = self.onednn_packed
        return _LINEAR_DYNAMIC(x, packed, True)

    def add_onednn_kernels(self) -> Int8Linear:
        """Also pack this layer's int8 weight for oneDNN, used by calls of `ONEDNN_MIN_MACS` and more."""
        with packing_for("onednn"):
            self.onednn_packed = _PREPACK(self.weight(), self.bias())
        self.onednn_rows = -(-ONEDNN_MIN_MACS // (self.in_features * self.out_features))  # ceil
        return self

    def select_outputs(self, ids: torch.Tensor) -> Int8Linear:
        """This layer restricted to output rows `ids` (a lexical shortlist), packed once.

        The rows keep their int8 values and their scale, and the input is quantised per row of the
        call as before, so each output equals the whole layer's.
        """
        weight, bias = self.weight(), self.bias()  # (out, in) qint8; (out,) fp32 or None
        rows = Int8Linear(self.in_features, ids.numel(), bias_=bias is not None, dtype=torch.qint8)
        rows.set_weight_bias(weight.index_select(0, ids), None if bias is None else bias[ids])
        return rows if self.onednn_packed is None else rows.add_onednn_kernels()
