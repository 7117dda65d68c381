"""What every format of text (web pages, Markdown, subtitles) shares: reading the bytes as UTF-8,
and checking that a document got one translation per sentence."""

from __future__ import annotations

from collections.abc import Sequence

from .errors import DocumentError

UTF8_BOM = b"\xef\xbb\xbf"
# What a document's sentences come back as: (translation, word alignment or None) each, in order.
Results = Sequence[tuple[str, list[tuple[int, int]] | None]]


def decoded(content: bytes, name: str) -> str:
    """`content` as text, its byte-order mark dropped (it is no text to translate); a DocumentError
    naming the file, line and byte where it is not UTF-8."""
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = content[: err.start].count(b"\n") + 1
        raise DocumentError(f"{name}:{line}: not valid UTF-8 (byte {err.start + 1} of the file)") from None


def check_results(results: Sequence, sentences: Sequence[str]) -> None:
    """A ValueError unless there is one result per sentence: a translate function that drops or adds
    one would shift every later translation onto the wrong sentence."""
    if len(results) != len(sentences):
        raise ValueError(f"{len(results)} translations for {len(sentences)} sentences")
