"""Text in, text out: tokenizer + a search engine, batched by length.

    translator = Translator.load("runs/de_en")
    translator.translate(["Ein Mann fährt Fahrrad."], beam=5)   # -> ["A man rides a bike."]
    Translator.load("runs/de_en", precision="int8", workers=2)       # int8 linear layers, 2 parallel batches
    Translator.load("runs/de_en.ct2", engine="ctranslate2")          # the same model run by CTranslate2

The engine turns source ids into hypotheses: nmt's own (`nmt.inference.torch_engine`) or
CTranslate2 (`nmt.inference.ctranslate2_engine`), behind one protocol (`nmt.inference.contract.Engine`).
Tokenisation, truncation, the request (checked by `SearchRequest`, and against the model's
vocabulary and the engine's abilities here) and the text of the result are the Translator's, the
same for both.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
from collections.abc import Sequence
from pathlib import Path

import torch

from .alignment import AlignmentMethod
from .config import DecodeConfig
from .decoding import Hypothesis
from .directions import Directions
from .forced_scoring import ForcedScorer
from .glossary import Glossary
from .inference.batch_search import search_limits
from .inference.contract import Engine, EngineOptions
from .inference.loading import engine_for_model, load_engine, merge_options
from .inference.plan import distinct_sources
from .model import Transformer
from .model_dir import read_decode_config, read_directions, read_languages, read_text_form
from .quality import QualityCalibration
from .rare_numbers import NumberStandIns, piece_count, translate_keeping_numbers
from .search_settings import Sampling, SearchRequest
from .term_search import TermSearch
from .text_form import TextForm
from .tokenizer import LANGUAGE_CODE, SubwordTokenizer
from .translation import Translation, add_details, capitals_by_alignment, check_details, translations_of

log = logging.getLogger(__name__)

DEFAULT_MAX_SOURCE_TOKENS = 256  # longer inputs are truncated (with a warning) to bound memory and time

__all__ = ["Translator", "Translation", "Sampling", "EngineOptions", "DEFAULT_MAX_SOURCE_TOKENS"]


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
        options: EngineOptions | None = None,
        text_form: TextForm | None = None,
        source_lang: str | None = None,
        output_lang: str | None = None,
        directions: Sequence[tuple[str, str]] = (),
        **engine_options,
    ):
        """model: a Transformer, run by nmt's own engine with the precision, workers, threads and
        worker_processes of `options` (or of keywords: `precision="int8"`); or an engine.
        text_form: the model's corpus was tokenised and/or lower-cased (see nmt.text_form): what
        users type is put into that form, and the output read back as running text.
        source_lang: the language it translates from (sentence splitting of documents needs it);
        output_lang: the one language a single-target model writes (a target_lang naming it is taken);
        directions: the (source, target) pairs it was trained for, where known: a source language
        chosen with choose_source_language must make one of them with the target."""
        self.decode = decode or DecodeConfig()
        if isinstance(model, Transformer):
            model = engine_for_model(model, self.decode, merge_options(options, engine_options))
        elif options is not None or engine_options:
            raise TypeError("an engine comes with its options: give EngineOptions with a Transformer, or to load()")
        self.engine: Engine = model
        self.src_tokenizer, self.tgt_tokenizer = src_tokenizer, tgt_tokenizer
        self.max_source_tokens = max_source_tokens
        self.target_lang: str | None = None  # a multi-target model's output language (choose_target_language)
        self.text_form = text_form
        self.source_lang = source_lang  # documents are split into its sentences; choose_source_language
        # what the model says it reads and writes (the source language may be chosen later)
        self.directions = Directions(
            tuple(directions), tuple(src_tokenizer.target_languages), source=source_lang, output=output_lang
        )
        self.glossary: Glossary | None = None  # used by every call that names none (nmt serve --glossary)
        self.quality: QualityCalibration | None = None  # what its scores mean (nmt calibrate; Translator.load)
        self.terms = TermSearch(self.engine, tgt_tokenizer)  # a glossary's constrained search

    @property
    def model(self) -> Transformer:
        """The Transformer of nmt's own engine (attention plots). In bf16 its linear weights are
        bf16: run it under `translator.engine.autocast()`."""
        if self.engine.model is None:
            raise ValueError(f"the {self.engine.name} engine has no PyTorch model: use engine='torch'")
        return self.engine.model

    @property
    def parameter_count(self) -> int | None:
        """The model's distinct parameters (None where the engine does not say)."""
        return self.engine.parameter_count

    @property
    def device(self) -> torch.device:
        return self.engine.device

    def start_workers(self, wait: bool = False) -> None:
        """Start the engine's background workers now, for a long-lived translator such as the
        server's (see nmt.inference.plan.WorkerPolicy); with `wait`, return once they are ready."""
        self.engine.start(wait)

    def close(self) -> None:
        """Stop the engine's background workers (the translator still works, in this thread)."""
        self.engine.close()

    @classmethod
    def load(
        cls,
        model_dir: str | Path,
        options: EngineOptions | None = None,
        *,
        source_case: bool = True,
        truecase: bool = True,
        **settings,
    ) -> Translator:
        """Everything from the model directory: config, tokenizers, weights (model.safetensors by default).

        options: how to run it (see EngineOptions: engine, precision, workers, threads,
        worker_processes, device, weights); or give them as keywords, e.g. `precision="int8"`.
        Any other keyword replaces a field of the directory's decode section (nmt.config.DecodeConfig)
        for every call: the search settings a call may also name (`beam`, `length_penalty`, ...: see
        nmt.search_settings), `min_len`, `max_len_a`, `max_len_b`, `batch_tokens`; None keeps the
        directory's. Choose a length penalty with `nmt tune-length-penalty`.
        source_case, truecase: for a model of a lower-cased corpus (ted_hrlr), whether its output
        takes the source's capitals through the word alignment, and the directory's truecaser
        (nmt.text_form, nmt.truecaser); both by default.
        """
        engine_fields = {f.name for f in dataclasses.fields(EngineOptions)}
        engine_options = {k: v for k, v in settings.items() if k in engine_fields}
        replaced = {k: v for k, v in settings.items() if k not in engine_fields and v is not None}
        options = merge_options(options, engine_options)
        if not (model_dir := Path(model_dir)).is_dir():
            raise FileNotFoundError(f"model directory {model_dir} does not exist")
        decode = read_decode_config(model_dir)
        if unknown := sorted(set(replaced) - {f.name for f in dataclasses.fields(DecodeConfig)}):
            raise TypeError(f"Translator.load() got unexpected keyword arguments: {', '.join(unknown)}")
        # before the weights load, which takes a while: replace() checks the values (ConfigError)
        decode = dataclasses.replace(decode, **replaced)
        engine, src_tokenizer, tgt_tokenizer = load_engine(model_dir, options, decode)
        languages = read_languages(model_dir)
        translator = cls(
            engine,
            src_tokenizer,
            tgt_tokenizer,
            decode=decode,
            text_form=read_text_form(model_dir, truecaser=truecase, case_from_source=source_case),
            source_lang=languages[0],
            output_lang=languages[1],
            directions=read_directions(model_dir),
        )
        translator.quality = QualityCalibration.load(model_dir)
        return translator

    # --- the simple API ----------------------------------------------------------------------
    def translate(
        self,
        texts: Sequence[str],
        request: SearchRequest | None = None,
        *,
        target_lang: str | None = None,
        pretokenized: bool = False,
        **settings,
    ) -> list[str]:
        """One translation per input sentence, in order. An empty sentence gives ''.

        request: the search (see `request`); or name its settings as keywords, which replace the
        model's own for this call: `beam=1` (greedy), `length_penalty=1.0`, `sampling=Sampling(...)`
        (draw at random instead).
        target_lang: a multi-target model's output language for this call (else the chosen one); a
        single-target model takes its own language here, or none;
        pretokenized: the texts are in the form of a tokenised corpus already (its test set), and the
        output stays in it (see `text_form`); else they are running text, put into that form here.
        """
        found = self.translate_detailed(texts, request, target_lang=target_lang, pretokenized=pretokenized, **settings)
        return [best[0].text for best in found]

    def translate_detailed(
        self,
        texts: Sequence[str],
        request: SearchRequest | None = None,
        *,
        target_lang: str | None = None,
        pretokenized: bool = False,
        scores: bool = False,
        alignments: bool = False,
        glossary: Glossary | None = None,
        qe_passes: int = 1,
        qe_seed: int = 0,
        **settings,
    ) -> list[list[Translation]]:
        """n-best Translations per sentence (best first), optionally with cross-attention.

        request, settings: the search, as in `translate` (`n_best=3`, `return_attention=True`, ...).
        target_lang: a multi-target model's output language for this call (default: the one chosen
        with choose_target_language); a ConfigError naming the valid ones for one it lacks (a
        single-target model takes its own language, or none).
        pretokenized: as in `translate`.
        scores: fill each Translation's token_probs and confidence; alignments: its word alignment
        (one teacher-forced pass over the results: nmt.decoding.forced).
        glossary: the sentences where its source terms occur are searched one by one under the
        constraint that their target terms appear (nmt.decoding.constrained; the torch engine);
        glossary_missed lists any that could not be placed.
        qe_passes: with scores, the word scores (and the sentence's, their mean) averaged over this
        many teacher-forced passes with the model's dropout on, drawn from qe_seed on (MC dropout;
        nmt's engine); 1: the one pass without dropout.
        request.protect_numbers (on by default): the model reads a stand-in for each rare number, and
        the number is written back into the text (nmt.rare_numbers); pieces, tokens and src_pieces
        stay those of the stand-ins."""
        if isinstance(texts, str):  # a str is a sequence too: of one-character "sentences"
            raise TypeError("texts must be a list of sentences, not one str: translate([text])")
        request = self.request_of(request, settings)
        check_details(self.scorer, scores=scores, alignments=alignments, passes=qe_passes)
        if target_lang is not None:
            self.directions.check_into(target_lang, self.source_lang)
        options = dict(target_lang=target_lang, pretokenized=pretokenized, scores=scores, alignments=alignments)
        options |= dict(glossary=self.glossary if glossary is None else glossary, qe_passes=qe_passes, qe_seed=qe_seed)
        options["request"] = dataclasses.replace(request, protect_numbers=False)  # translate_keeping_numbers' part
        search = functools.partial(self._translated, **options)
        if scores or alignments or capitals_by_alignment(None if pretokenized else self.text_form):
            # A teacher-forced pass follows the search; its batches would mix the groups (the
            # stand-in sentences with the others): one call for each group, as if alone.
            search = lambda groups, together=search: [together([group])[0] for group in groups]  # noqa: E731
        if not request.protect_numbers:
            return search([list(texts)])[0]
        return translate_keeping_numbers(list(texts), search, self.number_stand_ins, options["glossary"])

    @functools.cached_property
    def number_stand_ins(self) -> NumberStandIns:
        """Which numbers this model's tokenizers cut (rare: kept exactly, nmt.rare_numbers)."""
        return NumberStandIns(piece_count(self.src_tokenizer), piece_count(self.tgt_tokenizer))

    def _translated(
        self,
        groups: list[list[str]],
        request: SearchRequest,
        *,
        target_lang: str | None,
        pretokenized: bool,
        scores: bool,
        alignments: bool,
        glossary: Glossary | None,
        qe_passes: int,
        qe_seed: int,
    ) -> list[list[list[Translation]]]:
        """translate_detailed's n-best lists for each group of texts, its arguments checked and its
        numbers as they are: the groups searched in one engine call, each batched as if alone (the
        details after the search are one pass over them all)."""
        form = None if pretokenized else self.text_form
        texts = [text for group in groups for text in group]
        starts = list(itertools.accumulate((len(g) for g in groups), initial=0))
        typed = list(texts)
        if form is not None:
            texts = [form.to_corpus_form(t) for t in texts]
        encoded = [self.encode_source(t, target_lang) for t in texts]
        ids = [e[0] for e in encoded]
        terms = [glossary.matches(t) for t in texts] if glossary is not None else [[] for _ in texts]
        # Alignments without scores read the search's own attention where the engine records it: a
        # few percent more search, rather than a second pass that encodes every sentence again.
        asked_attention = request.return_attention
        align_in_search = alignments and not scores and self.engine.capabilities.attention and not any(terms)
        if align_in_search:
            request = dataclasses.replace(request, return_attention=True)
        hyps, missed = self._search(ids, terms, request, [range(a, b) for a, b in itertools.pairwise(starts)])
        tokenizers = (self.src_tokenizer if request.return_attention else None), self.tgt_tokenizer
        out = translations_of(hyps, encoded, texts, *tokenizers, missed)
        has_text = [bool(t.strip()) for t in texts]
        case_aligns = self.engine.capabilities.alignment and not self.target_languages
        details = dict(scores=scores, alignments=alignments, in_search=align_in_search, keep_attention=asked_attention)
        details |= dict(passes=qe_passes, seed=qe_seed)
        add_details(out, ids, has_text, typed, terms, form, self.scorer, self.quality, case_aligns, **details)
        return [out[a:b] for a, b in itertools.pairwise(starts)]

    def _search(
        self,
        ids: list[list[int]],
        terms: list[list[tuple[str, str]]],
        request: SearchRequest,
        groups: list[range],
    ) -> tuple[list[list[Hypothesis]], dict[int, list[str]]]:
        """The n-best of every sentence: those without glossary terms in one engine call, each
        group (a range of `ids`) batched as if alone and each distinct sentence of a group once
        (plan.distinct_sources), each with terms by the constrained search; and the terms each of
        those could not place."""
        distinct: list[list[int]] = []
        searched_as: dict[int, int] = {}  # a sentence -> its place in `distinct`
        apart: list[range] = []
        for group in groups:
            free = [i for i in group if not terms[i]]
            places, group_distinct = distinct_sources([ids[i] for i in free], request)
            searched_as |= {i: len(distinct) + j for i, j in zip(free, places, strict=True)}
            apart.append(range(len(distinct), len(distinct) + len(group_distinct)))
            distinct += group_distinct
        if len(apart) == 1:
            found = self.engine.translate_ids(distinct, request)
        else:
            found = self.engine.translate_ids(distinct, request, apart)
        hyps: list[list[Hypothesis]] = [[] for _ in ids]
        for i, j in searched_as.items():
            hyps[i] = list(found[j])
        missed = self.terms.search_each(ids, terms, request, hyps, text_form=self.text_form, scorer=self.scorer)
        return hyps, missed

    @property
    def scorer(self) -> ForcedScorer:
        """Teacher-forced passes over given outputs (token probabilities, word alignments)."""
        return ForcedScorer(self.engine, self.src_tokenizer, self.tgt_tokenizer, search_limits(self.decode))

    def align(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        method: AlignmentMethod | None = None,
        *,
        pretokenized: bool = False,
    ) -> list[list[tuple[int, int]]]:
        """Word alignments of given sentence pairs (a target need not be the model's own output): the
        model reads each pair as in training, and each target piece is aligned by its cross-attention.
        Word indices are over the whitespace-separated words of each source and target as given; for
        a model of a tokenised corpus (text_form), over the words of each in the corpus's form, into
        which typed text is put first (unless `pretokenized`: it is in that form already)."""
        self.scorer.check_aligns(method)
        if self.text_form is not None and not pretokenized:
            targets = [self.text_form.target_to_corpus_form(t) for t in targets]
        src_ids = [self.encode_source(self.model_input(s, pretokenized=pretokenized))[0] for s in sources]
        tgt_ids = [self.tgt_tokenizer.encode(t, add_special=False) for t in targets]
        return self.scorer.align(src_ids, tgt_ids, method)

    # --- languages (nmt.directions: what the model reads and writes) ---------------------------
    @property
    def target_languages(self) -> list[str]:
        """The languages a multi-target model translates into; empty for a model with one target."""
        return list(self.directions.targets)

    def choose_target_language(self, language: str | None) -> None:
        """Translate into `language` from now on: its >>xx<< token starts every source sentence.

        A ConfigError (key target_lang) names the valid languages for none or one this model lacks,
        on a multi-target model; a model with a single target takes only that one (or none).
        """
        self.directions.check_into(language, self.source_lang)
        self.target_lang = language

    def choose_source_language(self, language: str) -> None:
        """Translate from `language` from now on: documents, pages and --format text are split into
        its sentences. Where the model's sources are known (its trained directions, or an imported
        model's one source language), one it was not trained on, or a pairing with the chosen target
        it was not trained for, is a ConfigError naming what it has."""
        self.directions.check_source(language)
        self.directions.check_pair(language, self.target_lang)
        self.source_lang = language

    def check_languages(
        self, texts: Sequence[str] = (), target_lang: str | None = None, source_lang: str | None = None
    ) -> None:
        """Refuse before any search what a call would be refused part-way (a ConfigError): a source or
        target language the model lacks, a pairing it was not trained for, a text whose >>xx<< token
        it lacks or which contradicts target_lang, or no target for a text on a multi-target model."""
        if source_lang is not None:
            self.directions.check_source(source_lang)
        source = source_lang or self.source_lang
        if target_lang is not None or not texts:
            self.directions.check_into(target_lang, source)
        for text in texts:
            self.directions.target_of(text, target_lang or self.target_lang, source)

    # --- the pieces ----------------------------------------------------------------------------
    def encode_source(self, text: str, target_lang: str | None = None) -> tuple[list[int], bool]:
        """Source ids with the tokenizer's special tokens, cut to max_source_tokens (keeping the end
        token, the last id); and whether it was cut. A multi-target model's sentence starts with the
        chosen target language's token, unless it starts with one already (as OPUS-MT's users write
        them); a token contradicting the target asked for, or none at all, is refused (Directions.target_of)."""
        language = self.directions.target_of(text, target_lang or self.target_lang, self.source_lang)
        if language is not None and LANGUAGE_CODE.match(text.lstrip()) is None:
            text = f">>{language}<< {text}"
        ids = self.src_tokenizer.encode(text)
        if len(ids) <= self.max_source_tokens:
            return ids, False
        return ids[: self.max_source_tokens - 1] + ids[-1:], True

    def model_input(self, text: str, *, pretokenized: bool = False) -> str:
        """`text` as the model reads it: in its corpus's form (see text_form), unless it is already."""
        if self.text_form is None or pretokenized:
            return text
        return self.text_form.to_corpus_form(text)

    def source_fits(self, text: str, *, pretokenized: bool = False, target_lang: str | None = None) -> bool:
        """Whether `text` is short enough to be translated whole (within max_source_tokens)."""
        return not self.encode_source(self.model_input(text, pretokenized=pretokenized), target_lang)[1]

    def request(self, **settings) -> SearchRequest:
        """The request a call makes of the engine: the model's decode settings, each replaced by the
        keyword of its name that is not None (any SearchRequest field: `beam`, `n_best`,
        `length_penalty`, `return_attention`, `sampling`, ...). Checked against the model and the
        engine (ValueError saying what is wrong) before any sentence is read; built once, then
        passed down unchanged."""
        return self.check_request(SearchRequest.of(self.decode, **settings))

    def check_request(self, request: SearchRequest) -> SearchRequest:
        """`request`, if this model and engine can run it; else a ValueError saying why not."""
        vocab = self.tgt_tokenizer.vocab_size
        if 2 * request.beam > vocab:  # beam search ranks 2 * beam distinct tokens a step
            raise ValueError(f"beam ({request.beam}) must be at most {vocab // 2}, half the target vocabulary")
        wanted = (
            ("sampling", request.sampling is not None),
            ("attention", request.return_attention),
            ("transformers_stopping", request.beam > 1 and not request.early_stopping),
        )
        self.engine.capabilities.require([name for name, on in wanted if on], self.engine.name)
        return request

    def request_of(self, request: SearchRequest | None, settings: dict) -> SearchRequest:
        """A call's request: the one it passed (checked), or the one its keywords describe (not both)."""
        if request is None:
            return self.request(**settings)
        if settings:
            raise TypeError(f"give a request or its settings ({', '.join(settings)}), not both")
        return self.check_request(request)

    def translate_ids(
        self, ids: Sequence[Sequence[int]], request: SearchRequest | None = None, **settings
    ) -> list[list[Hypothesis]]:
        """Search over source id lists (BOS/EOS included); n-best Hypotheses per sentence, in input order.

        request, settings: as in `translate`; with `sampling`, one random draw per sentence instead.
        """
        return self.engine.translate_ids(ids, self.request_of(request, settings))
