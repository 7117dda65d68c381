"""Several processes, one model: torch.distributed set up from torchrun's environment.

    torchrun --nproc_per_node=2 -m nmt train CONFIG --out DIR

Each process (rank) trains on a disjoint shard of every epoch's batches; DDP averages
the gradients. The loss is normalised by the real target tokens of the *global* batch
(all ranks, all accumulation steps), so N processes with accumulation A train exactly
the model that 1 process with accumulation N * A trains. Only rank 0 writes files.
Backend: nccl on CUDA, gloo on CPU. Without torchrun's variables this is a world of one
and every collective is a no-op. How the model is held across the ranks (replicas or
shards) is placement.py's.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)

# Set by nmt train's own launcher (launch.py) for its workers.
RENDEZVOUS_FILE = "NMT_RENDEZVOUS_FILE"  # the FileStore the workers meet through: no port to choose or collide
SHARED_BATCH = "NMT_WORKERS_SHARE_BATCH"  # "1": each rank takes batch_tokens / world_size
VALIDATION_THREADS = "NMT_VALIDATION_THREADS"  # rank 0 validates alone while the others wait: on every core
# Set by the user (seconds): how long a rank waits in a collective for the others before it fails.
# torch's 30 minutes by default, because the other ranks wait at a barrier while rank 0 alone
# downloads, encodes and validates; a cluster that knows its slowest such step can set less, so
# that the survivors of a lost host stop in seconds (docs/distributed.md, "Two machines, tested").
COLLECTIVE_TIMEOUT = "NMT_COLLECTIVE_TIMEOUT"
DEFAULT_COLLECTIVE_TIMEOUT = 1800.0
# Set by torchrun in its workers: its --max-restarts, and how often this host's agent restarted them.
MAX_RESTARTS = "TORCHELASTIC_MAX_RESTARTS"
RESTART_COUNT = "TORCHELASTIC_RESTART_COUNT"


def collective_timeout() -> timedelta:
    """The wait NMT_COLLECTIVE_TIMEOUT asks for (seconds), or torch's 30 minutes."""
    text = os.environ.get(COLLECTIVE_TIMEOUT, "").strip()
    if not text:
        return timedelta(seconds=DEFAULT_COLLECTIVE_TIMEOUT)
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"{COLLECTIVE_TIMEOUT}={text!r}: give a number of seconds above 0")
    return timedelta(seconds=seconds)


def restarts_allowed() -> bool:
    """Whether torchrun may restart this job's workers after a failure (--max-restarts above 0)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and _count(MAX_RESTARTS) > 0


def _count(name: str) -> int:
    text = os.environ.get(name, "").strip()
    return int(text) if text.isdigit() else 0


class PeerFailed(RuntimeError):
    """Another rank failed where every rank checks or waits (its inputs, rank 0's data preparation)."""


def one_line(err: BaseException) -> str:
    """An error's message on one line, as another rank will print it."""
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        return f"{err.filename}: {err.strerror}"
    return " ".join(str(err).split()) or type(err).__name__


class LostContact(RuntimeError):
    """A collective failed: its peer closed the connection, or did not answer within the collective timeout."""


def lost_contact(err: BaseException, rank: int, world_size: int) -> LostContact | None:
    """One line naming what was lost, for a collective's failure (None for any other error).

    gloo names the peer's address ("Connection closed by peer [10.0.0.2]:41234") when its socket
    closed, and only the wait when the peer went silent ("Timed out waiting 5000ms for recv").
    """
    text = " ".join(str(err).split())
    if isinstance(err, PeerFailed):
        return None
    if not (isinstance(err, dist.DistError) or "gloo" in text or "Connection closed by peer" in text):
        return None
    peer = re.search(r"\[([0-9a-fA-F.:]+)\]:\d+", text)
    who = f"host {peer.group(1)}" if peer else "another host"
    if world_size == 2:
        who += f" (rank {1 - rank})"
    reason = re.sub(r"\[[^\]]*/[^\]]*\] ?", "", text).split(". ")[0]  # gloo's source path and advice left out
    return LostContact(
        f"rank {rank} of {world_size} lost contact with {who}: {reason}; when every host has stopped, "
        "start them all again with --resume to continue from the last checkpoint"
    )


def wants_cuda(device: str) -> bool:
    """Whether train.device asks for CUDA ("cuda", "cuda:N", or "auto" on a machine with a GPU)."""
    return device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())


@dataclass
class Distributed:
    """This process's place in the job: rank, world size and the device it trains on."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")
    shares_batch: bool = False  # started by nmt train (launch.py): each rank takes batch_tokens / world_size
    validation_threads: int | None = None  # threads for rank 0's validation (None: as for training)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @classmethod
    def from_environment(cls, device: str = "auto") -> Distributed:
        """Join the process group that torchrun describes (RANK, WORLD_SIZE, LOCAL_RANK), if any."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        use_cuda = wants_cuda(device)
        if use_cuda and not torch.cuda.is_available():
            raise RuntimeError(f"train.device={device} but CUDA is not available on this machine")
        if world_size == 1:
            target = torch.device(device if device != "auto" else ("cuda" if use_cuda else "cpu"))
            if target.type == "cuda" and (target.index or 0) >= torch.cuda.device_count():
                raise RuntimeError(
                    f"train.device={device} but this machine has {torch.cuda.device_count()} CUDA device(s)"
                )
            return cls(device=target)
        rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
        if use_cuda:
            gpus = torch.cuda.device_count()
            if local_rank >= gpus:  # otherwise NCCL fails later with "invalid device ordinal"
                raise RuntimeError(
                    f"this process is local rank {local_rank} but the machine has {gpus} CUDA device(s): start "
                    f"at most {gpus} process(es) per machine (torchrun --nproc_per_node={gpus}), or train on "
                    "CPU with --set train.device=cpu"
                )
            torch.cuda.set_device(local_rank)
            target = torch.device("cuda", local_rank)
        else:
            target = torch.device("cpu")
        rendezvous = os.environ.get(RENDEZVOUS_FILE)
        meet = dict(init_method=f"file://{rendezvous}", rank=rank, world_size=world_size) if rendezvous else {}
        if not dist.is_initialized():  # device_id: NCCL binds this rank to its GPU now, not by guessing
            dist.init_process_group(
                "nccl" if use_cuda else "gloo",
                timeout=collective_timeout(),
                device_id=target if use_cuda else None,
                **meet,
            )
        if rank == 0 and restarts_allowed() and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
            log.warning(
                "torchrun --max-restarts with its shared store: restarted workers may read the first ones' "
                "addresses and fail to meet (pytorch issue 135712); start torchrun with "
                "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 set"
            )
        threads = os.environ.get(VALIDATION_THREADS)
        return cls(
            rank=rank,
            world_size=world_size,
            device=target,
            shares_batch=os.environ.get(SHARED_BATCH) == "1",
            validation_threads=int(threads) if threads else None,
        )

    # --- collectives (no-ops in a world of one) --------------------------------------------
    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sum of a few numbers over all ranks (float64: exact for token counts)."""
        if not self.active:
            return values
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor.tolist()

    def any(self, flag: bool) -> bool:
        """True on every rank if it is True on any: keeps stop decisions in step."""
        return self.sum([float(flag)])[0] > 0

    def gather(self, value):
        """A list of every rank's `value` (picklable), on every rank."""
        if not self.active:
            return [value]
        out = [None] * self.world_size
        dist.all_gather_object(out, value)
        return out

    def barrier(self) -> None:
        if self.active:
            dist.barrier()

    @contextmanager
    def main_first(self):
        """Rank 0 runs the block first (downloads, tokenizer training, caches); the others then reuse its files.

        If the block fails on rank 0, the others raise PeerFailed with its message as soon as it
        does, instead of waiting for a rank that is gone (a closed socket, or the collective timeout).
        """
        if not self.active:
            yield
            return
        if not self.is_main:
            failure = self._from_main(None)
            if failure is not None:
                raise PeerFailed(f"rank 0 of {self.world_size} failed: {failure}")
            yield
            return
        try:
            yield
        except Exception as err:
            try:
                self._from_main(one_line(err))
            except Exception:  # the others are gone too: rank 0's own error is the one to tell
                pass
            raise
        self._from_main(None)

    def _from_main(self, message: str | None) -> str | None:
        """Rank 0's `message` on every rank (one broadcast, which the other ranks wait in)."""
        box = [message]
        dist.broadcast_object_list(box, src=0, device=self.device)
        return box[0]

    def restarted(self) -> bool:
        """True on every rank when torchrun has restarted the job's workers after a failure.

        Only the failed host's agent counts the restart; the others restart their workers to meet
        it again and count none, so one rank's count above 0 tells every rank.
        """
        return self.any(_count(RESTART_COUNT) > 0)

    def check_everywhere(self, check: Callable[[], None]) -> None:
        """Run `check` on every rank (each reads its own machine's files): where it fails on any rank,
        every rank raises, the failing ones their own error, the others PeerFailed naming it."""
        own: Exception | None = None
        try:
            check()
        except Exception as err:
            if not self.active:
                raise
            own = err
        failures = self.gather(None if own is None else one_line(own))
        if own is not None:
            raise own
        for rank, failure in enumerate(failures):
            if failure is not None:
                raise PeerFailed(f"rank {rank} of {self.world_size} failed: {failure}")

    def close(self) -> None:
        if self.active and dist.is_initialized():
            dist.destroy_process_group()


def parameter_fingerprint(model: torch.nn.Module) -> list[float]:
    """Sum and sum of squares of all parameters: equal on every rank when replicas agree."""
    with torch.no_grad():
        flat = torch.cat([p.detach().double().flatten().cpu() for p in model.parameters()])
    return [flat.sum().item(), flat.square().sum().item()]
