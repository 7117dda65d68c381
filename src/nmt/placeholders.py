"""Placeholders: the parts of a software string that are code, not language, kept exactly.

A string from a program holds code among its words: printf conversions (%s, %1$d, %(name)s),
brace fields ({0}, {name}, {{count}}, ${var}, %{name}, $t(key)), strftime's fields (%Y-%m-%d), URLs
and e-mail addresses, inline markup (<b>, </a>, &amp;) and escapes (\\n,
%%). The model never sees them. A string is cut at each one into the text around it, which reads
as one paragraph; its translation is put back into those pieces by word alignment, exactly as a web
page's text goes back around its tags (nmt.markup.placed_texts), and the codes go back between the
pieces as they were written:

    "Delete %d files from {folder}?"  ->  the model reads "Delete files from ?"
                                      ->  "%d Dateien aus {folder} löschen?" (by alignment)

So each placeholder comes out once and unaltered, in the order the source has them, and none is
invented: anything in the model's output that reads as a placeholder is removed.

ICU MessageFormat ("{count, plural, one {# file} other {# files}}") keeps its structure; each
message inside it is a string of its own, translated on its own ("#" is a placeholder there).
A line break in a string ends a paragraph: each line is translated on its own.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from .documents import Paragraph

Result = tuple[str, list[tuple[int, int]] | None]  # (translation, word alignment or None)

# printf conversions: C, Python's %(name)s, POSIX's positional %1$s, Objective-C's %@. The space
# flag is left out: "100% sure" would read as the conversion "% s".
PRINTF = r"%(?:\(\w+\)|\d+\$)?[-+0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcsp@]"
CODE = re.compile(
    r"%(?:\d+\$)?[-+0#' ]*(?:\d+|\*)?(?:\.(?:\d+|\*))?<PRI\w+>"  # gettext's portable conversions
    # (%<PRIuMAX>, %6<PRIu32>, %#<PRIx64>): before markup, so that one is not read as a % and a tag
    r"|</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>"  # inline markup
    r"|&(?:[A-Za-z][A-Za-z0-9]*|#\d+|#x[0-9A-Fa-f]+);"  # character references
    r"|%%|\\u[0-9A-Fa-f]{4}|\\[nrt\"'\\@?]"  # escapes written into the string (\@ \? are Android's)
    r"|%\{\w+\}"  # %{name} (Rails, Ruby)
    r"|\$t\([^()]*\)"  # $t(key): i18next's nesting of another string
    r"|\[X\d+X\]"  # [X12X]: how Weblate masks a placeholder before it asks a machine translation service
    rf"|{PRINTF}"
    r"|%-?[aAbBCeGhHIjmMpRSTuUVwWyYzZ]"  # strftime's fields (%Y-%m-%d %H:%M), Rails' date formats
    r"|\b(?:https?|ftp)://[^\s<>\"']*[^\s<>\"'.,;:!?)\]]"  # a URL (not the mark that ends its sentence)
    r"|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"  # an e-mail address
    r"|\{\{[^{}]*\}\}"  # {{count}} (i18next, Handlebars, Jinja)
    r"|\$\{[^{}]*\}"  # ${var}
    r"|\{[\w.\[\]]*(?:[!:][^{}]*)?\}"  # {0}, {name}, {0:.2f}, {name!r}
    r"|\{\s*\w+\s*,\s*(?:number|date|time|spellout|ordinal|duration)[^{}]*\}"  # ICU simple arguments
)
# What every code that may hold spaces begins or ends with, and "#" (a plural's number), "%", "\\":
# none of them in the model's words, and words set apart from the codes, no new code can be read.
CODE_MAKERS = re.compile(r"[{}<>$%#\\]")
_ICU_START = re.compile(r"\{\s*\w+\s*,\s*(plural|selectordinal|select)\s*,")
_ICU_SELECTOR = re.compile(r"\s*(?:offset:\d+\s*)?(=?[\w-]+)\s*\{")


@dataclass
class Code:
    """Something kept as written: a placeholder or tag (one part), or an ICU construct (the written
    parts alternating with the messages inside it, each a `MaskedText`)."""

    parts: list[str | MaskedText]


@dataclass
class Line:
    """One line of a string: the text pieces between its codes (len(codes) + 1 of them), read together."""

    pieces: list[str]
    codes: list[Code]
    paragraph: Paragraph


class MaskedText:
    """A string read for translation with its placeholders kept: `sentences`, then `rebuilt(results)`.

    in_plural: the string is a message of an ICU plural, where "#" stands for the number."""

    def __init__(self, text: str, lang: str, *, in_plural: bool = False):
        self.text = text
        self.in_plural = in_plural
        self.lines: list[Line | str] = []  # a Line, or a line break kept as written
        for k, line in enumerate(re.split(r"(\r\n|\n|\r)", text)):
            if k % 2:
                self.lines.append(line)
                continue
            pieces, codes = _cut(line, lang, in_plural)
            text_of_line = "".join(pieces)
            # A line with no letter outside its codes ("%d.%m.%Y", "{count}: ") has nothing to translate.
            paragraph = Paragraph.parse(text_of_line, lang) if any(c.isalpha() for c in text_of_line) else None
            self.lines.append(Line(pieces, codes, paragraph or Paragraph([], [text_of_line])))
        self.sentences = [s for unit in self._units() for s in unit.sentences]

    def _units(self) -> Iterator[Paragraph | MaskedText]:
        """Everything translated, in order: each line's paragraph, then the messages in its codes."""
        for line in self.lines:
            if isinstance(line, Line):
                yield line.paragraph
                for code in line.codes:
                    yield from (part for part in code.parts if isinstance(part, MaskedText))

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the string has it, its codes in it (one per sentence, in order): what a
        reviewer is shown (nmt.quality_report); an ICU construct is shown whole with the sentence it
        is in, and each of its messages' sentences again on its own, as `sentences` lists them."""
        found = []
        for line in self.lines:
            if isinstance(line, Line):
                text, spans = "", []  # the line as written, and where its codes are in it
                for piece, code in zip(line.pieces, [*line.codes, None], strict=True):
                    text += piece
                    if code is not None:
                        spans.append((len(text), len(text) + len(_as_written(code))))
                        text += _as_written(code)
                found += line.paragraph.as_written(text, spans)
                found += [
                    w
                    for code in line.codes
                    for part in code.parts
                    if isinstance(part, MaskedText)
                    for w in part.sentences_as_written
                ]
        return found

    @property
    def codes(self) -> list[str]:
        """The placeholders and tags of the string, as written, in order (an ICU construct's own
        parts included); a translation keeps exactly these."""
        return _flat([code for line in self.lines if isinstance(line, Line) for code in line.codes])

    def rebuilt(self, results: Sequence[Result], *, escape: Callable[[str], str] | None = None) -> str:
        """The string with each sentence translated (results: one per sentence) and every code kept.
        escape: applied to the model's words (a string of XML: `html.escape`, as its codes are written).

        Words moved next to a code can make a new one with it ("% of" before "{count}", reversed:
        "%{count}"); where the string read again has other codes than its source, the model's words
        are set apart from the codes by a space; where it still has (a "{" and a "}" of the words moved
        around a code: "{a!b %d c }" reads as one), the characters codes are made of are left out of
        the model's words: no code is ever made that the source did not have."""
        out = self._joined(results, escape)
        for bare in (False, True):
            if escape is not None or not self.codes or codes_of(out, in_plural=self.in_plural) == self.codes:
                break
            out = self._joined(results, escape, apart=True, bare=bare)
        return out

    def _joined(
        self, results: Sequence[Result], escape: Callable[[str], str] | None, *, apart: bool = False, bare: bool = False
    ) -> str:
        if len(results) != len(self.sentences):
            raise ValueError(f"{len(results)} translations for {len(self.sentences)} sentences")
        # imported here: nmt.markup reads pages with Beautiful Soup, whose import (0.2-0.3 s) a process
        # that masks no codes need not pay
        from .markup import placed_texts

        answers = iter(results)
        out = []
        for line in self.lines:
            if not isinstance(line, Line):
                out.append(line)
                continue
            mine = [next(answers) for _ in line.paragraph.sentences]
            if not line.codes:  # nothing to place: the spacing between sentences kept exactly
                words = without_codes(line.paragraph.rebuilt([text for text, _ in mine]), in_plural=self.in_plural)
                # an ICU message's "{" may lose its "}"; each a space, not nothing (see MaskedNodes._joined)
                words = CODE_MAKERS.sub(" ", words) if bare else words
                out.append(words if escape is None else escape(words))
                continue
            pieces = placed_texts(line.pieces, line.paragraph, mine) if mine else line.pieces
            for k, piece in enumerate(pieces):
                if piece != line.pieces[k]:
                    piece = without_codes(piece, in_plural=self.in_plural)
                    piece = piece if escape is None else escape(piece)
                    glued = line.pieces[k][:1].isalnum()  # the source wrote a word against the code before
                    if k > 0 and (piece[:1].isalnum() and not glued or apart and piece[:1] not in " "):
                        piece = " " + piece  # words moved in after a "?": "{x} the", not "{x}the"
                    if apart and k < len(line.codes) and piece[-1:] not in " ":
                        piece += " "
                if bare and CODE_MAKERS.search(piece):  # the source's own text too: its "{" may lose its "}"
                    piece = CODE_MAKERS.sub(" ", piece)  # a space each: nothing closes up into a URL
                out.append(piece)
                if k < len(line.codes):
                    for part in line.codes[k].parts:
                        if isinstance(part, MaskedText):
                            answered = [next(answers) for _ in part.sentences]
                            part = part._joined(answered, escape, apart=apart, bare=bare)
                        out.append(part)
        return "".join(out)


class MaskedNodes:
    """A paragraph of a document whose text lies in pieces (a .docx paragraph's runs, the text
    between a Markdown paragraph's markup, a subtitle's cue) read with its placeholders kept:
    `sentences`, then `rebuilt(results)`, the new text of each piece.

    The pieces are read together; each code found in that text (CODE: a URL, {name}, %s, even one
    that Word split over two runs) is cut out of its pieces, so the model reads the words around it,
    and is written back as it was while the translated words are placed into the pieces by word
    alignment (nmt.markup.placed_texts). A paragraph with no letter outside its codes has no
    sentence: it stays as it is."""

    def __init__(self, nodes: Sequence[str], lang: str):
        self.nodes = list(nodes)
        joined = "".join(self.nodes)
        spans = [m.span() for m in CODE.finditer(joined)]
        self.codes = [joined[start:end] for start, end in spans]
        self.spans = spans
        bounds = sorted({b for span in spans for b in span})
        starts = [start for start, _ in spans]
        # The parts the placement sees: each piece cut where a code starts or ends, a code's parts
        # seen as empty (no word goes there). Per part: its piece, its text, whether it is code.
        # Bisection keeps it O(parts log codes): a paragraph of 30,000 runs and codes is no square.
        self.parts: list[tuple[int, str, bool]] = []
        at = 0
        for k, node in enumerate(self.nodes):
            inside = bounds[bisect_right(bounds, at) : bisect_left(bounds, at + len(node))]
            cuts = [0, *(b - at for b in inside), len(node)]
            for start, end in zip(cuts, cuts[1:], strict=False) if node else [(0, 0)]:
                owner = bisect_right(starts, at + start) - 1  # the last code starting at or before the part
                self.parts.append((k, node[start:end], owner >= 0 and at + start < spans[owner][1]))
            at += len(node)
        text = "".join("" if code else part for _, part, code in self.parts)
        paragraph = Paragraph.parse(text, lang) if any(c.isalpha() for c in text) else None
        self.paragraph = paragraph or Paragraph([], [text])
        self.sentences = self.paragraph.sentences

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the pieces have it, its codes in it (one per sentence): what a reviewer
        is shown (nmt.quality_report)."""
        return self.paragraph.as_written("".join(self.nodes), self.spans)

    def rebuilt(self, results: Sequence[Result]) -> list[str]:
        """The new text of each piece, each sentence translated (results: one per sentence) and
        every code as it was; anything in the model's words that reads as a code is removed."""
        if len(results) != len(self.sentences):
            raise ValueError(f"{len(results)} translations for {len(self.sentences)} sentences")
        if not self.sentences:
            return list(self.nodes)
        from .markup import placed_texts  # imported here, as in MaskedText._joined

        placed = placed_texts(["" if code else part for _, part, code in self.parts], self.paragraph, results)
        out = self._joined(placed)
        for bare in (False, True):  # as MaskedText.rebuilt: words set apart, then left without code characters
            if [m.group(0) for m in CODE.finditer("".join(out))] == self.codes:
                break
            out = self._joined(placed, apart=True, bare=bare)
        return out

    def _joined(self, placed: list[str], *, apart: bool = False, bare: bool = False) -> list[str]:
        """Each piece again from its parts: codes as written, the placed words beside them, set apart
        from a code by a space where the source glued no word to it (or everywhere, `apart`), and
        without the characters codes are made of (`bare`)."""
        out = ["" for _ in self.nodes]
        # Whether the text written so far ends with a code: a part that comes out empty between a code
        # and the words placed after it leaves them against the code ("http://a.b" + "" + "r").
        after_code = False
        # And whether the next part written with any text after each part is a code (one pass back:
        # a paragraph of 30,000 runs placed into its first costs no square).
        # The model's words are cleaned of codes first: one left empty by it parts nothing either.
        cleaned = [
            without_codes(new) if new != old and not code else new
            for new, (_, old, code) in zip(placed, self.parts, strict=True)
        ]
        code_next, then = [False] * len(placed), False
        for k in range(len(placed) - 1, -1, -1):
            code_next[k] = then
            then = self.parts[k][2] if self.parts[k][2] or cleaned[k] else then
        for k, (new, (node, old, code)) in enumerate(zip(cleaned, self.parts, strict=True)):
            if not code:
                changed = placed[k] != old
                # beside a code now, though not in the source: the parts between came out empty
                after = after_code and (changed or not self.parts[k - 1][2])
                before = code_next[k] and (changed or not self.parts[k + 1][2])
                if apart and after and before and not new:  # two codes the source's words parted
                    new = " "
                if after:
                    glued = self.parts[k - 1][2] and old[:1].isalnum()  # the source wrote this word against it
                    if new[:1].isalnum() and not glued or apart and new[:1] not in " ":
                        new = " " + new
                if apart and before and new[-1:] not in " ":
                    new += " "
            if bare and not code and CODE_MAKERS.search(new):
                # each a space, not nothing: "ht>tp://" or "a$@b.de" closed up would be a URL or an address
                new = CODE_MAKERS.sub(" ", new)
            written = old if code else new
            out[node] += written
            after_code = code if written else after_code
        return out


def with_codes(written: str, read: str, result: Result, lang: str) -> str | None:
    """The translation of a sentence with its codes placed again by its word alignment, as its
    document places them: `written` is the sentence as the document has it (MaskedText.sentences_as_written),
    `read` what the model read of it and `result` what the model gave (translation, alignment).
    None where the sentence read alone is not `read` again (its document read it with other codes:
    an ICU message's "#"): then no place is known for its codes."""
    as_string = MaskedText(written, lang)
    if as_string.sentences == [read]:
        return as_string.rebuilt([result])
    as_pieces = MaskedNodes([written], lang)
    return as_pieces.rebuilt([result])[0] if as_pieces.sentences == [read] else None


def _as_written(code: Code) -> str:
    """A code as the string writes it, an ICU construct's messages included."""
    return "".join(part.text if isinstance(part, MaskedText) else part for part in code.parts)


def without_codes(text: str, *, in_plural: bool = False) -> str:
    """`text` (a model's output) with anything that reads as a placeholder removed: none is invented.
    Until none is left: what is around a code taken out can read as another ("{" + "${x}" + "}": "{}"),
    and an ICU construct or a plural's "#" is a code too."""
    while CODE.search(text) or "{" in text or in_plural and "#" in text:
        pieces, codes = _cut(text, "en", in_plural)
        if not codes:
            break
        text = re.sub(r"  +", " ", "".join(pieces))
    return text


def codes_of(text: str, *, in_plural: bool = False) -> list[str]:
    """The placeholders and tags of `text`, as written, in order (MaskedText.codes, without splitting
    the text around them into sentences)."""
    lines = re.split(r"\r\n|\n|\r", text)
    return _flat([code for line in lines for code in _cut(line, "en", in_plural)[1]])


def _flat(codes: list[Code]) -> list[str]:
    """The written parts of `codes`, an ICU construct's messages' own codes in their places."""
    found = []
    for code in codes:
        for part in code.parts:
            found += part.codes if isinstance(part, MaskedText) else [part]
    return found


def _cut(line: str, lang: str, in_plural: bool) -> tuple[list[str], list[Code]]:
    """The text pieces of `line` and the codes between them."""
    pieces, codes, at, start = [], [], 0, 0
    while at < len(line):
        icu = _ICU_START.match(line, at) if line[at] == "{" else None
        construct = _icu(line, at, lang) if icu else None
        match = None if construct else CODE.match(line, at)
        if construct is None and match is None and not (in_plural and line[at] == "#"):
            at += 1
            continue
        pieces.append(line[start:at])
        if construct is not None:
            code, at = construct
        else:
            end = match.end() if match else at + 1
            code, at = Code([line[at:end]]), end
        codes.append(code)
        start = at
    pieces.append(line[start:])
    return pieces, codes


def _icu(line: str, at: int, lang: str) -> tuple[Code, int] | None:
    """The ICU plural or select construct starting at `at` and where it ends; None where the braces
    do not balance as one (then "{" is text)."""
    head = _ICU_START.match(line, at)
    plural = head.group(1) != "select"  # "#" is the number in a plural's messages
    parts: list[str | MaskedText] = []
    written, i = head.group(0), head.end()
    while True:
        selector = _ICU_SELECTOR.match(line, i)
        if selector is None:
            rest = re.match(r"\s*\}", line[i:])
            if rest is None or not parts:
                return None
            parts.append(written + rest.group(0))
            return Code(parts), i + rest.end()
        written += selector.group(0)
        i = selector.end()
        depth, j = 1, i
        while j < len(line) and depth:  # the message runs to its matching brace
            depth += {"{": 1, "}": -1}.get(line[j], 0)
            j += 1
        if depth:
            return None
        parts += [written, MaskedText(line[i : j - 1], lang, in_plural=plural)]
        written, i = "}", j
