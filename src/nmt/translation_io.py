"""Translating files: streamed in chunks, or held whole (a test set to score).

Streaming: read a chunk of lines, translate it (sorted by length inside the Translator), write
it in input order, flush, repeat. Output starts before a large input ends, memory stays
bounded, and every input line gives exactly one output line. Either way a source cut to the
Translator's max_source_tokens is reported with its file and line, never passed over silently."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO, TextIO

from .alignment import pharaoh
from .documents import DocumentStats, cut_to_fit, translate_paragraphs
from .glossary import Glossary
from .inference.choices import CHUNK_LINES
from .memory import MemoryMatch, TranslationMemory, memory_first, memory_summary
from .placeholders import CODE, MaskedText
from .quality import sentence_score
from .search_settings import SearchRequest
from .short_segments import like_source
from .translator import Translation, Translator

log = logging.getLogger(__name__)


MAX_LINE_BYTES = 1 << 20  # a line (a sentence, or a paragraph) longer than this is refused, not translated


class InputError(ValueError):
    """Input that cannot be translated, naming the file and line."""


def decode_lines(source: BinaryIO, name: str, first_line: int = 1):
    """Yield (line_number, text) of UTF-8 lines without their line ending; bad UTF-8 is an InputError."""
    for number, raw in enumerate(source, start=first_line):
        if len(raw) > MAX_LINE_BYTES:
            raise InputError(
                f"{name}:{number}: a line of {len(raw):,} bytes is longer than the {MAX_LINE_BYTES:,} nmt takes: "
                "split it into paragraphs"
            )
        try:
            # the file's byte-order mark (on its first line) is no text to translate
            text = raw.decode("utf-8-sig" if number == first_line else "utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{name}:{number}: not valid UTF-8 (byte {err.start + 1} of the line)") from None
        yield number, text.rstrip("\r\n")


def warn_missed_terms(name: str, numbers: Sequence[int], results: list[list[Translation]]) -> None:
    """A warning for each line whose glossary terms could not all be placed within the sentence."""
    for number, best in zip(numbers, results, strict=True):
        if best[0].glossary_missed:
            log.warning("%s:%d: glossary terms not placed: %s", name, number, ", ".join(best[0].glossary_missed))


def output_line(
    translation: Translation, *, scores: bool = False, quality: bool = False, alignments: bool = False
) -> str:
    """A translation as one output line: its text; with scores, " ||| " + its confidence (mean token
    log-probability) + " ||| " + each token's probability; with quality, " ||| " + its quality score
    (the mean of its words') + " ||| " + "doubtful" or "ok" (by the model's calibration; "-" without
    one) + " ||| " + each word's score; with alignments, " ||| " + "0-0 1-2 ..."."""
    fields = [translation.text.replace("\n", " ")]
    if scores:
        fields.append(f"{translation.confidence:.4f}")
        fields.append(" ".join(f"{p:.4f}" for p in translation.token_probs or []))
    if quality:
        fields.append(f"{sentence_score(translation.word_scores or []):.4f}")
        fields.append({True: "doubtful", False: "ok", None: "-"}[translation.doubtful])
        fields.append(" ".join(f"{s:.4f}" for s in translation.word_scores or []))
    if alignments:
        fields.append(pharaoh(translation.alignment or []))
    return " ||| ".join(fields)


def best_texts(translator: Translator, texts: list[str], **options) -> list[str]:
    """The best translation's text of each of `texts` (options: those of translate_detailed)."""
    return [best[0].text for best in translator.translate_detailed(texts, **options)]


@dataclass
class CutSentences:
    """Sentences cut where too long for the model (nmt.documents.cut_to_fit): translate `pieces`,
    then `joined` puts each sentence's pieces' translations (and word alignments) back together."""

    parts: list[list[str]]

    @property
    def pieces(self) -> list[str]:
        return [piece for pieces in self.parts for piece in pieces]

    def joined(
        self, best: Sequence[Translation], target: str | None = None
    ) -> list[tuple[str, list[tuple[int, int]] | None]]:
        """(translation, word alignment) per sentence from the best Translation of each piece; the
        alignment None where the pieces have none. Each ends and begins as its source does (a
        heading gets no full stop: nmt.short_segments); target: the language translated into."""
        found = iter(best)
        out = []
        for pieces in self.parts:
            texts, pairs, aligned, src_offset, tgt_offset = [], [], True, 0, 0
            for piece in pieces:
                t = next(found)
                texts.append(t.text)
                aligned = aligned and t.alignment is not None
                pairs += [(i + src_offset, j + tgt_offset) for i, j in t.alignment or []]
                src_offset += len(piece.split())
                tgt_offset += len(t.text.split())
            out.append(like_source(" ".join(pieces), " ".join(texts), pairs if aligned else None, target))
        return out


def cut_sentences(translator: Translator, sentences: Sequence[str], target_lang: str | None = None) -> CutSentences:
    """`sentences`, each cut into pieces the model takes whole (with `target_lang`'s token, for a
    multi-target model)."""
    fits = functools.partial(translator.source_fits, target_lang=target_lang)
    return CutSentences([cut_to_fit(sentence, fits) for sentence in sentences])


def gives_alignments(translator: Translator) -> bool:
    """Whether the translator's word alignments are over the whitespace-separated words of the text
    it is given: its engine gives alignments, its model reads running text (not a tokenised corpus's
    form), and its tokenizers' words are the text's (WordPiece's also split off punctuation)."""
    return (
        translator.engine.capabilities.alignment
        and translator.text_form is None
        and "wordpiece" not in (translator.src_tokenizer.kind, translator.tgt_tokenizer.kind)
    )


def aligned_translations(
    translator: Translator, sentences: list[str], request: SearchRequest | None = None
) -> list[tuple[str, list[tuple[int, int]] | None]]:
    """(best translation, its word alignment or None) of each sentence, for putting markup back
    (nmt.markup); a sentence too long for the model is cut at a safe point and joined back.
    request: the search (`translator.request(beam=1)`; None: the model's own settings)."""
    return scored_translations(translator, sentences, request)[0]


def scored_translations(
    translator: Translator, sentences: list[str], request: SearchRequest | None = None, *, scores: bool = False
) -> tuple[list[tuple[str, list[tuple[int, int]] | None]], list[list[Translation]]]:
    """aligned_translations, and with it the best Translation of each sentence's pieces (one for a
    sentence that was not cut), with word scores and the model's flag where `scores`."""
    cut = cut_sentences(translator, sentences)
    found = translator.translate_detailed(cut.pieces, request, alignments=gives_alignments(translator), scores=scores)
    best = iter(found)
    pieces = [[next(best)[0] for _ in parts] for parts in cut.parts]
    joined = cut.joined(
        [piece for parts in pieces for piece in parts], translator.target_lang or translator.directions.output
    )
    return joined, pieces


def align_memory_hits(
    translator: Translator, sentences: Sequence[str], results: list, matches: Sequence[MemoryMatch | None]
) -> list:
    """`results` ((translation, alignment) per sentence) with each exact memory hit's word alignment
    from the model (one teacher-forced pass, no search), so its words go back into a document's runs
    or around its placeholders as the model's own translation would; none where the model gives none."""
    hits = [i for i, match in enumerate(matches) if match is not None and match.exact and results[i][0].strip()]
    if not hits or not gives_alignments(translator):
        return results
    found = translator.align([sentences[i] for i in hits], [results[i][0] for i in hits])
    results = list(results)
    for i, alignment in zip(hits, found, strict=True):
        results[i] = (results[i][0], alignment)
    return results


def translate_stream(
    translator: Translator,
    source: BinaryIO,
    target: TextIO,
    request: SearchRequest | None = None,
    *,
    name: str = "<stdin>",
    chunk_lines: int = CHUNK_LINES,
    pretokenized: bool = False,
    split_sentences: bool = False,
    scores: bool = False,
    quality: bool = False,
    alignments: bool = False,
    glossary: Glossary | None = None,
    memory: TranslationMemory | None = None,
    memory_update: TextIO | None = None,
    qe_passes: int = 1,
    qe_seed: int = 0,
) -> int:
    """Translate every line of `source` into `target`; returns the number of input lines translated.

    request: the search (`translator.request(beam=1)`; None: the model's own settings).
    pretokenized: the lines are in the form of the model's tokenised corpus (see Translator.translate).
    split_sentences: each line is a paragraph of running text, translated sentence by sentence with
    its spacing kept, and sentences too long for the model cut and joined back (nmt.documents);
    else each line is one sentence, cut to the model's limit with a warning if it is longer.
    scores / quality / alignments (line mode): each output line is followed by " ||| " and the
    translation's confidence and token probabilities, its quality score, flag and word scores, and
    its word alignment (see `output_line`); qe_passes > 1: the quality scores are MC dropout's over
    that many passes, drawn from qe_seed (Translator.translate_detailed).
    glossary: its target terms are required wherever its source terms occur (line mode); a line
    whose terms could not all be placed is named in a warning.
    request.n_best > 1 (line mode): each line's n best translations, best first, as Moses and Marian write
    them: "LINE ||| translation [||| scores ||| alignment] ||| score", LINE counted from 0.
    memory: a line (a sentence, with split_sentences) it holds exactly is translated as it says, not
    searched (nmt.memory); memory_update: each line the model translated is written to it as
    "source TAB translation", for the memory's next use.

    With a seeded `request.sampling`, each chunk draws from its own seed (seed + chunk index), so
    chunks do not repeat one another's random stream and a rerun gives the same output.
    """
    request = request or translator.request()
    columns = dict(scores=scores, quality=quality, alignments=alignments)
    sampling, n_best = request.sampling, request.n_best
    lines = decode_lines(source, name)
    matches: list[MemoryMatch | None] = []  # each sentence's memory match, for the summary
    written = 0
    stats = DocumentStats()
    for index in itertools.count():
        chunk = list(itertools.islice(lines, chunk_lines))
        if not chunk:
            break
        numbers, texts = zip(*chunk, strict=True)
        chunk_request = request
        if sampling is not None and sampling.seed is not None:
            chunk_request = dataclasses.replace(
                request, sampling=dataclasses.replace(sampling, seed=sampling.seed + index)
            )
        if split_sentences:
            remember = functools.partial(_remembered, memory, matches=matches, update=memory_update)
            for text in _paragraphs(translator, texts, chunk_request, remember, pretokenized=pretokenized, stats=stats):
                target.write(text + "\n")
        else:
            more = {"glossary": glossary} if glossary is not None else {}
            if quality and qe_passes > 1:
                more |= {"qe_passes": qe_passes, "qe_seed": qe_seed}
            searched = functools.partial(
                translator.translate_detailed,
                request=chunk_request,
                pretokenized=pretokenized,
                scores=scores or quality,
                alignments=alignments,
                **more,
            )
            results = _remembered(
                memory, searched, memory_translation, lambda r: r[0].text, list(texts), matches, memory_update
            )
            warn_missed_terms(name, numbers, results)
            _write_lines(target, name, numbers, results, translator.max_source_tokens, n_best, columns)
        target.flush()
        written += len(chunk)
    if split_sentences:
        log.info(
            "%s: %d sentences in %d paragraphs; %d longer than the model takes (%d tokens) were cut at a "
            "safe point and their translations joined",
            name,
            stats.sentences,
            stats.paragraphs,
            stats.cut,
            translator.max_source_tokens,
        )
    if memory is not None:
        log.info("%s: %s", name, memory_summary(matches, memory.threshold))
    return written


def _write_lines(
    target: TextIO,
    name: str,
    numbers: Sequence[int],
    results: list[list[Translation]],
    max_source_tokens: int,
    n_best: int,
    columns: dict[str, bool],
) -> None:
    """Each line's translation (or its n best, in Moses' form), a cut source named in a warning."""
    for number, best in zip(numbers, results, strict=True):
        if best[0].truncated:
            log.warning(
                "%s:%d: longer than %d tokens; translated the first %d only",
                name,
                number,
                max_source_tokens,
                max_source_tokens,
            )
        if n_best == 1:
            target.write(output_line(best[0], **columns) + "\n")
            continue
        for t in best:
            line = output_line(t, **columns)
            target.write(f"{number - 1} ||| {line} ||| {t.score:.4f}\n")


def memory_translation(match: MemoryMatch) -> list[Translation]:
    """A memory's exact match as a search's one-item n-best list (no scores: it was not searched)."""
    return [Translation(match.target, 0.0, 0.0, [], [])]


def _paragraphs(
    translator: Translator,
    texts: Sequence[str],
    request: SearchRequest,
    remember: functools.partial,
    *,
    pretokenized: bool,
    stats: DocumentStats,
) -> list[str]:
    """Each line of running text translated sentence by sentence (nmt.documents); a line with
    placeholders (%s, {name}, <b>) keeps them exactly (nmt.placeholders: placed by alignment).
    remember: _remembered with the memory, its matches and its update stream."""
    lang = translator.source_lang or "en"
    masked = {} if pretokenized else {k: MaskedText(t, lang) for k, t in enumerate(texts) if CODE.search(t)}
    # A paragraph without a letter ("1045", "2026-12-02", a rule of dashes) has nothing to translate
    # and stays as it is, as in documents and both APIs.
    kept = set() if pretokenized else {k for k, t in enumerate(texts) if k not in masked and not has_letters(t)}
    searched = functools.partial(best_texts, translator, request=request, pretokenized=pretokenized)
    plain = iter(
        translate_paragraphs(
            [t for k, t in enumerate(texts) if k not in masked and k not in kept],
            functools.partial(remember, searched, lambda match: match.target, str),
            lang=lang,
            fits=functools.partial(translator.source_fits, pretokenized=pretokenized),
            stats=stats,
        )
    )
    sentences = [s for text in masked.values() for s in text.sentences]
    aligned = functools.partial(aligned_translations, translator, request=request)
    matches = remember.keywords["matches"]
    first = len(matches)
    found = remember(aligned, lambda match: (match.target, None), lambda r: r[0], sentences)
    found = iter(align_memory_hits(translator, sentences, found, matches[first:]))
    return [
        texts[k]
        if k in kept
        else masked[k].rebuilt([next(found) for _ in masked[k].sentences])
        if k in masked
        else next(plain)
        for k in range(len(texts))
    ]


def has_letters(text: str) -> bool:
    """Whether `text` has a letter of any script: a text without one is numbers, marks and space."""
    return any(c.isalpha() for c in text)


def _remembered(
    memory, translate, from_memory, text_of, texts: list[str], matches: list, update: TextIO | None
) -> list:
    """translate(texts), the memory's exact matches taken first (memory_first); each text's match
    added to `matches`; each text the model translated written to `update` as "source TAB
    translation" (text_of: a result's translated text)."""
    results, found = memory_first(memory, texts, translate, from_memory)
    matches += found
    if update is not None:
        for text, result, match in zip(texts, results, found, strict=True):
            if match is None or not match.exact:
                update.write(f"{' '.join(text.split())}\t{' '.join(text_of(result).split())}\n")
    return results


def translate_sentences(
    translator: Translator,
    texts: Sequence[str],
    request: SearchRequest | None = None,
    *,
    name: str = "<input>",
    pretokenized: bool = False,
    glossary: Glossary | None = None,
) -> list[str]:
    """The best translation of each of `texts` (lines 1.. of the file `name`), in order, searched
    as `request` asks (`translator.request(beam=1)`; None: the model's own settings).

    pretokenized: the texts are a tokenised corpus's own (its test set): no conversion in or out.

    Sources cut to the Translator's max_source_tokens are counted in one warning that names
    the first few lines (each source is encoded once: the Translator reports the cut).
    """
    more = {"glossary": glossary} if glossary is not None else {}
    results = translator.translate_detailed(list(texts), request, pretokenized=pretokenized, **more)
    warn_missed_terms(name, range(1, len(texts) + 1), results)
    truncated = [number for number, best in enumerate(results, start=1) if best[0].truncated]
    if truncated:
        shown = ", ".join(f"{name}:{n}" for n in truncated[:5]) + (", ..." if len(truncated) > 5 else "")
        log.warning(
            "%d source sentences are longer than %d tokens; translated the first %d only (%s)",
            len(truncated),
            translator.max_source_tokens,
            translator.max_source_tokens,
            shown,
        )
    return [best[0].text for best in results]
