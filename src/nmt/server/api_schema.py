"""The OpenAPI description of both APIs (GET /openapi.json): what each route takes, and every answer it
gives, status by status, with its content type and body.

The routes read their bodies themselves (requests.py, libretranslate.py: strict UTF-8, limits checked
before anything is queued, errors in each API's own words), so FastAPI cannot infer what they take:
each route declares it here, as `add_api_route(..., **declaration)` (a `responses=` table and the
request body in `openapi_extra`). The answers are pydantic models; the request bodies are JSON
Schema built from the server's own limits and languages, so that a body the schema allows is one
the server accepts, and a generator of requests (schemathesis: tests/test_api_schema.py, fuzz/api)
can hold the server to it. A field or status added to a route is added here in the same change.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import Path
from fastapi.responses import HTMLResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, RootModel

from ..search_settings import API_SEARCH_FIELDS, SearchSettings
from .libretranslate import DOWNLOAD_NAME, FILE_FORMATS, MEDIA_TYPES, NO, SPACES, YES
from .requests import TranslateRequest
from .settings import ServerLimits

JSON, FORM, MULTIPART = "application/json", "application/x-www-form-urlencoded", "multipart/form-data"


# --- answers: nmt's API ------------------------------------------------------------------------------
class NmtError(BaseModel):
    """nmt's error (requests.ApiError), also the Host and Origin checks' on every path (access.py)."""

    error: str
    message: str
    limit: str | None = None  # the limit that was hit, where one was (max_chars, max_body_bytes, ...)


class AttentionOut(BaseModel):
    src_pieces: list[str]
    tgt_pieces: list[str]
    weights: list[list[list[list[float]]]]  # [layer][head][target piece][source piece]


class MemoryOffer(BaseModel):
    source: str
    target: str
    score: float


class QualityOut(BaseModel):
    """A scored sentence's quality: its score (the mean of its words' scores), the flag of the model's
    calibration (null without one) and each word's score."""

    score: float
    doubtful: bool | None
    words: list[float]


class TranslationOut(BaseModel):
    """One text's translation; the optional fields where the request asked for them (requests.translation_json)."""

    text: str
    score: float
    truncated: bool
    confidence: float | None = None
    token_probs: list[float] | None = None
    word_scores: list[float] | None = None
    doubtful: bool | None = None
    quality: QualityOut | None = None
    alignment: str | None = None  # Pharaoh format: "0-0 1-2"
    attention: AttentionOut | None = None
    origin: Literal["memory", "model"] | None = None  # where the server has a translation memory
    memory: MemoryOffer | None = None


class NmtTranslation(BaseModel):
    beam: int
    translations: list[TranslationOut]


class Health(BaseModel):
    """GET /health: readiness, the first model's info (service.model_info: its own fields) and the figures."""

    model_config = ConfigDict(extra="allow")

    ready: bool
    degraded: bool
    shared_state: dict[str, Any]
    default_beam: int
    translation_cache: bool
    limits: dict[str, Any]
    batching: dict[str, Any]
    models: list[dict[str, Any]]


class Readiness(BaseModel):
    ready: bool
    models: int
    workers_running: bool
    draining: bool
    shared_state: dict[str, Any]


class Liveness(BaseModel):
    alive: bool


# --- answers: LibreTranslate's API ----------------------------------------------------------------
class LibreTranslateErrorBody(BaseModel):
    """LibreTranslate's error, `{"error": TEXT}` (a Host or Origin refusal adds nmt's "message")."""

    error: str


class DetectedLanguage(BaseModel):
    confidence: float  # 0-100
    language: str


class TextQuality(BaseModel):
    """nmt's "quality" of a translated text (libretranslate.text_quality): null on both where the memory
    answered it; doubtful null where the model has no calibration."""

    score: float | None  # the least sure sentence's score (nmt.quality): 0 is certain
    doubtful: bool | None


class LibreTranslation(BaseModel):
    """POST /translate's answer: one text, or a list where q was a list (and so for the others)."""

    translatedText: str | list[str]  # noqa: N815 - LibreTranslate's field names
    detectedLanguage: DetectedLanguage | list[DetectedLanguage] | None = None  # noqa: N815 - where source was auto
    alternatives: list[str] | list[list[str]] | None = None
    quality: TextQuality | list[TextQuality] | None = None  # nmt's own, where the call sent quality=true


class Language(BaseModel):
    code: str
    name: str
    targets: list[str]


class NamedLanguage(BaseModel):
    code: str
    name: str


class SettingsLanguages(BaseModel):
    source: NamedLanguage
    target: NamedLanguage


class FrontendSettings(BaseModel):
    """GET /frontend/settings, as LibreTranslate's page reads it (libretranslate.frontend_settings)."""

    charLimit: int  # noqa: N815
    frontendTimeout: int  # noqa: N815
    apiKeys: bool  # noqa: N815
    keyRequired: bool  # noqa: N815
    suggestions: bool
    filesTranslation: bool  # noqa: N815
    supportedFilesFormat: list[str]  # noqa: N815
    language: SettingsLanguages


class TranslatedFile(BaseModel):
    translatedFileUrl: str  # noqa: N815 - .../download_file/NAME, fetched once


# --- statuses --------------------------------------------------------------------------------------
WHY = {
    400: "a malformed body or field, an unknown language; or a Host the server cannot read",
    403: "a Host or Origin not served here, or an API key refused",
    404: "no such file: fetched already, expired, or the server restarted",
    408: "the body did not arrive within body_timeout_s",
    413: "the body (or a document's content) is larger than the server takes",
    415: "the body is not of a media type the route reads",
    422: "a body of the right shape that this server declines (a limit, a value out of range)",
    429: "the rate limit, or (LibreTranslate's API) the queue is full: retry after Retry-After",
    503: "not ready, draining, over the deadline, or (nmt's API) the queue is full: retry after Retry-After",
}
RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before trying again", "schema": {"type": "string"}}}


def errors(model: type[BaseModel], *statuses: int, json_route: bool = True) -> dict[int | str, dict[str, Any]]:
    """The `responses=` entries of these error statuses, each answering `model` as JSON. json_route
    False: a route whose own answer is not JSON (FastAPI would give its errors the route's media type),
    whose errors name the model's schema, which other routes' `model` entries put in the components."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        out[status] = {"description": WHY[status]}
        if json_route:
            out[status]["model"] = model
        else:
            out[status]["content"] = {JSON: {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}
        if status in (429, 503):
            out[status]["headers"] = RETRY_AFTER
    return out


# --- request bodies ---------------------------------------------------------------------------------
def texts_schema(limits: ServerLimits) -> dict[str, Any]:
    return {"type": "array", "maxItems": limits.max_sentences, "items": text_schema(limits)}


def text_schema(limits: ServerLimits) -> dict[str, Any]:
    # A lone surrogate is no text, and JSON Schema cannot say so: the 4xx for one is documented instead.
    return {"type": "string", "maxLength": limits.max_chars}


def nmt_request(
    limits: ServerLimits, sources: list[str], targets: list[str], available: dict[str, bool]
) -> dict[str, Any]:
    """nmt's JSON body (requests.TranslateRequest), with this server's limits; `available`: whether its
    engine gives "attention" and "alignments" (nmt_api.NmtApi.available), which may be asked only then."""
    schema = TranslateRequest.model_json_schema()
    properties = schema["properties"]
    properties["text"] = texts_schema(limits)
    for name in API_SEARCH_FIELDS:  # each ranged integer setting with its declared range
        rule = SearchSettings.RULES.get(name)
        if rule is not None and rule.bounds is not None and {"type": "integer"} in properties[name].get("anyOf", []):
            low, high = rule.bounds
            high = limits.max_beam if name == "beam" else high  # this server's own, narrower bound
            properties[name] = {"anyOf": [{"type": "integer", "minimum": low, "maximum": high}, {"type": "null"}]}
    for name, codes in (("source_lang", sources), ("target_lang", targets)):
        properties[name] = {"anyOf": [{"type": "string", "enum": codes}, {"type": "null"}]}
    for name, given in available.items():
        if not given:
            properties[name] = {"const": False}
    schema.pop("description", None)
    # attention for a few sentences at a time (max_attention_sentences)
    schema["if"] = {"properties": {"attention": {"const": True}}, "required": ["attention"]}
    schema["then"] = {"properties": {"text": {"maxItems": limits.max_attention_sentences}}}
    return schema


def libretranslate_fields(
    limits: ServerLimits, sources: list[str], targets: list[str], *, json: bool
) -> dict[str, Any]:
    """LibreTranslate's POST /translate fields; a JSON body may send q as a list of texts, a form a string."""
    # LibreTranslate's `if not q`: an empty text or list is a missing q
    one = {**text_schema(limits), "minLength": 1}
    q = {"anyOf": [one, {**texts_schema(limits), "minItems": 1}]} if json else one
    return {
        "type": "object",
        "required": ["q", "source", "target"],
        "properties": {
            "q": q,
            "source": {"type": "string", "enum": ["auto", *sources]},
            "target": {"type": "string", "enum": targets},
            "format": or_none({"type": "string", "enum": ["text", "html"]}, json),
            "alternatives": or_none(COUNT, json),
            "api_key": or_none({"type": "string"}, json),
            # nmt's own: each text's quality in the answer. A form sends a word for yes or no, and
            # JSON may too (libretranslate.yes_or_no); any other value is a 400
            "quality": {"anyOf": [{"type": "boolean"}, {"type": "null"}, YES_OR_NO]} if json else YES_OR_NO,
        },
    }


# libretranslate.count_field's counts: at most 4 (a negative one is none), as a number or its digits
# (a form sends only strings; JSON may too), "" being none
COUNT = {
    "anyOf": [
        {"type": "integer", "maximum": 4},
        {"type": "string", "pattern": rf"^(?:{SPACES}(?:\+?0*[0-4]|-[0-9]+){SPACES})?$"},
    ]
}

# libretranslate.yes_or_no's words, in any case, spaces around: JSON Schema's patterns (ECMA-262)
# have no flag for case, so each letter is a class of both
YES_OR_NO = {
    "type": "string",
    "pattern": r"^\s*(?:"
    + "|".join("".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word) for word in (*YES, *NO) if word)
    + r")?\s*$",
}


def or_none(schema: dict[str, Any], json: bool) -> dict[str, Any]:
    """An optional LibreTranslate field, which may also be sent as none: JSON's null, a form's empty value
    (read as absent, as LibreTranslate reads them)."""
    if not json and schema == {"type": "string"}:  # a form's "" is a string already
        return schema
    return {"anyOf": [schema, {"type": "null"} if json else {"const": ""}]}


# --- the routes' declarations ---------------------------------------------------------------------
class TranslateAnswer(RootModel[NmtTranslation | LibreTranslation]):
    """POST /translate's answer: nmt's to nmt's body, LibreTranslate's to LibreTranslate's."""


class EitherError(RootModel[NmtError | LibreTranslateErrorBody]):
    """POST /translate's errors: in the API's own shape whose body was sent (nmt's where none could be told)."""


Routes = dict[tuple[str, str], tuple[int, str | None]]  # (source, target) -> (model index, its target token)


def languages(routes: Routes, model: int | None = None) -> tuple[list[str], list[str]]:
    """(sources, targets) the server translates (`model`: that model's alone), from service.routes."""
    pairs = [pair for pair, (index, _) in routes.items() if model is None or index == model]
    return sorted({s for s, _ in pairs}), sorted({t for _, t in pairs})


def translate_route(limits: ServerLimits, routes: Routes, available: dict[str, bool]) -> dict[str, Any]:
    """POST /translate, which both APIs share: nmt's JSON (its first model's languages; `available`: see
    nmt_request), or LibreTranslate's JSON or form (every model's)."""
    form = libretranslate_fields(limits, *languages(routes), json=False)
    nmt_body = nmt_request(limits, *languages(routes, 0), available)
    either_json = {"anyOf": [nmt_body, libretranslate_fields(limits, *languages(routes), json=True)]}
    return {
        "summary": "Translate (nmt's JSON body, or LibreTranslate's JSON or form)",
        "responses": {
            200: {"model": TranslateAnswer, "description": "the translations"},
            **errors(EitherError, 400, 403, 408, 413, 415, 422, 429, 503),
        },
        "openapi_extra": {
            "requestBody": {
                "required": True,
                "content": {JSON: {"schema": either_json}, FORM: {"schema": form}, MULTIPART: {"schema": form}},
            }
        },
    }


def translate_file_route(limits: ServerLimits, routes: Routes) -> dict[str, Any]:
    """POST /translate_file: a multipart form with the file; its answer links to the download."""
    form = libretranslate_fields(limits, *languages(routes), json=False)
    properties = {name: form["properties"][name] for name in ("source", "target", "api_key")}
    properties["file"] = {
        "type": "string",
        "format": "binary",
        "description": f"a file of one of the kinds {', '.join(FILE_FORMATS)}, by its name's extension",
    }
    return {
        "summary": "Translate a file (LibreTranslate's)",
        "responses": {
            200: {
                "model": TranslatedFile,
                "description": "where the translated file is, fetched once",
                "links": {
                    "DownloadFile": {
                        "operationId": "download_file",
                        # The file's name is the URL's last segment. "#regex:" is schemathesis' extractor
                        # of it (OpenAPI's expressions take a whole value); other tools read the URL.
                        "parameters": {"name": "$response.body#/translatedFileUrl#regex:/download_file/([^/]+)$"},
                    }
                },
            },
            **errors(LibreTranslateErrorBody, 400, 403, 408, 413, 429, 503),
        },
        "openapi_extra": {
            "requestBody": {
                "required": True,
                "content": {
                    MULTIPART: {
                        "schema": {
                            "type": "object",
                            "required": ["file", "source", "target"],
                            "properties": properties,
                        },
                        # The file's kind is its name's extension, which a schema cannot state: a text file's
                        # part as an example, which request generators (schemathesis) send as its name.
                        "encoding": {
                            "file": {
                                "headers": {
                                    "Content-Disposition": {
                                        "schema": {"type": "string"},
                                        "example": 'form-data; name="file"; filename="text.txt"',
                                    }
                                }
                            }
                        },
                    }
                },
            }
        },
    }


# The name's form in the schema alone: a name not of it is LibreTranslate's 400 "Invalid filename",
# which a validated parameter would turn into FastAPI's 422.
DOWNLOAD_NAME_PARAMETER = Path(json_schema_extra={"pattern": f"^{DOWNLOAD_NAME.pattern}$"})
DOWNLOAD_TYPES = sorted({kind.split(";")[0] for kind in MEDIA_TYPES.values()})


DOWNLOAD = {
    "summary": "Fetch a translated file (LibreTranslate's), once",
    "operation_id": "download_file",
    "responses": {
        200: {
            "description": "the file, as an attachment",
            "content": {kind: {"schema": {"type": "string", "format": "binary"}} for kind in DOWNLOAD_TYPES},
        },
        **errors(LibreTranslateErrorBody, 400, 403, 404, 503),
    },
}


def detect_route(limits: ServerLimits) -> dict[str, Any]:
    """POST /detect: q's language, by JSON or form."""

    def fields(json: bool) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["q"],
            "properties": {"q": {**text_schema(limits), "minLength": 1}, "api_key": or_none({"type": "string"}, json)},
        }

    form = {"schema": fields(json=False)}
    return {
        "summary": "Detect a text's language (LibreTranslate's)",
        "responses": {
            200: {"model": list[DetectedLanguage], "description": "up to 3 candidates, best first"},
            **errors(LibreTranslateErrorBody, 400, 403, 408, 413, 415, 429, 503),
        },
        "openapi_extra": {
            "requestBody": {
                "required": True,
                "content": {JSON: {"schema": fields(json=True)}, FORM: form, MULTIPART: form},
            }
        },
    }


def answers(model: Any, description: str, *statuses: int, errors_in: type[BaseModel] = NmtError) -> dict[str, Any]:
    """A route that takes no body: its answer `model` at 200 (and at 503 where it says "not ready" so),
    and its error statuses."""
    responses = {200: {"model": model, "description": description}, **errors(errors_in, *statuses)}
    return {"responses": responses}


HEALTH = answers(Health, "serving; 503: the same body while not ready", 403)
HEALTH["responses"][503] = {"model": Health, "description": "not ready: the workers are not running"}
LIVEZ = answers(Liveness, "the process answers")  # the probes answer whatever the Host: no 403
READYZ = answers(Readiness, "ready for work")
READYZ["responses"][503] = {"model": Readiness, "description": "starting, draining or cut off from the shared state"}
LANGUAGES = answers(list[Language], "every language served, with its targets", 403, errors_in=LibreTranslateErrorBody)
SUGGEST = {
    "status_code": 403,
    "responses": {403: {"model": LibreTranslateErrorBody, "description": "suggestions are off (nmt keeps none)"}},
}


METRICS = {
    "response_class": PlainTextResponse,
    "responses": {
        200: {
            "description": "Prometheus' text format",
        },
        **errors(NmtError, 403, json_route=False),
    },
}
SETTINGS = answers(
    FrontendSettings, "the settings LibreTranslate's web page reads", 403, errors_in=LibreTranslateErrorBody
)
PAGE = {"response_class": HTMLResponse, "responses": errors(NmtError, 403, json_route=False)}
