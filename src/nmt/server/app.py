"""HTTP translation server (FastAPI on uvicorn): POST /translate, GET /health, GET /metrics, a web page at /.

    nmt serve --model runs/de_en --port 8000
    curl -s localhost:8000/translate -H 'Content-Type: application/json' \\
         -d '{"text": ["Ein Mann fährt Fahrrad."], "beam": 5}'
    # -> {"beam": 5, "translations": [{"text": "A man rides a bike.", "score": -0.41, "truncated": false}]}

With `"attention": true` each translation also carries its cross-attention:
`{"src_pieces": [...], "tgt_pieces": [...], "weights": [layer][head][tgt piece][src piece]}`, one row
per target piece (the last piece is "[END]" when the sentence ended), each row summing to 1.

Concurrent requests are translated together (see batching_queue.py): the handlers only validate
and wait; one worker thread runs the model. The server is built to face hostile clients and
overload (docs/serving.md has the options, limits and every error code):
- every malformed body, hostile value or undecodable text is a 4xx JSON error (requests.py);
- the queue is bounded (503 + Retry-After when full), each request has a deadline, and a request
  whose client hung up leaves the queue before it is translated;
- Host and Origin are checked and the body must be JSON (access.py);
- connections have header, body and keep-alive timeouts and a count limit; SIGTERM drains the
  queue and exits within the grace period plus one batch (connections.py);
- /metrics reports requests, queue depth, batches, latency and dropped work (metrics.py).

Errors are JSON, `{"error": CODE, "message": TEXT}`, plus `"limit": NAME` when a limit was hit.
Text is tokenized as is, so a user who types "[END]" or "[UNK]" gets those special tokens, not
the letters: harmless (the model reads them as it would anywhere), but worth knowing.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict
from functools import partial
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.types import Receive

from ..documents import Paragraph
from ..glossary import Glossary
from ..markup import HtmlPage, page_text
from ..model_dir import read_languages
from ..translation_io import cut_sentences, gives_alignments
from ..translator import EngineOptions, Translation, Translator
from .access import LOOPBACK_NAMES, AccessGuard, AccessPolicy
from .batching_queue import BatchingConfig, BatchingQueue, DeadlineExceeded, Overloaded, ShuttingDown
from .connections import CloseWhenDraining, ConnectionOptions, DrainingServer, listening_socket, uvicorn_config
from .keys import Admission, Refusal
from .libretranslate import (
    DOWNLOAD_NAME,
    Directions,
    LanguageDetector,
    LibreTranslateError,
    alternatives_of,
    file_text,
    form_parts,
    frontend_settings,
    is_libretranslate_body,
    parse_translate,
    query_fields,
    request_fields,
    translate_answer,
)
from .metrics import ServerMetrics, StatusCounter
from .requests import (
    ApiError,
    BodyAbandoned,
    ServerLimits,
    answer_body,
    check_json_content_type,
    parse_request,
    read_body,
)
from .settings import DEFAULT_HOST, DEFAULT_PORT

log = logging.getLogger(__name__)
MAX_DOWNLOADS = 100  # translated files waiting to be fetched, at most (the oldest make room)
CLIENT_GONE = 499  # nginx's code for "the client closed the connection first": logged, never received


def model_info(model_dir: str | Path, translator: Translator) -> dict[str, Any]:
    """What /health says about the model: its directory name, size, languages and engine."""
    model_dir = Path(model_dir)
    src_lang, tgt_lang = read_languages(model_dir)
    return {
        "model": model_dir.resolve().name,
        "parameters": translator.parameter_count,
        "engine": translator.engine.name,
        "attention": translator.engine.supports_attention,  # the page shows a heatmap only where true
        "precision": translator.engine.precision,
        "length_penalty": translator.decode.length_penalty,
        "min_len": translator.decode.min_len,
        "early_stopping": translator.decode.early_stopping,
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        # a multi-target model: the languages of its >>xx<< tokens, each a direction of its own
        "target_langs": list(getattr(translator, "target_languages", [])),
        "device": str(translator.device),
    }


def index_page() -> str:
    """The web page, shipped as package data beside this module."""
    return files(__package__).joinpath("web", "index.html").read_text(encoding="utf-8")


async def client_gone(receive: Receive) -> None:
    """Returns when the client disconnects. Only call it once the body has been read: from then on
    the ASGI server's receive() has nothing else to say."""
    while (await receive())["type"] != "http.disconnect":
        await asyncio.sleep(0.05)  # uvicorn blocks in receive(); an ASGI server that answers at once must not spin


async def wait_for_answer(
    request: Request, future: Future[list[list[Translation]]], queue: BatchingQueue, deadline_s: float
) -> list[list[Translation]] | None:
    """The translations, or None if the client hung up first; ApiError (503) past the deadline.

    Either way the request is cancelled: still queued, it is dropped before the model sees it;
    already in the model's hands, its batch finishes and its part of the answer is not read.
    """
    answer = asyncio.wrap_future(future)
    gone = asyncio.ensure_future(client_gone(request.receive))
    try:
        done, _ = await asyncio.wait({answer, gone}, timeout=deadline_s, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        if queue.accepting:
            raise
        # uvicorn cancels what is still running when the grace period at shutdown ends: tell the
        # client so (503, retry elsewhere) rather than let uvicorn answer a bare 500.
        raise ApiError(503, "shutting_down", "the server is shutting down", retry_after_s=1) from None
    finally:
        gone.cancel()
        if not answer.done():
            answer.cancel()  # cancels `future` too (asyncio chains the cancel), also when this task is cancelled
    if answer in done:
        try:
            return answer.result()
        except DeadlineExceeded as err:
            raise ApiError(
                503,
                "deadline_exceeded",
                f"{err} of {deadline_s:g} s: the server is busy",
                limit="deadline_s",
                retry_after_s=queue.retry_after_s(),
            ) from None
        except ShuttingDown as err:
            raise ApiError(503, "shutting_down", str(err), retry_after_s=1) from None
        except Exception as err:  # noqa: BLE001 - a model failure is reported as JSON, not a bare 500
            raise ApiError(500, "translation_failed", f"{type(err).__name__}: {err}") from err
    if gone in done:
        return None
    raise ApiError(
        503,
        "deadline_exceeded",
        f"no translation within the {deadline_s:g} s deadline: the server is busy",
        limit="deadline_s",
        retry_after_s=queue.retry_after_s(),
    )


async def submit_unless_gone(request: Request, queue: BatchingQueue, texts: list[str], **options: Any) -> Future | None:
    """queue.submit, or None when the client left before its turn (it takes no room in the queue).

    A full queue is asked once more 50 ms later: clients that hung up just before this request came
    leave the queue as soon as the event loop hears of them, which may be a moment after this
    request is read (50 abandoned requests, then one that waits)."""
    if await request.is_disconnected():
        return None
    try:
        return queue.submit(texts, **options)
    except Overloaded as err:
        if err.limit != "max_pending_sentences":
            raise
        await asyncio.sleep(0.05)
        return queue.submit(texts, **options)


# --- the app ----------------------------------------------------------------------------------------
def create_app(
    translator: Any,
    limits: ServerLimits,
    *,
    info: dict[str, Any],
    batching: BatchingConfig | None = None,
    access: AccessPolicy | None = None,
    more_models: Sequence[tuple[Any, dict[str, Any]]] = (),
    admission: Admission | None = None,
) -> FastAPI:
    """The ASGI app around a loaded translator (anything with Translator.translate_detailed).

    Its lifespan starts and stops the batching workers, so run it under uvicorn (serve, serve_in_thread)
    or `with TestClient(app, base_url="http://127.0.0.1")` (the Host must be allowed by `access`,
    by default the loopback names); `info` is what /health reports about the model (see model_info).
    more_models: further (translator, info) pairs, each with a batching queue of its own, reached
    through LibreTranslate's API by their languages; nmt's own API and the web page use the first.
    admission: API keys and rate limits for the translation requests (keys.py); none by default.

    Long, and known to be: both APIs' handlers are closures over the queues, limits, routes and
    metrics built here, so each new endpoint has joined this function. Issue 57 moves them into two
    routers over one service object; until then, the sections below keep nmt's API and
    LibreTranslate's apart.
    """
    admission = admission or Admission()
    metrics = ServerMetrics()
    models = [(translator, info), *more_models]
    queues = [BatchingQueue(t, batching, on_batch=metrics.batch) for t, _ in models]
    queue = queues[0]
    metrics.watch(queues)
    default_beam = min(translator.decode.beam, limits.max_beam)
    route = model_routes([i for _, i in models])  # (source, target) -> index into models
    page = index_page()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        for each in queues:
            each.start()
        yield
        # stop() joins the worker, which may be mid-batch: wait in a thread, not on the event loop
        await asyncio.gather(*(asyncio.to_thread(each.stop) for each in queues))
        shutil.rmtree(downloads, ignore_errors=True)  # translated files nobody fetched

    app = FastAPI(title="nmt", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.queue, app.state.metrics = queue, metrics  # for serve(), the tests and anyone embedding the app
    app.state.queues = queues
    app.add_middleware(AccessGuard, policy=access or AccessPolicy())
    app.add_middleware(CloseWhenDraining, draining=lambda: any(q.running and not q.accepting for q in queues))
    app.add_middleware(StatusCounter, metrics=metrics)  # added last, so outermost: it counts the 403s too

    @app.exception_handler(ApiError)
    async def api_error(request: Request, err: ApiError) -> JSONResponse:
        if speaks_libretranslate(request):  # a body too large or too slow, ...: in the shape its client reads
            return LibreTranslateError(err.status, err.message, err.retry_after_s).response()
        return err.response()

    @app.exception_handler(LibreTranslateError)
    async def libretranslate_error(request: Request, err: LibreTranslateError) -> JSONResponse:
        return err.response()

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, err: HTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(err.status_code, "http_error")
        return JSONResponse(
            {"error": code, "message": f"{request.method} {request.url.path}: {err.detail}"},
            status_code=err.status_code,
            headers=err.headers,
        )

    @app.get("/", response_class=HTMLResponse)
    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/health")
    async def health() -> JSONResponse:
        ready = all(each.running for each in queues)
        body = {
            "ready": ready,
            **info,
            "default_beam": default_beam,
            "limits": asdict(limits),
            "batching": {**asdict(queue.config), **asdict(queue.stats), "pending_sentences": queue.pending_sentences},
            "models": [each_info for _, each_info in models],
        }
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/metrics")
    async def metrics_page() -> Response:
        content, content_type = metrics.exposition()
        return Response(content, media_type=content_type)

    @app.post("/translate")
    async def translate(request: Request) -> Response:
        start, outcome = time.perf_counter(), "error"
        try:
            response = await translate_request(request)
            outcome = {200: "ok", CLIENT_GONE: "disconnected"}.get(response.status_code, "error")
            return response
        except ApiError as err:
            outcome = err.code if err.status >= 500 else "refused"
            raise
        finally:
            metrics.latency.labels(outcome).observe(time.perf_counter() - start)

    engine_name, attention_available = translator.engine.name, translator.engine.supports_attention
    alignment_available = translator.engine.supports_alignment

    async def translate_request(request: Request) -> Response:
        content_type = request.headers.get("content-type", "")
        media_type = content_type.split(";")[0].strip().lower()
        query = query_fields(request.query_params.multi_items())
        in_query = not media_type and "q" in query  # LibreTranslate's fields in the query string, no body
        if media_type not in LIBRETRANSLATE_TYPES and not in_query:
            check_json_content_type(request)
        try:
            body = await read_body(request, limits.max_body_bytes, limits.body_timeout_s)
        except BodyAbandoned:  # counted (outcome "disconnected") and logged as one access line, no traceback
            metrics.disconnects.labels("body").inc()
            return JSONResponse({"error": "client_disconnected", "message": "the client left"}, CLIENT_GONE)
        if in_query or is_libretranslate_body(media_type, body):
            return await libretranslate_translate(request, request_fields(content_type, body, query))
        parsed = parse_request(body, limits)
        refusal = admit(request, request.headers.get("x-api-key"), max(1, len(parsed.text)))
        if refusal is not None:
            code = {429: "rate_limited", 413: "limit_exceeded"}.get(refusal.status, "forbidden_key")
            raise ApiError(refusal.status, code, refusal.message, retry_after_s=refusal.retry_after_s)
        if not queue.running:
            raise ApiError(503, "not_ready", "the translation worker is not running", retry_after_s=1)
        beam = default_beam if parsed.beam is None else parsed.beam
        for asked, available, field in (
            (parsed.attention, attention_available, "attention"),
            (parsed.alignments, alignment_available, "alignments"),
        ):
            if asked and not available:
                raise ApiError(
                    422,
                    "attention_unavailable",
                    f"this server's engine ({engine_name}) does not return the attention weights that "
                    f'{field} needs; leave out "{field}"',
                )
        check_target = getattr(translator, "check_target_language", None)
        if check_target is not None:  # before the queue: in the worker it would be a 500
            try:
                check_target(parsed.target_lang)
            except ValueError as err:
                raise ApiError(422, "invalid_request", str(err)) from None
        if not parsed.text:  # nothing to translate: no need to queue
            return JSONResponse({"beam": beam, "translations": []})
        try:
            future = await submit_unless_gone(
                request,
                queue,
                parsed.text,
                beam=beam,
                attention=parsed.attention,
                deadline=time.monotonic() + limits.deadline_s,
                target_lang=parsed.target_lang,
                scores=parsed.scores,
                alignments=parsed.alignments,
            )
        except Overloaded as err:
            raise ApiError(
                503,
                "overloaded",
                f"the server is busy: {err}; try again later",
                limit=err.limit,
                retry_after_s=err.retry_after_s,
            ) from None
        results = None if future is None else await wait_for_answer(request, future, queue, limits.deadline_s)
        if results is None:
            metrics.disconnects.labels("answer").inc()
            return JSONResponse({"error": "client_disconnected", "message": "the client left"}, CLIENT_GONE)
        build = partial(answer_body, beam, results, attention=parsed.attention, max_cells=limits.max_attention_cells)
        # Attention is megabytes of JSON for long sentences: built in a thread, the loop stays free.
        body = await asyncio.to_thread(build) if parsed.attention else build()
        return Response(body, media_type="application/json")

    # --- LibreTranslate's API (libretranslate.py) ------------------------------------------------------
    directions = Directions(tuple(route))
    detector = LanguageDetector(directions.languages)

    def require_languages() -> None:
        if not directions.pairs:
            raise LibreTranslateError(
                500,
                "this model's languages are unknown: an nmt model's config names them (data.src_lang, "
                "data.tgt_lang), an imported one is given them (nmt import --source-lang XX --target-lang YY)",
            )

    def admit(request: Request, key: Any, cost: int) -> Refusal | None:
        address = request.client.host if request.client else ""
        return admission.check(key if isinstance(key, str) else None, address, cost)

    def admit_libretranslate(
        request: Request, fields: dict[str, Any], sentences: int | None = None, *, charge: bool = True
    ) -> None:
        """LibreTranslate's key and rate checks: the rate limit charged one unit per text of q (or
        `sentences`: a file's); charge False checks the key alone."""
        q = fields.get("q")
        cost = sentences if sentences is not None else len(q) if isinstance(q, list) and q else 1
        refusal = admit(request, fields.get("api_key"), cost if charge else 0)
        if refusal is not None:
            raise LibreTranslateError(refusal.status, refusal.message, refusal.retry_after_s)

    def resolve_source(source: str, target: str, texts: list[str]) -> tuple[str, dict | None]:
        """(source language, the detected-language answer where source was "auto")."""
        if source != "auto":
            return source, None
        found = detector.detect(" ".join(texts))
        if found:
            return found[0]["language"], found[0]
        # digits, symbols, emoji: no language to tell; LibreTranslate then takes a default, confidence 0:
        # here the first source language that translates into the target
        into = [s for s in directions.sources if (s, directions.code(target)) in directions.pairs]
        best = {"confidence": 0.0, "language": (into or directions.sources)[0]}
        return best["language"], best

    def served(source: str, target: str) -> tuple[str, str]:
        """A request's language pair in the served codes (zh-Hans: zh), checked: LibreTranslate's 400s."""
        source, target = directions.code(source), directions.code(target)
        directions.check(source, target)
        return source, target

    async def translate_via_route(
        request: Request,
        source: str,
        target: str,
        texts: list[str],
        n_best: int = 1,
        alignments: bool = False,
        deadline: float | None = None,
    ) -> list[list[Translation]] | None:
        """The n-best of each text from the model that serves source -> target (None: the client left).
        deadline: a time.monotonic() value, the whole request's (default: deadline_s from now)."""
        source, target = served(source, target)
        chosen, target_lang = route[(source, target)]
        its_queue, its_beam = queues[chosen], min(models[chosen][0].decode.beam, limits.max_beam)
        if not its_queue.running:
            raise LibreTranslateError(503, "the translation worker is not running", retry_after_s=1)
        deadline = time.monotonic() + limits.deadline_s if deadline is None else deadline
        try:
            if deadline <= time.monotonic():  # a document's earlier parts took the whole deadline
                raise ApiError(
                    503,
                    "deadline_exceeded",
                    f"the document was not translated within the {limits.deadline_s:g} s deadline: "
                    "the server is busy, or the document too long for it",
                    retry_after_s=its_queue.retry_after_s(),
                )
            future = await submit_unless_gone(
                request,
                its_queue,
                texts,
                beam=max(its_beam, n_best),
                n_best=n_best,
                deadline=deadline,
                target_lang=target_lang,
                alignments=alignments,
            )
            if future is None:
                return None
            return await wait_for_answer(request, future, its_queue, deadline - time.monotonic())
        except Overloaded as err:  # 429 + "Slowdown": what LibreTranslate's clients read as "back off and retry"
            raise LibreTranslateError(429, f"Slowdown: the server is busy: {err}", err.retry_after_s) from None
        except ApiError as err:  # the deadline, a shutdown, a model failure: in LibreTranslate's shape
            raise LibreTranslateError(err.status, err.message, err.retry_after_s) from None

    async def translate_documents(
        request: Request,
        source: str,
        target: str,
        texts: list[str],
        html: bool,
        charge: Callable[[int], None] | None = None,
    ) -> list[str] | None:
        """Each text translated as a document: paragraphs (lines) split into sentences, or a web page
        with its markup kept (nmt.markup); sentences too long for the model cut and joined back. The
        sentences go through the route's queue in requests of max_sentences, under one deadline for
        them all (None: the client left). charge: called with the sentence count before any is
        translated (a file's cost for the rate limit)."""
        deadline = time.monotonic() + limits.deadline_s
        source, target = served(source, target)
        chosen, target_lang = route[(source, target)]
        translator = models[chosen][0]

        def prepare():  # parsing, sentence splitting and tokenising: off the event loop
            if html:
                docs = [HtmlPage(text, source) for text in texts]
                sentences = [[*page.sentences] for page in docs]
            else:
                docs = [[Paragraph.parse(line, source) for line in text.split("\n")] for text in texts]
                sentences = [[s for p in doc for s in p.sentences] for doc in docs]
            return docs, sentences, cut_sentences(translator, [s for doc in sentences for s in doc], target_lang)

        docs, sentences, cut = await asyncio.to_thread(prepare)
        pieces, best = cut.pieces, []
        if charge is not None:
            charge(len(pieces))
        aligned = html and gives_alignments(translator)
        for start in range(0, len(pieces), limits.max_sentences):  # the queue's request size, one after another
            results = await translate_via_route(
                request,
                source,
                target,
                pieces[start : start + limits.max_sentences],
                alignments=aligned,
                deadline=deadline,
            )
            if results is None:
                return None
            best += [found[0] for found in results]

        def rebuild() -> list[str]:
            answers = iter(cut.joined(best))
            out = []
            for doc, doc_sentences in zip(docs, sentences, strict=True):
                mine = [next(answers) for _ in doc_sentences]
                if html:
                    out.append(doc.rebuilt(mine))
                else:
                    texts_of = iter(text for text, _ in mine)
                    out.append("\n".join(p.rebuilt([next(texts_of) for _ in p.sentences]) for p in doc))
            return out

        return await asyncio.to_thread(rebuild)

    def client_left() -> JSONResponse:
        metrics.disconnects.labels("answer").inc()
        return JSONResponse({"error": "the client left"}, CLIENT_GONE)

    async def libretranslate_translate(request: Request, fields: dict[str, Any]) -> Response:
        require_languages()
        # Checked before the rate limit is charged: a request over the batch limit is a 400 at once,
        # not a cost larger than the whole limit (a 429 at every try).
        call = parse_translate(fields, limits.max_sentences, limits.max_chars)
        admit_libretranslate(request, fields)
        html = call.format == "html"
        texts = [page_text(t) for t in call.texts] if html else call.texts
        source, detected = resolve_source(call.source, call.target, texts)
        if call.alternatives and not html:  # alternatives of a whole text: each text is one input
            results = await translate_via_route(request, source, call.target, call.texts, call.alternatives + 1)
            if results is None:
                return client_left()
            texts, others = [best[0].text for best in results], alternatives_of(results, call.alternatives)
        else:
            texts, others = await translate_documents(request, source, call.target, call.texts, html), None
            if texts is None:
                return client_left()
        return JSONResponse(translate_answer(call, texts, others, detected))

    downloads = Path(tempfile.mkdtemp(prefix="nmt-files-"))  # translated files until fetched (or the app ends)

    @app.post("/translate_file")
    async def translate_file(request: Request) -> Response:
        require_languages()
        content_type = request.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "multipart/form-data":
            raise LibreTranslateError(400, "Invalid request: send the file as multipart/form-data")
        try:
            body = await read_body(request, limits.max_body_bytes, limits.body_timeout_s)
        except BodyAbandoned:
            metrics.disconnects.labels("body").inc()
            return JSONResponse({"error": "the client left"}, CLIENT_GONE)
        fields, upload = form_parts(content_type, body)
        fields = {**query_fields(request.query_params.multi_items()), **fields}  # api_key may be in the query
        # The key is checked now (nothing is charged); the rate limit is charged the file's sentences
        # once they are counted, as a request of that many texts would be.
        admit_libretranslate(request, {"api_key": fields.get("api_key")}, charge=False)
        for name in ("source", "target"):
            if not fields.get(name):
                raise LibreTranslateError(400, f"Invalid request: missing {name} parameter")
        extension, text = file_text(upload)
        html = extension in (".html", ".htm")
        for line in text.split("\n"):
            if len(line) > limits.max_chars and not html:
                raise LibreTranslateError(
                    400, f"Invalid request: request ({len(line)}) exceeds text limit ({limits.max_chars})"
                )
        source, _ = resolve_source(
            fields["source"].lower(), fields["target"].lower(), [(page_text(text) if html else text)[:5000]]
        )
        source, target = served(source, fields["target"].lower())  # the served codes name the file

        def charge(sentences: int) -> None:
            admit_libretranslate(request, {"api_key": fields.get("api_key")}, sentences)

        translated = await translate_documents(request, source, target, [text], html, charge=charge)
        if translated is None:
            return client_left()
        out = translated[0] if html else translated[0] + "\n"
        name = f"{uuid.uuid4().hex}_{target}{extension}"
        kept = sorted(downloads.iterdir(), key=lambda p: p.stat().st_mtime)
        for old in kept[: max(0, len(kept) - MAX_DOWNLOADS + 1)]:  # unfetched files: the oldest go first
            old.unlink(missing_ok=True)
        downloads.mkdir(exist_ok=True)  # an app run again after its lifespan ended
        (downloads / name).write_text(out, encoding="utf-8")
        return JSONResponse({"translatedFileUrl": f"{str(request.base_url).rstrip('/')}/download_file/{name}"})

    @app.get("/download_file/{name}")
    async def download_file(name: str) -> Response:
        path = downloads / name
        if not DOWNLOAD_NAME.fullmatch(name):
            raise LibreTranslateError(400, "Invalid filename")
        if not path.is_file():
            raise LibreTranslateError(404, "no such file: it was fetched already, or the server restarted")
        content = path.read_bytes()
        path.unlink(missing_ok=True)  # fetched once: the server keeps no one's documents
        filename = name.split("_", 1)[1]
        return Response(
            content,
            media_type=("text/html" if name.endswith((".html", ".htm")) else "text/plain") + "; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="translated_{filename}"'},
        )

    @app.api_route("/languages", methods=["GET"])
    async def languages() -> JSONResponse:
        return JSONResponse(directions.languages_json())

    @app.get("/frontend/settings")
    async def settings() -> JSONResponse:
        require_languages()
        return JSONResponse(frontend_settings(directions, limits.max_chars, admission.keys_required))

    @app.post("/suggest")
    async def suggest() -> JSONResponse:
        """LibreTranslate's answer where suggestions are off (nmt keeps none: frontend settings say so)."""
        return JSONResponse({"error": "Suggestions are disabled on this server."}, 403)

    @app.post("/detect")
    async def detect(request: Request) -> JSONResponse:
        require_languages()
        content_type = request.headers.get("content-type", "")
        media_type = content_type.split(";")[0].strip().lower()
        query = query_fields(request.query_params.multi_items())
        if media_type not in LIBRETRANSLATE_TYPES and not (not media_type and "q" in query):
            check_json_content_type(request)
        try:
            body = await read_body(request, limits.max_body_bytes, limits.body_timeout_s)
        except BodyAbandoned:
            metrics.disconnects.labels("body").inc()
            return JSONResponse({"error": "the client left"}, CLIENT_GONE)
        fields = request_fields(content_type, body, query)
        admit_libretranslate(request, {"api_key": fields.get("api_key")})
        q = fields.get("q")
        if not q or not isinstance(q, str):
            raise LibreTranslateError(400, "Invalid request: missing q parameter")
        if len(q) > limits.max_chars:
            raise LibreTranslateError(
                400, f"Invalid request: request ({len(q)}) exceeds text limit ({limits.max_chars})"
            )
        found = await asyncio.to_thread(detector.detect, q)
        return JSONResponse(found or [{"confidence": 0.0, "language": directions.sources[0]}])

    return app


def model_routes(infos: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[int, str | None]]:
    """(source, target) -> (which model translates it, the target language to ask a multi-target model
    for, else None); a model of unknown languages serves nmt's API only.

    Two models for one direction are refused: the server could not say which one answers."""
    routes: dict[tuple[str, str], tuple[int, str | None]] = {}
    for index, info in enumerate(infos):
        several = info.get("target_langs") or []
        targets = [(t, t) for t in several] if several else [(info.get("tgt_lang"), None)]
        for target, asked in targets:
            pair = (info.get("src_lang"), target)
            if not all(pair):
                continue
            if pair in routes:
                raise ValueError(
                    f"{infos[routes[pair][0]]['model']} and {info['model']} both translate {pair[0]} -> "
                    f"{pair[1]}: serve one model per direction"
                )
            routes[pair] = (index, asked)
    return routes


# A form body is what LibreTranslate's clients send; the Origin check (access.py) still keeps other
# sites' pages out, since a browser sends Origin with every cross-site POST.
LIBRETRANSLATE_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
LIBRETRANSLATE_PATHS = ("/detect", "/translate_file", "/languages", "/frontend/settings", "/suggest", "/download_file")


def speaks_libretranslate(request: Request) -> bool:
    """Whether a request is LibreTranslate's, as far as its path and headers tell before its body is
    read: a path only LibreTranslate has, or /translate with a form body or q in the query string."""
    path = request.url.path
    if path.startswith(LIBRETRANSLATE_PATHS):
        return True
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return path == "/translate" and (
        media_type in LIBRETRANSLATE_TYPES or (not media_type and "q" in request.query_params)
    )


# --- running it ---------------------------------------------------------------------------------------
def access_policy(host: str, *, allowed_hosts: str | None = None, allowed_origins: str = "") -> AccessPolicy:
    """The policy for a server listening on `host`, from comma-separated lists (as `nmt serve` takes them).

    Without allowed_hosts: the loopback names, plus `host` when it is a specific address.
    """

    def names(value: str) -> tuple[str, ...]:
        return tuple(name.strip() for name in value.split(",") if name.strip())

    if allowed_hosts:
        hosts = names(allowed_hosts)
    else:
        hosts = LOOPBACK_NAMES + (() if host in ("", "0.0.0.0", "::", *LOOPBACK_NAMES) else (host,))
    return AccessPolicy(allowed_hosts=hosts, allowed_origins=names(allowed_origins))


def serve(
    model_dir: str | Path | Sequence[str | Path],
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    limits: ServerLimits | None = None,
    engine: EngineOptions | None = None,
    length_penalty: float | None = None,
    length_normalization: str | None = None,
    min_len: int | None = None,
    early_stopping: bool | None = None,
    batching: BatchingConfig | None = None,
    access: AccessPolicy | None = None,
    connections: ConnectionOptions | None = None,
    admission: Admission | None = None,
    glossary: Glossary | None = None,
) -> None:
    """Load the model (or models) and serve until SIGTERM or Ctrl-C (then drain: see connections.py).

    model_dir: one directory, or several (one per direction; nmt's own API and the page use the
    first, LibreTranslate's API routes by language). engine: how the models run (EngineOptions);
    length_penalty, length_normalization, min_len and early_stopping: how beam search ranks and
    stops for every request (default: each model's decode settings). glossary: terms every
    translation of the first model must use (nmt.glossary).
    """
    sock = listening_socket(host, port)  # before the model loads: a port in use fails at once
    try:
        serve_on(
            sock,
            host,
            model_dir,
            limits=limits,
            engine=engine,
            length_penalty=length_penalty,
            length_normalization=length_normalization,
            min_len=min_len,
            early_stopping=early_stopping,
            batching=batching,
            access=access,
            connections=connections,
            admission=admission,
            glossary=glossary,
        )
    finally:
        sock.close()


def serve_on(
    sock: socket.socket,
    host: str,
    model_dir: str | Path | Sequence[str | Path],
    *,
    limits: ServerLimits | None,
    engine: EngineOptions | None,
    length_penalty: float | None,
    length_normalization: str | None,
    batching: BatchingConfig | None,
    access: AccessPolicy | None,
    connections: ConnectionOptions | None,
    admission: Admission | None = None,
    glossary: Glossary | None = None,
    min_len: int | None = None,
    early_stopping: bool | None = None,
) -> None:
    """`serve` on a socket bound to `host` (the name as given: the Host names answered follow it)."""
    port = sock.getsockname()[1]  # the one the system chose for port 0
    engine = engine or EngineOptions()
    model_dirs = [model_dir] if isinstance(model_dir, (str, Path)) else list(model_dir)
    directions = [(str(d), *read_languages(d)) for d in model_dirs]
    model_routes([{"model": d, "src_lang": s, "tgt_lang": t} for d, s, t in directions])  # before any loads
    loaded = []
    for each_dir in model_dirs:
        translator = Translator.load(
            each_dir,
            engine,
            length_penalty=length_penalty,
            length_normalization=length_normalization,
            min_len=min_len,
            early_stopping=early_stopping,
        )
        if not loaded:  # a glossary is for one direction: the first model's (nmt's own API's)
            translator.glossary = glossary
        translator.start_workers()  # the server runs long: its worker processes start now, not once due
        loaded.append((translator, model_info(each_dir, translator)))
    (translator, info), more_models = loaded[0], loaded[1:]
    access = access or access_policy(host)
    if host not in LOOPBACK_NAMES:
        log.warning("listening on %s: there is no authentication; anyone who can reach it can use it", host)
    if host in ("0.0.0.0", "::") and "*" not in access.allowed_hosts:
        log.warning(
            "only Host names %s are answered: add the names clients use with --allowed-hosts",
            ", ".join(access.allowed_hosts),
        )
    for _, each_info in loaded:
        size = each_info["parameters"]
        log.info(
            "serving %s (%s -> %s, %s engine%s) at http://%s:%d/",
            each_info["model"],
            each_info["src_lang"],
            each_info["tgt_lang"],
            each_info["engine"],
            f", {size:,} parameters" if size is not None else "",
            host,
            port,
        )
    app = create_app(
        translator,
        limits or ServerLimits(),
        info=info,
        batching=batching,
        access=access,
        more_models=more_models,
        admission=admission,
    )
    run_app(app, connections or ConnectionOptions(), host=host, port=port, sockets=[sock])


def close_queues(app: FastAPI) -> None:
    """Stop taking requests on every model's queue (SIGTERM: the drain begins)."""
    for each in app.state.queues:
        each.close()


def run_app(
    app: FastAPI,
    connections: ConnectionOptions,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    sockets: list[socket.socket] | None = None,
    log_level: str = "info",
) -> None:
    """Run an app from create_app with uvicorn, in this thread, until SIGTERM or Ctrl-C."""
    config = uvicorn_config(app, connections, host=host, port=port, log_level=log_level)
    DrainingServer(config, on_shutdown=partial(close_queues, app)).run(sockets=sockets)


@contextmanager
def serve_in_thread(
    app: FastAPI, *, host: str = "127.0.0.1", timeout: float = 30.0, connections: ConnectionOptions | None = None
) -> Iterator[str]:
    """Run the app with uvicorn in a background thread on a free port; yields its base URL.

    For tests and notebooks. The socket is bound here, before the thread starts, so the port is
    known at once and no other process can take it in between.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((host, 0))
    config = uvicorn_config(app, connections or ConnectionOptions(), log_level="warning")
    server = DrainingServer(config, on_shutdown=partial(close_queues, app))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()
