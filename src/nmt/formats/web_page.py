"""Web pages (.html, .htm) as documents: the text of the page translated sentence by sentence, its
markup placed back on the translated words by their word alignment (nmt.markup.HtmlPage), the
rest of the file (scripts, styles, attributes, comments) kept as it was, but for the root <html>'s
lang, which names the target language where it is known. Placeholders in the text ({name}, %s, a
URL, an e-mail address: nmt.placeholders) are placed as tags are, never read by the model."""

from __future__ import annotations

from ..markup import HtmlPage
from ..placeholders import CODE
from .language_tags import target_tag
from .text_files import Results, decoded


class WebPage:
    """A web page read for translation: `sentences`, then `rebuilt(results)` (UTF-8 bytes)."""

    def __init__(self, content: bytes, name: str, lang: str, *, target: str | None = None):
        self.page = HtmlPage(decoded(content, name), lang, codes=CODE)
        self.sentences = self.page.sentences
        if tag := target_tag(target):
            self.page.name_language(str(tag))

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the file has it, its placeholders in it (one per sentence): what a
        reviewer is shown (nmt.quality_report)."""
        return self.page.sentences_as_written

    def rebuilt(self, results: Results) -> bytes:
        return self.page.rebuilt(results).encode("utf-8")
