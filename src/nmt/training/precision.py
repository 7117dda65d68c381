"""Which arithmetic a training step runs in: bf16 mixed precision where the hardware multiplies bf16
natively, fp32 elsewhere (`train.precision`: auto | fp32 | bf16).

Mixed precision is autocast's: the matrix products (linear layers, attention) run in bf16, while
the parameters, their gradients and Adam's state stay fp32, and so do the checkpoints; the
residual stream stays fp32 (a bf16 sublayer output added to it is promoted), so every LayerNorm
normalises fp32; the loss takes its logits to fp32 before the softmax (nmt.training.loss).

`auto` picks bf16 on CUDA (as training always has there) and on CPUs with bf16 dot-product units:
AMX's tiles (Intel Sapphire Rapids and later, `amx_bf16` in /proc/cpuinfo) or AVX-512 BF16
(`avx512_bf16`: AMD Zen 4, Intel Cooper Lake), where oneDNN's bf16 products beat fp32 ones
(docs/results.md, "How fast"); elsewhere (AVX2 only, as on Zen 3) bf16 is emulated and slower, so fp32.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import ConfigError

CPUINFO = Path("/proc/cpuinfo")


def bf16_units(cpuinfo: Path = CPUINFO) -> str | None:
    """The CPU's native bf16 dot-product units: "AMX", "AVX-512 BF16", or None (Linux's flags; None elsewhere)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    flags = {flag for line in text.splitlines() if line.startswith("flags") for flag in line.split()}
    return "AMX" if "amx_bf16" in flags else "AVX-512 BF16" if "avx512_bf16" in flags else None


@dataclass(frozen=True)
class TrainingPrecision:
    """The arithmetic of a run's steps, and why (the line the log prints)."""

    dtype: torch.dtype | None  # the autocast type; None: plain fp32
    reason: str

    @property
    def name(self) -> str:
        return "bf16" if self.dtype == torch.bfloat16 else "fp32"

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        """The context a step's forward pass runs in."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=self.dtype)


def training_precision(asked: str, device: torch.device, *, units: str | None = "read") -> TrainingPrecision:
    """The precision `train.precision` (`asked`) means on `device`; `units`: the CPU's bf16 units
    (default: read from the CPU, see bf16_units). bf16 on a GPU without it is a ConfigError."""
    how = "--set train.precision=fp32 or bf16 forces either"
    if device.type == "cuda":
        if asked == "fp32":
            return TrainingPrecision(None, "fp32 (train.precision)")
        if not torch.cuda.is_bf16_supported():
            if asked == "bf16":
                raise ConfigError("train.precision=bf16: this GPU has no bf16; use fp32 (or auto)")
            return TrainingPrecision(None, f"fp32: auto, this GPU has no bf16 ({how})")
        return TrainingPrecision(torch.bfloat16, f"bf16 mixed precision on CUDA (train.precision={asked}; {how})")
    if device.type != "cpu":
        return TrainingPrecision(None, f"fp32 on {device.type}")
    units = bf16_units() if units == "read" else units
    if asked == "fp32":
        return TrainingPrecision(None, "fp32 (train.precision)")
    if asked == "bf16":
        note = f"this CPU has {units}" if units else "this CPU has no bf16 units: expect it slower than fp32"
        return TrainingPrecision(torch.bfloat16, f"bf16 mixed precision (train.precision=bf16; {note})")
    if units:
        return TrainingPrecision(torch.bfloat16, f"bf16 mixed precision: auto, this CPU has {units} ({how})")
    return TrainingPrecision(None, f"fp32: auto, this CPU has no bf16 units (AMX, AVX-512 BF16) ({how})")
