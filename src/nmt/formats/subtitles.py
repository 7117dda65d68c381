"""Subtitles (.srt, .vtt): each cue's text translated, numbering, timings and everything else kept.

A file is read as blocks separated by blank lines. In a block with a timing line ("00:00:01,000 -->
00:00:04,000"), the lines after it are the cue's text; every other line (the SubRip number, a WebVTT
header, NOTE, STYLE or REGION block, cue settings) is written back byte for byte, line endings
included; a block with neither a timing nor WebVTT's own header (a mistyped "->") is kept too, and
the log names its line. A cue's lines are translated as one paragraph (a sentence often runs over
two lines) and the translation is wrapped again over as many lines, of balanced length.

Markup inside a cue (<i>, <b>, <u>, <font>) goes through the HTML placement (nmt.markup), so an
italic word stays italic; a WebVTT voice tag at the start (<v Roger>) is kept as it is. Placeholders
and URLs in a cue ({name}, %s, https://...: nmt.placeholders) are never read by the model and come
back as written, placed by the same alignment.

A parsing library (srt, webvtt-py) would write the file again from its own model of it,
renumbering cues and normalising timings; reading only the text lines keeps the rest exact.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..markup import HtmlPage
from ..placeholders import CODE, MaskedNodes
from .errors import DocumentError
from .text_files import UTF8_BOM, check_results, decoded

log = logging.getLogger(__name__)

WEBVTT_BLOCKS = ("WEBVTT", "NOTE", "STYLE", "REGION")  # blocks of a .vtt that hold no cue
_WRAP_WORD = re.compile(r"(?:<[^>]*>|\S)+")
_VOICE = re.compile(r"^(<v(?:\.[\w.-]+)?(?:\s[^>]*)?>)")  # WebVTT's <v Speaker> opening a cue


def wrapped(text: str, lines: int) -> list[str]:
    """`text` over `lines` lines of about equal length, cut between words."""
    words = _WRAP_WORD.findall(text)  # a tag with attributes (<font color="red">) stays whole
    if lines <= 1 or len(words) <= 1:
        return [text]
    lines = min(lines, len(words))
    total = sum(len(w) for w in words) + len(words) - 1
    out, current = [], []
    for w in words:
        room = total * (len(out) + 1) / lines
        written = sum(len(line) + 1 for line in out) + len(" ".join([*current, w]))
        if current and written > room and len(out) < lines - 1:
            out.append(" ".join(current))
            current = []
        current.append(w)
    out.append(" ".join(current))
    return out


@dataclass
class Cue:
    """A cue's text lines: where they are in the file, the voice tag kept, and its text read for translation."""

    first: int  # index of its first text line in the file's lines
    count: int
    voice: str
    page: HtmlPage | None  # for a cue with markup
    text: MaskedNodes | None  # for a cue without

    @property
    def sentences(self) -> list[str]:
        return self.page.sentences if self.page is not None else self.text.sentences

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the file has it, its placeholders in it (one per sentence): what a
        reviewer is shown (nmt.quality_report)."""
        return (self.page if self.page is not None else self.text).sentences_as_written


class Subtitles:
    """A .srt or .vtt file read for translation: `sentences`, then `rebuilt(results)`."""

    def __init__(self, content: bytes, name: str, lang: str):
        text = decoded(content, name)
        self.bom = content.startswith(UTF8_BOM)
        self.lines = text.splitlines(keepends=True)
        if name.lower().endswith(".vtt") and not text.lstrip().startswith("WEBVTT"):
            raise DocumentError(f"{name}:1: a WebVTT file starts with 'WEBVTT'")
        self.cues: list[Cue] = []
        untimed: list[int] = []  # the first line (from 1) of each block that is neither a cue nor WebVTT's own
        block: list[int] = []
        for i, line in enumerate([*self.lines, "\n"]):
            if line.strip():
                block.append(i)
                continue
            timing = next((k for k, j in enumerate(block) if "-->" in self.lines[j]), None)
            if timing is not None and timing + 1 < len(block):
                first = block[timing + 1]
                self.cues.append(self._cue(first, len(block) - timing - 1, lang))
            elif timing is None and block and not self.lines[block[0]].lstrip().startswith(WEBVTT_BLOCKS):
                untimed.append(block[0] + 1)
            block = []
        if untimed:  # a mistyped timing ("->"): kept as it is, which the reader must be told
            where = ", ".join(map(str, untimed[:10])) + (", ..." if len(untimed) > 10 else "")
            log.warning(
                "%s: %d block(s) without a cue timing kept untranslated (from line %s)", name, len(untimed), where
            )
        if not any("-->" in line for line in self.lines):
            raise DocumentError(f"{name}: no cue timings ('00:00:01,000 --> 00:00:04,000'): not a subtitle file")
        self.sentences = [s for cue in self.cues for s in cue.sentences]

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the file has it, its placeholders in it (one per sentence): what a
        reviewer is shown (nmt.quality_report)."""
        return [w for cue in self.cues for w in cue.sentences_as_written]

    def _cue(self, first: int, count: int, lang: str) -> Cue:
        text = " ".join(line.strip() for line in self.lines[first : first + count])
        voice = ""
        if m := _VOICE.match(text):
            voice, text = m.group(1), text[m.end() :].lstrip()
            if text.endswith("</v>"):
                text = text[: -len("</v>")].rstrip()
        if "<" in text:
            return Cue(first, count, voice, HtmlPage(text, lang, codes=CODE), None)
        return Cue(first, count, voice, None, MaskedNodes([text], lang))

    def rebuilt(self, results: Sequence[tuple[str, list[tuple[int, int]] | None]]) -> bytes:
        """The file with each cue's text translated, every other line as it was."""
        check_results(results, self.sentences)
        lines = list(self.lines)
        answers = iter(results)
        for cue in self.cues:
            mine = [next(answers) for _ in cue.sentences]
            new = cue.page.rebuilt(mine) if cue.page is not None else cue.text.rebuilt(mine)[0]
            old = lines[cue.first : cue.first + cue.count]
            ending = "\r\n" if old[0].endswith("\r\n") else "\n"
            last_ending = old[-1][len(old[-1].rstrip("\r\n")) :]  # the file's last line may have none
            closing = "</v>" if cue.voice and old[-1].rstrip().endswith("</v>") else ""
            parts = wrapped(new.strip(), cue.count)  # at most cue.count lines; fewer for fewer words
            parts[0] = cue.voice + parts[0]
            parts[-1] += closing  # the same line as the voice, for a one-line cue
            for k in range(cue.count):
                last = k == len(parts) - 1
                lines[cue.first + k] = parts[k] + (last_ending if last else ending) if k < len(parts) else ""
        text = "".join(lines)
        return ("\ufeff" if self.bom else "").encode() + text.encode("utf-8")
