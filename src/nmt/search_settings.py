"""The settings of one search, declared once: what a model's `decode` section sets as its defaults
and every translate call may replace.

    SearchSettings(beam=5, length_penalty=0.6)     # nmt.config.DecodeConfig and the per-call
                                                    # nmt.inference.plan.SearchRequest extend it

No torch at import: the CLI builds its options from these fields for `--help`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from .config_checks import Rule, at_least, one_of

# Far wider than useful (Vaswani et al. use 4): every step ranks 2 * beam candidates per sentence, so
# a typo like beam 1000 is refused at once instead of running slowly or failing deep in the search.
MAX_BEAM = 256
BEAM = Rule(lambda v: 1 <= v <= MAX_BEAM, f"between 1 and {MAX_BEAM}")
# Longer than any output the length limits allow (3 or 4 is usual), and within what every engine
# takes: CTranslate2 reads the size as a C size_t and fails on a larger number with a TypeError.
MAX_NGRAM = 1024
NGRAM = Rule(lambda v: 0 <= v <= MAX_NGRAM, f"between 0 and {MAX_NGRAM}")


@dataclass(frozen=True)
class SearchSettings:
    """How one search runs: the fields a model's `decode` section sets as its defaults and every call
    may replace (`Translator.request(beam=1)`, `nmt translate --beam 1`, the server's "beam"). The
    one declaration of their names, defaults and ranges: `DecodeConfig` and the per-call
    `nmt.inference.plan.SearchRequest` both extend it, so a new search option is a field here."""

    beam: int = 5  # beam size; 1 is greedy search
    length_penalty: float = 0.6  # GNMT alpha in ((5 + len) / 6)^alpha; 0 disables
    length_normalization: str = "gnmt"  # gnmt: the line above; average: len^alpha (transformers')
    early_stopping: bool = True  # beam search ends a sentence at `beam` finished; false: transformers' default
    no_repeat_ngram_size: int = 0  # n > 0: no output repeats an n-gram of itself (decoding.SearchLimits); 0: off

    RULES: ClassVar[dict[str, Rule]] = {
        "beam": BEAM,
        "length_penalty": at_least(0),
        "length_normalization": one_of("gnmt", "average"),
        "no_repeat_ngram_size": NGRAM,
    }

    def search_settings(self) -> dict[str, Any]:
        """This value's search settings by name (a DecodeConfig's, to build a SearchRequest from)."""
        return {name: getattr(self, name) for name in SEARCH_FIELDS}


SEARCH_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SearchSettings))
# The settings added after models were saved without them: an older config.yaml's decode section
# gets their defaults (nmt.config.ADDED_SINCE_SAVED).
ADDED_SINCE_SAVED: frozenset[str] = frozenset({"length_normalization", "early_stopping", "no_repeat_ngram_size"})
