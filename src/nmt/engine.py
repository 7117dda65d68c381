"""nmt's own search engine: the model and the searches of `nmt.decoding`, batched by length and
spread over parallel workers.

Why workers: on a few CPU cores, N intra-op threads on one batch wait for each other at every
small operation of a decoding step, and collapse when another process takes a core (an
OpenMP team cannot finish until its slowest thread does). N workers with one thread each run
N length-sorted batches side by side instead: no barrier between them, and a taken core only
slows the worker on it. On CPU the calling thread is one worker and the others are child
processes (nmt.decode_processes), started in the background once an engine has worked 30 s:
threads in one process lose time handing Python's GIL to each other around every operation.
Where processes cannot be used (a model in training, bf16, `processes=False`) the workers are
threads. See docs/benchmarks.md for the measurements.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch

from .config import DecodeConfig
from .decode_processes import DecodeProcesses
from .decoding import Hypothesis, SearchLimits, beam_search, greedy_search, sample
from .model import Transformer
from .precision import autocast_for, is_int8, prepare_for_inference

BATCHES_PER_WORKER = 4  # with parallel workers, batches are cut smaller than batch_tokens to make this many
# Parallel workers get batches of about this many rows (sentences x beam) or more: a decoding step of a few rows is
# mostly fixed cost (Python, short kernels). Worker threads need larger batches than worker processes: they
# hand Python's GIL to each other around every operation, which costs the more the shorter the operations.
# Before this, a call that fit one batch of `batch_tokens` kept one worker with every core as intra-op
# threads, which collapse when another process takes a core (docs/benchmarks.md, issue 11 session 20).
MIN_BATCH_ROWS = 32
MIN_BATCH_ROWS_THREADS = 100
# A memory guard, not a measured optimum (measured machines had 2 cores): every worker beyond the first is a
# process with its own copy of the model (about as large as the caller: 0.3-0.8 GB for the Multi30k models).
MAX_DEFAULT_WORKERS = 8
# Worker processes start once an engine has decoded this long in parallel calls: a start costs a core for
# 2-3 s, which a short run (`nmt translate` of a few thousand lines) would not win back (docs/benchmarks.md).
PROCESSES_AFTER_SECONDS = 30.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Search:
    """What one translate call asks of an engine (already checked by the Translator)."""

    beam: int = 1
    n_best: int = 1
    length_penalty: float = 0.6  # GNMT alpha
    return_attention: bool = False
    temperature: float | None = None  # set: sample instead of searching
    top_k: int = 0
    seed: int | None = None


def search_limits(decode: DecodeConfig) -> SearchLimits:
    """The output length limits a model directory's decode section asks for."""
    return SearchLimits(max_len_a=decode.max_len_a, max_len_b=decode.max_len_b)


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask, not the whole machine)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# torch's thread count is process-wide: translate calls from several threads take turns, or one
# would restore its count under another.
_THREADS_LOCK = threading.RLock()


@contextlib.contextmanager
def intra_op_threads(threads: int) -> Iterator[None]:
    """torch's intra-op thread count set for the duration, then restored; one holder at a time."""
    with _THREADS_LOCK:
        before = torch.get_num_threads()
        if threads != before:
            torch.set_num_threads(threads)
        try:
            yield
        finally:
            if threads != before:
                torch.set_num_threads(before)


def check_counts(**counts: int | None) -> None:
    """ValueError naming the first of `counts` (workers, threads) that is set but below 1."""
    for name, value in counts.items():
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")


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


def plan_workers(batches: int, cores: int, workers: int | None, threads: int | None) -> tuple[int, int]:
    """(workers, threads per worker) for a call that can be cut into `batches` batches, on `cores` cores.

    By default one single-threaded worker per core, but never more workers than batches: a lone
    sentence (one batch) gets every core as intra-op threads, for latency. With threads left to
    choose, never more than MAX_DEFAULT_WORKERS: each worker process holds a copy of the model, so on
    a many-core machine the default shares the cores out as intra-op threads instead. An explicit
    value wins.
    """
    if workers is None:
        most = min(cores, MAX_DEFAULT_WORKERS) if threads is None else cores // threads
        workers = max(1, min(most, batches))
    if threads is None:
        threads = max(1, cores // workers)
    return workers, threads


class TorchEngine:
    """Translates source id lists with a Transformer in fp32, bf16 or int8 (see nmt.precision).

    workers / threads: parallel batches and intra-op threads each (None: chosen per call from the
    cores and how many batches the call is worth, by the token budget and by MIN_BATCH_ROWS; see
    `plan_workers`). On CUDA, one worker.
    processes: on CPU, run the workers beyond the caller's thread as child processes (see
    nmt.decode_processes) where the model allows it: frozen (requires_grad False, as
    `Translator.load` gives it), fp32 or int8. Otherwise, or with False, they are threads. The
    processes start once the engine has decoded PROCESSES_AFTER_SECONDS in parallel calls, or when
    `start_worker_processes` (the server) or `worker_processes` is called: a short run would spend on
    their start what they save.
    """

    name = "torch"
    supports_attention = True

    def __init__(
        self,
        model: Transformer,
        decode: DecodeConfig,
        *,
        precision: str = "fp32",
        workers: int | None = None,
        threads: int | None = None,
        processes: bool = True,
    ):
        check_counts(workers=workers, threads=threads)
        self.parameter_count = sum(p.numel() for p in model.parameters())  # before int8 packs the weights
        # The fp32 weights the worker processes will load, kept before int8 replaces them (for fp32
        # they are the model's own tensors, no copy); serialised for them when they start.
        # A model in training is never copied: its weights would go stale.
        self.cores = available_cores()
        self._process_weights: dict[str, torch.Tensor] | None = None
        on_cpu = next(model.parameters()).device.type == "cpu"
        frozen = not any(p.requires_grad for p in model.parameters())
        parallel = workers != 1 and self.cores > 1
        if processes and parallel and on_cpu and frozen and precision in ("fp32", "int8") and not is_int8(model):
            self._process_weights = dict(model.state_dict())
        self._processes: DecodeProcesses | None = None
        self._parallel_seconds = 0.0  # decoding time in parallel calls: see PROCESSES_AFTER_SECONDS
        self.model = prepare_for_inference(model, precision)
        self.precision, self.decode = precision, decode
        self.workers, self.threads = workers, threads

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def autocast(self) -> contextlib.AbstractContextManager:
        """The context this engine runs its model in: autocast for bf16 (whose linear weights are bf16)."""
        return autocast_for(self.precision, self.device)

    def batches_by_length(self, ids: Sequence[Sequence[int]], beam: int, min_batches: int = 1) -> list[list[int]]:
        """Indices of sentences of similar length, longest first, each batch within decode.batch_tokens
        (divided by the beam), and small enough to make about `min_batches` batches."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
        lengths = [len(s) for s in ids]
        return cut_batches(order, lengths, batch_budget(self.decode.batch_tokens, beam, sum(lengths), min_batches))

    @torch.inference_mode()
    def translate_ids(self, ids: Sequence[Sequence[int]], search: Search) -> list[list[Hypothesis]]:
        """n-best Hypotheses per source id list (BOS/EOS included), in input order."""
        batches = self.batches_by_length(ids, search.beam)
        use_processes = self._processes is not None or (
            self._process_weights is not None and self._parallel_seconds >= PROCESSES_AFTER_SECONDS
        )
        min_rows = MIN_BATCH_ROWS if use_processes else MIN_BATCH_ROWS_THREADS
        pieces = max(len(batches), len(ids) * search.beam // min_rows)  # the batches worth a worker each
        if search.seed is not None:  # seeded sampling keeps the token budget's batches (see below)
            pieces = len(batches)
        if self.device.type == "cpu":
            workers, threads = plan_workers(pieces, self.cores, self.workers, self.threads)
        else:
            workers, threads = 1, torch.get_num_threads()
        # A few batches per worker, so that none waits long for the last one; but never for seeded
        # sampling, whose draws follow the batches and must not depend on the number of workers.
        if workers > 1 and search.seed is None:
            wanted = max(workers, min(BATCHES_PER_WORKER * workers, pieces))
            batches = self.batches_by_length(ids, search.beam, min_batches=wanted)
        results: list[list[Hypothesis]] = [[] for _ in ids]
        begun = time.perf_counter()

        def run(index_and_rows: tuple[int, list[int]]) -> list[list[Hypothesis]]:
            index, rows = index_and_rows
            with torch.inference_mode():  # the mode is per thread: pool threads need their own
                return self.search_batch([ids[i] for i in rows], search, batch_index=index)

        with intra_op_threads(threads), contextlib.ExitStack() as stack:
            if workers == 1:
                found_batches = map(run, enumerate(batches))
            elif use_processes and (processes := self.worker_processes(workers - 1)):
                # Each worker takes the next (longest remaining) batch when free; children once ready.
                found = processes.run(
                    range(len(batches)),
                    workers - 1,
                    run_here=lambda index: run((index, batches[index])),
                    request=lambda index: (index, [ids[i] for i in batches[index]], search, self.decode, threads),
                )
                found_batches = (found[index] for index in range(len(batches)))
            else:  # map keeps the order; each worker takes the next (longest remaining) batch when free
                pool = stack.enter_context(ThreadPoolExecutor(workers, thread_name_prefix="nmt-decode"))
                found_batches = pool.map(run, enumerate(batches))
            for rows, found_rows in zip(batches, found_batches, strict=True):
                for i, hyps in zip(rows, found_rows, strict=True):
                    results[i] = hyps
        if workers > 1:
            self._parallel_seconds += time.perf_counter() - begun
        return results

    def start_worker_processes(self) -> None:
        """Start the worker processes now, in the background, rather than after PROCESSES_AFTER_SECONDS
        of parallel calls: for a long-lived user (the server) that will pay for them anyway."""
        workers, _ = plan_workers(self.cores, self.cores, self.workers, self.threads)  # as for a call of many batches
        if workers > 1:
            self.worker_processes(workers - 1)

    def worker_processes(self, count: int) -> DecodeProcesses | None:
        """The worker processes, `count` of them at least (started on first use, ready later), or
        None where this engine decodes in threads only (see the class docstring)."""
        if self._processes is None:
            if self._process_weights is None:
                return None
            weights, self._process_weights = self._process_weights, None  # serialised now: int8's fp32 copy can go
            self._processes = DecodeProcesses(self.model.config, weights, self.precision)
        try:
            self._processes.ensure(count)
        except OSError as error:  # no process can start here (resources, an embedded interpreter)
            log.warning("decoding worker processes cannot start (%s); the workers are threads", error)
            self._processes = None
        return self._processes

    def search_batch(self, batch_ids: list[Sequence[int]], search: Search, batch_index: int) -> list[list[Hypothesis]]:
        """n-best Hypotheses for one batch of source id lists, in its order (what each worker runs)."""
        pad_id = self.model.config.pad_id
        src = torch.nn.utils.rnn.pad_sequence(
            [torch.as_tensor(s) for s in batch_ids], batch_first=True, padding_value=pad_id
        ).to(self.device)
        limits = search_limits(self.decode)
        attention = search.return_attention
        with self.autocast():
            if search.temperature is not None:
                # One generator per batch, seeded by the batch's place: the same draws whichever
                # worker runs it, and in whatever order.
                generator = None
                if search.seed is not None:
                    generator = torch.Generator(self.device).manual_seed(search.seed * 100_003 + batch_index)
                return [
                    [h]
                    for h in sample(
                        self.model,
                        src,
                        temperature=search.temperature,
                        top_k=search.top_k,
                        generator=generator,
                        limits=limits,
                        return_attention=attention,
                    )
                ]
            if search.beam == 1:
                return [[h] for h in greedy_search(self.model, src, limits=limits, return_attention=attention)]
            return beam_search(
                self.model,
                src,
                beam_size=search.beam,
                n_best=search.n_best,
                length_penalty=search.length_penalty,
                limits=limits,
                return_attention=attention,
            )
