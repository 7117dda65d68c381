"""The HTTP translation server's app (FastAPI): nmt's API and LibreTranslate's, two routers over one
translation service, behind the guards every request meets.

    service.py             the models and their batching queues, admission, metrics, the lifecycle
    nmt_api.py             the web page, /health, /metrics, POST /translate (nmt's JSON)
    libretranslate_api.py  LibreTranslate's endpoints, in its shapes
    running.py             serve / run_app / serve_in_thread

The server is built to face hostile clients and overload (docs/serving.md has the options, limits
and every error code):
- every malformed body, hostile value or undecodable text is a 4xx JSON error (requests.py);
- the queue is bounded (503 + Retry-After when full), each request has a deadline, and a request
  whose client hung up leaves the queue before it is translated (batching_queue.py, service.py);
- Host and Origin are checked and the body must be JSON or LibreTranslate's form (access.py);
- connections have header, body and keep-alive timeouts and a count limit; SIGTERM drains the
  queue and exits within the grace period plus one batch (connections.py);
- /metrics reports requests, queue depth, batches, latency and dropped work (metrics.py).

Text is tokenized as is, so a user who types "[END]" or "[UNK]" gets those special tokens, not
the letters: harmless (the model reads them as it would anywhere), but worth knowing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from ..memory import TranslationMemory
from . import api_schema
from .access import AccessGuard, AccessPolicy
from .batching_queue import BatchingConfig
from .connections import CloseWhenDraining
from .keys import Admission
from .libretranslate import LibreTranslateError, is_libretranslate_body, media_type, request_fields, sends_form
from .libretranslate_api import LibreTranslateApi
from .metrics import StatusCounter
from .nmt_api import LEFT, NmtApi
from .requests import ApiError, ServerLimits, check_json_content_type
from .service import CLIENT_GONE, ServedModel, TranslationService, model_info
from .shared_state import SharedState

__all__ = ["create_app", "model_info"]


def create_app(
    translator: ServedModel,
    limits: ServerLimits,
    *,
    info: dict[str, Any],
    batching: BatchingConfig | None = None,
    access: AccessPolicy | None = None,
    more_models: Sequence[tuple[ServedModel, dict[str, Any]]] = (),
    admission: Admission | None = None,
    memory: TranslationMemory | None = None,
    state: SharedState | None = None,
) -> FastAPI:
    """The ASGI app around a loaded translator (a Translator, or anything with what ServedModel lists).

    Its lifespan starts and stops the batching workers, so run it under uvicorn (serve, serve_in_thread)
    or `with TestClient(app, base_url="http://127.0.0.1")` (the Host must be allowed by `access`,
    by default the loopback names); `info` is what /health reports about the model (see model_info).
    more_models: further (translator, info) pairs, each with a batching queue of its own, reached
    through LibreTranslate's API by their languages; nmt's own API and the web page use the first.
    admission: API keys and rate limits for the translation requests (keys.py); none by default.
    memory: a translation memory for the first model's direction (nmt.memory): its exact matches are
    answered without a search, its fuzzy ones offered beside the model's translation.
    state: what the replicas of a service share (shared_state.open_state; default: this process alone):
    the rate-limit windows, which admission's limits then count in, and the translated files.
    """
    service = TranslationService(
        translator,
        limits,
        info=info,
        batching=batching,
        more_models=more_models,
        admission=admission,
        memory=memory,
        state=state,
    )
    # /openapi.json describes both APIs (api_schema.py); no docs pages, which would load scripts from a CDN
    app = FastAPI(title="nmt", lifespan=service.lifespan, docs_url=None, redoc_url=None, openapi_url="/openapi.json")
    # for running.py, the tests and anyone embedding the app
    app.state.service, app.state.queues, app.state.metrics = service, service.queues, service.metrics
    app.state.queue = service.queues[0]
    app.add_middleware(AccessGuard, policy=access or AccessPolicy())
    app.add_middleware(CloseWhenDraining, draining=service.draining)
    app.add_middleware(StatusCounter, metrics=service.metrics)  # added last, so outermost: it counts the 403s too
    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(LibreTranslateError, libretranslate_error)
    app.add_exception_handler(HTTPException, http_error)
    nmt_api, libretranslate = NmtApi(service), LibreTranslateApi(service)
    app.include_router(nmt_api.router())
    app.include_router(libretranslate.router())
    app.add_api_route(
        "/translate",
        TranslateRoute(service, nmt_api, libretranslate).translate,
        methods=["POST"],
        **api_schema.translate_route(limits, service.routes, nmt_api.available),
    )
    return app


class TranslateRoute:
    """POST /translate, the path both APIs share: each body goes to the router of its shape (a form,
    or JSON with LibreTranslate's fields: its router; other JSON: nmt's), and both are timed as one."""

    def __init__(self, service: TranslationService, nmt_api: NmtApi, libretranslate: LibreTranslateApi):
        self.service, self.nmt_api, self.libretranslate = service, nmt_api, libretranslate

    async def translate(self, request: Request) -> Response:
        start, outcome = time.perf_counter(), "error"
        try:
            response = await self.routed(request)
            outcome = {200: "ok", CLIENT_GONE: "disconnected"}.get(response.status_code, "error")
            return response
        except ApiError as err:
            outcome = err.code if err.status >= 500 else "refused"
            raise
        finally:
            self.service.metrics.latency.labels(outcome).observe(time.perf_counter() - start)

    async def routed(self, request: Request) -> Response:
        if sends_form(request):
            return await self.libretranslate.translate_request(request)
        check_json_content_type(request)
        body = await self.service.body(request)
        if body is None:
            return self.service.client_left(LEFT, "body")
        if is_libretranslate_body(media_type(request), body):
            fields = request_fields(request.headers.get("content-type", ""), body)
            return await self.libretranslate.translate(request, fields)
        return await self.nmt_api.translate(request, body)


async def api_error(request: Request, err: ApiError) -> JSONResponse:
    return err.response()


async def libretranslate_error(request: Request, err: LibreTranslateError) -> JSONResponse:
    return err.response()


async def http_error(request: Request, err: HTTPException) -> JSONResponse:
    """A path or method that is not served, as JSON (Starlette's default is plain text)."""
    code = {404: "not_found", 405: "method_not_allowed"}.get(err.status_code, "http_error")
    return JSONResponse(
        {"error": code, "message": f"{request.method} {request.url.path}: {err.detail}"},
        status_code=err.status_code,
        headers=err.headers,
    )
