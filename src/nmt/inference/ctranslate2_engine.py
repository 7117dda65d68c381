"""The CTranslate2 engine: the same weights and the same search rules as nmt's own engine, run by
CTranslate2's C++ code (see export_ctranslate2.py for how the model maps onto it).

What is kept the same as `TorchEngine`, so that both engines pick the same hypotheses:
- tokenisation and truncation (the Translator does them, for either engine);
- the length limit per sentence, floor(max_len_a * src_len + max_len_b) steps, the end token
  counted: CTranslate2 takes one limit per call, so each batch runs under its largest limit,
  and the few sentences whose hypotheses reached their own, lower, limit are cut there (greedy:
  exact, see `_cut_at_limit`) or searched again under it (beam);
- the minimum output length (its min_decoding_length refuses the end token before the softmax,
  as nmt does);
- the length penalty. CTranslate2 ranks by score / length^alpha; nmt by GNMT's
  score / ((5 + length) / 6)^alpha, length counting the end token. So CTranslate2 is asked for
  every finished beam (num_hypotheses = beam) with raw log-probability scores (length_penalty 0),
  and they are re-ranked here with nmt's formula (`rerank`).
The beams themselves can still differ from nmt's in rare cases, because the two searches stop at
different moments (nmt: fairseq's rule; CTranslate2: once `beam` hypotheses have finished).
Word alignments: the export returns the one attention they read (the top layer, heads averaged),
taken under teacher forcing as a forced prefix (`_alignment_attention`). Not available on this
engine: the other layers' attention (plots) and sampling.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import math
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from ..alignment import AlignmentMethod
from ..config import DecodeConfig
from ..decoding import Hypothesis, length_penalty
from ..decoding.forced import ForcedScore
from ..model import ModelConfig
from ..model_dir import MODEL_CONFIG
from ..search_settings import SearchRequest
from ..tokenizer import SubwordTokenizer
from .batch_search import search_limits
from .contract import ENGINE_CAPABILITIES, EngineOptions
from .export_ctranslate2 import (
    export_ctranslate2,
    exported_model_config,
    is_ctranslate2_dir,
    require_ctranslate2,
    returns_alignment_attention,
    vocabulary,
)
from .plan import (
    DEFAULT_POLICY,
    WorkerPolicy,
    available_cores,
    batch_budget,
    cut_batches,
    decoder_step_bytes,
)
from .shortlist import VOCABULARY_MAP

log = logging.getLogger(__name__)

COMPUTE_TYPES = {"fp32": "float32", "int8": "int8_float32", "bf16": "bfloat16"}


def rerank(
    hypotheses: list[tuple[list[str], float]],
    alpha: float,
    n_best: int,
    end_token: str,
    normalization: str = "gnmt",
) -> list[tuple[list[str], float, float]]:
    """CTranslate2's finished hypotheses (tokens with the end token if reached, raw log-prob) ranked by
    nmt's length penalty (GNMT's by default); returns the n_best best as (tokens without the end
    token, score, log_prob)."""
    ranked = []
    for tokens, log_prob in hypotheses:
        length = len(tokens)  # the end token counts, as in nmt's searches
        ended = bool(tokens) and tokens[-1] == end_token
        ranked.append(
            (tokens[:-1] if ended else tokens, log_prob / length_penalty(length, alpha, normalization), log_prob)
        )
    ranked.sort(key=lambda h: h[1], reverse=True)
    return ranked[:n_best]


# Source tokens in one CTranslate2 batch on CPU, greedy (beam search: half). Batches of 16-32
# sentences translated Multi30k's test set 20-30% faster than nmt's token budget (about 100 or
# more): a batch runs until its slowest sentence ends, and a small one also needs fewer vocabulary-
# map candidates (docs/benchmarks-log.md, "CTranslate2's batch size on CPU").
CPU_BATCH_TOKENS = 512


def export_step_bytes(ct2_dir: str | Path, precision: str, *, shortlist: bool = False) -> int | None:
    """The weights a decoding step reads (nmt.inference.plan.decoder_step_bytes), from the model.json
    that nmt's export keeps beside CTranslate2's files. None where there is none (CTranslate2's own
    converter) or it cannot be read (another nmt version's): the engine then keeps its usual layout."""
    path = Path(ct2_dir) / MODEL_CONFIG
    if not path.is_file():
        return None
    try:
        config = ModelConfig.load(path)
    except (ValueError, TypeError, OSError) as err:
        log.info("%s: %s; the worker layout does not weigh the model's size", path, err)
        return None
    return decoder_step_bytes(config, precision, shortlist=shortlist)


class CTranslate2Engine:
    """Translates source id lists with a CTranslate2 model directory (see `export_ctranslate2`).

    precision picks CTranslate2's compute type (fp32 -> float32, int8 -> int8_float32, bf16 on
    CUDA only); workers are CTranslate2's parallel translators (inter_threads) and threads the
    threads of each (intra_threads): by default one single-threaded worker per core, the engine's
    own advice for CPU throughput.
    """

    name = "ctranslate2"
    parameter_count = None  # CTranslate2 does not say
    model = None  # CTranslate2 holds its own

    def __init__(
        self,
        ct2_dir: str | Path,
        src_tokenizer: SubwordTokenizer,
        tgt_tokenizer: SubwordTokenizer,
        decode: DecodeConfig,
        *,
        precision: str | None = None,
        device: str = "cpu",
        workers: int | None = None,
        threads: int | None = None,
        shortlist: bool = True,
        policy: WorkerPolicy = DEFAULT_POLICY,
    ):
        ctranslate2 = require_ctranslate2()
        device, _, index = device.partition(":")  # "cuda:1" -> device "cuda", index 1
        precision = precision or ("bf16" if device == "cuda" else "fp32")
        EngineOptions(precision=precision, workers=workers, threads=threads)  # the one check of these values
        if precision == "bf16" and device == "cpu":
            raise ValueError("CTranslate2 has no bf16 on CPU: use int8 or fp32")
        cores = available_cores()
        # As in nmt's engine (WorkerPolicy.max_parallel_step_mib): a model whose decoding step reads
        # more weights than the policy's bound runs as one worker, every core its threads (unless
        # the caller chose a layout), and one worker on CPU takes batches of the whole token budget.
        uses_vmap = shortlist and (Path(ct2_dir) / VOCABULARY_MAP).is_file()
        streams = device == "cpu" and policy.streams_weights(export_step_bytes(ct2_dir, precision, shortlist=uses_vmap))
        if streams and workers is None and threads is None:
            workers = 1
        self.workers = workers or (1 if device == "cuda" else max(1, cores // (threads or 1)))
        self.whole_budget = streams and self.workers == 1
        if self.whole_budget:
            log.info("a large model (%s): one CTranslate2 worker, batches of the whole token budget", precision)
        self.threads = threads or max(1, cores // self.workers)
        # CTranslate2 sets the calling thread's OpenMP thread count to intra_threads, and torch shares
        # that runtime: without this, a process that loads two single-threaded workers runs all its
        # later torch work (nmt's own engine, a training step, transformers) on one thread.
        torch_threads = torch.get_num_threads()
        self.translator = ctranslate2.Translator(
            str(ct2_dir),
            device=device,
            device_index=int(index or 0),
            compute_type=COMPUTE_TYPES[precision],
            inter_threads=self.workers,
            intra_threads=self.threads,
        )
        torch.set_num_threads(torch_threads)
        self.decode, self.precision = decode, precision
        # every layer's attention, sampling and glossaries need nmt's engine; alignments, an export that
        # returns the attention they read
        self.capabilities = dataclasses.replace(
            ENGINE_CAPABILITIES["ctranslate2"], alignment=returns_alignment_attention(ct2_dir)
        )
        # the export returns the model's alignment attention alone, as one layer of one head: read as
        # such, a step late where the model's head aligns so
        self.alignment = AlignmentMethod(shift=exported_model_config(ct2_dir).alignment_shift)
        # the export's form of the model directory's lexical shortlist, used as nmt's engine uses it
        self.use_vmap = uses_vmap
        self.device = torch.device(device, int(index) if index else None)
        self.src_vocab = vocabulary(src_tokenizer)
        self.tgt_ids = {piece: i for i, piece in enumerate(vocabulary(tgt_tokenizer))}
        self.end_token = tgt_tokenizer.lookup([tgt_tokenizer.eos_id])[0]
        if device == "cuda":
            self._check_cuda_runs()

    def _check_cuda_runs(self) -> None:
        """Fail at load, with the way out, where CTranslate2 cannot run on this GPU: its wheel links the
        CUDA 12 libraries, which a machine with another CUDA lacks ("libcublas.so.12 is not found")."""
        try:
            self.translator.translate_batch([self.src_vocab[:1]], max_decoding_length=1)
        except RuntimeError as err:
            raise RuntimeError(
                f"CTranslate2 cannot translate on CUDA on this machine ({err}): use --device cpu, or the "
                "torch engine (--engine torch)"
            ) from None

    @classmethod
    def from_model_dir(
        cls,
        model_dir: str | Path,
        src_tokenizer: SubwordTokenizer,
        tgt_tokenizer: SubwordTokenizer,
        decode: DecodeConfig,
        *,
        weights: str | Path | None = None,
        **options,
    ) -> CTranslate2Engine:
        """An exported directory as is; an nmt model directory is exported first, to a temporary directory."""
        require_ctranslate2()  # before any work: a missing extra is the first thing to say
        if is_ctranslate2_dir(model_dir):
            if weights is not None:
                raise ValueError(f"{model_dir} is an exported CTranslate2 model: --weights does not apply")
            return cls(model_dir, src_tokenizer, tgt_tokenizer, decode, **options)
        log.info("converting %s to CTranslate2 for this run (nmt export --to ctranslate2 does it once)", model_dir)
        with tempfile.TemporaryDirectory(prefix="nmt-ct2-") as tmp:  # CTranslate2 reads it all at load
            out = export_ctranslate2(
                model_dir, Path(tmp) / "model", weights=weights, shortlist=options.get("shortlist", True)
            )
            return cls(out, src_tokenizer, tgt_tokenizer, decode, **options)

    def start(self, wait: bool = False) -> None:
        """Nothing to start: CTranslate2's workers start at load."""

    def close(self) -> None:
        """Nothing to stop: CTranslate2's workers go with the engine."""

    def autocast(self) -> contextlib.AbstractContextManager:
        """No PyTorch model runs here: a null context."""
        return contextlib.nullcontext()

    def translate_constrained(self, ids, constraints, request):
        """Terminology constraints need nmt's own beam search (CTranslate2 has none)."""
        self.capabilities.require(["constraints"], self.name)

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
        """Teacher-forced per-token log-probabilities of given outputs (CTranslate2's score_batch,
        which scores an end token after each); with need_attention, the attention word alignments
        read as cross_attention, (1, 1, steps, src_len): one layer, its heads averaged. A
        dropout_seed is refused: CTranslate2's models have no dropout to keep on."""
        if dropout_seed is not None:
            self.capabilities.require(["mc_dropout"], self.name)
        if need_attention and not self.capabilities.alignment:
            raise ValueError(
                "this CTranslate2 export returns no alignment attention (made by an older nmt): export it "
                "again (nmt export --to ctranslate2 --force), or use the torch engine"
            )
        if not sources:
            return []
        ended = [True] * len(outputs) if ended is None else list(ended)
        target_pieces = {i: piece for piece, i in self.tgt_ids.items()}
        source_tokens = [[self.src_vocab[t] for t in source] for source in sources]
        output_tokens = [[target_pieces[t] for t in output] for output in outputs]
        scored = self._score_pieces(source_tokens, output_tokens) if need_log_probs else [[] for _ in outputs]
        attention = self._alignment_attention(source_tokens, output_tokens) if need_attention else None
        results = []
        for k, (output, end, log_probs) in enumerate(zip(outputs, ended, scored, strict=True)):
            steps = len(output) + (1 if end else 0)
            rows = attention[k][None, None, :steps] if attention is not None else None  # (1, 1, steps, src_len)
            results.append(ForcedScore(log_probs[:steps], rows))
        return results

    def _alignment_attention(self, sources: list[list[str]], targets: list[list[str]]) -> list[torch.Tensor]:
        """Each target's (len + 1, src_len) attention under teacher forcing: the target given as a
        forced prefix, one step decoded after it (the row for its end token). Sentences are sorted by
        length so that each batch's step limit, its longest target's, costs the others little."""
        order = sorted(range(len(targets)), key=lambda k: len(targets[k]))
        lengths = [len(s) + len(t) for s, t in zip(sources, targets, strict=True)]
        calls = []
        for rows in cut_batches(order, lengths, self.decode.batch_tokens):
            calls.append(
                (
                    rows,
                    self.translator.translate_batch(
                        [sources[k] for k in rows],
                        target_prefix=[targets[k] for k in rows],
                        max_decoding_length=len(targets[rows[-1]]) + 1,
                        beam_size=1,
                        return_attention=True,
                        return_end_token=True,
                        max_input_length=0,
                        asynchronous=True,
                    ),
                )
            )
        attention: list[torch.Tensor] = [torch.empty(0)] * len(targets)
        for rows, futures in calls:
            for k, future in zip(rows, futures, strict=True):
                found = torch.tensor(future.result().attention[0], dtype=torch.float32).reshape(-1, len(sources[k]))
                steps = len(targets[k]) + 1
                if found.size(0) < steps:  # decoding ended with the prefix: the last row stands for the end
                    found = torch.cat([found, found[-1:].expand(steps - found.size(0), -1)])
                attention[k] = found[:steps]
        return attention

    def _score_pieces(self, sources: list[list[str]], targets: list[list[str]]) -> list[list[float]]:
        """Each target's token log-probs, then its end token's, as the search scores them.

        Within the first decode.min_len steps the search chose among every token but the end token,
        renormalised without it (nmt.decoding.SearchLimits.min_len); CTranslate2's score_batch
        scores against them all. So where a target went on at such a step, the end token's own
        log-prob there (scored as that prefix followed by an end) puts the difference back:
        log p'(y_j) = log p(y_j) - log(1 - p(end)), as nmt.decoding.forced does it in one pass.
        Each such step costs a scoring row of its own (the source encoded again, a short target):
        with the default min_len 1, twice the rows, half of them one token long.
        """
        early = [(k, j) for k, target in enumerate(targets) for j in range(min(self.decode.min_len, len(target)))]
        scored = self.translator.score_batch(
            sources + [sources[k] for k, _ in early],
            targets + [targets[k][:j] for k, j in early],
            max_batch_size=self.decode.batch_tokens,
            batch_type="tokens",
            max_input_length=0,
        )
        log_probs = [list(result.log_probs) for result in scored[: len(targets)]]
        for (k, j), result in zip(early, scored[len(targets) :], strict=True):
            log_probs[k][j] -= math.log1p(-min(math.exp(result.log_probs[j]), 1 - 1e-7))  # float32's resolution
        return log_probs

    def translate_ids(
        self, ids: Sequence[Sequence[int]], request: SearchRequest, groups: Sequence[Sequence[int]] | None = None
    ) -> list[list[Hypothesis]]:
        """n-best Hypotheses per source id list (BOS/EOS included), in input order. The Translator
        refuses what this engine cannot do before it reaches it (capabilities: transformers' stopping
        rule too, where CTranslate2's beam search ends a sentence once `beam` hypotheses have finished).
        groups: as in TorchEngine.translate_ids, each batched as if alone; here one call after another."""
        if groups is not None:
            results: list[list[Hypothesis]] = [[] for _ in ids]
            for members in (g for g in groups if len(g)):
                for i, hyps in zip(members, self.translate_ids([ids[i] for i in members], request), strict=True):
                    results[i] = hyps
            return results
        lengths = [len(s) for s in ids]
        limit = search_limits(self.decode).max_steps(torch.tensor(lengths)).tolist()
        alpha = request.length_penalty if request.beam > 1 else 0.0  # greedy: score == log_prob, as in nmt
        options = dict(
            beam_size=request.beam,
            num_hypotheses=request.beam,
            length_penalty=0.0,
            return_scores=True,
            return_end_token=True,
            min_decoding_length=self.decode.min_len,  # the same rule as SearchLimits.min_len
            no_repeat_ngram_size=request.no_repeat_ngram_size,  # the rule nmt's searches copy
            max_input_length=0,
            use_vmap=self.use_vmap,
        )
        # Sentences sorted by limit, cut into batches of the token budget, one asynchronous call each
        # (CTranslate2 spreads them over its workers) under the batch's largest limit; with several
        # workers, a few batches each, as in TorchEngine. A sentence whose hypotheses stayed short of
        # its own limit stopped where it would have stopped under it: its result stands. The few
        # others, in a batch whose limit is above theirs, are cut at their limit (greedy) or searched
        # again under it (beam), queued as soon as their batch returns: behind the batches still
        # waiting, they fill the time when a worker would idle at the end.
        order = sorted(range(len(ids)), key=lambda i: (limit[i], lengths[i]))
        min_batches = DEFAULT_POLICY.batches_per_worker * self.workers if self.workers > 1 else 1
        budget = batch_budget(self.decode.batch_tokens, request.beam, sum(lengths), min_batches)
        if self.device.type == "cpu" and not self.whole_budget:
            budget = min(budget, CPU_BATCH_TOKENS if request.beam == 1 else CPU_BATCH_TOKENS // 2)
        found: dict[int, list[tuple[list[str], float]]] = {}  # (tokens, log-prob) of each finished hypothesis
        first = [self._submit(ids, rows, limit[rows[-1]], options) for rows in cut_batches(order, lengths, budget)]
        second, to_cut = [], []
        for rows, max_len, futures in first:
            self._gather(rows, futures, found)
            past = [i for i in rows if max_len > limit[i] and any(len(t) >= limit[i] for t, _ in found[i])]
            if request.beam == 1:
                to_cut += [i for i in past if len(found[i][0][0]) > limit[i]]
            else:
                past.sort(key=limit.__getitem__)
                groups = itertools.groupby(past, key=limit.__getitem__)
                second += [self._submit(ids, list(group), own_limit, options) for own_limit, group in groups]
        for rows, _, futures in second:
            self._gather(rows, futures, found)
        self._cut_at_limit(ids, to_cut, limit, found)
        results = []
        for i in range(len(ids)):
            best = rerank(found[i], alpha, request.n_best, self.end_token, request.length_normalization)
            results.append(
                [
                    Hypothesis([self.tgt_ids[p] for p in tokens], score, log_prob, None)
                    for tokens, score, log_prob in best
                ]
            )
        return results

    def _cut_at_limit(
        self, ids: Sequence[Sequence[int]], rows: list[int], limit: list[int], found: dict[int, list]
    ) -> None:
        """Cut the greedy hypotheses of sentences `rows`, which ran past their own limit, at that limit.

        Greedy search picks each token without looking at the limit, so the first limit[i] tokens are
        what a search under it gives. Their log-probability is summed from one teacher-forced pass
        (`score_batch`, which scores each token and an end token after them), which costs far less
        than searching those sentences again: they are the longest outputs, often repeating
        themselves to the limit, and each limit would need a call of its own.
        """
        if not rows:
            return
        sources = [[self.src_vocab[t] for t in ids[i]] for i in rows]
        cut = [found[i][0][0][: limit[i]] for i in rows]  # no end token: it came after the limit
        for i, tokens, log_probs in zip(rows, cut, self._score_pieces(sources, cut), strict=True):
            found[i] = [(tokens, sum(log_probs[: len(tokens)]))]

    def _submit(
        self, ids: Sequence[Sequence[int]], rows: list[int], max_len: int, options: dict
    ) -> tuple[list[int], int, list]:
        """Queue sentences `rows` as one batch of at most `max_len` steps: (rows, max_len, futures)."""
        tokens = [[self.src_vocab[t] for t in ids[i]] for i in rows]
        options = dict(options, min_decoding_length=min(options["min_decoding_length"], max_len))  # never above
        futures = self.translator.translate_batch(tokens, max_decoding_length=max_len, asynchronous=True, **options)
        return rows, max_len, futures

    @staticmethod
    def _gather(rows: list[int], futures: list, found: dict) -> None:
        """Wait for a batch's results and keep each sentence's finished hypotheses in `found`."""
        for i, future in zip(rows, futures, strict=True):
            result = future.result()
            found[i] = list(zip(result.hypotheses, result.scores, strict=True))


__all__ = ["CTranslate2Engine", "rerank"]
