"""The language a document is translated into, as the formats that name a text's language write it.

Word, PowerPoint, OpenDocument, EPUB and HTML name the language of their text, so that a spelling
checker, a screen reader or a hyphenator treats it as what it is; a translation that kept the
source's ("de-DE") would have its English checked as German. The target arrives as the model or the
request names it ("en", "pt_BR", or "pt-br" from the LibreTranslate API) and is written as BCP 47
writes it ("pt-BR", "zh-Hans"), which all of these formats take.

Office formats keep three languages per run, one for each kind of script (Word's w:val, w:eastAsia
and w:bidi; ODF's plain, -asian and -complex attributes). Which one the target fills is decided by
its language alone, kept simple: Chinese, Japanese and Korean are East Asian, the languages written
right to left are complex, every other is taken as written in Latin (or Cyrillic, Greek...) script.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

EAST_ASIAN = frozenset({"zh", "ja", "ko", "yue"})
RIGHT_TO_LEFT = frozenset({"ar", "arz", "ckb", "dv", "fa", "he", "iw", "ps", "sd", "syr", "ug", "ur", "yi"})
_SCRIPT = re.compile(r"[A-Za-z]{4}")
_REGION = re.compile(r"[A-Za-z]{2}|[0-9]{3}")


@dataclass(frozen=True)
class LanguageTag:
    """A target language: its language subtag ("pt"), script ("Hans") and region ("BR") if named."""

    language: str
    script: str | None = None
    region: str | None = None

    @classmethod
    def parse(cls, text: str) -> LanguageTag:
        """A tag as the model or a request names it, in BCP 47's case: pt_br is pt-BR, zh-hans-cn
        zh-Hans-CN; a variant or extension after them is dropped (none of these formats has a place
        for one)."""
        language, *rest = re.split(r"[-_]", text.strip())
        script = next((s.title() for s in rest[:1] if _SCRIPT.fullmatch(s)), None)
        region = next((r.upper() for r in rest[1 if script else 0 :][:1] if _REGION.fullmatch(r)), None)
        return cls(language.lower(), script, region)

    def __str__(self) -> str:
        return "-".join(part for part in (self.language, self.script, self.region) if part)

    @property
    def kind(self) -> Literal["latin", "asian", "complex"]:
        """Which of an Office format's three languages the target is (see the module's docstring)."""
        if self.language in EAST_ASIAN:
            return "asian"
        return "complex" if self.language in RIGHT_TO_LEFT else "latin"


def target_tag(target: str | None) -> LanguageTag | None:
    """The target as a LanguageTag; None where it is unknown (or empty): the file's languages are kept."""
    return LanguageTag.parse(target) if target and target.strip() else None
