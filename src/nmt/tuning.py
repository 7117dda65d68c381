"""Choosing decode settings on held-out data: beam search's length penalty, and the CPU precision.

Beam search ranks a finished hypothesis by log_prob / ((5 + length) / 6)^alpha (GNMT's penalty,
nmt.decoding.penalties). Wu et al.'s alpha 0.6 is every model's default, but how short a
model's beam output runs depends on the model: the 20-minute de→en model gave 0.875 of the
reference length on test at 0.6, and 36.05 instead of 33.38 BLEU at the alpha chosen on the
validation set (docs/results.md; the lengths: docs/benchmarks-log.md). So alpha is chosen per
model: translate a validation set with each candidate, keep the one with the best cased BLEU.
Never choose it on the test set, and do not take the gain for granted there: on the 20-minute
en→de model val's choice (2.0) gained 2.05 BLEU on val and lost 0.24 on test, whose output was
already longer at 0.6.

int8 runs a model's linear layers 1.5-5x faster on CPU (docs/results.md) at a cost in BLEU that
depends on the model: so it is measured too, on the same held-out set, and int8 becomes the
model's default only where it is faster here and within INT8_TOLERANCE BLEU of fp32. On a CPU with
AMX, bf16 is a third candidate under the same rule, and the fastest that keeps the BLEU wins.

`choose_decoding` does both, as `nmt train` does at the end of a run: a model then decodes with
settings chosen for itself rather than with those its config inherited from another run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .evaluation import Scores, score_translations, sentence_chrf
from .inference.choices import INT8_TOLERANCE, LENGTH_PENALTIES
from .inference.precision import cpu_flags
from .model_dir import write_decode_settings
from .quality import BINS, QualityCalibration, fit_calibration, sentence_score
from .search_settings import SearchRequest, check_length_penalty
from .translator import Translator

DEFAULT_ALPHAS = LENGTH_PENALTIES
WARM_UP = 32  # sentences translated before timing a precision

log = logging.getLogger(__name__)


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
    request: SearchRequest | None = None,
    pretokenized: bool = False,
) -> PenaltyTrial:
    """Translate `sources` with beam search under `alpha` and score it against `references`.
    request: the search, its length penalty replaced by `alpha` (None: the model's own)."""
    request = dataclasses.replace(request or translator.request(), length_penalty=alpha)
    hypotheses = translator.translate(list(sources), request, pretokenized=pretokenized)
    scores = score_translations(hypotheses, list(references), pretokenized=pretokenized)
    return PenaltyTrial(alpha, scores, length_ratio(hypotheses, references))


def try_length_penalties(
    translator: Translator,
    sources: Sequence[str],
    references: Sequence[str],
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    *,
    request: SearchRequest | None = None,
    pretokenized: bool = False,
) -> list[PenaltyTrial]:
    """`try_length_penalty` for each of `alphas`, in order."""
    check_alphas(alphas)
    return [
        try_length_penalty(translator, sources, references, a, request=request, pretokenized=pretokenized)
        for a in alphas
    ]


def best_trial(trials: Sequence[PenaltyTrial]) -> PenaltyTrial:
    """The trial with the highest cased BLEU (the earliest of equal ones)."""
    return max(trials, key=lambda t: t.scores.bleu)


def write_length_penalty(model_dir: str | Path, alpha: float) -> Path:
    """Make `alpha` the model directory's decode.length_penalty; returns the file written (its
    config.yaml, or an imported model's imported_from.json: see model_dir.write_decode_settings)."""
    return write_decode_settings(model_dir, length_penalty=alpha)


# --- int8 or fp32 -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrecisionTrial:
    """One precision's result on the held-out set."""

    precision: str
    scores: Scores
    seconds: float  # translating the set, the better of two runs, the model loaded and warm


def cpu_precisions() -> tuple[str, ...]:
    """The precisions worth trying on this CPU: fp32 and int8, and bf16 where the CPU has AMX
    (without AMX bf16 is slower than fp32, and nmt.inference.precision refuses it)."""
    return ("fp32", "int8", "bf16") if "amx_bf16" in cpu_flags() else ("fp32", "int8")


def try_precisions(
    model_dir: str | Path,
    sources: Sequence[str],
    references: Sequence[str],
    *,
    engine: str = "auto",
    request: SearchRequest | None = None,
    pretokenized: bool = False,
    target_lang: str | None = None,
    precisions: Sequence[str] | None = None,
    **case,
) -> list[PrecisionTrial]:
    """Translate `sources` on CPU in each precision (default `cpu_precisions()`: fp32, int8, and
    bf16 with AMX) with `request`'s search (None: the model's own), and score each.

    Timed as a long-lived translator runs: workers started and warmed on a few sentences first,
    then the better of two passes over the set (one pass moves by 10-15% on a shared machine).
    target_lang: a multi-target model's output language (its >>xx<< token); case: Translator.load's
    source_case and truecase.
    """
    trials = []
    for precision in precisions or cpu_precisions():
        translator = Translator.load(model_dir, engine=engine, precision=precision, device="cpu", **case)
        try:
            translator.start_workers(wait=True)
            options = dict(pretokenized=pretokenized, target_lang=target_lang)
            translator.translate(list(sources[:WARM_UP]), request, **options)
            seconds = float("inf")
            for _ in range(2):
                start = time.perf_counter()
                hypotheses = translator.translate(list(sources), request, **options)
                seconds = min(seconds, time.perf_counter() - start)
        finally:
            translator.close()
        scores = score_translations(hypotheses, list(references), pretokenized=pretokenized)
        trials.append(PrecisionTrial(precision, scores, seconds))
    return trials


def chosen_precision(trials: Sequence[PrecisionTrial], tolerance: float = INT8_TOLERANCE) -> str:
    """The fastest precision that beat fp32's time with a cased BLEU at most `tolerance` below
    fp32's (int8, or bf16 on an AMX CPU); fp32 where none did."""
    fp32 = next(t for t in trials if t.precision == "fp32")
    good = [
        t
        for t in trials
        if t.precision != "fp32" and t.seconds < fp32.seconds and t.scores.bleu >= fp32.scores.bleu - tolerance
    ]
    return min(good, key=lambda t: t.seconds).precision if good else "fp32"


def write_precision(model_dir: str | Path, precision: str) -> Path:
    """Make `precision` the model directory's decode.precision (fp32 is written as null: the default)."""
    return write_decode_settings(model_dir, precision=None if precision == "fp32" else precision)


# --- both, for a freshly trained model ---------------------------------------------------------------


@dataclass(frozen=True)
class DecodingChoice:
    """What `choose_decoding` chose for a model, with the figures it chose by."""

    penalties: list[PenaltyTrial]  # empty where the model searches greedily (no alpha to choose)
    precisions: list[PrecisionTrial]
    length_penalty: float | None  # None: not chosen (greedy)
    precision: str | None  # None: not chosen
    quality: QualityCalibration | None = None  # what its quality scores mean, fitted last

    def report(self, before: float | None, on: str) -> list[str]:
        """One line per choice, with the validation BLEU of each candidate (`before`: the alpha the
        config had; `on`: the set's name)."""
        lines = []
        if self.length_penalty is not None:
            tried = ", ".join(f"{t.alpha:g}: {t.scores.bleu:.2f}" for t in self.penalties)
            kept = "" if before is None or before == self.length_penalty else f" (was {before:g})"
            lines.append(f"length penalty: {self.length_penalty:g}{kept}; BLEU on {on} by alpha: {tried}")
        if self.precision is not None:
            measured = ", ".join(
                f"{t.precision} BLEU {t.scores.bleu:.2f} in {t.seconds:.2f} s" for t in self.precisions
            )
            lines.append(f"precision: {self.precision} on CPU ({measured} on {on})")
        if self.quality is not None:
            lines.append(f"quality scores: {self.quality.describe()}")
        return lines


@contextlib.contextmanager
def trials_quietly() -> Iterator[None]:
    """Hush what each translation logs about its own sentences (nmt.rare_numbers' count of numbers the
    model did not carry through): the trials translate the same held-out set again and again, so it
    would be said once per trial, about sentences the user never asked to translate."""
    logger = logging.getLogger("nmt.rare_numbers")
    before = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(before)


@trials_quietly()
def choose_decoding(
    model_dir: str | Path,
    sources: Sequence[str],
    references: Sequence[str],
    *,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    pretokenized: bool = False,
    precision: bool = True,
) -> DecodingChoice:
    """Choose the model directory's length penalty (where its search is a beam) and then, unless
    `precision` is False, its CPU precision (under that penalty) on a held-out set, and write both
    into its config."""
    check_alphas(alphas)
    penalties: list[PenaltyTrial] = []
    translator = Translator.load(model_dir, engine="auto")
    try:
        if translator.decode.beam > 1:
            for alpha in alphas:
                penalties.append(try_length_penalty(translator, sources, references, alpha, pretokenized=pretokenized))
                log.info("length penalty %g: BLEU %.2f on validation", alpha, penalties[-1].scores.bleu)
    finally:
        translator.close()
    alpha = best_trial(penalties).alpha if penalties else None
    if alpha is not None:
        write_length_penalty(model_dir, alpha)
    if not precision:
        return DecodingChoice(penalties, [], alpha, None, calibrated(model_dir, sources, references, pretokenized))
    precisions = try_precisions(model_dir, sources, references, pretokenized=pretokenized)
    chosen = chosen_precision(precisions)
    write_precision(model_dir, chosen)
    quality = calibrated(model_dir, sources, references, pretokenized)
    return DecodingChoice(penalties, precisions, alpha, chosen, quality)


def calibrated(
    model_dir: str | Path, sources: Sequence[str], references: Sequence[str], pretokenized: bool
) -> QualityCalibration | None:
    """The model's quality calibration on the held-out set, under the settings just chosen, written
    into its directory (None, and nothing written, on a set too small to fit one)."""
    if len(sources) < BINS:
        return None
    translator = Translator.load(model_dir, engine="auto")
    try:
        calibration = calibrate_quality(
            translator, sources, references, fitted_on="validation", pretokenized=pretokenized
        )
    finally:
        translator.close()
    calibration.save(model_dir)
    return calibration


def calibrate_quality(
    translator: Translator,
    sources: Sequence[str],
    references: Sequence[str],
    *,
    fitted_on: str,
    pretokenized: bool = False,
    passes: int = 1,
) -> QualityCalibration:
    """What `translator`'s quality scores mean on a set with references (nmt.quality): each
    translation's score (the mean of its word scores; over `passes` of MC dropout where more than
    one) against its sentence chrF."""
    found = translator.translate_detailed(list(sources), scores=True, pretokenized=pretokenized, qe_passes=passes)
    chrfs = sentence_chrf([best[0].text for best in found], list(references))
    scores = [sentence_score(best[0].word_scores or []) for best in found]
    return fit_calibration(scores, chrfs, fitted_on=fitted_on, passes=passes)
