"""What the translation server accepts and what it sends back: limits, parsing, errors, answers.

Everything a client sends is checked here before anything is queued, so that no malformed body,
hostile value or undecodable text reaches the tokenizer or the model: each is a 4xx JSON error
naming the problem (see ApiError and docs/serving.md for the codes).
"""

from __future__ import annotations

import asyncio
import json
import math
import typing
from collections.abc import Sequence
from typing import Annotated, Any

import torch
from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, create_model
from starlette.requests import ClientDisconnect

from ..alignment import pharaoh, word_attention
from ..memory import MemoryMatch
from ..quality import sentence_score
from ..search_settings import API_SEARCH_FIELDS, SEARCH_FIELD_INFO
from ..tokenizer import EOS
from ..translator import Translation
from .settings import ServerLimits


def _whole(value: Any) -> Any:
    """JSON has numbers, not integers: 5.0 is the integer 5 (JSON Schema's rule), as a client's json.dumps
    of a float writes it; 5.5, "5" and true stay what the strict check refuses."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


WholeNumber = Annotated[int, BeforeValidator(_whole)]
_TYPES = {"int": WholeNumber, "float": float, "str": str, "bool": bool}  # a search field's type, by its name


class _Text(BaseModel):
    """What every body sends first. Strict: "5" is not a beam, and a misspelt field is an error."""

    model_config = ConfigDict(strict=True, extra="forbid")

    text: list[str]


# The search settings a request may name (SearchSettings' fields with api=True); None: the model's
# own, its beam capped at the server's max_beam.
_Search = create_model(
    "_Search",
    __base__=_Text,
    **{name: (_TYPES[SEARCH_FIELD_INFO[name]["type"]] | None, None) for name in API_SEARCH_FIELDS},
)


class TranslateRequest(_Search):
    """The body of POST /translate: the text, the search settings the API takes (nmt.search_settings),
    and what to return with each translation."""

    attention: bool = False
    target_lang: str | None = None  # a multi-target model's output language (one of its >>xx<< tokens)
    source_lang: str | None = None  # the text's language: checked against the directions the model was trained for
    scores: bool = False  # each translation's confidence and token probabilities
    alignments: bool = False  # each translation's word alignment ("0-0 1-2", source-target)

    def search_settings(self) -> dict[str, Any]:
        """The search settings this body gives (None: the model's)."""
        return {name: getattr(self, name) for name in API_SEARCH_FIELDS}


class ApiError(Exception):
    """A refusal the client should see as JSON with this status (and Retry-After when it may retry)."""

    def __init__(
        self, status: int, code: str, message: str, *, limit: str | None = None, retry_after_s: int | None = None
    ):
        super().__init__(message)
        self.status, self.code, self.message, self.limit = status, code, message, limit
        self.retry_after_s = retry_after_s

    def response(self) -> JSONResponse:
        body = {"error": self.code, "message": printable(self.message)}
        if self.limit:
            body["limit"] = self.limit
        headers = {"Retry-After": str(self.retry_after_s)} if self.retry_after_s is not None else None
        return JSONResponse(body, status_code=self.status, headers=headers)


def printable(message: str) -> str:
    """A message as UTF-8 can carry it: one that repeats a client's lone surrogate ("\ud800")
    shows it escaped, where the JSON answer would otherwise fail to encode (a 500)."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


# --- requests in ------------------------------------------------------------------------------
def check_json_content_type(request: Request) -> None:
    """415 unless the body is declared as JSON in UTF-8.

    Cross-site protection as much as hygiene: a page on another site can send a "simple" request
    (text/plain, form data) without the browser asking first; application/json it cannot.
    """
    declared = request.headers.get("content-type", "")
    media_type, *params = [part.strip().lower() for part in declared.split(";")]
    charset = next((p.split("=", 1)[1].strip('" ') for p in params if p.startswith("charset=")), "utf-8")
    if media_type != "application/json" or charset not in ("utf-8", "utf8"):
        raise ApiError(
            415,
            "unsupported_media_type",
            f"the body must be sent as Content-Type: application/json (UTF-8), not {declared!r}",
        )


class BodyAbandoned(Exception):
    """The client closed the connection while sending its body: normal traffic, answered by no one."""


async def read_body(request: Request, max_bytes: int, timeout_s: float) -> bytes:
    """The body, refused with 413 as soon as it passes max_bytes (Content-Length may be absent or lie),
    and with 408 if it has not all arrived within timeout_s (a client trickling bytes holds a slot).
    BodyAbandoned if the client leaves before the end of it."""
    too_large = ApiError(
        413, "limit_exceeded", f"the request body is larger than {max_bytes} bytes", limit="max_body_bytes"
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise too_large
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():  # chunked bodies have no Content-Length: count as they come
                size += len(chunk)
                if size > max_bytes:
                    raise too_large
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(
            408, "body_timeout", f"the request body did not arrive within {timeout_s:g} s", limit="body_timeout_s"
        ) from None
    except ClientDisconnect:
        raise BodyAbandoned from None
    return b"".join(chunks)


def body_shape(model: type[BaseModel]) -> str:
    """A body's fields and types as a 422 states them: '{"text": [str, ...], "beam": int, ...}'."""

    def shown(annotation: Any) -> str:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if typing.get_origin(annotation) is list:
            return f"[{shown(args[0])}, ...]"
        return shown(args[0]) if args else annotation.__name__

    return "{" + ", ".join(f'"{name}": {shown(f.annotation)}' for name, f in model.model_fields.items()) + "}"


EXPECTED_BODY = body_shape(TranslateRequest)


def parse_request(body: bytes, limits: ServerLimits) -> TranslateRequest:
    """JSON -> TranslateRequest, checked against the limits; ApiError (400/422) otherwise."""
    try:
        # Decoded here, strictly: json.loads(bytes) would let encoded surrogates (ED A0 80) through.
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ApiError(
            400, "malformed_json", f"the body is not valid UTF-8: {err.reason} at byte {err.start}"
        ) from None
    except RecursionError:  # json nests by recursion: a deeply nested body exhausts the stack
        raise ApiError(400, "malformed_json", "the body nests too deeply") from None
    except ValueError as err:  # JSONDecodeError, and integers longer than Python converts (4,300 digits)
        raise ApiError(400, "malformed_json", f"the body is not valid JSON: {err}") from None
    try:
        request = TranslateRequest.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in err.errors())
        raise ApiError(422, "invalid_request", f"expected {EXPECTED_BODY}: {problems}") from None
    except RecursionError:
        raise ApiError(400, "malformed_json", "the body nests too deeply") from None
    check_limits(request, limits)
    return request


def check_limits(request: TranslateRequest, limits: ServerLimits) -> None:
    """422 for a request this server declines: too many or too long sentences, text it cannot encode."""
    if len(request.text) > limits.max_sentences:
        raise ApiError(
            422,
            "limit_exceeded",
            f"{len(request.text)} sentences; at most {limits.max_sentences} per request",
            limit="max_sentences",
        )
    for i, text in enumerate(request.text):
        if len(text) > limits.max_chars:
            raise ApiError(
                422,
                "limit_exceeded",
                f"sentence {i} has {len(text)} characters; at most {limits.max_chars}",
                limit="max_chars",
            )
        try:
            text.encode("utf-8")  # a lone surrogate ("\ud800" in JSON) is not text: the tokenizer fails on it
        except UnicodeEncodeError as err:
            raise ApiError(
                422, "invalid_text", f"sentence {i} is not valid Unicode text: {err.reason} at character {err.start}"
            ) from None
    if request.beam is not None and request.beam < 1:
        raise ApiError(422, "invalid_request", f"beam must be at least 1, got {request.beam}")
    if request.beam is not None and request.beam > limits.max_beam:
        raise ApiError(422, "limit_exceeded", f"beam {request.beam} is larger than {limits.max_beam}", limit="max_beam")
    if request.attention and len(request.text) > limits.max_attention_sentences:
        raise ApiError(
            422,
            "limit_exceeded",
            f"attention for {len(request.text)} sentences; at most {limits.max_attention_sentences} per request",
            limit="max_attention_sentences",
        )


# --- translations out -----------------------------------------------------------------------------
def translation_json(translation: Translation, *, attention: bool) -> dict[str, Any]:
    """One best translation as JSON; with attention, its (layers, heads, tgt, src) weights and pieces;
    its confidence and token probabilities, and its word alignment, where they were asked for."""
    out: dict[str, Any] = {
        "text": translation.text,
        "score": round(translation.score, 4),
        "truncated": translation.truncated,
    }
    if translation.confidence is not None:
        out["confidence"] = round(translation.confidence, 4)
        out["token_probs"] = [round(p, 4) for p in translation.token_probs or []]
        out["word_scores"] = [round(s, 4) for s in translation.word_scores or []]
        # The sentence's quality in one object, as `nmt translate --qe` and LibreTranslate's "quality"
        # give it: its score (the mean of its words'), the flag (null without a calibration), the words'.
        score = sentence_score(translation.word_scores or [])
        out["quality"] = {"score": round(score, 4), "doubtful": translation.doubtful, "words": out["word_scores"]}
    if translation.doubtful is not None:  # the model has a quality calibration (nmt calibrate)
        out["doubtful"] = translation.doubtful
    if translation.alignment is not None:
        out["alignment"] = pharaoh(translation.alignment)
    if attention:
        weights = translation.attention  # (layers, heads, steps, src_len); None for an empty input
        tgt_pieces = list(translation.pieces)
        if weights is not None and weights.shape[2] > len(tgt_pieces):
            tgt_pieces.append(EOS)  # the step that chose [END] has an attention row too
        out["attention"] = {
            "src_pieces": translation.src_pieces,
            "tgt_pieces": tgt_pieces if weights is not None else [],
            "weights": _rounded(weights) if weights is not None else [],
        }
        src_words, tgt_words = translation.src_words, translation.tgt_words
        if weights is not None and src_words is not None and tgt_words is not None:
            out["attention"]["words"] = {  # what the web page draws: words, not pieces
                "src": src_words.labels,
                "tgt": tgt_words.labels,
                "weights": _rounded(word_attention(weights, tgt_words, src_words)),
            }
    return out


def _rounded(weights: torch.Tensor) -> list[Any]:
    # float64 before rounding, or float32's 0.1234000027 comes back through json
    return weights.double().round(decimals=4).tolist()


def _attention_cells(translation: Translation) -> int:
    """How many weights a translation's attention puts in an answer: its pieces' and its words'."""
    if translation.attention is None:
        return 0
    layers, heads = translation.attention.shape[:2]
    words = len(translation.src_words.labels) * len(translation.tgt_words.labels) if translation.src_words else 0
    return math.prod(translation.attention.shape) + layers * heads * words


def answer_body(
    beam: int,
    results: list[list[Translation]],
    *,
    attention: bool,
    max_cells: int,
    matches: Sequence[MemoryMatch | None] | None = None,
) -> bytes:
    """The JSON answer as bytes; 422 (max_attention_cells) if its attention would be too large.
    matches: each text's translation memory match, where the server has a memory: each translation
    says where it came from ("origin": "memory" or "model") and carries a fuzzy match offered beside it.

    Run it in a thread when attention is on: for a long sentence this is megabytes of JSON, and on
    the event loop it would stall every other request (and /health) meanwhile.
    """
    if attention:
        cells = sum(_attention_cells(best[0]) for best in results)
        if cells > max_cells:
            raise ApiError(
                422,
                "limit_exceeded",
                f"the attention asked for has {cells} weights; at most "
                f"{max_cells} per answer: ask for fewer or shorter sentences",
                limit="max_attention_cells",
            )
    translations = [translation_json(best[0], attention=attention) for best in results]
    for out, match in zip(translations, matches or (), strict=False):
        out["origin"] = "memory" if match is not None and match.exact else "model"
        if match is not None:
            out["memory"] = {"source": match.source, "target": match.target, "score": round(match.score, 2)}
    body = {"beam": beam, "translations": translations}
    return json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
