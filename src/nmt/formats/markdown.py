"""Markdown: prose and headings translated; code, links' targets, HTML and front matter kept.

markdown-it-py (the CommonMark parser, tables enabled) finds the inline text of each paragraph,
heading and table cell, with its lines. Within it, each text token is found in the source in turn;
what lies between them (emphasis marks, code spans, a link's `](target "title")`, inline HTML) is
kept as it is, and the translated words are placed into the text pieces by word alignment (the
HTML path's placement, nmt.markup), so an emphasised word stays emphasised and a link keeps its
target. Placeholders and URLs in the prose ({name}, %s, https://...: nmt.placeholders) are never
read by the model and come back as written. Code blocks, fenced code, HTML blocks and YAML/TOML
front matter are not read at all.

A paragraph, heading or cell without a letter (a number, a date) is left as it is, as in the
other formats. A paragraph whose text the parser changed (entities such as `&amp;`, backslash
escapes) cannot be located byte for byte: it is kept untranslated, and counted in the log. A
paragraph over several lines is written back on one line (Markdown reads both alike).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt

from ..placeholders import MaskedNodes
from .text_files import UTF8_BOM, check_results, decoded

log = logging.getLogger(__name__)

_FRONT_MATTER = re.compile(r"\A(---|\+\+\+)[ \t]*\r?\n.*?^\1[ \t]*\r?$", re.DOTALL | re.MULTILINE)


@dataclass
class InlineText:
    """One paragraph's (or heading's, or cell's) inline source: [start, end) in the file's text, cut
    into pieces; pieces[i] is translated text where is_text[i], markup kept as it is elsewhere."""

    start: int
    end: int
    pieces: list[str]
    is_text: list[bool]
    text: MaskedNodes  # the text pieces (markup as empty ones), placeholders in them kept


def _code_span_end(source: str, at: int, token) -> int:
    """Where the code span found from `at` ends: its closing run of backticks (content is normalised)."""
    ticks = token.markup
    start = _backticks(ticks).search(source, at)
    close = _backticks(ticks).search(source, start.end()) if start else None
    return close.end() if close else -1


def _backticks(ticks: str) -> re.Pattern:
    return re.compile(rf"(?<!`){re.escape(ticks)}(?!`)")


def _html_end(source: str, at: int, token) -> int:
    found = source.find(token.content, at)
    return found + len(token.content) if found >= 0 else -1


def _link_end(source: str, at: int, token) -> int:
    """Where a link's `](target "title")`, `][label]` or `]` ends (an autolink's `>`)."""
    if token.markup in ("autolink", "linkify"):
        found = source.find(">", at) if token.markup == "autolink" else at
        return found + 1 if token.markup == "autolink" and found >= 0 else found
    close = source.find("]", at)
    return _destination_end(source, close + 1) if close >= 0 else -1


def _image_end(source: str, at: int, token) -> int:
    """Where `![alt](src)` found from `at` ends: the alt text is not translated (yet), but kept."""
    start = source.find("![", at)
    if start < 0:
        return -1
    depth, i = 0, start + 1
    while i < len(source):
        if source[i] == "\\":
            i += 2
            continue
        depth += {"[": 1, "]": -1}.get(source[i], 0)
        if depth == 0:
            return _destination_end(source, i + 1)
        i += 1
    return -1


def _destination_end(source: str, at: int) -> int:
    """After a link's `]` at `at`-1: past `(target "title")` (parentheses balanced, quoted and <>
    parts skipped whole) or `[label]`; a shortcut reference has neither."""
    if source.startswith("[", at):
        close = source.find("]", at)
        return close + 1 if close >= 0 else -1
    if not source.startswith("(", at):
        return at
    depth, i, quote = 0, at, None
    while i < len(source):
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if quote:
            quote = None if c == quote else quote
        elif c in "\"'<":
            quote = ">" if c == "<" else c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


_CONTINUATION = re.compile(r"\r?\n[ \t>]*")  # a line break inside a paragraph, and a quote's or list's prefix
# The source each kind of non-text token spans, skipped so that a later text token is never found
# inside it (the "." of a link's target, a word inside a code span).
_SKIPPED = {"code_inline": _code_span_end, "html_inline": _html_end, "link_close": _link_end, "image": _image_end}


def _pieces(source: str, children) -> tuple[list[str], list[bool]] | None:
    """The inline source cut at its text tokens, or None where one cannot be found as written. A
    line break inside the paragraph, with the next line's container prefix ("> "), reads as a space."""
    pieces, is_text, cursor, autolink, broken_at = [], [], 0, False, None

    def add(piece: str, text: bool) -> None:
        if piece:
            pieces.append(piece)
            is_text.append(text)

    for token in children:
        if token.type == "softbreak":
            broken_at = source.find("\n", cursor)
            if broken_at < 0:
                return None
            broken_at -= source[broken_at - 1 : broken_at] == "\r"  # a CRLF file's break
            continue
        if broken_at is not None:  # the break and the next line's prefix: one space of text
            add(source[cursor:broken_at], False)
            add(" ", True)  # whitespace: written back as it is, one space
            cursor, broken_at = _CONTINUATION.match(source, broken_at).end(), None
        if token.type == "link_open":
            autolink = token.markup in ("autolink", "linkify")
        elif token.type == "link_close":
            autolink = False
        if token.type in _SKIPPED:
            end = _SKIPPED[token.type](source, cursor, token)
            if end < 0:
                return None
            add(source[cursor:end], False)
            cursor = end
            continue
        if token.type != "text" or autolink:
            continue
        at = source.find(token.content, cursor)
        if at < 0:
            return None
        add(source[cursor:at], False)
        add(token.content, True)
        cursor = at + len(token.content)
    add(source[cursor:], False)
    return pieces, is_text


class MarkdownDocument:
    """A Markdown file read for translation: `sentences`, then `rebuilt(results)`."""

    def __init__(self, content: bytes, name: str, lang: str):
        self.text = decoded(content, name)
        self.bom = content.startswith(UTF8_BOM)
        self.lang = lang
        front = _FRONT_MATTER.match(self.text)
        # front matter is blanked for the parser, keeping its lines, so line numbers stay the file's
        parsed = self.text if front is None else re.sub(r"[^\n]", " ", front.group(0)) + self.text[front.end() :]
        # Lines as markdown-it counts them (its token.map): a lone CR ends one too, as CommonMark says.
        line_starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", parsed)]
        self.inlines: list[InlineText] = []
        kept = 0
        for token in MarkdownIt("commonmark").enable("table").parse(parsed):
            if token.type != "inline" or not token.map or not token.content.strip():
                continue
            first = line_starts[token.map[0]]
            lines_end = line_starts[token.map[1]] if token.map[1] < len(line_starts) else len(self.text)
            found = self._locate(token, first, lines_end)
            if found is None:
                kept += 1
                continue
            if not found.text.sentences:  # a number, a date, a URL: no text to translate (a model would guess)
                continue
            self.inlines.append(found)
        if kept:
            log.warning("%s: %d Markdown paragraph(s) kept untranslated: entities or escapes in their text", name, kept)
        self.sentences = [s for inline in self.inlines for s in inline.text.sentences]

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the file has it, its placeholders in it (one per sentence): what a
        reviewer is shown (nmt.quality_report)."""
        return [w for inline in self.inlines for w in inline.text.sentences_as_written]

    def _locate(self, token, first: int, lines_end: int) -> InlineText | None:
        lines = token.content.split("\n")
        start = self.text.find(lines[0], first, lines_end)
        if start < 0:
            return None
        end, cursor = start + len(lines[0]), start + len(lines[0])
        for line in lines[1:]:  # later lines follow, after a container's prefix ("> ", indentation)
            at = self.text.find(line, cursor, lines_end)
            if at < 0:
                return None
            end = cursor = at + len(line)
        source = self.text[start:end]
        cut = _pieces(source, token.children or [])
        if cut is None:
            return None
        pieces, is_text = cut
        nodes = [p if t else "" for p, t in zip(pieces, is_text, strict=True)]
        return InlineText(start, end, pieces, is_text, MaskedNodes(nodes, self.lang))

    def rebuilt(self, results: Sequence[tuple[str, list[tuple[int, int]] | None]]) -> bytes:
        """The file with its prose translated and all else as it was."""
        check_results(results, self.sentences)
        answers = iter(results)
        edits = []
        for inline in self.inlines:
            mine = [next(answers) for _ in inline.text.sentences]
            new = inline.text.rebuilt(mine)
            written = [n if t else p for n, p, t in zip(new, inline.pieces, inline.is_text, strict=True)]
            edits.append((inline.start, inline.end, "".join(written)))
        out, at = [], 0
        for start, end, new in edits:
            out += [self.text[at:start], new]
            at = end
        out.append(self.text[at:])
        return ("\ufeff" if self.bom else "").encode() + "".join(out).encode("utf-8")
