"""Training on a CPU as one process per core, started by `nmt train` itself.

Why processes and not threads: torch splits every operation over its intra-op threads and
waits for the slowest. When another program takes one of the cores, the thread on it runs at
a fraction of its speed and the others wait for it at every one of a step's thousands of
operations; a run fell 8x beside a second training job. Processes meet once per step (the
gradient all-reduce), so a core that is shared costs about its share: 1.6x faster than two
threads beside a busy process, for 3-4% less idle (the all-reduce, and Adam on one thread in each
worker; docs/results.md, "Training beside other work").

The workers are what torchrun would start: a DDP group over gloo (training/distributed.py),
each on a disjoint shard of the batches. They split the config's batch between them, each
taking `batch_tokens / N`, so an optimizer step still sees about `batch_tokens` tokens and the
recipe's learning-rate schedule still fits it. N workers train exactly what one process trains
with `batch_tokens / N` and `accumulate * N`.

    layout = choose_layout(config.train, on_cuda=False)   # Layout(processes=2, threads=1) on 2 cores
    run_workers(["python", "-m", "nmt", "train", ...], layout)
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..config import TrainConfig
from .distributed import RENDEZVOUS_FILE, SHARED_BATCH, VALIDATION_THREADS
from .signals import STOP_SIGNALS

log = logging.getLogger(__name__)

# Below this many tokens per worker a step's matrices are too small to keep a core busy and the
# all-reduce of every gradient would cost more than it saves: fewer workers, more threads each.
MIN_BATCH_TOKENS_PER_PROCESS = 1024
STOP_GRACE_SECONDS = 10  # after one worker fails, how long the others get to stop before SIGKILL


@dataclass(frozen=True)
class Layout:
    """How a run uses this machine's cores: `processes` workers of `threads` intra-op threads each."""

    processes: int
    threads: int | None  # None: torch's default (one per core)
    reason: str

    def describe(self, batch_tokens: int) -> str:
        share = f"each on {batch_tokens // self.processes} of the batch's {batch_tokens} tokens"
        return f"training in {self.processes} processes of {self.threads} thread(s) ({self.reason}), {share}"


def usable_cores() -> int:
    """Cores this process may run on (a container's or taskset's limit, not the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def choose_layout(cfg: TrainConfig, *, on_cuda: bool, cores: int | None = None) -> Layout:
    """The placement `train.processes` asks for on this machine.

    auto: one single-threaded worker per core, as many as the batch allows (at least
    MIN_BATCH_TOKENS_PER_PROCESS tokens each), the leftover cores as threads; one process when
    `train.threads` is set (the user chose threads), on CUDA (one process per GPU is torchrun's
    job), and inside a process group already (torchrun, or a worker of this launcher).
    """
    cores = cores or usable_cores()
    single = Layout(1, cfg.threads, "one process")
    if "WORLD_SIZE" in os.environ:
        return single
    if cfg.processes != "auto":
        if on_cuda and cfg.processes > 1:
            raise ValueError(
                f"train.processes={cfg.processes} is for training on CPU cores; for several GPUs start "
                "one process per GPU with torchrun --nproc_per_node=N"
            )
        if cfg.processes == 1:
            return single
        return Layout(cfg.processes, cfg.threads or max(1, cores // cfg.processes), "train.processes")
    if on_cuda:
        return Layout(1, cfg.threads, "one process on the GPU")
    if cfg.threads:
        return Layout(1, cfg.threads, f"train.threads={cfg.threads}")
    processes = max(1, min(cores, cfg.batch_tokens // MIN_BATCH_TOKENS_PER_PROCESS))
    if processes == 1:
        why = "one core" if cores == 1 else f"batch_tokens {cfg.batch_tokens} is too small to split"
        return Layout(1, None, f"one process: {why}")
    return Layout(processes, max(1, cores // processes), "train.processes=auto: one per core")


def _die_with_parent(parent: int):
    """In the child before exec: SIGKILL it when the launcher dies (Linux), so no worker trains on alone."""

    def arm() -> None:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the launcher died before the line above took effect
            os._exit(1)

    return arm if sys.platform.startswith("linux") else None


def run_workers(command: list[str], layout: Layout, *, cores: int | None = None) -> int:
    """Run `command` as `layout.processes` workers of one process group; returns the exit status.

    Rank 0 writes to this terminal; the others' output is kept and shown only if one of them
    fails first. SIGINT/SIGTERM sent to the launcher reach every worker (they save and stop at
    the same step). When one worker fails, the rest are stopped, and its status is returned.
    """
    cores = cores or usable_cores()
    with tempfile.TemporaryDirectory(prefix="nmt-train-") as tmp:
        base = {
            **os.environ,
            "WORLD_SIZE": str(layout.processes),
            "LOCAL_WORLD_SIZE": str(layout.processes),
            "OMP_NUM_THREADS": str(layout.threads or 1),
            RENDEZVOUS_FILE: str(Path(tmp) / "rendezvous"),
            SHARED_BATCH: "1",
            VALIDATION_THREADS: str(cores),
        }
        workers, logs = [], []
        for rank in range(layout.processes):
            env = {**base, "RANK": str(rank), "LOCAL_RANK": str(rank)}
            out = None if rank == 0 else open(Path(tmp) / f"rank{rank}.log", "w")  # noqa: SIM115
            logs.append(out)
            workers.append(
                subprocess.Popen(
                    command,
                    env=env,
                    stdout=subprocess.DEVNULL if rank else None,
                    stderr=out,
                    start_new_session=True,  # a terminal's Ctrl-C reaches the launcher, which passes it on once
                    preexec_fn=_die_with_parent(os.getpid()),
                )
            )
        with _forward_signals(workers):
            status, failed = _wait(workers)
        for out in logs:
            if out is not None:
                out.close()
        if failed is not None and failed > 0:  # rank 0 said why on the terminal; another rank's words are kept
            lines = (Path(tmp) / f"rank{failed}.log").read_text(errors="replace").strip().splitlines()
            print(lines[-1] if lines else f"training worker {failed} failed", file=sys.stderr)
        return status


def _wait(workers: list[subprocess.Popen]) -> tuple[int, int | None]:
    """Until all end: (exit status, rank of the first that failed, or None)."""
    failed, deadline = None, None
    while any(w.poll() is None for w in workers):
        for rank, w in enumerate(workers):
            if failed is None and w.returncode not in (None, 0):
                failed = rank
                deadline = time.monotonic() + STOP_GRACE_SECONDS
                for other in workers:  # the others would wait for it at the next all-reduce
                    if other.poll() is None:
                        other.send_signal(signal.SIGTERM)
        if deadline is not None and time.monotonic() > deadline:
            for w in workers:
                if w.poll() is None:
                    w.kill()
        time.sleep(0.1)
    if workers[0].returncode > 0:  # rank 0 said why on the terminal (the same reason as the others, mostly)
        return workers[0].returncode, None
    if failed is None:
        failed = next((r for r, w in enumerate(workers) if w.returncode != 0), None)
    if failed is None:
        return 0, None
    code = workers[failed].returncode
    if code < 0:  # killed by a signal (the OOM killer's SIGKILL, say)
        print(
            f"nmt train: error: training worker {failed} was killed by {signal.Signals(-code).name}",
            file=sys.stderr,
        )
        return 1, None
    return code, failed


@contextlib.contextmanager
def _forward_signals(workers: list[subprocess.Popen]):
    def forward(signum, frame):
        for w in workers:
            if w.poll() is None:
                w.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
