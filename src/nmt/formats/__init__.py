"""Documents as people keep them: each file's text translated, everything else kept.

    translate_document(content, "report.docx", translate, lang="de") -> the translated .docx's bytes

    .docx .pptx .xlsx .odt .odp .ods   office.py (the parts with text; runs placed by alignment)
    .epub                              epub.py (chapters as web pages, the table of contents)
    .srt .vtt                          subtitles.py (cue text; numbering and timings kept)
    .md                                markdown.py (prose and headings; code and link targets kept)
    .html .htm                         web_page.py (the page's text; its markup placed by alignment)
    .po .pot                           gettext.py (each msgid into its msgstr, placeholders kept, fuzzy)
    .xlf .xliff                        xliff.py (XLIFF 1.2 and 2.x: each unit's source into its target)
    .json .arb .yml .yaml              resource_files.py (every string value; keys, order, comments kept)
    .xml                               android.py (an Android strings.xml: strings, plurals, arrays)
    .txt                               plain_text.py (lines of paragraphs; `nmt translate` streams
                                       text files instead: not among DOCUMENT_FORMATS)

Where the language translated into is known (`target`), a file that names its text's language names
the target instead (formats.language_tags): Word's w:lang, a slide's lang, ODF's fo:language and
fo:country, EPUB's dc:language, a page's <html lang>, XLIFF's target language, a catalog's Language,
an ARB's @@locale, a Rails file's root key.
An .xlsx, Markdown and subtitles (WebVTT's header included) have no such place.

`translate` takes a list of sentences and gives (translation, word alignment or None) for each, as
for web pages (nmt.markup.translate_html; nmt.translation_io.aligned_translations builds one from a
Translator). Every sentence of a document goes in one call, so they are batched by length.

Refused, each with a DocumentError naming the file: an unknown extension; macro-enabled Office files
(.docm, .xlsm, .pptm: their macros would travel with the translation); PDF (writing a translation
back into a PDF's pages needs a library that can lay text out again; PyMuPDF, which LibreTranslate
uses, is AGPL); a corrupt, encrypted or oversized package (formats.packages); unsafe XML
(formats.xml_text).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePath
from typing import Protocol

from .errors import DocumentError
from .language_tags import target_tag
from .text_files import Results

__all__ = [
    "DOCUMENT_FORMATS",
    "FILE_FORMATS",
    "REFUSED",
    "DocumentError",
    "read_document",
    "reviewed_pairs",
    "translate_document",
    "document_format",
]

OFFICE_FORMATS = (".docx", ".pptx", ".xlsx", ".odt", ".odp", ".ods")  # formats.office.OFFICE_KINDS
# software's strings: placeholders kept, the target language written
LOCALISATION_FORMATS = (".po", ".pot", ".xlf", ".xliff", ".json", ".arb", ".yml", ".yaml", ".xml")
BILINGUAL_FORMATS = (".po", ".pot", ".xlf", ".xliff")  # a source and its translation side by side: existing ones kept
DOCUMENT_FORMATS = (*OFFICE_FORMATS, ".epub", ".srt", ".vtt", ".md", ".html", ".htm", *LOCALISATION_FORMATS)
# every format read_document reads: the documents and plain text (.txt), which `nmt translate`
# streams as lines instead (nmt.translation_io) and the server reads whole (/translate_file)
FILE_FORMATS = (".txt", *DOCUMENT_FORMATS)
# text files: read from stdin, written to stdout
TEXT_FORMATS = (".srt", ".vtt", ".md", ".html", ".htm", *LOCALISATION_FORMATS)
REFUSED = {
    ".docm": "a macro-enabled Word document: save it as .docx (nmt does not carry macros)",
    ".xlsm": "a macro-enabled Excel workbook: save it as .xlsx (nmt does not carry macros)",
    ".pptm": "a macro-enabled presentation: save it as .pptx (nmt does not carry macros)",
    ".pdf": "PDF cannot be written back with its layout by a permissively licensed library: "
    "convert it to .docx or .odt first (docs/real-text.md)",
    ".doc": "a pre-2007 Word document: save it as .docx",
    ".xls": "a pre-2007 Excel workbook: save it as .xlsx",
    ".ppt": "a pre-2007 presentation: save it as .pptx",
}


class Document(Protocol):
    sentences: list[str]  # what the model reads: each sentence without its placeholders

    @property
    def sentences_as_written(self) -> list[str]: ...  # each sentence with them, as the file has it

    def rebuilt(self, results: Results) -> bytes: ...


def document_format(name: str) -> str:
    """The extension of a file nmt translates whole ('.docx', '.txt'); DocumentError otherwise."""
    extension = PurePath(name).suffix.lower()
    if extension in REFUSED:
        raise DocumentError(f"{name}: {REFUSED[extension]}")
    if extension not in FILE_FORMATS:
        raise DocumentError(
            f"{name}: unknown document format {extension or '(no extension)'!r}; nmt translates "
            f"{', '.join(FILE_FORMATS)}"
        )
    return extension


def read_document(
    content: bytes,
    name: str,
    lang: str,
    extension: str | None = None,
    *,
    target: str | None = None,
    retranslate: bool = False,
) -> Document:
    """The document in `content`, read for translation (`sentences`, then `rebuilt(results)`); its
    format from `extension` or from the name's. lang: the source language (sentence splitting);
    target: the language it is translated into, written where the file names its language (None:
    unknown, left as it is); retranslate: a localisation file's existing translations are
    translated again (else they are kept)."""
    # The readers load lxml and markdown-it: only when a document is read, not with the CLI's parser.
    from .android import AndroidStrings  # noqa: PLC0415
    from .epub import EpubDocument  # noqa: PLC0415
    from .gettext import GettextCatalog  # noqa: PLC0415
    from .markdown import MarkdownDocument  # noqa: PLC0415
    from .office import OfficeDocument  # noqa: PLC0415
    from .plain_text import PlainText  # noqa: PLC0415
    from .resource_files import JsonResources, YamlResources  # noqa: PLC0415
    from .subtitles import Subtitles  # noqa: PLC0415
    from .web_page import WebPage  # noqa: PLC0415
    from .xliff import XliffDocument  # noqa: PLC0415

    extension = document_format(name if extension is None else f"x{extension}")
    tag = target_tag(target)
    written = str(tag) if tag else None  # BCP 47's case ("pt-BR"), whichever way the caller wrote it
    if extension in (".po", ".pot"):
        return GettextCatalog(content, name, lang, target=written, retranslate=retranslate)
    if extension in (".xlf", ".xliff"):
        return XliffDocument(content, name, lang, target=written, retranslate=retranslate)
    if extension in (".json", ".arb"):
        return JsonResources(content, name, lang, target=written)
    if extension in (".yml", ".yaml"):
        return YamlResources(content, name, lang, target=written)
    if extension == ".xml":
        return AndroidStrings(content, name, lang, target=written)
    if extension in OFFICE_FORMATS:
        return OfficeDocument(content, name, extension, lang, target=target)
    if extension == ".epub":
        return EpubDocument(content, name, lang, target=target)
    if extension in (".srt", ".vtt"):
        return Subtitles(content, name, lang)
    if extension in (".html", ".htm"):
        return WebPage(content, name, lang, target=target)
    if extension == ".txt":
        return PlainText(content, name, lang)
    return MarkdownDocument(content, name, lang)


def translate_document(
    content: bytes,
    name: str,
    translate: Callable[[list[str]], Results],
    *,
    lang: str,
    extension: str | None = None,
    target: str | None = None,
    retranslate: bool = False,
) -> bytes:
    """The document translated, as bytes of the same format (see the module's docstring and
    `read_document`)."""
    document = read_document(content, name, lang, extension, target=target, retranslate=retranslate)
    return document.rebuilt(translate(document.sentences) if document.sentences else [])


def reviewed_pairs(document: Document, results: Results, lang: str) -> list[tuple[str, str]]:
    """Each sentence of `document` and its translation (`results`: one per sentence) as the document
    and its translation have them, placeholders included (the model read them without): what a
    reviewer is shown (nmt.quality_report). A translation whose codes have no known place (a
    plural's "#": placeholders.with_codes) is shown as the model wrote it."""
    from ..placeholders import with_codes  # noqa: PLC0415 - with the readers, not the CLI's parser

    written = document.sentences_as_written
    return [
        (shown, with_codes(shown, read, result, lang) or result[0])
        for shown, read, result in zip(written, document.sentences, results, strict=True)
    ]
