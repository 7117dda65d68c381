"""How a translate call (a SearchRequest: nmt.search_settings) is cut into batches for workers.

    plan = plan_call(lengths, request, batch_tokens=8000, cores=2, workers=None, threads=None,
                     processes=True)                              # batches, workers, threads

Why workers: on a few CPU cores, N intra-op threads on one batch wait for each other at every
small operation of a decoding step, and collapse when another process takes a core (an OpenMP
team cannot finish until its slowest thread does). N workers with one thread each run N
length-sorted batches side by side instead: no barrier between them, and a taken core slows
only the worker on it. `WorkerPolicy` holds the numbers that decide how.

How a model directory is run (EngineOptions) and what each engine can do: contract.py.

No torch at import: the CLI reads `WorkerPolicy` to write its --help.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..search_settings import SearchRequest

if TYPE_CHECKING:
    from ..model import ModelConfig


@dataclass(frozen=True)
class WorkerPolicy:
    """How nmt's engine shares a call between workers; this docstring is the one place its numbers
    are explained (the measurements are in docs/benchmarks-log.md).

    max_default_workers (8): the default never plans more workers than this. A memory guard, not a
    measured optimum: each worker process holds its own copy of the model (0.3-0.8 GB for the
    Multi30k models), so on a many-core machine further cores become intra-op threads.
    processes_after_s (30): worker processes start once an engine has decoded this long in
    parallel calls. A start costs a core for 2-3 s, which a short `nmt translate` would not win
    back; a long-lived caller (the server) starts them at once (`Engine.start`).
    min_rows_processes (32) / min_rows_threads (100): a call is spread over several workers only
    if each batch keeps about this many rows (sentences x beam): a decoding step of a few rows is
    mostly fixed cost. Threads need more rows than processes: they hand Python's GIL to each
    other around every operation, which costs the more the shorter the operations.
    batches_per_worker (4): with parallel workers a call is cut into about this many batches per
    worker, so that none waits long for the last batch.
    max_parallel_step_mib (128): where one decoding step reads more weights than this (MiB, the
    decoder and the output projection at the run's precision: `decoder_step_bytes`), a call runs on
    one worker with every core as its threads, on batches of the whole token budget (unless workers
    or threads are given; a lexical shortlist leaves the output projection out of the sum). Each batch
    streams the weights from memory once per step, so parallel workers on smaller batches multiply
    that traffic and run out of memory bandwidth: an OPUS-MT-base model (197 MiB a step in fp32)
    decoded 1.5x faster greedy that way on nmt's engine and 2.6x on CTranslate2, while in int8 (49 MiB)
    two workers stayed the faster; the Multi30k models read under 20 MiB.
    """

    max_default_workers: int = 8
    processes_after_s: float = 30.0
    min_rows_processes: int = 32
    min_rows_threads: int = 100
    batches_per_worker: int = 4
    max_parallel_step_mib: int = 128

    def streams_weights(self, step_bytes: int | None) -> bool:
        """Whether a model reading `step_bytes` of weights per decoding step runs as one batch stream."""
        return step_bytes is not None and step_bytes > self.max_parallel_step_mib * 2**20


DEFAULT_POLICY = WorkerPolicy()

# Bytes per weight of the linear layers a decoding step multiplies by, as each precision stores them.
BYTES_PER_WEIGHT = {"fp32": 4, "bf16": 2, "int8": 1}


def decoder_step_bytes(config: ModelConfig, precision: str, *, shortlist: bool = False) -> int:
    """Bytes of weights one decoding step reads whatever its batch: per decoder layer the self-attention
    (4 d^2), the cross-attention's query and output projections (2 d^2: the source's keys and values
    are projected once per sentence) and the feed-forward network (2 d d_ff); then the output
    projection (vocabulary x d), left out under a lexical shortlist, which reads only its candidates' rows."""
    d = config.d_model
    per_layer = 6 * d * d + 2 * d * config.d_ff
    weights = config.decoder_layers * per_layer + (0 if shortlist else config.tgt_vocab_size * d)
    return weights * BYTES_PER_WEIGHT.get(precision, 4)


# --- cutting a call -----------------------------------------------------------------------------
def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask, not the whole machine)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def distinct_sources(ids: Sequence[Sequence[int]], request: SearchRequest) -> tuple[list[int], list[list[int]]]:
    """The sources a call searches, each once: (for each of `ids`, its place among them; them).

    A sentence that comes more than once (a document's repeated headings and table cells, a
    subtitle file's "(Laughter)") is searched once and each copy gets that search's hypotheses: a
    sentence's search does not depend on the rest of its batch (beyond the rounding that the
    batch's shape brings; with nmt's int8 layers, beyond the activations' scale, which the batch
    sets: nmt.inference.precision), so this is what the copies would have got, or as likely. Not
    when sampling, where each copy is a draw of its own."""
    if request.sampling is not None:
        return list(range(len(ids))), [list(i) for i in ids]
    first: dict[tuple[int, ...], int] = {}  # a sentence's ids -> its place among the distinct ones
    places = [first.setdefault(tuple(i), len(first)) for i in ids]
    return places, [list(key) for key in first]


def cut_batches(order: Sequence[int], lengths: Sequence[int], budget: int) -> list[list[int]]:
    """`order` cut into consecutive batches whose padded size (rows x longest) stays within `budget`
    (a sentence longer than the budget gets a batch of its own)."""
    batches, batch, longest = [], [], 0
    for i in order:
        if batch and (len(batch) + 1) * max(longest, lengths[i]) > budget:
            batches.append(batch)
            batch, longest = [], 0
        batch.append(i)
        longest = max(longest, lengths[i])
    return batches + [batch] if batch else batches


def batch_budget(batch_tokens: int, beam: int, total_tokens: int, min_batches: int = 1) -> int:
    """Padded source tokens per batch: `batch_tokens` shared by the beams, and small enough to cut
    `total_tokens` into about `min_batches` batches (parallel workers need several each)."""
    budget = max(batch_tokens // max(beam, 1), 1)
    if min_batches > 1:
        budget = max(min(budget, total_tokens // min_batches), 1)
    return budget


def batches_by_length(lengths: Sequence[int], beam: int, batch_tokens: int, min_batches: int = 1) -> list[list[int]]:
    """Indices of sentences of similar length, longest first, each batch within `batch_tokens`
    (divided by the beam), and small enough to make about `min_batches` batches."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
    return cut_batches(order, lengths, batch_budget(batch_tokens, beam, sum(lengths), min_batches))


def plan_workers(
    batches: int, cores: int, workers: int | None, threads: int | None, policy: WorkerPolicy = DEFAULT_POLICY
) -> tuple[int, int]:
    """(workers, threads per worker) for a call that can be cut into `batches` batches, on `cores` cores.

    By default one single-threaded worker per core, but never more workers than batches: a lone
    sentence (one batch) gets every core as intra-op threads, for latency; and, with threads left
    to choose, never more than policy.max_default_workers. An explicit value wins.
    """
    if workers is None:
        most = min(cores, policy.max_default_workers) if threads is None else cores // threads
        workers = max(1, min(most, batches))
    if threads is None:
        threads = max(1, cores // workers)
    return workers, threads


@dataclass(frozen=True)
class CallPlan:
    """How one call runs: its batches (sentence indices, longest first) on `workers` workers with
    `threads` intra-op threads each (None: leave torch's setting, as on CUDA)."""

    batches: list[list[int]]
    workers: int
    threads: int | None


def plan_call(
    lengths: Sequence[int],
    request: SearchRequest,
    *,
    batch_tokens: int,
    cores: int | None,
    workers: int | None,
    threads: int | None,
    processes: bool,
    policy: WorkerPolicy = DEFAULT_POLICY,
    step_bytes: int | None = None,
) -> CallPlan:
    """The batches and workers for a call on sentences of `lengths` source tokens.

    cores: CPU cores to share out (None: a device that runs one batch at a time, such as CUDA).
    processes: whether the workers beyond the caller will be processes (they need fewer rows).
    step_bytes: the weights a decoding step reads (`decoder_step_bytes`); above the policy's
    max_parallel_step_mib the call runs on one worker, unless `workers` or `threads` are given.
    Seeded sampling keeps the token budget's batches: its draws follow the batches, and must not
    depend on the number of workers.
    """
    batches = batches_by_length(lengths, request.beam, batch_tokens)
    if cores is None:
        return CallPlan(batches, 1, None)
    seeded = request.sampling is not None and request.sampling.seed is not None
    min_rows = policy.min_rows_processes if processes else policy.min_rows_threads
    if workers is None and threads is None and policy.streams_weights(step_bytes):
        worth = 1  # one stream of batches, every core its threads (WorkerPolicy.max_parallel_step_mib)
    else:
        worth = len(batches) if seeded else max(len(batches), len(lengths) * request.beam // min_rows)
    workers, threads = plan_workers(worth, cores, workers, threads, policy)
    if workers > 1 and not seeded:
        wanted = max(workers, min(policy.batches_per_worker * workers, worth))
        batches = batches_by_length(lengths, request.beam, batch_tokens, min_batches=wanted)
    return CallPlan(batches, workers, threads)
