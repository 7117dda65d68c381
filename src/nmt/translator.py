"""Text in, text out: tokenizer + a search engine, batched by length.

    translator = Translator.load("runs/de_en")
    translator.translate(["Ein Mann fährt Fahrrad."], beam=5)   # -> ["A man rides a bike."]
    Translator.load("runs/de_en", precision="int8", workers=2)       # int8 linear layers, 2 parallel batches
    Translator.load("runs/de_en.ct2", engine="ctranslate2")          # the same model run by CTranslate2

The engine turns source ids into hypotheses: nmt's own (`engine.TorchEngine`) or CTranslate2
(`engine_ctranslate2.CTranslate2Engine`). Tokenisation, truncation, the checks on beam, n-best
and sampling, and the text of the result are the Translator's, the same for both.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch

from .checkpoint import load_model_dir
from .config import DecodeConfig
from .decoding import Hypothesis
from .engine import Search, TorchEngine
from .export_ctranslate2 import is_ctranslate2_dir
from .model import Transformer
from .model_dir import WEIGHTS, read_decode_config
from .tokenizer import EOS_ID, SubwordTokenizer, load_tokenizers

log = logging.getLogger(__name__)

DEFAULT_MAX_SOURCE_TOKENS = 256  # longer inputs are truncated (with a warning) to bound memory and time
ENGINES = ("torch", "ctranslate2")


def check_length_penalty(alpha: float) -> None:
    """Refuse a GNMT alpha that is negative, NaN or infinite (ValueError)."""
    if not 0 <= alpha < math.inf:
        raise ValueError(f"length_penalty (GNMT alpha) must be a number >= 0, got {alpha}")


class Engine(Protocol):
    """What a Translator needs of a search engine (TorchEngine, CTranslate2Engine)."""

    name: str
    precision: str
    device: torch.device

    def translate_ids(self, ids: Sequence[Sequence[int]], search: Search) -> list[list[Hypothesis]]: ...


@dataclass
class Translation:
    """One hypothesis for one input sentence, with what a person or a plot needs."""

    text: str
    score: float  # length-penalised log-probability (the ranking score)
    log_prob: float
    tokens: list[int]
    pieces: list[str]  # target subword pieces (no BOS/EOS)
    src_pieces: list[str] = field(default_factory=list)  # source pieces, BOS/EOS included
    attention: torch.Tensor | None = None  # (layers, heads, steps, src_len) cross-attention, when asked
    truncated: bool = False  # the source was cut to max_source_tokens


@dataclass(frozen=True)
class Sampling:
    """Draw each translation at random from the model instead of searching for the best one.

    For back-translation and data augmentation, where varied outputs help more than the
    single most likely one. temperature > 1 flattens the distribution, < 1 sharpens it;
    top_k > 0 draws only among the k most likely tokens. With a seed, the same inputs
    (in the same batches) give the same draws.
    """

    temperature: float = 1.0
    top_k: int = 0
    seed: int | None = None

    def __post_init__(self):
        if not 0 < self.temperature < math.inf:
            raise ValueError(f"sampling temperature must be > 0 and finite, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"sampling top_k must be >= 0 (0 keeps every token), got {self.top_k}")
        if self.seed is not None and not 0 <= self.seed < 2**63:  # what a torch generator takes
            raise ValueError(f"sampling seed must be in [0, 2**63), got {self.seed}")


class Translator:
    """Translates sentences with a trained model; build it with `Translator.load(model_dir)`."""

    def __init__(
        self,
        model: Transformer | Engine,
        src_tokenizer: SubwordTokenizer,
        tgt_tokenizer: SubwordTokenizer,
        *,
        decode: DecodeConfig | None = None,
        max_source_tokens: int = DEFAULT_MAX_SOURCE_TOKENS,
        precision: str = "fp32",
        workers: int | None = None,
        threads: int | None = None,
        worker_processes: bool = True,
    ):
        """model: a Transformer (run by nmt's own engine with `precision`, `workers`, `threads` and
        `worker_processes`: see TorchEngine) or an engine."""
        self.decode = decode or DecodeConfig()
        if isinstance(model, Transformer):
            model = TorchEngine(
                model, self.decode, precision=precision, workers=workers, threads=threads, processes=worker_processes
            )
        self.engine = model
        self.src_tokenizer, self.tgt_tokenizer = src_tokenizer, tgt_tokenizer
        self.max_source_tokens = max_source_tokens

    @property
    def model(self) -> Transformer:
        """The Transformer of nmt's own engine (attention plots, parameter counts). In bf16 its linear
        weights are bf16: run it under `translator.engine.autocast()`."""
        if not isinstance(self.engine, TorchEngine):
            raise ValueError(f"the {self.engine.name} engine has no PyTorch model: use engine='torch'")
        return self.engine.model

    @property
    def parameter_count(self) -> int | None:
        """The model's distinct parameters (None where the engine does not say)."""
        return getattr(self.engine, "parameter_count", None)

    @property
    def device(self) -> torch.device:
        return self.engine.device

    def start_workers(self) -> None:
        """Start nmt's engine's worker processes now rather than after 30 s of parallel decoding, for a
        long-lived translator such as the server's (see TorchEngine); other engines start theirs at load."""
        if isinstance(self.engine, TorchEngine):
            self.engine.start_worker_processes()

    @classmethod
    def load(
        cls,
        model_dir: str | Path,
        *,
        device: str = "auto",
        weights: str | Path | None = None,
        engine: str = "torch",
        precision: str | None = None,
        workers: int | None = None,
        threads: int | None = None,
        length_penalty: float | None = None,
        worker_processes: bool = True,
    ) -> Translator:
        """Everything from the model directory: config, tokenizers, weights (model.safetensors by default).

        engine: "torch" (nmt's own) or "ctranslate2" (an exported directory, or an nmt one converted
        at load). precision: fp32 | int8 | bf16 (default: fp32; bf16 for CTranslate2 on CUDA); a precision the
        device runs badly is refused (see nmt.precision). workers / threads: parallel batches and
        intra-op threads each (default: chosen from the cores); nmt's engine runs the workers beyond the
        caller's as child processes unless worker_processes is False (see nmt.decode_processes).
        length_penalty: the GNMT alpha every call uses unless it names its own (default: the
        directory's decode.length_penalty; choose one with `nmt tune-length-penalty`). The model is loaded frozen
        (requires_grad False): it is for translation, and fp32 packs its output projection on CPUs
        where that is faster (nmt.packed_linear); to train from it, use `load_model_dir` instead.
        """
        model_dir = Path(model_dir)
        if not model_dir.is_dir():
            raise FileNotFoundError(f"model directory {model_dir} does not exist")
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
        if length_penalty is not None:  # before the weights load, which takes a while
            check_length_penalty(length_penalty)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if (
            engine == "torch"
            and is_ctranslate2_dir(model_dir)
            and weights is None
            and not (model_dir / WEIGHTS).exists()
        ):
            raise ValueError(
                f"{model_dir} holds a CTranslate2 export, not PyTorch weights: use engine "
                "'ctranslate2' (--engine ctranslate2)"
            )
        model = None
        if engine == "torch":  # frozen: for translation only (which lets fp32 pack its output projection)
            model = load_model_dir(model_dir, weights=weights, device=device).requires_grad_(False)
        src_tok, tgt_tok = load_tokenizers(model_dir)
        decode = read_decode_config(model_dir)
        if length_penalty is not None:
            decode = dataclasses.replace(decode, length_penalty=length_penalty)
        if engine == "ctranslate2":
            from .engine_ctranslate2 import CTranslate2Engine  # noqa: PLC0415 - an optional extra

            search_engine = CTranslate2Engine.from_model_dir(
                model_dir,
                src_tok,
                tgt_tok,
                decode,
                weights=weights,
                precision=precision,
                device=device,
                workers=workers,
                threads=threads,
            )
            return cls(search_engine, src_tok, tgt_tok, decode=decode)
        # fp32 by default, on CUDA too: bf16 decoding was 5.6x slower on an H100 (docs/benchmarks.md, unexplained)
        precision = precision or "fp32"
        return cls(
            model,
            src_tok,
            tgt_tok,
            decode=decode,
            precision=precision,
            workers=workers,
            threads=threads,
            worker_processes=worker_processes,
        )

    # --- the simple API ----------------------------------------------------------------------
    def translate(
        self,
        texts: Sequence[str],
        *,
        beam: int | None = None,
        length_penalty: float | None = None,
        sampling: Sampling | None = None,
    ) -> list[str]:
        """One translation per input sentence, in order. An empty sentence gives ''.

        beam: search width (1 = greedy); sampling: draw at random instead (see `Sampling`).
        """
        return [
            best[0].text
            for best in self.translate_detailed(texts, beam=beam, length_penalty=length_penalty, sampling=sampling)
        ]

    def translate_detailed(
        self,
        texts: Sequence[str],
        *,
        beam: int | None = None,
        n_best: int = 1,
        length_penalty: float | None = None,
        return_attention: bool = False,
        sampling: Sampling | None = None,
    ) -> list[list[Translation]]:
        """n-best Translations per sentence (best first), optionally with cross-attention."""
        encoded = [self.encode_source(t) for t in texts]
        ids = [e[0] for e in encoded]
        hyps = self.translate_ids(
            ids,
            beam=beam,
            n_best=n_best,
            length_penalty=length_penalty,
            return_attention=return_attention,
            sampling=sampling,
        )
        out = []
        for (src_ids, truncated), text, sentence_hyps in zip(encoded, texts, hyps, strict=True):
            src_pieces = self.src_tokenizer.lookup(src_ids) if return_attention else []
            out.append([self.to_translation(h, src_pieces, truncated, empty=not text.strip()) for h in sentence_hyps])
        return out

    # --- the pieces ----------------------------------------------------------------------------
    def encode_source(self, text: str) -> tuple[list[int], bool]:
        """Source ids with BOS/EOS, cut to max_source_tokens (keeping EOS); and whether it was cut."""
        ids = self.src_tokenizer.encode(text)
        if len(ids) <= self.max_source_tokens:
            return ids, False
        return ids[: self.max_source_tokens - 1] + [EOS_ID], True

    def to_translation(self, h: Hypothesis, src_pieces: list[str], truncated: bool, empty: bool) -> Translation:
        if empty:  # nothing in, nothing out: the model's guess for an empty input is noise
            return Translation("", 0.0, 0.0, [], [], src_pieces, None, truncated)
        return Translation(
            self.tgt_tokenizer.decode(h.tokens),
            h.score,
            h.log_prob,
            h.tokens,
            self.tgt_tokenizer.lookup(h.tokens),
            src_pieces,
            h.attention,
            truncated,
        )

    def translate_ids(
        self,
        ids: Sequence[Sequence[int]],
        *,
        beam: int | None = None,
        n_best: int = 1,
        length_penalty: float | None = None,
        return_attention: bool = False,
        sampling: Sampling | None = None,
    ) -> list[list[Hypothesis]]:
        """Search over source id lists (BOS/EOS included); n-best Hypotheses per sentence, in input order.

        With `sampling`, one random draw per sentence instead (beam and n_best must be unset or 1).
        """
        if sampling is not None and (beam not in (None, 1) or n_best != 1):
            raise ValueError(
                f"sampling draws one translation per sentence: it takes no beam ({beam}) or n_best ({n_best})"
            )
        beam = 1 if sampling is not None else self.decode.beam if beam is None else beam
        if beam < 1 or n_best < 1 or n_best > beam:
            raise ValueError(f"need 1 <= n_best ({n_best}) <= beam ({beam})")
        if length_penalty is not None:
            check_length_penalty(length_penalty)
        if 2 * beam > self.tgt_tokenizer.vocab_size:  # beam search ranks 2 * beam distinct tokens a step
            raise ValueError(
                f"beam ({beam}) must be at most {self.tgt_tokenizer.vocab_size // 2}, half the target vocabulary"
            )
        search = Search(
            beam=beam,
            n_best=n_best,
            return_attention=return_attention,
            length_penalty=self.decode.length_penalty if length_penalty is None else length_penalty,
        )
        if sampling is not None:
            search = dataclasses.replace(
                search, temperature=sampling.temperature, top_k=sampling.top_k, seed=sampling.seed
            )
        return self.engine.translate_ids(ids, search)
