"""A glossary's target terms as constraints of the beam search, for one model and engine.

A target term becomes the target ids the model writes it with mid-sentence (in its corpus's form
for a model of a tokenised corpus); its last piece may also be written merged with punctuation after
it ("▁dog" or "▁dog."), since a subword vocabulary often has the merged piece. The sentence is then
searched under the constraint that every term appears (nmt.decoding.constrained, the torch engine).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .decoding import Hypothesis
from .forced_scoring import ForcedScorer
from .inference.contract import Engine
from .search_settings import SearchRequest
from .text_form import TextForm
from .tokenizer import SubwordTokenizer

TRAILING_PUNCTUATION = ".,;:!?)\"'"


class TermSearch:
    """Constrained search for sentences whose source holds glossary terms."""

    def __init__(self, engine: Engine, tgt_tokenizer: SubwordTokenizer):
        self.engine, self.tgt_tokenizer = engine, tgt_tokenizer
        self._stems: dict[str, list[int]] | None = None  # built on first use: it reads the whole vocabulary

    def target_ids(self, term: str, text_form: TextForm | None = None) -> list[int]:
        """A target term as the target ids the model writes it with mid-sentence (in the corpus's
        form, for a model of a tokenised or lower-cased corpus: `text_form`)."""
        if text_form is not None:
            term = dataclasses.replace(text_form, src_lang=text_form.tgt_lang).to_corpus_form(term)
        return self.tgt_tokenizer.encode(term, add_special=False)

    def constraint(self, term: str, text_form: TextForm | None = None) -> list[int | frozenset[int]]:
        """The constraint a target term makes: its ids, the last of which may also be written merged
        with punctuation after it (any vocabulary piece that is that piece plus punctuation)."""
        ids = self.target_ids(term, text_form)
        if not ids:
            return []
        last = self.tgt_tokenizer.lookup([ids[-1]])[0]
        merged = self._pieces_by_stem().get(last, ())
        return [*ids[:-1], frozenset([ids[-1], *merged])]

    def search(
        self,
        src_ids: Sequence[int],
        terms: list[tuple[str, str]],
        request: SearchRequest,
        *,
        text_form: TextForm | None,
        attention_from: ForcedScorer | None = None,
    ) -> tuple[list[Hypothesis], list[str]]:
        """One sentence's n-best that use the target terms of `terms` ((source, target) matches), and
        the terms it could not place. With `attention_from`, the hypotheses' cross-attention from its
        teacher-forced pass (the constrained search keeps none)."""
        targets = list(dict.fromkeys(target for _, target in terms))
        constraints = [self.constraint(t, text_form) for t in targets]
        result = self.engine.translate_constrained(src_ids, constraints, request)
        if attention_from is not None:
            outputs = [h.tokens for h in result.hypotheses]
            forced = attention_from.forced([src_ids] * len(outputs), outputs, need_attention=True)
            for h, f in zip(result.hypotheses, forced, strict=True):
                h.attention = f.cross_attention
        return result.hypotheses, [targets[k] for k in result.missed]

    def search_each(
        self,
        ids: Sequence[Sequence[int]],
        terms: Sequence[list[tuple[str, str]]],
        request: SearchRequest,
        hyps: list[list[Hypothesis]],
        *,
        text_form: TextForm | None,
        scorer: ForcedScorer,
    ) -> dict[int, list[str]]:
        """Search each sentence i that has glossary matches terms[i] under them, into hyps[i]; the
        terms each could not place. Attention, where the request asks for it, comes from `scorer`'s
        teacher-forced pass."""
        if any(terms) and request.sampling is not None:
            raise ValueError("a glossary constrains beam search: it does not sample")
        search = dataclasses.replace(request, return_attention=False)  # attention: a forced pass after
        attention_from = scorer if request.return_attention else None
        missed: dict[int, list[str]] = {}
        for i, found in enumerate(terms):
            if found:
                hyps[i], missed[i] = self.search(
                    ids[i], found, search, text_form=text_form, attention_from=attention_from
                )
        return missed

    def _pieces_by_stem(self) -> dict[str, list[int]]:
        """piece -> ids of the pieces that are it plus trailing punctuation ("▁dog" -> ["▁dog.", ...])."""
        if self._stems is None:
            pieces = self.tgt_tokenizer.lookup(range(self.tgt_tokenizer.vocab_size))
            stems: dict[str, list[int]] = {}
            for i, piece in enumerate(pieces):
                stem = piece.rstrip(TRAILING_PUNCTUATION)
                if stem and stem != piece:
                    stems.setdefault(stem, []).append(i)
            self._stems = stems
        return self._stems
