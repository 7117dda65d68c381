"""LibreTranslate's API over nmt's model: the endpoints its clients already speak.

LibreTranslate (libretranslate.com) is the open translation service people deploy; its REST API
has client libraries (libretranslatepy, ...), browser extensions and CAT-tool and chat plugins.
This module answers as its documentation and source specify, so those work against nmt unchanged:

    POST /translate         q (a string or a list), source (a code or "auto"), target, format,
                            alternatives, api_key; form-encoded or JSON
                            -> {"translatedText": ..., ["detectedLanguage": ..., "alternatives": ...]}
                            nmt's own: quality=true adds "quality": {"score", "doubtful"} per text
    POST /detect            q -> [{"confidence": 0-100, "language": code}, ...] best first
    GET  /languages         [{"code", "name", "targets": [...]}, ...]
    GET  /frontend/settings the settings LibreTranslate's web page reads
    POST /translate_file    a multipart form: file (.txt), source, target, api_key
                            -> {"translatedFileUrl": ".../download_file/NAME"}, fetched once with GET

POST /translate shares its path with nmt's own API: a form body, or a JSON body with "q", is
LibreTranslate's; a JSON body with "text" is nmt's. Errors are LibreTranslate's, `{"error": TEXT}`
with its status codes and words; the server's limits, queue and deadline apply as to nmt's API.
Language identification (py3langid, langid.py's model) is restricted to the languages the server
translates from or to, so it never answers a language nothing here can translate.
"""

from __future__ import annotations

import dataclasses
import email.parser
import email.policy
import functools
import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from fastapi import Request
from fastapi.responses import JSONResponse

from ..formats import FILE_FORMATS
from ..quality import combined_quality
from ..translator import Translation
from .requests import printable

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
MAX_DETECTED = 3  # LibreTranslate returns up to 3 candidates
LIBRETRANSLATE_FIELDS = ("q", "source", "target")

# English names of the languages nmt's corpora and OPUS-MT's models cover most (a code not listed is its own name).
LANGUAGE_NAMES = {
    "ar": "Arabic",
    "cs": "Czech",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "en": "English",
    "es": "Spanish",
    "fi": "Finnish",
    "fr": "French",
    "hu": "Hungarian",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "sv": "Swedish",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "zh": "Chinese",
}


class LibreTranslateError(Exception):
    """A refusal in LibreTranslate's shape: {"error": message} with this status."""

    def __init__(self, status: int, message: str, retry_after_s: int | None = None):
        super().__init__(message)
        self.status, self.message, self.retry_after_s = status, message, retry_after_s

    def response(self) -> JSONResponse:
        headers = {"Retry-After": str(self.retry_after_s)} if self.retry_after_s is not None else None
        return JSONResponse({"error": printable(self.message)}, status_code=self.status, headers=headers)


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


@dataclass(frozen=True)
class ServedPairs:
    """The (source, target) pairs the server translates, from its models' languages."""

    pairs: tuple[tuple[str, str], ...]

    @property
    def sources(self) -> list[str]:
        return sorted({s for s, _ in self.pairs})

    @property
    def languages(self) -> list[str]:
        return sorted({code for pair in self.pairs for code in pair})

    def targets(self, source: str) -> list[str]:
        return sorted(t for s, t in self.pairs if s == source)

    def languages_json(self) -> list[dict[str, Any]]:
        """GET /languages: every language the server knows, with the targets it translates it into."""
        return [{"code": c, "name": language_name(c), "targets": self.targets(c)} for c in self.languages]

    def code(self, given: str) -> str:
        """The served code a client's code names: itself (in any case), else its language without
        script or region where only that is served (LibreTranslate's zh-Hans, pt-BR: zh, pt)."""
        given = given.lower()
        base = re.split(r"[-_]", given)[0]
        return base if given not in self.languages and base in self.languages else given

    def check(self, source: str, target: str) -> None:
        """LibreTranslate's 400s for an unknown language, then for a pair no model translates; its
        words first (a client may match them), then the directions this server has."""
        served = f" (this server translates {', '.join(f'{s}-{t}' for s, t in sorted(self.pairs))})"
        for code in (source, target):
            if code not in self.languages:
                raise LibreTranslateError(400, f"{code} is not supported{served}")
        if (source, target) not in self.pairs:
            raise LibreTranslateError(
                400,
                f"{language_name(target)} ({target}) is not available as a target language from "
                f"{language_name(source)} ({source}){served}",
            )


class LanguageDetector:
    """py3langid restricted to some languages; confidences on LibreTranslate's 0-100 scale."""

    def __init__(self, languages: list[str]):
        self.languages = languages

    @functools.cached_property
    def _identifier(self):
        from py3langid.langid import MODEL_FILE, LanguageIdentifier  # noqa: PLC0415 - slow to load: on first use

        identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        known = [code for code in self.languages if code in identifier.nb_classes]
        if len(known) >= 2:
            identifier.set_languages(known)
        return identifier, known

    def detect(self, text: str, among: Collection[str] | None = None) -> list[dict[str, Any]]:
        """Up to 3 candidates, best first; [] when the text says nothing (digits, symbols, empty),
        i.e. when every language is as likely as the others. among: the candidates allowed (a
        request's sources that translate into its target), each with its confidence among all the
        languages served; [] where none of them is one langid knows."""
        if not any(c.isalpha() for c in text):  # digits, symbols, emoji: no language to tell
            return []
        identifier, known = self._identifier
        allowed = [code for code in self.languages if among is None or code in among]
        if len(known) < 2:  # one language (or none langid knows): nothing to choose between
            return [{"confidence": 100.0, "language": allowed[0]}] if allowed else []
        ranked = identifier.rank(text)
        if ranked[0][1] - ranked[-1][1] < 1e-3:
            return []
        ranked = [(code, p) for code, p in ranked if code in allowed]
        return [{"confidence": round(p * 100, 1), "language": code} for code, p in ranked[:MAX_DETECTED]]


# --- requests --------------------------------------------------------------------------------------


def media_type(request: Request) -> str:
    """The request's media type, lower-cased, without its parameters ("" for none)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def sends_form(request: Request) -> bool:
    """A form body, or LibreTranslate's fields in the query string without one. (A form is what
    LibreTranslate's clients send; the Origin check, access.py, still keeps other sites' pages out,
    since a browser sends Origin with every cross-site POST.)"""
    kind = media_type(request)
    return kind in FORM_TYPES or (not kind and "q" in request.query_params)


def is_libretranslate_body(media_type: str, body: bytes) -> bool:
    """A form body, or a JSON object with LibreTranslate's fields (q, source, target) and not nmt's
    "text": LibreTranslate's request rather than nmt's (whose errors then name nmt's fields)."""
    if media_type in FORM_TYPES:
        return True
    if media_type != "application/json" or not any(f'"{name}"'.encode() in body for name in LIBRETRANSLATE_FIELDS):
        return False
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and "text" not in data and any(name in data for name in LIBRETRANSLATE_FIELDS)


def holds_surrogates(data: Any) -> bool:
    """Whether a parsed JSON value holds a lone surrogate anywhere (a key or a string value)."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def query_fields(request_query: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A query string's fields, the first value of each (some clients, deep-translator among them,
    send LibreTranslate's fields there, with no body)."""
    fields: dict[str, str] = {}
    for name, value in request_query:
        fields.setdefault(name, value)
    return fields


def request_fields(content_type: str, body: bytes, query: dict[str, str] | None = None) -> dict[str, Any]:
    """The fields of a JSON body, or of a form (url-encoded or multipart, as LibreTranslate's own page
    sends it) over those of the query string. A form's field the server reads, sent twice, is a 400
    (LibreTranslate would read its first value): no client of its sends one, and which value was meant
    cannot be told; other fields keep their first value."""
    media_type = content_type.split(";")[0].strip().lower()
    if media_type == "application/json":
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise LibreTranslateError(400, "Invalid JSON format") from None
        if not isinstance(data, dict):
            raise LibreTranslateError(400, "Invalid JSON format")
        if holds_surrogates(data):  # "\ud800" is valid JSON, and no text: refused before any field is read
            raise LibreTranslateError(400, "Invalid request: a field holds a lone surrogate, which is not text")
        return data
    if media_type == "multipart/form-data":
        fields, _ = form_parts(content_type, body)
        return {**(query or {}), **fields}
    try:
        values = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise LibreTranslateError(400, "Invalid request: the body is not UTF-8") from None
    return {**(query or {}), **{name: once(name, items) for name, items in values.items()}}


# The fields the endpoints read; others are passed over, however often sent
FIELDS_READ = frozenset({"q", "source", "target", "format", "alternatives", "api_key", "quality", "file"})


def once(name: str, values: list[str]) -> str:
    """A form field's value; one the server reads sent more than once is a 400 naming it (which value
    was meant?)."""
    if len(values) > 1 and name in FIELDS_READ:
        raise sent_twice(name)
    return values[0]


def sent_twice(name: str) -> LibreTranslateError:
    return LibreTranslateError(400, f"Invalid request: {printable(name)} is sent more than once")


@dataclass(frozen=True)
class TranslateCall:
    """A checked LibreTranslate translate request."""

    texts: list[str]
    batch: bool  # q was a list: the answer is a list too
    source: str  # a code, or "auto"
    target: str
    alternatives: int
    format: str = "text"  # "text" or "html"
    quality: bool = False  # nmt's field: each text's quality score and flag (text_quality)


def parse_translate(fields: dict[str, Any], max_sentences: int, max_chars: int) -> TranslateCall:
    """LibreTranslate's checks, in its order and words."""
    for name in ("q", "source", "target"):
        if not fields.get(name):  # an empty list too: LibreTranslate's `if not q`
            raise LibreTranslateError(400, f"Invalid request: missing {name} parameter")
    q, source, target = fields["q"], fields["source"], fields["target"]
    if not all(isinstance(v, str) for v in (source, target)):
        raise LibreTranslateError(400, "Invalid request: source and target must be strings")
    texts = q if isinstance(q, list) else [q]
    if not all(isinstance(t, str) for t in texts):
        raise LibreTranslateError(400, "Invalid request: q must be a string or a list of strings")
    alternatives = max(0, count_field(fields.get("alternatives")))  # LibreTranslate reads a negative count as none
    if alternatives > 4:
        raise LibreTranslateError(400, "Invalid request: alternatives parameter must be <= 4")
    if len(texts) > max_sentences:
        raise LibreTranslateError(400, f"Invalid request: request ({len(texts)}) exceeds text limit ({max_sentences})")
    for text in texts:
        if len(text) > max_chars:
            raise LibreTranslateError(400, f"Invalid request: request ({len(text)}) exceeds text limit ({max_chars})")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise LibreTranslateError(400, "Invalid request: q is not valid Unicode text") from None
    text_format = fields.get("format")
    text_format = "text" if text_format is None or text_format == "" else text_format
    if text_format not in ("text", "html"):  # JSON's {} or false is no format either
        raise LibreTranslateError(400, f"{text_format} format is not supported")
    if text_format == "text":  # LibreTranslate's line-ending normalisation; a page keeps its bytes
        texts = ["\n".join(t.splitlines()) for t in texts]
    call = TranslateCall(texts, isinstance(q, list), source.lower(), target.lower(), alternatives, text_format)
    return dataclasses.replace(call, quality=yes_or_no(fields.get("quality"), "quality"))


YES, NO = ("true", "1", "on", "yes"), ("false", "0", "off", "no", "")


def yes_or_no(value: Any, name: str) -> bool:
    """A JSON boolean, or a form's word for one (a form sends only strings); absent is no. Anything
    else is a 400 naming the field."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in YES + NO:
        return value.strip().lower() in YES
    raise LibreTranslateError(400, f"Invalid request: {name} must be true or false")


def text_quality(found: Sequence[Translation]) -> dict[str, Any]:
    """A translated text's "quality": nmt.quality.combined_quality of its sentences (or of their
    pieces), the score rounded; null on both where none was scored (the memory answered it)."""
    score, doubtful = combined_quality(found)
    return {"score": None if score is None else round(score, 4), "doubtful": doubtful}


# A count written out: ASCII digits, a sign, spaces around (what int() reads, less its underscores and
# other scripts' digits, which no client sends and api_schema.COUNT could not state)
SPACES = r"[ \t\n\r\f\v]*"  # str.strip()'s ASCII whitespace, as JSON Schema's patterns can say it too
COUNT_TEXT = re.compile(rf"{SPACES}[+-]?[0-9]+{SPACES}")


def count_field(value: Any) -> int:
    """A count as LibreTranslate's fields send it: a JSON integer, or its digits (a form's, or JSON's
    string); none (absent, null, "") is 0. A 400 for anything else: JSON's true, {}, 2.5 are no count."""
    if value is None or value == "":
        return 0
    if isinstance(value, str) and COUNT_TEXT.fullmatch(value):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():  # JSON's 2.0; 1e999 is infinity, not integral
        return int(value)
    raise LibreTranslateError(400, "Invalid request: alternatives parameter is not a number")


def translate_answer(
    call: TranslateCall,
    texts: list[str],
    alternatives: list[list[str]] | None,
    detected: list[dict] | None,
    quality: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """LibreTranslate's answer: the text(s), and the detected language of each and alternatives where
    asked; and nmt's "quality" of each (text_quality) where the call asked for it, a field
    LibreTranslate's clients pass over."""
    answer: dict[str, Any] = {"translatedText": texts if call.batch else texts[0]}
    if detected is not None:
        answer["detectedLanguage"] = detected if call.batch else detected[0]
    if call.alternatives:
        others = alternatives or [[] for _ in texts]
        answer["alternatives"] = others if call.batch else others[0]
    if call.quality and quality is not None:
        answer["quality"] = quality if call.batch else quality[0]
    return answer


def alternatives_of(results: list[list[Any]], count: int) -> list[list[str]]:
    """Up to `count` other translations of each text, distinct from the best and one another."""
    others = []
    for best in results:
        seen = {best[0].text}
        unique = [t.text for t in best[1:] if not (t.text in seen or seen.add(t.text))]
        others.append(unique[:count])
    return others


# what /translate_file takes: every format of nmt.formats (a .txt too), read whole
_EXTENSIONS = "|".join(f.lstrip(".") for f in FILE_FORMATS)
DOWNLOAD_NAME = re.compile(rf"[0-9a-f]{{32}}_[a-z]{{2,3}}(-[A-Za-z]+)?\.({_EXTENSIONS})")  # what /translate_file writes
OPENXML = "application/vnd.openxmlformats-officedocument"
MEDIA_TYPES = {  # a download's Content-Type, by extension
    ".txt": "text/plain; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".docx": f"{OPENXML}.wordprocessingml.document",
    ".pptx": f"{OPENXML}.presentationml.presentation",
    ".xlsx": f"{OPENXML}.spreadsheetml.sheet",
    ".odt": "application/vnd.oasis.opendocument.text",
    ".odp": "application/vnd.oasis.opendocument.presentation",
    ".ods": "application/vnd.oasis.opendocument.spreadsheet",
    ".epub": "application/epub+zip",
    ".srt": "application/x-subrip; charset=utf-8",
    ".vtt": "text/vtt; charset=utf-8",
    ".md": "text/markdown; charset=utf-8",
    ".po": "text/x-gettext-translation; charset=utf-8",
    ".pot": "text/x-gettext-translation; charset=utf-8",
    ".json": "application/json",
    ".arb": "application/json",
    ".yml": "application/yaml; charset=utf-8",
    ".yaml": "application/yaml; charset=utf-8",
    ".xml": "application/xml",
    ".xlf": "application/xliff+xml",
    ".xliff": "application/xliff+xml",
}


def form_parts(content_type: str, body: bytes) -> tuple[dict[str, str], tuple[str, bytes] | None]:
    """A multipart/form-data body -> (text fields, (file name, file bytes) or None), by the
    standard library's MIME parser; LibreTranslate's 400s for what is missing or malformed."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode("latin-1") + body
    )
    if not message.is_multipart():
        raise LibreTranslateError(400, "Invalid request: send the file as multipart/form-data")
    fields, upload = {}, None
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        if name in FIELDS_READ and (name in fields or (name == "file" and upload is not None)):
            raise sent_twice(name)
        if name == "file":
            upload = (part.get_filename() or "", payload)
        elif name and name not in fields:  # another field sent again keeps its first value
            try:
                fields[name] = payload.decode("utf-8")
            except UnicodeDecodeError:
                raise LibreTranslateError(400, f"Invalid request: field {name} is not UTF-8") from None
    return fields, upload


def file_extension(upload: tuple[str, bytes] | None) -> str:
    """The extension of an uploaded file of a kind /translate_file takes; LibreTranslate's 400s for a
    missing, empty or unsupported one."""
    if upload is None:
        raise LibreTranslateError(400, "Invalid request: missing file parameter")
    name, _ = upload
    if not name:
        raise LibreTranslateError(400, "Invalid request: empty file")
    extension = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if extension not in FILE_FORMATS:
        raise LibreTranslateError(400, "Invalid request: file format not supported")
    return extension


def frontend_settings(directions: ServedPairs, max_chars: int, keys: bool = False) -> dict[str, Any]:
    """GET /frontend/settings, as LibreTranslate's page reads it."""
    source = directions.sources[0]
    target = directions.targets(source)[0]
    return {
        "charLimit": max_chars,
        "frontendTimeout": 500,
        "apiKeys": keys,
        "keyRequired": keys,
        "suggestions": False,
        "filesTranslation": True,
        "supportedFilesFormat": list(FILE_FORMATS),
        "language": {
            "source": {"code": "auto", "name": "Auto Detect"},
            "target": {"code": target, "name": language_name(target)},
        },
    }
