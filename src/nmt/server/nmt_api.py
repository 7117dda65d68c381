"""nmt's own API as a router over the translation service (service.py): the web page at /,
GET /health, GET /metrics, the probes GET /livez and GET /readyz, and POST /translate with a JSON body
(requests.py has its fields).

    curl -s localhost:8000/translate -H 'Content-Type: application/json' \\
         -d '{"text": ["Ein Mann fährt Fahrrad."], "beam": 5}'
    # -> {"beam": 5, "translations": [{"text": "A man rides a bike.", "score": -0.41, "truncated": false}]}

With `"attention": true` each translation also carries its cross-attention:
`{"src_pieces": [...], "tgt_pieces": [...], "weights": [layer][head][tgt piece][src piece]}`, one row
per target piece (the last piece is "[END]" when the sentence ended), each row summing to 1; and, in
`"words": {"src", "tgt", "weights"}`, the same by words, which the web page draws (a word's column is
the sum of its pieces', its row their mean: nmt.alignment.word_attention; "(start)" and "(end)" for
the special tokens).

Errors are ApiError's JSON, `{"error": CODE, "message": TEXT}`, plus `"limit": NAME` when a limit was
hit. POST /translate is LibreTranslate's path too: app.py hands each body to the router of its shape.
"""

from __future__ import annotations

import asyncio
import dataclasses
from functools import partial
from importlib.resources import files

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from ..inference.contract import Capabilities
from ..placeholders import CODE, MaskedText
from ..translation_io import memory_translation
from ..translator import Translation
from . import api_schema
from .batching_queue import Overloaded
from .requests import ApiError, TranslateRequest, answer_body, parse_request
from .service import TranslationService

LEFT = {"error": "client_disconnected", "message": "the client left"}  # the answer nobody reads


def unmasked(
    found: list[list[Translation]], count: int, masks: dict[int, MaskedText], *, keep_alignments: bool
) -> list[list[Translation]]:
    """Each text's n-best list: a masked text's rebuilt from its sentences' best translations (their
    word alignments place its placeholders), scored by their mean; the alignments the request did
    not ask for dropped."""
    answers, out = iter(found), []
    for i in range(count):
        if i not in masks:
            best = next(answers)  # copied, never changed: the translation cache may hold these
            out.append(best if keep_alignments else [dataclasses.replace(t, alignment=None) for t in best])
            continue
        mine = [next(answers)[0] for _ in masks[i].sentences]
        rebuilt = masks[i].rebuilt([(t.text, t.alignment) for t in mine])
        score = sum(t.score for t in mine) / len(mine) if mine else 0.0
        log_prob = sum(t.log_prob for t in mine)
        out.append([Translation(rebuilt, score, log_prob, [], [], truncated=any(t.truncated for t in mine))])
    return out


def index_page() -> str:
    """The web page, shipped as package data beside this module."""
    return files(__package__).joinpath("web", "index.html").read_text(encoding="utf-8")


class NmtApi:
    """nmt's endpoints over `service` (its first model); POST /translate's JSON body: `translate`."""

    def __init__(self, service: TranslationService):
        self.service, self.limits = service, service.limits
        self.page = index_page()
        engine = service.models[0][0].engine
        self.available = {"attention": engine.capabilities.attention, "alignments": engine.capabilities.alignment}
        self.engine_name = engine.name

    def router(self) -> APIRouter:
        router = APIRouter()
        router.add_api_route("/", self.index, methods=["GET"], **api_schema.PAGE)
        router.add_api_route("/health", self.health, methods=["GET"], **api_schema.HEALTH)
        router.add_api_route("/livez", self.livez, methods=["GET"], **api_schema.LIVEZ)
        router.add_api_route("/readyz", self.readyz, methods=["GET"], **api_schema.READYZ)
        router.add_api_route("/metrics", self.metrics, methods=["GET"], **api_schema.METRICS)
        return router

    async def index(self) -> HTMLResponse:
        return HTMLResponse(self.page)

    async def health(self) -> JSONResponse:
        body, ready = self.service.health()
        return JSONResponse(body, status_code=200 if ready else 503)

    async def livez(self) -> JSONResponse:
        """Liveness: the process answers (an orchestrator restarts it when it does not)."""
        return JSONResponse({"alive": True})

    async def readyz(self) -> JSONResponse:
        """Readiness: whether to send this replica work (503 while starting, draining or cut off)."""
        body, ready = self.service.readiness()
        return JSONResponse(body, status_code=200 if ready else 503)

    async def metrics(self) -> Response:
        content, content_type = self.service.metrics.exposition()
        return Response(content, media_type=content_type)

    async def translate(self, request: Request, body: bytes) -> Response:
        """POST /translate with nmt's JSON `body` (read: requests.TranslateRequest)."""
        parsed = parse_request(body, self.limits)
        self.check(request, parsed)
        search = self.service.search(0, **parsed.search_settings(), return_attention=parsed.attention)
        beam = search.beam
        if not parsed.text:  # nothing to translate: no need to queue
            return JSONResponse({"beam": beam, "translations": []})
        matches = self.service.remembered(0, parsed.text, parsed.target_lang)
        searched = [text for text, match in zip(parsed.text, matches, strict=True) if match is None or not match.exact]
        masks = self.masks(parsed, searched, search.n_best)
        queries = [piece for i, text in enumerate(searched) for piece in (masks[i].sentences if i in masks else [text])]
        try:
            found = (
                await self.service.translate(
                    request,
                    0,
                    queries,
                    search,
                    target_lang=parsed.target_lang,
                    scores=parsed.scores,
                    alignments=parsed.alignments or bool(masks) and self.available["alignments"],
                )
                if queries
                else []
            )
        except Overloaded as err:
            raise ApiError(
                503,
                "overloaded",
                f"the server is busy: {err}; try again later",
                limit=err.limit,
                retry_after_s=err.retry_after_s,
            ) from None
        if found is None:
            return self.service.client_left(LEFT)
        answers = iter(unmasked(found, len(searched), masks, keep_alignments=parsed.alignments))
        results = [
            next(answers) if match is None or not match.exact else memory_translation(match) for match in matches
        ]
        build = partial(
            answer_body,
            beam,
            results,
            attention=parsed.attention,
            max_cells=self.limits.max_attention_cells,
            matches=matches if self.service.memory is not None else None,
        )
        # Attention is megabytes of JSON for long sentences: built in a thread, the loop stays free.
        body = await asyncio.to_thread(build) if parsed.attention else build()
        return Response(body, media_type="application/json")

    def masks(self, parsed: TranslateRequest, texts: list[str], n_best: int) -> dict[int, MaskedText]:
        """The texts with placeholders (%s, {name}, <b>...: nmt.placeholders), read so that the model
        never sees them, by index; none where the request asks for what describes one search of the
        text as sent (scores, alignments, attention, an n-best list)."""
        if parsed.scores or parsed.alignments or parsed.attention or n_best > 1:
            return {}
        lang = parsed.source_lang or self.service.models[0][1].get("src_lang") or "en"
        return {i: MaskedText(text, lang) for i, text in enumerate(texts) if CODE.search(text)}

    def check(self, request: Request, parsed: TranslateRequest) -> None:
        """Refuse, before the queue, what this request may not have or the model cannot give."""
        refusal = self.service.admit(request, request.headers.get("x-api-key"), max(1, len(parsed.text)))
        if refusal is not None:
            code = {429: "rate_limited", 413: "limit_exceeded"}.get(refusal.status, "forbidden_key")
            raise ApiError(refusal.status, code, refusal.message, retry_after_s=refusal.retry_after_s)
        if not self.service.queues[0].running:
            raise ApiError(503, "not_ready", "the translation worker is not running", retry_after_s=1)
        for field, feature, asked in (
            ("attention", "attention", parsed.attention),
            ("alignments", "alignment", parsed.alignments),
        ):
            if asked and not self.available[field]:  # the contract's wording, and the way out a request has
                refusal = Capabilities.refusal([feature], self.engine_name)
                raise ApiError(422, "attention_unavailable", f'{refusal}; or leave out "{field}"')
        try:  # before the queue: in the worker it would be a 500
            self.service.models[0][0].check_languages(parsed.text, parsed.target_lang, parsed.source_lang)
        except ValueError as err:
            raise ApiError(422, "invalid_request", str(err)) from None
