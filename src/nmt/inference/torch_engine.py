"""nmt's own search engine: the model and the searches of `nmt.decoding`, batched by length and
spread over parallel workers.

    engine = TorchEngine(model, decode, precision="int8")
    engine.translate_ids(ids, SearchRequest(beam=5))   # n-best hypotheses per sentence, in order

A call is planned (nmt.inference.plan: batches, workers, threads), its batches run on the
workers (nmt.inference.workers: the caller's thread, plus threads or processes), and the
results go back to input order.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence

import torch

from ..alignment import model_alignment
from ..config import DecodeConfig
from ..decoding import Hypothesis
from ..decoding.constrained import ConstrainedResult, constrained_beam_search
from ..decoding.forced import ForcedScore, force_decode
from ..model import Transformer
from ..search_settings import SearchRequest
from .batch_search import BatchJob, search_limits
from .contract import ENGINE_CAPABILITIES, EngineOptions
from .mc_dropout import dropout_twin, drops_out, seeded
from .plan import (
    DEFAULT_POLICY,
    WorkerPolicy,
    available_cores,
    batches_by_length,
    decoder_step_bytes,
    plan_call,
    plan_workers,
)
from .precision import autocast_for, is_int8, prepare_for_inference
from .shortlist import LexicalShortlist
from .workers import Workers

log = logging.getLogger(__name__)


class TorchEngine:
    """Translates source id lists with a Transformer in fp32, bf16 or int8 (see nmt.inference.precision).

    workers / threads: parallel batches and intra-op threads each (None: chosen per call from the
    cores and how many batches the call is worth; see `plan_call`). On CUDA, one worker.
    processes: on CPU, run the workers beyond the caller's thread as child processes where the
    model allows it: frozen (requires_grad False, as `Translator.load` gives it), fp32 or int8.
    Otherwise, or with False, they are threads. When they start: see WorkerPolicy.
    shortlist: greedy and beam search score only each sentence's candidates (nmt.inference.shortlist);
    fp32 and bf16 only.
    """

    name = "torch"
    capabilities = ENGINE_CAPABILITIES["torch"]

    def __init__(
        self,
        model: Transformer,
        decode: DecodeConfig,
        *,
        precision: str = "fp32",
        workers: int | None = None,
        threads: int | None = None,
        processes: bool = True,
        policy: WorkerPolicy = DEFAULT_POLICY,
        shortlist: LexicalShortlist | None = None,
    ):
        EngineOptions(workers=workers, threads=threads)  # the one check of the counts
        self._parameter_count = sum(p.numel() for p in model.parameters())  # before int8 packs the weights
        self.cores = available_cores()
        # The fp32 weights the worker processes will load, kept before int8 replaces them (for fp32
        # they are the model's own tensors, no copy). A model in training is never copied: its
        # weights would go stale.
        process_weights = None
        on_cpu = next(model.parameters()).device.type == "cpu"
        frozen = not any(p.requires_grad for p in model.parameters())
        uses_shortlist = shortlist is not None and precision != "int8"
        self.step_bytes = decoder_step_bytes(model.config, precision, shortlist=uses_shortlist)
        self.one_stream = workers is None and threads is None and on_cpu and policy.streams_weights(self.step_bytes)
        if self.one_stream and self.cores > 1:
            log.info(
                "a decoding step reads %d MiB of weights (%s): one worker with %d threads, whole-budget batches",
                self.step_bytes >> 20,
                precision,
                self.cores,
            )
        parallel = workers != 1 and self.cores > 1 and not self.one_stream
        if processes and parallel and on_cpu and frozen and precision in ("fp32", "int8") and not is_int8(model):
            process_weights = dict(model.state_dict())
        self.model = prepare_for_inference(model, precision)
        c = model.config
        self.alignment = model_alignment(c.alignment_layer, c.alignment_heads, c.alignment_shift)
        self.precision, self.decode = precision, decode
        self.workers, self.threads = workers, threads
        # With int8 layers the restricted projection measured slower than the whole one (its rows are
        # packed again for every batch) and lost BLEU: docs/results.md, "Distilled students".
        self.shortlist = shortlist if precision != "int8" else None
        if shortlist is not None and precision == "int8":
            log.info("the lexical shortlist is left out with int8 on nmt's engine (measured slower there)")
        self.runner = Workers(self.model, precision, process_weights, policy)
        self._dropout_twin: torch.nn.Module | None = None  # made on the first MC dropout pass

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def policy(self) -> WorkerPolicy:
        return self.runner.policy

    @property
    def parameter_count(self) -> int:
        return self._parameter_count

    def autocast(self):
        """The context this engine runs its model in: autocast for bf16 (whose linear weights are bf16)."""
        return autocast_for(self.precision, self.device)

    def score_ids(
        self,
        sources: Sequence[Sequence[int]],
        outputs: Sequence[Sequence[int]],
        *,
        ended: Sequence[bool] | None = None,
        need_attention: bool = False,
        need_log_probs: bool = True,
        dropout_seed: int | None = None,
    ) -> list[ForcedScore]:
        """Teacher-forced scores of given outputs (see nmt.decoding.forced), in this thread, in batches
        of similar length within decode.batch_tokens; with `dropout_seed`, by the model with its
        dropout on, masks drawn from that seed (nmt.inference.mc_dropout): the same call, the same scores."""
        ended = [True] * len(outputs) if ended is None else list(ended)
        lengths = [len(s) + len(o) + 1 for s, o in zip(sources, outputs, strict=True)]
        found: dict[int, ForcedScore] = {}
        model = self.model
        draws = contextlib.nullcontext()
        if dropout_seed is not None:
            if self._dropout_twin is None:
                self._dropout_twin = dropout_twin(self.model)
                if not drops_out(self.model):
                    log.warning("MC dropout: this model has no dropout (dropout 0), so every pass scores alike")
            model, draws = self._dropout_twin, seeded(dropout_seed, self.device)
        with self.autocast(), draws:
            for rows in batches_by_length(lengths, 1, self.decode.batch_tokens):
                scored = force_decode(
                    model,
                    [sources[i] for i in rows],
                    [outputs[i] for i in rows],
                    ended=[ended[i] for i in rows],
                    need_attention=need_attention,
                    need_log_probs=need_log_probs,
                    min_len=self.decode.min_len,
                )
                found.update(zip(rows, scored, strict=True))
        return [found[i] for i in range(len(sources))]

    def translate_constrained(
        self, ids: Sequence[int], constraints: Sequence[Sequence[int]], request: SearchRequest
    ) -> ConstrainedResult:
        """One sentence's n-best under terminology constraints (nmt.decoding.constrained), in this thread."""
        src = torch.tensor([list(ids)], dtype=torch.long, device=self.device)
        with self.autocast(), torch.inference_mode():
            return constrained_beam_search(
                self.model,
                src,
                constraints,
                beam_size=request.beam,
                n_best=request.n_best,
                length_penalty=request.length_penalty,
                length_normalization=request.length_normalization,
                limits=search_limits(self.decode, request),
            )

    def translate_ids(
        self, ids: Sequence[Sequence[int]], request: SearchRequest, groups: Sequence[Sequence[int]] | None = None
    ) -> list[list[Hypothesis]]:
        """n-best Hypotheses per source id list (BOS/EOS included), in input order.

        groups: the sentences (indices into `ids`) of each group, each group cut into the batches a
        call of its own would have, all run in this one on the workers and threads of the first
        (non-empty) group's plan; the later groups' batches are taken first. So a small second pass
        (nmt.rare_numbers') runs beside the first instead of after it on one worker while the others
        idle, and the first group runs exactly as it would alone. None: one group.
        """
        groups = [range(len(ids))] if groups is None else [g for g in groups if len(g)]
        processes = self.runner.processes_due
        plans = [
            plan_call(
                [len(ids[i]) for i in members],
                request,
                batch_tokens=self.decode.batch_tokens,
                cores=self.cores if self.device.type == "cpu" else None,
                workers=self.workers,
                threads=self.threads,
                processes=processes,
                policy=self.policy,
                step_bytes=self.step_bytes,
            )
            for members in groups
        ]
        limits = search_limits(self.decode, request)
        jobs, placed = [], []
        for members, plan in reversed(list(zip(groups, plans, strict=True))):
            for i, rows in enumerate(plan.batches):  # i: the batch's place in its group's call (seeded draws)
                rows = [members[r] for r in rows]
                batch = [ids[r] for r in rows]
                vocabulary = allowed = None
                if self.shortlist is not None and request.sampling is None:
                    vocabulary, allowed = self.shortlist.restrict(batch, least=2 * request.beam)
                jobs.append(BatchJob(i, batch, request, limits, vocabulary, allowed))
                placed.append(rows)
        found = self.runner.map(jobs, plans[0].workers, plans[0].threads, processes) if jobs else []
        results: list[list[Hypothesis]] = [[] for _ in ids]
        for rows, found_rows in zip(placed, found, strict=True):
            for i, hyps in zip(rows, found_rows, strict=True):
                results[i] = hyps
        return results

    def start(self, wait: bool = False) -> None:
        """Start the worker processes now, in the background, rather than after
        WorkerPolicy.processes_after_s of parallel calls: for a long-lived caller (the server).
        With `wait`, return once they are ready. A model that runs as one batch stream (see
        WorkerPolicy.max_parallel_step_mib) starts none."""
        if self.one_stream:
            return
        workers, _ = plan_workers(self.cores, self.cores, self.workers, self.threads, self.policy)
        pool = self.runner.start_processes(workers - 1) if workers > 1 else None
        if wait and pool is not None:
            pool.wait_ready()

    def close(self) -> None:
        """Stop the worker processes (later calls run in threads)."""
        self.runner.close()
