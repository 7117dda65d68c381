"""Plain text files (.txt) as documents: each line a paragraph, translated sentence by sentence with
its spacing kept, blank lines kept; placeholders in it ({name}, %s, <b>, a URL: nmt.placeholders)
kept exactly, placed by word alignment. Its lines are read as str.splitlines reads them and written
with "\\n", the last one ended too, as LibreTranslate writes a translated .txt.

`nmt translate` streams a text file instead (--format lines or text: nmt.translation_io), so that
its output starts before a long input ends."""

from __future__ import annotations

from ..placeholders import MaskedText
from .text_files import Results, decoded


class PlainText:
    """A text file read for translation: `sentences`, then `rebuilt(results)` (UTF-8 bytes).

    text: the file's text as translated (its lines joined by "\\n"); codes: its placeholders, which
    only word alignments place (a file without any needs none)."""

    def __init__(self, content: bytes, name: str, lang: str):
        self.text = "\n".join(decoded(content, name).splitlines())
        self.masked = MaskedText(self.text, lang)
        self.sentences = self.masked.sentences
        self.codes = self.masked.codes

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the file has it, its placeholders in it (one per sentence): what a
        reviewer is shown (nmt.quality_report)."""
        return self.masked.sentences_as_written

    def rebuilt(self, results: Results) -> bytes:
        return (self.masked.rebuilt(results) + "\n").encode("utf-8")
