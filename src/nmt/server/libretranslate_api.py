"""LibreTranslate's API as a router over the translation service (service.py).

Its endpoints (POST /translate with a form body, q in the query string or LibreTranslate's JSON,
/translate_file, /download_file, /languages, /frontend/settings, /suggest, /detect) answer in
LibreTranslate's shapes, errors included: every route of this router turns the service's ApiError
into LibreTranslate's `{"error": ...}` (LibreTranslateRoute), so a new endpoint is one method here
and one line in `router`. What is pure (parsing fields, the answers, languages) is in
libretranslate.py; nmt's own POST /translate hands LibreTranslate's bodies to `translate`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute

from ..formats import DocumentError, read_document
from ..formats.plain_text import PlainText
from ..formats.web_page import WebPage
from ..markup import page_text
from ..placeholders import MaskedText
from ..translation_io import CutSentences, cut_sentences, gives_alignments, memory_translation
from ..translator import Translation
from . import api_schema
from .batching_queue import Overloaded
from .libretranslate import (
    DOWNLOAD_NAME,
    MEDIA_TYPES,
    LanguageDetector,
    LibreTranslateError,
    ServedPairs,
    alternatives_of,
    file_extension,
    form_parts,
    frontend_settings,
    media_type,
    parse_translate,
    query_fields,
    request_fields,
    sends_form,
    text_quality,
    translate_answer,
)
from .requests import ApiError, check_json_content_type
from .service import TranslationService
from .shared_state import FilesUnavailable

LEFT = {"error": "the client left"}  # the answer nobody reads, in LibreTranslate's shape


def in_its_shape(err: ApiError) -> LibreTranslateError:
    """The service's refusal (a body too large or too slow, the deadline, ...) as LibreTranslate's."""
    return LibreTranslateError(err.status, err.message, err.retry_after_s)


class LibreTranslateRoute(APIRoute):
    """A route whose ApiErrors reach the client in LibreTranslate's shape."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def shaped(request: Request) -> Response:
            try:
                return await handler(request)
            except ApiError as err:
                raise in_its_shape(err) from None

        return shaped


class LibreTranslateApi:
    """LibreTranslate's endpoints over `service`, its models reached by their languages."""

    def __init__(self, service: TranslationService):
        self.service, self.limits = service, service.limits
        self.directions = ServedPairs(tuple(service.routes))
        self.detector = LanguageDetector(self.directions.languages)

    def router(self) -> APIRouter:
        router = APIRouter(route_class=LibreTranslateRoute)
        schema = api_schema.translate_file_route(self.limits, self.service.routes)
        router.add_api_route("/translate_file", self.translate_file, methods=["POST"], **schema)
        router.add_api_route("/download_file/{name}", self.download_file, methods=["GET"], **api_schema.DOWNLOAD)
        router.add_api_route("/languages", self.languages, methods=["GET"], **api_schema.LANGUAGES)
        router.add_api_route("/frontend/settings", self.settings, methods=["GET"], **api_schema.SETTINGS)
        router.add_api_route("/suggest", self.suggest, methods=["POST"], **api_schema.SUGGEST)
        router.add_api_route("/detect", self.detect, methods=["POST"], **api_schema.detect_route(self.limits))
        return router

    # --- checks -----------------------------------------------------------------------------------
    def require_languages(self) -> None:
        if not self.directions.pairs:
            raise LibreTranslateError(
                500,
                "this model's languages are unknown: an nmt model's config names them (data.src_lang, "
                "data.tgt_lang), an imported one is given them (nmt import --source-lang XX --target-lang YY)",
            )

    def admit(self, request: Request, fields: dict[str, Any], sentences: int | None = None, *, charge=True) -> None:
        """The key and rate checks: the rate limit charged one unit per text of q (or `sentences`: a
        file's); charge False checks the key alone."""
        q, key = fields.get("q"), fields.get("api_key")
        if key is not None and not isinstance(key, str):  # read as no key at all, it would pass as anonymous
            raise LibreTranslateError(400, f"Invalid request: api_key must be a string, not {type(key).__name__}")
        cost = sentences if sentences is not None else len(q) if isinstance(q, list) and q else 1
        refusal = self.service.admit(request, key, cost if charge else 0)
        if refusal is not None:
            raise LibreTranslateError(refusal.status, refusal.message, refusal.retry_after_s)

    def resolve_source(self, source: str, target: str, texts: list[str]) -> tuple[str, dict | None]:
        """(source language, the detected-language answer where source was "auto")."""
        if source != "auto":
            return source, None
        into = self.sources_into(target)
        # Only a language that translates into the target is a candidate: English text sent to a de-en
        # server with source "auto" is read as German, not refused as English -> English.
        found = self.detector.detect(" ".join(texts), among=into or None)
        if found:
            return found[0]["language"], found[0]
        # digits, symbols, emoji: no language to tell; LibreTranslate then takes a default, confidence 0:
        # here the first source language that translates into the target
        best = {"confidence": 0.0, "language": (into or self.directions.sources)[0]}
        return best["language"], best

    def sources_into(self, target: str) -> list[str]:
        """The source languages served into `target` (any code that names it)."""
        return [s for s in self.directions.sources if (s, self.directions.code(target)) in self.directions.pairs]

    def resolve_sources(self, source: str, target: str, texts: list[str]) -> tuple[list[str], list[dict] | None]:
        """Each text's source language, and the detected-language answer of each where source was "auto".

        LibreTranslate's rule: a text of more than 40 characters is detected on its own; a shorter one,
        too short to tell reliably, takes the language detected over all the texts of the request."""
        if source != "auto":
            return [source] * len(texts), None
        _, overall = self.resolve_source(source, target, texts)
        into = self.sources_into(target) or None
        detected = [
            overall if len(text) <= 40 else (self.detector.detect(text, among=into) or [overall])[0] for text in texts
        ]
        return [found["language"] for found in detected], detected

    def check_lines(self, text: str) -> None:
        """LibreTranslate's 400 for a text file with a line longer than a text of q may be."""
        for line in text.split("\n"):
            if len(line) > self.limits.max_chars:
                raise LibreTranslateError(
                    400, f"Invalid request: request ({len(line)}) exceeds text limit ({self.limits.max_chars})"
                )

    def served(self, source: str, target: str) -> tuple[str, str]:
        """A request's language pair in the served codes (zh-Hans: zh), checked: LibreTranslate's 400s."""
        source, target = self.directions.code(source), self.directions.code(target)
        self.directions.check(source, target)
        return source, target

    def check_texts(self, chosen: int, texts: list[str], target_lang: str | None) -> None:
        """A 400 for a text the model would refuse in the worker (a 500 there): a >>xx<< token of
        its own that the model lacks or that is not the request's target."""
        if target_lang is not None:
            try:
                self.service.models[chosen][0].check_languages(texts, target_lang)
            except ValueError as err:
                raise LibreTranslateError(400, str(err)) from None

    # --- translating --------------------------------------------------------------------------------
    async def translate_via_route(
        self,
        request: Request,
        source: str,
        target: str,
        texts: list[str],
        n_best: int = 1,
        alignments: bool = False,
        deadline: float | None = None,
        scores: bool = False,
    ) -> list[list[Translation]] | None:
        """The n-best of each text from the model that serves source -> target (None: the client left).
        deadline: a time.monotonic() value, the whole request's (default: deadline_s from now);
        scores: with word scores and the model's flag (nmt.quality)."""
        source, target = self.served(source, target)
        chosen, target_lang = self.service.routes[(source, target)]
        self.check_texts(chosen, texts, target_lang)
        queue = self.service.queues[chosen]
        if not queue.running:
            raise LibreTranslateError(503, "the translation worker is not running", retry_after_s=1)
        if deadline is not None and deadline <= time.monotonic():  # a document's earlier parts took it all
            raise LibreTranslateError(
                503,
                f"the document was not translated within the {self.limits.deadline_s:g} s deadline: "
                "the server is busy, or the document too long for it",
                queue.retry_after_s(),
            )
        try:
            return await self.service.translate(
                request,
                chosen,
                texts,
                self.service.search(chosen, beam=max(self.service.default_beam(chosen), n_best), n_best=n_best),
                deadline=deadline,
                target_lang=target_lang,
                alignments=alignments,
                **({"scores": True} if scores else {}),  # unscored requests keep their cache keys
            )
        except Overloaded as err:  # 429 + "Slowdown": what LibreTranslate's clients read as "back off and retry"
            raise LibreTranslateError(429, f"Slowdown: the server is busy: {err}", err.retry_after_s) from None
        except ApiError as err:  # the deadline, a shutdown, a model failure: in LibreTranslate's shape
            raise in_its_shape(err) from None

    async def translate_documents(
        self,
        request: Request,
        source: str,
        target: str,
        texts: list[str],
        html: bool,
        charge: Callable[[int], None] | None = None,
        scores: bool = False,
    ) -> tuple[list[str], list[list[Translation]]] | None:
        """Each text translated as a document: paragraphs (lines) split into sentences, or a web page
        with its markup kept (nmt.formats.web_page); sentences too long for the model cut and joined back. The
        sentences go through the route's queue in requests of max_sentences, under one deadline for
        them all (None: the client left). charge: called with the sentence count before any is
        translated (a file's cost for the rate limit). With each text, the Translations of its
        sentences' pieces (with word scores where `scores`: libretranslate.text_quality)."""
        deadline = time.monotonic() + self.limits.deadline_s
        source, target = self.served(source, target)
        chosen, target_lang = self.service.routes[(source, target)]
        translator = self.service.models[chosen][0]

        def prepare():  # parsing, sentence splitting and tokenising: off the event loop
            if html:
                docs = [WebPage(text.encode("utf-8"), f"q[{i}]", source) for i, text in enumerate(texts)]
                sentences = [[*page.sentences] for page in docs]
            else:  # lines of paragraphs; placeholders (%s, {name}, [X12X]) kept exactly (nmt.placeholders)
                docs = [MaskedText(text, source) for text in texts]
                sentences = [doc.sentences for doc in docs]
            self.check_texts(chosen, [s for doc in sentences for s in doc], target_lang)
            return docs, sentences, cut_sentences(translator, [s for doc in sentences for s in doc], target_lang)

        docs, sentences, cut = await asyncio.to_thread(prepare)
        placed = html or any(doc.codes for doc in docs)  # markup or placeholders to put back among the words
        aligned = placed and gives_alignments(translator)
        cut_found = await self.translate_cut(request, source, target, cut, aligned, deadline, charge, scores)
        if cut_found is None:
            return None
        found, pieces = cut_found
        sizes, flat = iter(len(part) for part in cut.parts), iter(pieces)  # cut.parts: each sentence's pieces
        pieces_of_text = [[next(flat) for _ in doc for _ in range(next(sizes))] for doc in sentences]

        def rebuild() -> list[str]:
            answers = iter(found)
            out = []
            for doc, doc_sentences in zip(docs, sentences, strict=True):
                mine = [next(answers) for _ in doc_sentences]
                out.append(doc.rebuilt(mine).decode("utf-8") if html else doc.rebuilt(mine))
            return out

        return await asyncio.to_thread(rebuild), pieces_of_text

    async def translate_cut(
        self,
        request: Request,
        source: str,
        target: str,
        cut: CutSentences,
        aligned: bool,
        deadline: float,
        charge: Callable[[int], None] | None,
        scores: bool = False,
    ) -> tuple[list[tuple[str, list[tuple[int, int]] | None]], list[Translation]] | None:
        """(translation, word alignment or None) of each cut sentence, through the route's queue in
        requests of max_sentences (None: the client left); `aligned`: ask for word alignments (markup
        to place, and a model that gives them). A sentence the server's memory holds exactly is
        answered from it, not searched. With them, the Translation of each piece (cut.pieces), scored
        where `scores`."""
        if charge is not None:
            charge(len(cut.pieces))
        chosen, target_lang = self.service.routes[self.served(source, target)]
        matches = self.service.remembered(chosen, cut.pieces, target_lang)
        searched = [piece for piece, match in zip(cut.pieces, matches, strict=True) if not (match and match.exact)]
        best, step = [], self.limits.max_sentences
        for start in range(0, len(searched), step):  # the queue's request size, one after another
            part = searched[start : start + step]
            results = await self.translate_via_route(
                request, source, target, part, alignments=aligned, deadline=deadline, scores=scores
            )
            if results is None:
                return None
            best += [found[0] for found in results]
        answers = iter(best)
        pieces = [memory_translation(m)[0] if m and m.exact else next(answers) for m in matches]
        return cut.joined(pieces, target_lang or target), pieces

    async def translate_document_file(
        self, request: Request, fields: dict[str, str], upload: tuple[str, bytes], extension: str
    ) -> Response:
        """An uploaded file (.txt, .docx, .epub, .srt, ...: nmt.formats) translated into the same kind."""
        name, content = upload

        def read(lang: str):  # unzipping and parsing: off the event loop
            try:
                return read_document(content, name, lang, extension, target=fields["target"].lower())
            except DocumentError as err:
                raise LibreTranslateError(413 if err.too_large else 400, f"Invalid request: {err}") from None

        asked = fields["source"].lower()
        split_by = "en" if asked == "auto" else asked
        document = await asyncio.to_thread(read, split_by)
        sample, placed = " ".join(document.sentences), True  # runs, markup, placeholders: placed by alignment
        if isinstance(document, PlainText):  # LibreTranslate's rules for text: its lines as q's texts
            self.check_lines(document.text)
            sample, placed = document.text, bool(document.codes)  # only placeholders need alignments
        source, _ = self.resolve_source(asked, fields["target"].lower(), [sample[:5000]])
        source, target = self.served(source, fields["target"].lower())
        if source != split_by:  # sentences split by the language detected, in the served code (de-DE: de)
            document = await asyncio.to_thread(read, source)
        chosen, target_lang = self.service.routes[(source, target)]
        translator = self.service.models[chosen][0]
        self.check_texts(chosen, document.sentences, target_lang)  # as for text: a 400, not the worker's 500
        cut = await asyncio.to_thread(cut_sentences, translator, document.sentences, target_lang)
        deadline = time.monotonic() + self.limits.deadline_s

        def charge(sentences: int) -> None:
            self.admit(request, {"api_key": fields.get("api_key")}, sentences)

        aligned = placed and gives_alignments(translator)
        found = await self.translate_cut(request, source, target, cut, aligned, deadline, charge)
        if found is None:
            return self.service.client_left(LEFT)
        translated = await asyncio.to_thread(document.rebuilt, found[0])
        download = f"{uuid.uuid4().hex}_{target}{extension}"
        self.keep_download(download, translated)
        return JSONResponse({"translatedFileUrl": f"{str(request.base_url).rstrip('/')}/download_file/{download}"})

    # --- the endpoints ------------------------------------------------------------------------------
    async def translate_request(self, request: Request) -> Response:
        """POST /translate with a form body or q in the query string (nmt's router hands it over)."""
        try:
            body = await self.service.body(request)
        except ApiError as err:
            raise in_its_shape(err) from None
        if body is None:
            return self.service.client_left(LEFT, "body")
        query = query_fields(request.query_params.multi_items())
        return await self.translate(request, request_fields(request.headers.get("content-type", ""), body, query))

    async def translate(self, request: Request, fields: dict[str, Any]) -> Response:
        """POST /translate's fields, from any of the bodies LibreTranslate takes."""
        self.require_languages()
        # Checked before the rate limit is charged: a request over the batch limit is a 400 at once,
        # not a cost larger than the whole limit (a 429 at every try).
        call = parse_translate(fields, self.limits.max_sentences, self.limits.max_chars)
        self.admit(request, fields)
        html = call.format == "html"
        plain = [page_text(t) for t in call.texts] if html else call.texts
        sources, detected = await asyncio.to_thread(self.resolve_sources, call.source, call.target, plain)
        translated = [""] * len(call.texts)
        quality: list[dict[str, Any]] = [{} for _ in call.texts]
        others: list[list[str]] | None = [[] for _ in call.texts] if call.alternatives and not html else None
        for source in dict.fromkeys(sources):  # the texts of each source language together, through its route
            group = [i for i, s in enumerate(sources) if s == source]
            texts = [call.texts[i] for i in group]
            if others is not None:  # alternatives of a whole text: each text is one input
                results = await self.translate_via_route(
                    request, source, call.target, texts, call.alternatives + 1, scores=call.quality
                )
                if results is None:
                    return self.service.client_left(LEFT)
                kept = alternatives_of(results, call.alternatives)
                for i, best, alternatives in zip(group, results, kept, strict=True):
                    translated[i], others[i], quality[i] = best[0].text, alternatives, text_quality(best[:1])
            else:
                found = await self.translate_documents(request, source, call.target, texts, html, scores=call.quality)
                if found is None:
                    return self.service.client_left(LEFT)
                for i, text, pieces in zip(group, *found, strict=True):
                    translated[i], quality[i] = text, text_quality(pieces)
        return JSONResponse(translate_answer(call, translated, others, detected, quality))

    async def translate_file(self, request: Request) -> Response:
        self.require_languages()
        content_type = request.headers.get("content-type", "")
        if media_type(request) != "multipart/form-data":
            raise LibreTranslateError(400, "Invalid request: send the file as multipart/form-data")
        body = await self.service.body(request)
        if body is None:
            return self.service.client_left(LEFT, "body")
        fields, upload = form_parts(content_type, body)
        fields = {**query_fields(request.query_params.multi_items()), **fields}  # api_key may be in the query
        # The key is checked now (nothing is charged); the rate limit is charged the file's sentences
        # once they are counted, as a request of that many texts would be.
        self.admit(request, {"api_key": fields.get("api_key")}, charge=False)
        for name in ("source", "target"):
            if not fields.get(name):
                raise LibreTranslateError(400, f"Invalid request: missing {name} parameter")
        return await self.translate_document_file(request, fields, upload, file_extension(upload))

    def keep_download(self, name: str, content: bytes) -> None:
        """Keep a translated file until it is fetched, through any replica where the state is shared
        (shared_state.py: its bound and expiry)."""
        self.service.state.keep_file(name, content)

    async def download_file(self, name: Annotated[str, api_schema.DOWNLOAD_NAME_PARAMETER]) -> Response:
        if not DOWNLOAD_NAME.fullmatch(name):
            raise LibreTranslateError(400, "Invalid filename")
        try:
            content = self.service.state.take_file(name)  # fetched once: the server keeps no one's documents
        except FilesUnavailable as err:  # it may be there: say "later", not "gone"
            raise LibreTranslateError(503, f"{err}: try again in a moment", retry_after_s=1) from None
        if content is None:
            raise LibreTranslateError(404, "no such file: it was fetched already, it expired, or the server restarted")
        filename = name.split("_", 1)[1]
        return Response(
            content,
            media_type=MEDIA_TYPES["." + name.rsplit(".", 1)[-1]],
            headers={"Content-Disposition": f'attachment; filename="translated_{filename}"'},
        )

    async def languages(self) -> JSONResponse:
        return JSONResponse(self.directions.languages_json())

    async def settings(self) -> JSONResponse:
        self.require_languages()
        return JSONResponse(
            frontend_settings(self.directions, self.limits.max_chars, self.service.admission.keys_required)
        )

    async def suggest(self) -> JSONResponse:
        """LibreTranslate's answer where suggestions are off (nmt keeps none: frontend settings say so)."""
        return JSONResponse({"error": "Suggestions are disabled on this server."}, 403)

    async def detect(self, request: Request) -> JSONResponse:
        self.require_languages()
        if not sends_form(request):
            try:
                check_json_content_type(request)
            except ApiError as err:  # its words name JSON alone; LibreTranslate's clients send forms too
                declared = request.headers.get("content-type", "")
                raise LibreTranslateError(
                    err.status,
                    f"Invalid request: send q as JSON (Content-Type: application/json) or as a form "
                    f"(application/x-www-form-urlencoded or multipart/form-data), not {declared!r}",
                ) from None
        body = await self.service.body(request)
        if body is None:
            return self.service.client_left(LEFT, "body")
        query = query_fields(request.query_params.multi_items())
        fields = request_fields(request.headers.get("content-type", ""), body, query)
        self.admit(request, {"api_key": fields.get("api_key")})
        q = fields.get("q")
        if q is not None and not isinstance(q, str):  # /detect reads one text, not a list
            raise LibreTranslateError(400, f"Invalid request: q must be a string, not {type(q).__name__}")
        if not q:
            raise LibreTranslateError(400, "Invalid request: missing q parameter")
        if len(q) > self.limits.max_chars:
            raise LibreTranslateError(
                400, f"Invalid request: request ({len(q)}) exceeds text limit ({self.limits.max_chars})"
            )
        found = await asyncio.to_thread(self.detector.detect, q)
        return JSONResponse(found or [{"confidence": 0.0, "language": self.directions.sources[0]}])
