"""MC dropout: a trained model run with its dropout kept on, each pass's masks drawn from a seed.

Fomicheva et al. (2020, "Unsupervised quality estimation for NMT") average a sentence's
length-normalised log-probability over about ten such passes ("D-TP"): where the model is unsure,
thinned copies of it disagree, and the average ranks bad translations better than one pass does.

    twin = dropout_twin(model)          # the same weights, its dropout on; `model` stays as it was
    with seeded(7, device):             # the masks of this pass, the same on every run
        forced = force_decode(twin, sources, outputs)

The twin is a second tree of modules over the model's own tensors (no copy of a weight), so that a
search running meanwhile in another thread on `model` keeps its dropout off.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Iterator

import torch
from torch import nn

from ..model.attention import MultiHeadAttention
from ..model.dropout import Dropout

# torch's generator is one per process: passes of two threads at once would draw from each other's
# seeds. One pass at a time keeps each seed's masks its own (a sampling search meanwhile still draws).
_SEEDED = threading.Lock()


def dropout_twin(model: nn.Module) -> nn.Module:
    """A copy of `model`'s module tree, in training mode, whose parameters and buffers are the
    model's own tensors: dropout and attention dropout act in it, and never in `model`."""

    def twin(module: nn.Module) -> nn.Module:
        copied = copy.copy(module)  # a new __dict__ holding the same tensors and settings
        copied.__dict__["_modules"] = {name: twin(child) for name, child in module._modules.items()}
        copied.__dict__["_parameters"] = dict(module._parameters)
        copied.__dict__["_buffers"] = dict(module._buffers)
        return copied

    return twin(model).train()


def drops_out(model: nn.Module) -> bool:
    """Whether any of `model`'s dropout would act in training mode (a model trained or imported
    without dropout gives the same scores on every pass)."""
    return any(
        (isinstance(m, Dropout) and m.p > 0) or (isinstance(m, MultiHeadAttention) and m.dropout > 0)
        for m in model.modules()
    )


@contextlib.contextmanager
def seeded(seed: int, device: torch.device) -> Iterator[None]:
    """Draw from torch's generator seeded with `seed` (and that of `device`, on CUDA), restoring
    both after: the caller's own random stream goes on as if nothing had been drawn."""
    devices = [device] if device.type == "cuda" else []
    with _SEEDED, torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield
