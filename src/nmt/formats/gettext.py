"""gettext catalogs (.po, .pot): each message translated into its msgstr, as translators expect.

    msgid "Delete %d files?"            ->  msgid "Delete %d files?"
    msgstr ""                               msgstr "%d Dateien löschen?"     (and "#, fuzzy")

- Placeholders (printf, braces, markup, escapes) are kept exactly, in their order (nmt.placeholders),
  so `msgfmt -c`, which compares a c-format msgstr's conversions with its msgid's, accepts the result.
- A plural message (msgid_plural) fills every msgstr[n] the target language has: the form that
  holds n = 1 gets the singular's translation, every other form the plural's. How many forms and
  which is which come from the catalog's Plural-Forms header when it is written for the target
  language, else from CLDR's rules (Babel), and the header is set to match.
- Machine-filled messages are marked "fuzzy", so gettext does not use them until a translator has
  looked (`msgfmt` leaves fuzzy messages out). Context (msgctxt), comments, references and flags
  are kept; obsolete (#~) messages and the header entry are not translated.
- A message that already has a translation is left as it is, unless `retranslate`.
- The header's Language becomes the target's, its charset UTF-8 (the catalog is written in UTF-8).

polib (MIT) reads and writes the catalog; it re-wraps long lines as gettext's own tools do.
"""

from __future__ import annotations

import gettext as stdlib_gettext
import logging
import re

import polib

from ..placeholders import MaskedText
from .errors import DocumentError
from .text_files import Results, check_results

log = logging.getLogger(__name__)

_CHARSET = re.compile(rb"charset=([\w.:-]+)", re.IGNORECASE)
_PLURAL_FORMS = re.compile(r"^\s*nplurals\s*=\s*(\d+)\s*;\s*plural\s*=\s*([^;]+);?\s*$")
MAX_PLURALS = 6  # the most any language has (Arabic)
# A message is a user interface string or a paragraph of documentation; one larger than this is no
# message but an attack or a mistake (sentence splitting alone would take minutes).
MAX_MESSAGE_CHARS = 100_000


def plural_forms(header: str | None, header_language: str, target: str | None) -> tuple[str, int, int]:
    """The Plural-Forms header to write, how many msgstr[n] a plural message needs, and which one
    holds n = 1 alone (-1: none does): the catalog's own where it is written for `target`, else
    CLDR's for `target`, else the catalog's own, else English's ("nplurals=2; plural=(n != 1);")."""
    written = bool(header) and "INTEGER" not in header  # a template's header is a placeholder
    same_language = target is None or _language(header_language) == _language(target)
    if written and (same_language or not _cldr(target)):
        text = header  # the catalog's own rule for the target: checked, never silently replaced
    else:
        text = _cldr(target) or "nplurals=2; plural=(n != 1);"
    m = _PLURAL_FORMS.match(text)
    if m is None:
        raise ValueError(f"Plural-Forms {text!r} is not 'nplurals=N; plural=EXPRESSION;'")
    count, expression = int(m.group(1)), m.group(2)
    if not 1 <= count <= MAX_PLURALS:
        raise ValueError(f"Plural-Forms has nplurals={count}; a language has 1 to {MAX_PLURALS}")
    try:
        form = stdlib_gettext.c2py(expression)
        singular = int(form(1))
        # a form that also holds larger numbers (Japanese's only one) takes the plural's text
        if any(int(form(n)) == singular for n in range(2, 1001)):
            singular = -1
    except (ValueError, SyntaxError) as err:  # c2py raises ValueError for anything but C's arithmetic
        raise ValueError(f"Plural-Forms {text!r} is not a plural expression: {err}") from None
    return text.strip(), count, singular


def _language(code: str) -> str:
    return re.split(r"[-_@.]", code.strip().lower())[0] if code else ""


def _cldr(target: str | None) -> str | None:
    """The Plural-Forms of `target` from CLDR (Babel); None for a language it does not know."""
    if not target:
        return None
    from babel.core import UnknownLocaleError  # noqa: PLC0415 (Babel's data loads only for a catalog)
    from babel.messages.plurals import get_plural  # noqa: PLC0415

    try:
        return get_plural(target.replace("-", "_")).plural_forms
    except (UnknownLocaleError, ValueError):
        return None


def _decoded(content: bytes, name: str) -> str:
    """The catalog's text, in the charset its header names (UTF-8 if none)."""
    found = _CHARSET.search(content[:4096])
    charset = found.group(1).decode("ascii") if found else "utf-8"
    if charset.upper() == "CHARSET":  # a template's placeholder
        charset = "utf-8"
    try:
        return content.decode("utf-8-sig" if charset.lower().replace("_", "-") == "utf-8" else charset)
    except LookupError:
        raise DocumentError(f"{name}: the header names the charset {charset!r}, which Python does not know") from None
    except UnicodeDecodeError as err:
        line = content[: err.start].count(b"\n") + 1
        raise DocumentError(f"{name}:{line}: not valid {charset} (byte {err.start + 1} of the file)") from None


class GettextCatalog:
    """A .po or .pot file read for translation: `sentences`, then `rebuilt(results)` (UTF-8 bytes)."""

    def __init__(self, content: bytes, name: str, lang: str, *, target: str | None = None, retranslate: bool = False):
        self.name = name
        # polib reads a string that names an existing file as that file: a line break makes sure
        # an uploaded catalog is only ever read as itself.
        text = _decoded(content, name) + "\n"
        # A message too long is refused before polib reads it (a 100 MB line takes it many seconds);
        # escapes make a line at most twice its message, and its keyword and quotes a few more.
        for number, line in enumerate(text.splitlines(), 1):
            if len(line) > 2 * MAX_MESSAGE_CHARS + 32:
                raise DocumentError(
                    f"{name}:{number}: a line of {len(line):,} characters; nmt translates messages of up to "
                    f"{MAX_MESSAGE_CHARS:,}",
                    too_large=True,
                )
        check_syntax(text, name)
        try:
            self.catalog = polib.pofile(text, encoding="utf-8", wrapwidth=78, check_for_duplicates=True)
        except (OSError, ValueError) as err:  # polib's syntax errors are OSErrors naming the line
            raise DocumentError(f"{name}: {err}") from None
        for entry in self.catalog:
            longest = max(len(entry.msgid), len(entry.msgid_plural or ""))
            if longest > MAX_MESSAGE_CHARS:
                raise DocumentError(
                    f"{name}:{_line_of(entry, text)}: a message of {longest:,} characters; nmt translates "
                    f"messages of up to {MAX_MESSAGE_CHARS:,}",
                    too_large=True,
                )
        metadata = self.catalog.metadata
        try:
            self.plurals, self.count, self.singular = plural_forms(
                metadata.get("Plural-Forms"), metadata.get("Language", ""), target
            )
        except ValueError as err:
            raise DocumentError(f"{name}: {err}") from None
        self.target = target
        self.entries = [
            entry
            for entry in self.catalog
            if entry.msgid and not entry.obsolete and (retranslate or not _has_translation(entry))
        ]
        self.texts: list[MaskedText] = []
        for entry in self.entries:
            self.texts.append(MaskedText(entry.msgid, lang))
            if entry.msgid_plural:
                self.texts.append(MaskedText(entry.msgid_plural, lang))
        self.sentences = [s for text in self.texts for s in text.sentences]

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the file has it, its placeholders in it (one per sentence): what a
        reviewer is shown (nmt.quality_report)."""
        return [w for text in self.texts for w in text.sentences_as_written]

    def rebuilt(self, results: Results) -> bytes:
        """The catalog with each message's msgstr filled and marked fuzzy, the header set for the target."""
        check_results(results, self.sentences)
        answers = iter(results)
        translated = iter([text.rebuilt([next(answers) for _ in text.sentences]) for text in self.texts])
        for entry in self.entries:
            singular = next(translated)
            if entry.msgid_plural:
                plural = next(translated)
                entry.msgstr_plural = {k: singular if k == self.singular else plural for k in range(self.count)}
            else:
                entry.msgstr = singular
            if "fuzzy" not in entry.flags:
                entry.flags.insert(0, "fuzzy")
            entry.previous_msgid = entry.previous_msgid_plural = entry.previous_msgctxt = None
        self._set_header()
        return written_catalog(self.catalog).encode("utf-8")

    def _set_header(self) -> None:
        metadata = self.catalog.metadata
        if self.target:
            self.catalog.metadata_is_fuzzy = False  # a template's header is fuzzy until a language is set (msginit)
            metadata["Language"] = self.target.replace("-", "_")  # gettext names locales as POSIX does: pt_BR
        content_type = metadata.get("Content-Type", "text/plain; charset=UTF-8")
        metadata["Content-Type"] = re.sub(r"charset=[\w.:-]+", "charset=UTF-8", content_type, flags=re.IGNORECASE)
        if "charset=" not in metadata["Content-Type"].lower():
            metadata["Content-Type"] = "text/plain; charset=UTF-8"
        metadata.setdefault("Content-Transfer-Encoding", "8bit")
        if any(entry.msgid_plural for entry in self.catalog) or "Plural-Forms" in metadata:
            metadata["Plural-Forms"] = self.plurals
        # A plural message a translator filled before keeps its forms: the header now counts more or fewer.
        for entry in self.catalog:
            if entry.msgid_plural and entry not in self.entries and not entry.obsolete:
                forms = entry.msgstr_plural or {}
                if forms and len(forms) != self.count:
                    log.warning(
                        "%s:%d: msgstr has %d plural forms where Plural-Forms says %d; left as it is",
                        self.name,
                        entry.linenum,
                        len(forms),
                        self.count,
                    )


def written_catalog(catalog: polib.POFile) -> str:
    """The catalog as polib writes it, but for the header's comment lines: polib writes one that
    starts with ":" or "," as "#:" or "#,", a reference or flags line, which gettext's tools read as
    such and polib cannot read back ("# :src" -> "#:src": a syntax error). Written as gettext writes
    a translator's comment ("# :src"), each reads back as itself."""
    text = catalog.__unicode__()
    lines = catalog.header.split("\n")
    polibs = "".join("#\n" if not line else f"#{line}\n" if line[:1] in ",:" else f"# {line}\n" for line in lines)
    if not text.startswith(polibs):  # another polib's way of writing: its own is kept
        return text
    return "".join(f"# {line}\n" if line else "#\n" for line in lines) + text[len(polibs) :]


_KEYWORD_LINE = re.compile(r'^(?:#~\s*)?(?:(?:msgid|msgid_plural|msgstr|msgctxt|msgstr\[\d+\])\s+)?"(.*)$')
_QUOTED = re.compile(r'(?:[^"\\]|\\.)*"\s*')


def check_syntax(text: str, name: str) -> None:
    """A DocumentError naming the line of a string that is not closed ('msgstr "b'): polib would read
    it and lose the rest of the message, where gettext's tools refuse the file."""
    for number, line in enumerate(text.splitlines(), 1):
        found = _KEYWORD_LINE.match(line.strip())
        if found is not None and not _QUOTED.fullmatch(found.group(1)):
            raise DocumentError(f"{name}:{number}: a string that is not closed with a quote: {line.strip()[:60]}")


def _line_of(entry: polib.POEntry, text: str) -> int:
    """The line (from 1) where `entry` starts; polib counts the first entry's as 0."""
    if entry.linenum:
        return entry.linenum
    starts = (i for i, line in enumerate(text.splitlines(), 1) if line.startswith(("#", "msgctxt", "msgid")))
    return next(starts, 1)


def _has_translation(entry: polib.POEntry) -> bool:
    if entry.msgid_plural:
        return any(text for text in (entry.msgstr_plural or {}).values())
    return bool(entry.msgstr)
