"""Where the model's weights live across processes: whole on every rank, or in shards.

Two placements, one interface, so the training loop never asks which it has:

- `Replicas`: every rank holds the whole model (a single process, or DDP, which averages
  the gradients of N replicas).
- `Shards`: FSDP2 (`fully_shard`): each rank holds 1/N of every parameter, gradient and
  optimizer state; a layer's weights are gathered just before it runs. Saving, validating
  and loading gather or scatter whole tensors, so checkpoints are the same files as
  without sharding and do not depend on the number of processes.

Both take the model, the module that computes the loss (whose backward the step runs) and
the process group; build the optimizer after the placement, over `model.parameters()`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import torch

from ..checkpoint import apply_weights
from ..model import Transformer
from .distributed import Distributed, parameter_fingerprint

log = logging.getLogger(__name__)


class Replicas:
    """The whole model on every rank: one process, or DDP."""

    sharded = False
    # one kernel for the whole Adam update: fewer passes over the weights, on CPU too (docs/results.md)
    fused_optimizer = True

    def __init__(self, model: Transformer, loss_module: torch.nn.Module, dist: Distributed):
        self.model, self.dist = model, dist
        self.step_module = loss_module
        if dist.active:
            device_ids = [dist.device.index] if dist.device.type == "cuda" else None
            self.step_module = torch.nn.parallel.DistributedDataParallel(
                loss_module, device_ids=device_ids, gradient_as_bucket_view=True
            )

    @contextlib.contextmanager
    def gradient_sync(self, enabled: bool) -> Iterator[None]:
        """Skip DDP's gradient all-reduce on all but the last micro-batch of a step."""
        if self.dist.active and not enabled:
            with self.step_module.no_sync():
                yield
        else:
            yield

    def whole_model(self) -> Transformer | None:
        """A Transformer holding all current weights on rank 0 (None elsewhere)."""
        return self.model if self.dist.is_main else None

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict:
        return optimizer.state_dict()

    def load(
        self, weights: dict[str, torch.Tensor], optimizer: torch.optim.Optimizer, optimizer_state: dict, source: str
    ) -> None:
        """Weights (as read from `source`, strictly) and the optimizer state they were saved with."""
        apply_weights(self.model, weights, source)
        optimizer.load_state_dict(optimizer_state)

    def check_agree(self) -> None:
        """Every rank must end with the same parameters; say so, or fail loudly."""
        if not self.dist.active:
            return
        prints = self.dist.gather(parameter_fingerprint(self.model))
        if any(f != prints[0] for f in prints):
            raise RuntimeError(f"processes ended with different parameters: {prints}")
        log.info("all %d processes hold identical parameters", self.dist.world_size)


class Shards:
    """Each rank holds 1/N of the model (FSDP2); rank 0 keeps a plain copy to validate and save."""

    sharded = True
    fused_optimizer = False  # FSDP's sharded tensors take the default Adam

    def __init__(self, model: Transformer, loss_module: torch.nn.Module, dist: Distributed):
        from torch.distributed.fsdp import fully_shard  # noqa: PLC0415 - only under torchrun

        self.model, self.dist = model, dist
        # Each encoder and decoder layer is its own shard group; the loss module (embeddings,
        # output projection, final norms) is the root.
        for layer in [*model.encoder_layers, *model.decoder_layers]:
            fully_shard(layer)
        self.step_module = fully_shard(loss_module)
        self.plain_model = Transformer(model.config).to(dist.device) if dist.is_main else None

    @contextlib.contextmanager
    def gradient_sync(self, enabled: bool) -> Iterator[None]:
        """Skip the gradient reduce-scatter on all but the last micro-batch of a step."""
        self.step_module.set_requires_gradient_sync(enabled)
        yield

    def whole_model(self) -> Transformer | None:
        """Rank 0's plain copy holding all current weights (None elsewhere). A collective."""
        from torch.distributed.checkpoint.state_dict import get_model_state_dict  # noqa: PLC0415

        state = get_model_state_dict(self.step_module, options=_full_options())
        if self.plain_model is None:
            return None
        self.plain_model.load_state_dict(_unprefixed(state))
        return self.plain_model

    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict:
        """The whole optimizer state keyed by parameter names, gathered from the shards (a collective)."""
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict  # noqa: PLC0415

        return get_optimizer_state_dict(self.step_module, optimizer, options=_full_options())

    def load(
        self, weights: dict[str, torch.Tensor], optimizer: torch.optim.Optimizer, optimizer_state: dict, source: str
    ) -> None:
        """Scatter whole weights and optimizer state (read on every rank) into this rank's shards."""
        from torch.distributed.checkpoint.state_dict import (  # noqa: PLC0415
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        plain = Transformer(self.model.config)
        apply_weights(plain, weights, source)  # strict: names and shapes checked before any is scattered
        # A shared matrix (tied embeddings) is one parameter under several names: load it once,
        # under the name named_parameters() gives it, and let the aliases follow.
        canonical = {name for name, _ in self.step_module.named_parameters()}
        state = {_PREFIX + k: v for k, v in plain.state_dict().items() if _PREFIX + k in canonical}
        if missing := canonical - set(state):
            raise ValueError(f"{source}: lacks parameters {sorted(missing)[:5]}")
        set_model_state_dict(self.step_module, state, options=StateDictOptions(full_state_dict=True, strict=False))
        set_optimizer_state_dict(
            self.step_module, optimizer, optimizer_state, options=StateDictOptions(full_state_dict=True)
        )

    def check_agree(self) -> None:
        """Nothing to compare: each rank holds a different shard by design."""


def place(model: Transformer, loss_module: torch.nn.Module, dist: Distributed, *, fsdp: bool) -> Replicas | Shards:
    """Shards when asked for under torchrun; replicas otherwise (a single process has nothing to shard)."""
    return Shards(model, loss_module, dist) if fsdp and dist.active else Replicas(model, loss_module, dist)


# The loss module holds the Transformer as `model`: its state-dict names carry this prefix.
_PREFIX = "model."


def _unprefixed(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k.removeprefix(_PREFIX): v for k, v in state.items() if k.startswith(_PREFIX)}


def _full_options():
    from torch.distributed.checkpoint.state_dict import StateDictOptions  # noqa: PLC0415

    return StateDictOptions(full_state_dict=True, cpu_offload=True)
