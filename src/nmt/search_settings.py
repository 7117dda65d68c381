"""The settings of one search, declared once: what a model's `decode` section sets as its defaults,
what every translate call may replace, and what each edge shows of them.

    SearchSettings(beam=5, length_penalty=0.6)      # nmt.config.DecodeConfig extends it
    SearchRequest.of(decode, beam=1, n_best=1)      # one call's request: defaults + overrides

Each field of SearchSettings carries what the edges need (`search_field`): its command-line help,
whether nmt's JSON API takes it per request, and its name in transformers' generation_config.json.
The CLI's search flags, the JSON API's request fields and the reports (`nmt evaluate --json`,
`nmt info`, `/health`, the Hugging Face export) are all made from this list, so a new search option
is one field here and one rule where the search applies it.

No torch at import: the CLI builds its options from these fields for `--help`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from .config_checks import ConfigError, Rule, at_least, between, check_fields, one_of

# Far wider than useful (Vaswani et al. use 4): every step ranks 2 * beam candidates per sentence, so
# a typo like beam 1000 is refused at once instead of running slowly or failing deep in the search.
MAX_BEAM = 256
BEAM = between(1, MAX_BEAM)
# Longer than any output the length limits allow (3 or 4 is usual), and within what every engine
# takes: CTranslate2 reads the size as a C size_t and fails on a larger number with a TypeError.
MAX_NGRAM = 1024
NGRAM = between(0, MAX_NGRAM)
# How beam search ranks finished hypotheses: GNMT's ((5 + len) / 6)^alpha, or len^alpha (transformers').
LENGTH_NORMALIZATIONS = ("gnmt", "average")


def search_field(
    default: Any,
    help: str,
    *,
    metavar: str | None = None,
    choices: tuple[str, ...] | None = None,
    api: bool = False,
    transformers: str | None = None,
    beam_only: bool = False,
) -> Any:
    """A SearchSettings field with what each edge shows of it: `help` for its command-line flag
    (`--beam` for `beam`), `api` whether nmt's JSON API takes it per request, `transformers` its
    name in a Hugging Face generation_config.json (None: transformers has no such setting), and
    `beam_only` whether it is a setting of beam search alone (else every search applies it)."""
    meta = {"help": help, "metavar": metavar, "choices": choices, "api": api, "transformers": transformers}
    meta["beam_only"] = beam_only
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class SearchSettings:
    """How one search runs: the fields a model's `decode` section sets as its defaults and every call
    may replace (`Translator.request(beam=1)`, `nmt translate --beam 1`, the server's "beam"). The
    one declaration of their names, defaults, ranges and flags: `DecodeConfig` and the per-call
    `SearchRequest` both extend it, so a new search option is a field here."""

    beam: int = search_field(
        5,
        "beam size (default: the model's decode.beam; 1 = greedy)",
        api=True,
        transformers="num_beams",
        beam_only=True,
    )
    length_penalty: float = search_field(
        0.6,
        "GNMT length penalty alpha for beam search: a finished hypothesis scores log-prob / "
        "((5 + length) / 6)^alpha; 0 ranks by log-prob, larger favours longer output (default: the "
        "model's decode.length_penalty; choose it on a validation set with `nmt tune-length-penalty`)",
        metavar="ALPHA",
        transformers="length_penalty",
        beam_only=True,
    )
    length_normalization: str = search_field(
        "gnmt",
        "how beam search ranks finished hypotheses: gnmt, log-prob / ((5 + length) / 6)^alpha, or "
        "average, log-prob / length^alpha (transformers'; an imported Marian model's default) "
        "(default: the model's decode.length_normalization)",
        choices=LENGTH_NORMALIZATIONS,
        beam_only=True,
    )
    early_stopping: bool = search_field(
        True,
        "beam search ends a sentence once `beam` hypotheses have finished (fairseq, CTranslate2, "
        "Marian); --no-early-stopping: transformers' default rule, which goes on while a live beam could "
        "still win, on nmt's engine only (--engine auto takes it; default: the model's decode.early_stopping)",
        transformers="early_stopping",
        beam_only=True,
    )
    no_repeat_ngram_size: int = search_field(
        0,
        "no output repeats an n-gram of itself: a token that would is never chosen, in every search "
        "of both engines (fairseq's --no-repeat-ngram-size, CTranslate2's rule); 0: off (default: the "
        "model's decode.no_repeat_ngram_size, 0)",
        metavar="N",
        api=True,
        transformers="no_repeat_ngram_size",
    )
    protect_numbers: bool = search_field(
        True,
        "a rare number (one the source tokenizer cuts into pieces, or of more than 4 digits: 1045, "
        "2026-12-02, 3,14) is swapped for a number the model knows while it translates, then written back "
        "exactly where the model wrote that one. A sentence with one is searched twice (as it is, and with "
        "stand-ins); where the model lost a stand-in, the first translation is kept, with the model's own "
        "numbers (the log counts them; docs/real-text.md). --no-protect-numbers: the model reads every number "
        "(default: the model's decode.protect_numbers, true)",
        api=True,
    )

    RULES: ClassVar[dict[str, Rule]] = {
        "beam": BEAM,
        "length_penalty": at_least(0),
        "length_normalization": one_of(*LENGTH_NORMALIZATIONS),
        "no_repeat_ngram_size": NGRAM,
    }

    def search_settings(self) -> dict[str, Any]:
        """This value's search settings by name (a DecodeConfig's, to build a SearchRequest from, or
        to report)."""
        return {name: getattr(self, name) for name in SEARCH_FIELDS}


SEARCH_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SearchSettings))
# What each edge reads of a field: name -> its search_field metadata (help, api, transformers, ...).
SEARCH_FIELD_INFO: dict[str, dict[str, Any]] = {
    f.name: {**f.metadata, "type": f.type, "default": f.default} for f in dataclasses.fields(SearchSettings)
}
# The settings nmt's JSON API takes per request (the others are each model's own).
API_SEARCH_FIELDS: tuple[str, ...] = tuple(name for name in SEARCH_FIELDS if SEARCH_FIELD_INFO[name]["api"])
# The settings added after models were saved without them: an older config.yaml's decode section
# gets their defaults (nmt.config.ADDED_SINCE_SAVED).
ADDED_SINCE_SAVED: frozenset[str] = frozenset(
    {"length_normalization", "early_stopping", "no_repeat_ngram_size", "protect_numbers"}
)


def describe_search(settings: SearchSettings) -> str:
    """The settings in one line, each by its config name (`nmt info`): "beam 5, length_penalty 0.6, ..."."""

    def shown(value: Any) -> str:
        return (
            str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value)
        )

    return ", ".join(f"{name} {shown(value)}" for name, value in settings.search_settings().items())


@dataclass(frozen=True)
class Sampling:
    """Draw each translation at random from the model instead of searching for the best one.

    For back-translation and data augmentation, where varied outputs help more than the
    single most likely one. temperature > 1 flattens the distribution, < 1 sharpens it;
    top_k > 0 draws only among the k most likely tokens. With a seed, the same inputs
    (in the same batches) give the same draws.
    """

    RULES: ClassVar[dict[str, Rule]] = {
        "temperature": Rule(lambda v: v > 0, "> 0"),
        "top_k": Rule(lambda v: v >= 0, ">= 0 (0 keeps every token)"),
        "seed": Rule(lambda v: 0 <= v < 2**63, "in [0, 2**63)"),  # what a torch generator takes
    }
    temperature: float = 1.0
    top_k: int = 0
    seed: int | None = None

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class SearchRequest(SearchSettings):
    """What one translate call asks of an engine: the search settings (SearchSettings: their
    declaration, defaults and ranges), how many results and what with them.

    Built once where a call enters (`Translator.request`, from the model's decode section and the
    call's overrides), then passed down unchanged: it is also what the server's batching queue
    groups calls by. Built bare, a request is greedy (beam 1).
    """

    beam: int = 1
    n_best: int = 1
    return_attention: bool = False
    sampling: Sampling | None = None  # set: one random draw per sentence instead of a search

    RULES: ClassVar[dict[str, Rule]] = {**SearchSettings.RULES, "n_best": at_least(1)}

    def __post_init__(self) -> None:
        check_fields(self)
        if self.sampling is not None and (self.beam != 1 or self.n_best != 1):
            raise ConfigError(
                f"sampling draws one translation per sentence: it takes no beam ({self.beam}) or n_best ({self.n_best})"
            )
        if self.n_best > self.beam:
            raise ConfigError(f"need 1 <= n_best ({self.n_best}) <= beam ({self.beam})")

    @classmethod
    def of(cls, defaults: SearchSettings, **settings: Any) -> SearchRequest:
        """A call's request: `defaults` (a model's decode section), each replaced by the keyword of
        its name that is not None. A draw (`sampling`) is one translation: no default beam."""
        given = {k: v for k, v in settings.items() if v is not None}
        resolved = defaults.search_settings()
        if given.get("sampling") is not None:
            resolved["beam"] = 1
        return cls(**{**resolved, **given})


def check_length_penalty(alpha: float) -> None:
    """GNMT's alpha checked before a whole request exists (ConfigError naming `length_penalty`)."""
    SearchRequest(length_penalty=alpha)


def check_beam(beam: int) -> None:
    """A beam size checked before a whole request exists (ConfigError naming `beam`)."""
    SearchRequest(beam=beam)
