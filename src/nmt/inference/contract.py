"""The engine contract: what every engine gives a Translator and the server (`Engine`), how a model
directory is to be run (`EngineOptions`), and what each engine can do beyond translating
(`Capabilities`), asked in one place:

    ENGINE_CAPABILITIES["ctranslate2"].missing({"sampling"})   # ["sampling"]: before anything loads
    engine_for("auto", {"sampling"})                             # "torch": auto picks the engine that can
    engine.capabilities.require({"attention"}, engine.name)      # a ValueError naming what, and the way out

A feature an engine lacks is refused with one message, here, whoever asks (the CLI, the Python API,
the server); nothing outside this package compares engine names. No torch at import: the CLI reads
these to write its --help.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from ..config_checks import Rule, at_least, check_fields, one_of
from ..search_settings import SearchRequest
from .choices import ENGINES, PRECISIONS

if TYPE_CHECKING:
    import torch

    from ..alignment import AlignmentMethod
    from ..decoding import Hypothesis
    from ..decoding.constrained import ConstrainedResult
    from ..decoding.forced import ForcedScore
    from ..model import Transformer


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do beyond translating: each field a feature a caller may ask for by name."""

    attention: bool = False  # cross-attention of every layer and head (plots, the page's heatmap)
    alignment: bool = False  # the attention word alignments read (the model's alignment head: Engine.alignment)
    sampling: bool = False  # random draws (SearchRequest.sampling)
    constraints: bool = False  # glossary terms placed by constrained beam search
    transformers_stopping: bool = False  # beam search under transformers' rule (early_stopping false)
    mc_dropout: bool = False  # teacher-forced scoring with the model's dropout kept on (score_ids' dropout_seed)

    # How a refusal names each feature (and the option that asks for it).
    NAMES: ClassVar[dict[str, str]] = {
        "attention": "attention weights",
        "alignment": "word alignments",
        "sampling": "sampling (--sample)",
        "constraints": "a glossary (--glossary)",
        "transformers_stopping": "transformers' stopping rule (--no-early-stopping)",
        "mc_dropout": "MC dropout (--qe-passes)",
    }

    def missing(self, asked: Iterable[str]) -> list[str]:
        """The features of `asked` this engine lacks, in `asked`'s order (an unknown one: KeyError)."""
        asked = list(asked)
        unknown = [name for name in asked if name not in self.NAMES]
        if unknown:
            raise KeyError(f"no engine feature {unknown[0]!r}: one of {', '.join(self.NAMES)}")
        return [name for name in asked if not getattr(self, name)]

    def require(self, asked: Iterable[str], engine: str) -> None:
        """A ValueError, naming what and the way out, unless this engine (named `engine`) has all of `asked`."""
        lacking = self.missing(asked)
        if lacking:
            raise ValueError(self.refusal(lacking, engine))

    @classmethod
    def refusal(cls, lacking: Sequence[str], engine: str) -> str:
        """The one wording of a refusal of the features `lacking` by the engine named `engine`, for
        every caller: auto takes nmt's engine only for what is asked for before the model loads (the
        CLI's flags, a model's decode settings), never for what a call or a server's request asks."""
        what = ", ".join(cls.NAMES[name] for name in lacking)
        return (
            f"{what}: the {engine} engine cannot; nmt's engine can "
            "(engine torch, which auto picks where this is asked for before the model loads)"
        )


# What each engine can do, known before one loads. A CTranslate2 export made before exports carried
# alignment.json gives no alignments: its engine says so (Capabilities with alignment False).
ENGINE_CAPABILITIES = {
    "torch": Capabilities(
        attention=True, alignment=True, sampling=True, constraints=True, transformers_stopping=True, mc_dropout=True
    ),
    "ctranslate2": Capabilities(alignment=True),
}


def engine_for(engine: str, asked: Iterable[str]) -> str:
    """The engine to load for a run that asks for the features `asked`: "auto" stays auto unless
    CTranslate2 lacks one (then nmt's engine, which has them all); a named engine that lacks one is a
    ValueError naming what (before any model loads or converts)."""
    asked = list(asked)
    if engine == "auto":
        return "torch" if ENGINE_CAPABILITIES["ctranslate2"].missing(asked) else "auto"
    ENGINE_CAPABILITIES[engine].require(asked, engine)
    return engine


@dataclass(frozen=True)
class EngineOptions:
    """How a model directory is run: by which engine, in which precision, where, on how many workers.

    engine: "torch" (nmt's own), "ctranslate2" (an exported directory, or an nmt one converted at
    load), or "auto" (the faster that can run the model here: nmt.inference.engine_choice; the
    command line's default). precision: fp32 | int8 | bf16 (None: on CPU the model's
    decode.precision, else fp32; bf16 for CTranslate2 on CUDA); a precision the device runs badly
    is refused (see nmt.inference.precision). workers / threads: parallel
    batches and intra-op threads each (None: chosen per call, see WorkerPolicy).
    worker_processes: nmt's engine runs the workers beyond the caller's as child processes (False:
    threads of this process, half the memory, a little slower). device: auto | cpu | cuda[:N].
    weights: a weights file instead of the directory's model.safetensors.
    shortlist: restrict greedy and beam search to the candidates of the model directory's lexical
    shortlist, where it has one (nmt.inference.shortlist); False scores the whole vocabulary.
    """

    RULES: ClassVar[dict[str, Rule]] = {
        "engine": one_of(*ENGINES),
        "precision": one_of(*PRECISIONS),
        "workers": at_least(1),
        "threads": at_least(1),
    }
    engine: str = "torch"
    precision: str | None = None
    workers: int | None = None
    threads: int | None = None
    worker_processes: bool = True
    device: str = "auto"
    weights: str | Path | None = None
    shortlist: bool = True

    def __post_init__(self) -> None:
        if self.device is not None and not isinstance(self.device, str):  # a torch.device
            object.__setattr__(self, "device", str(self.device))
        check_fields(self)


ENGINE_DEFAULTS = EngineOptions()


class Engine(Protocol):
    """What a Translator (and the server) needs of a search engine: TorchEngine, CTranslate2Engine."""

    name: str  # "torch", "ctranslate2"
    precision: str
    capabilities: Capabilities  # what it can do beyond translating (ENGINE_CAPABILITIES, or less)
    model: Transformer | None  # the PyTorch model, where the engine runs one (attention plots)
    # How nmt.alignment reads the attention score_ids gives for word alignments: the model's own
    # alignment head (ModelConfig.alignment_layer / alignment_heads), located in what this engine returns.
    alignment: AlignmentMethod

    @property
    def device(self) -> torch.device: ...

    @property
    def parameter_count(self) -> int | None:
        """The model's distinct parameters (None where the engine cannot say)."""

    def translate_ids(
        self, ids: Sequence[Sequence[int]], request: SearchRequest, groups: Sequence[Sequence[int]] | None = None
    ) -> list[list[Hypothesis]]:
        """n-best Hypotheses per source id list (BOS/EOS included), in input order; `groups` (indices
        into `ids`), each batched as if it were a call of its own (None: one group)."""

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
        """Each output's per-token log-probabilities (and, with need_attention, cross-attention: every
        layer where capabilities.attention, else the one alignments read) under teacher forcing; see
        nmt.decoding.forced. need_log_probs=False: the attention alone (token_log_probs empty).
        dropout_seed: the model's dropout kept on, its masks drawn from this seed (one pass of MC
        dropout; capabilities.mc_dropout, else a ValueError)."""

    def translate_constrained(
        self, ids: Sequence[int], constraints: Sequence[Sequence[int]], request: SearchRequest
    ) -> ConstrainedResult:
        """One sentence's n-best containing every constraint (target ids), nmt.decoding.constrained;
        a ValueError from an engine that cannot."""

    def autocast(self) -> contextlib.AbstractContextManager:
        """The context its PyTorch model runs in (bf16 autocast; a null context otherwise)."""

    def start(self, wait: bool = False) -> None:
        """Start background workers now, for a long-lived caller that will pay for them anyway;
        with `wait`, return once they are ready (benchmarks time the workers, not their start)."""

    def close(self) -> None:
        """Stop background workers (the engine still translates, in the caller's thread)."""
