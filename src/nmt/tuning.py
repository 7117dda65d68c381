"""Choosing beam search's length penalty on held-out data.

Beam search ranks a finished hypothesis by log_prob / ((5 + length) / 6)^alpha (GNMT's penalty,
nmt.decoding.penalties). Wu et al.'s alpha 0.6 is every model's default, but how short a
model's beam output runs depends on the model: the 20-minute de→en model gave 0.875 of the
reference length on test at 0.6, and 36.05 instead of 33.38 BLEU at the alpha chosen on the
validation set (docs/results.md). So alpha is chosen per model: translate a validation set
with each candidate, keep the one with the best cased BLEU. Never choose it on the test set, and
do not take the gain for granted there: on the 20-minute en→de model val's choice (2.0) gained
2.05 BLEU on val and lost 0.24 on test, whose output was already longer at 0.6.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .config import ExperimentConfig
from .evaluation import Scores, score_translations
from .inference.choices import LENGTH_PENALTIES
from .inference.plan import check_length_penalty
from .model_dir import RUN_CONFIG, read_run_config
from .translator import Translator

DEFAULT_ALPHAS = LENGTH_PENALTIES


@dataclass(frozen=True)
class PenaltyTrial:
    """One alpha's result on the held-out set."""

    alpha: float
    scores: Scores
    length_ratio: float  # hypothesis words / reference words, over the whole set


def length_ratio(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Whitespace words of all hypotheses over those of all references."""
    return sum(len(h.split()) for h in hypotheses) / max(1, sum(len(r.split()) for r in references))


def check_alphas(alphas: Sequence[float]) -> None:
    """ValueError unless `alphas` holds one or more GNMT alphas (see `check_length_penalty`)."""
    if not alphas:
        raise ValueError("alphas must be one or more numbers >= 0, got none")
    for alpha in alphas:
        check_length_penalty(alpha)


def try_length_penalty(
    translator: Translator,
    sources: Sequence[str],
    references: Sequence[str],
    alpha: float,
    *,
    beam: int | None = None,
    pretokenized: bool = False,
) -> PenaltyTrial:
    """Translate `sources` with beam search under `alpha` and score it against `references`."""
    hypotheses = translator.translate(list(sources), beam=beam, length_penalty=alpha, pretokenized=pretokenized)
    scores = score_translations(hypotheses, list(references), pretokenized=pretokenized)
    return PenaltyTrial(alpha, scores, length_ratio(hypotheses, references))


def try_length_penalties(
    translator: Translator,
    sources: Sequence[str],
    references: Sequence[str],
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    *,
    beam: int | None = None,
    pretokenized: bool = False,
) -> list[PenaltyTrial]:
    """`try_length_penalty` for each of `alphas`, in order."""
    check_alphas(alphas)
    return [
        try_length_penalty(translator, sources, references, a, beam=beam, pretokenized=pretokenized) for a in alphas
    ]


def best_trial(trials: Sequence[PenaltyTrial]) -> PenaltyTrial:
    """The trial with the highest cased BLEU (the earliest of equal ones)."""
    return max(trials, key=lambda t: t.scores.bleu)


def write_length_penalty(model_dir: str | Path, alpha: float) -> Path:
    """Make `alpha` the model directory's decode.length_penalty (in its config.yaml); returns the file.

    A directory without a config.yaml gets one with the library's defaults and this alpha, which
    is what it decoded with before, apart from the alpha.
    """
    config = read_run_config(model_dir) or ExperimentConfig()
    config.decode.length_penalty = alpha
    path = Path(model_dir) / RUN_CONFIG
    config.save(path)
    return path
