"""What a quality score means for one model: a calibration fitted on held-out sentences.

A sentence's score is the mean of its words' scores (each word's mean piece log-probability:
Translation.word_scores), and raw scores are not comparable between models: a sure model scores
everything higher. So each model keeps, in `quality.json` beside its weights, what its scores meant
on a set with references:

    calibration = fit_calibration(scores, chrfs, fitted_on="multi30k:val:de-en")
    calibration.doubtful(-1.3)          # True: among the least sure fifth of that set
    calibration.expected_chrf(-0.4)     # the mean sentence chrF of that set's sentences scored alike
    calibration.save(model_dir); QualityCalibration.load(model_dir)

A sentence is doubtful below the score that flags a fifth of the set (a reviewer reads those first;
on one Multi30k model that fifth held two thirds of the worst tenth by chrF: docs/benchmarks-log.md); a word is
doubtful below ln 0.5, Bergamot's line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from .files import atomic_write_text

QUALITY_FILE = "quality.json"
FLAGGED_SHARE = 0.2  # the share of the fitting set a sentence flag marks
WORD_THRESHOLD = math.log(0.5)  # a word its model gave less than even odds, on average over its pieces
BINS = 10  # the expected chrF: one mean per tenth of the fitting set, by score


def sentence_score(word_scores: Sequence[float]) -> float:
    """A sentence's score: the mean of its words' (0.0, certain, for an empty translation)."""
    return sum(word_scores) / len(word_scores) if word_scores else 0.0


class Scored(Protocol):
    """What a quality score is read from: a Translation (nmt.translation) scored or not."""

    word_scores: list[float] | None
    doubtful: bool | None


def combined_quality(found: Sequence[Scored]) -> tuple[float | None, bool | None]:
    """The quality of a text made of several translations (its sentences, or a long sentence's
    pieces): the score of the least sure, and whether any is doubtful (None where the model has no
    calibration). Translations without word scores (a memory's) are left out; (None, None) where
    none has them."""
    scored = [t for t in found if t.word_scores is not None]
    if not scored:
        return None, None
    flags = [t.doubtful for t in scored]
    return min(sentence_score(t.word_scores) for t in scored), None if None in flags else any(flags)


@dataclass(frozen=True)
class QualityCalibration:
    """What a model's sentence scores meant on a set with references (see the module's docstring)."""

    threshold: float  # sentence scores below this are doubtful
    bin_edges: list[float]  # BINS - 1 ascending scores that cut the fitting set into tenths
    bin_chrf: list[float]  # each tenth's mean sentence chrF, from the least sure up
    caught: float  # the share of the set's worst tenth by chrF that the flag marks
    sentences: int
    fitted_on: str
    word_threshold: float = WORD_THRESHOLD
    passes: int = 1  # the scores fitted were MC dropout's over this many passes (1: one pass, no dropout)

    def doubtful(self, score: float) -> bool:
        return score < self.threshold

    def flag(self, score: float, passes: int = 1) -> bool | None:
        """Whether a sentence scored `score` over `passes` is doubtful; None where this calibration
        was fitted on scores of another number of passes (dropout lowers them: not comparable)."""
        return self.doubtful(score) if passes == self.passes else None

    def expected_chrf(self, score: float) -> float:
        """The mean sentence chrF of the fitting set's sentences in the score's tenth."""
        return self.bin_chrf[sum(score >= edge for edge in self.bin_edges)]

    def describe(self) -> str:
        scored = f", MC dropout over {self.passes} passes" if self.passes > 1 else ""
        return (
            f"fitted on {self.fitted_on} ({self.sentences} sentences{scored}): "
            f"below {self.threshold:.3f} a sentence is doubtful "
            f"(a fifth of that set, holding {self.caught:.0%} of its worst tenth by chrF); "
            f"expected chrF {self.bin_chrf[0]:.1f} for the least sure tenth, {self.bin_chrf[-1]:.1f} for the surest"
        )

    def save(self, model_dir: str | Path) -> Path:
        path = Path(model_dir) / QUALITY_FILE
        atomic_write_text(path, json.dumps(asdict(self), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, model_dir: str | Path) -> QualityCalibration | None:
        """The model directory's calibration; None where it has none. A file that is not one is a
        ValueError naming it."""
        path = Path(model_dir) / QUALITY_FILE
        if not path.is_file():
            return None
        try:
            return cls(**json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError) as err:
            raise ValueError(f"{path}: not a quality calibration ({err}); `nmt calibrate` writes it again") from None


def fit_calibration(
    scores: Sequence[float], chrfs: Sequence[float], *, fitted_on: str, passes: int = 1
) -> QualityCalibration:
    """The calibration of sentence `scores` (of `passes` MC dropout passes, 1: none) against their
    sentence `chrfs` (one each, at least BINS)."""
    if len(scores) != len(chrfs) or len(scores) < BINS:
        raise ValueError(f"need one chrF per score and at least {BINS} sentences, got {len(scores)} and {len(chrfs)}")
    order = sorted(range(len(scores)), key=lambda i: scores[i])  # least sure first
    n = len(order)
    flagged = max(1, round(n * FLAGGED_SHARE))
    # halfway between the last flagged score and the next: the flag marks that fifth of the set
    threshold = (scores[order[flagged - 1]] + scores[order[flagged]]) / 2 if flagged < n else math.inf
    cuts = [round(n * k / BINS) for k in range(BINS + 1)]
    bin_chrf = [sum(chrfs[i] for i in order[a:b]) / (b - a) for a, b in zip(cuts, cuts[1:], strict=False)]
    bin_edges = [scores[order[c]] for c in cuts[1:-1]]
    tenth = max(1, n // 10)
    worst = set(sorted(range(n), key=lambda i: chrfs[i])[:tenth])
    caught = sum(1 for i in worst if scores[i] < threshold) / tenth
    return QualityCalibration(threshold, bin_edges, bin_chrf, caught, n, fitted_on, passes=passes)
