"""HTTP translation server (FastAPI on uvicorn): POST /translate, GET /health, and a web page at /.

    nmt serve --model runs/de_en --port 8000
    curl -s localhost:8000/translate -d '{"text": ["Ein Mann fährt Fahrrad."], "beam": 5}'
    # -> {"beam": 5, "translations": [{"text": "A man rides a bike.", "score": -0.41, "truncated": false}]}

With `"attention": true` each translation also carries its cross-attention:
`{"src_pieces": [...], "tgt_pieces": [...], "weights": [layer][head][tgt piece][src piece]}`, one row
per target piece (the last piece is "[END]" when the sentence ended), each row summing to 1.

Concurrent requests are translated together (see `batching_queue`): the handlers only validate
and wait; one worker thread runs the model.

Errors are JSON, `{"error": CODE, "message": TEXT}`, plus `"limit": NAME` when a limit was hit:
    400 malformed_json      the body is not JSON (or not UTF-8)
    413 limit_exceeded      the body is larger than max_body_bytes (limit: "max_body_bytes")
    422 invalid_request     the JSON does not fit {"text": [str, ...], "beam": int, "attention": bool}
    422 limit_exceeded      too many sentences, a sentence too long, a beam too large (limit names it)
    503 not_ready           the batching worker is not running (starting up or shutting down)
    500 translation_failed  the model raised; the message says why
422 rather than 400 for limits: the request is well formed, this server just declines its size.

Text is tokenized as is, so a user who types "[END]" or "[UNK]" gets those special tokens, not
the letters: harmless (the model reads them as it would anywhere), but worth knowing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import uvicorn
import yaml
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, ValidationError

from .batching_queue import BatchingConfig, BatchingQueue
from .tokenizer import EOS
from .translator import Translation, Translator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerLimits:
    """What one request may ask for; anything larger is refused with a 4xx naming the limit."""

    max_sentences: int = 64  # sentences in one request
    max_chars: int = 1000  # characters in one sentence
    max_beam: int = 8  # beam size
    max_body_bytes: int = 256 * 1024  # request body, checked before it is parsed


class TranslateRequest(BaseModel):
    """The body of POST /translate. Strict: "5" is not a beam, and a misspelt field is an error."""

    model_config = ConfigDict(strict=True, extra="forbid")

    text: list[str]
    beam: int | None = None  # default: the model's decode.beam (capped at max_beam)
    attention: bool = False


class ApiError(Exception):
    """A refusal the client should see as JSON with this status."""

    def __init__(self, status: int, code: str, message: str, *, limit: str | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.limit = status, code, message, limit

    def response(self) -> JSONResponse:
        body = {"error": self.code, "message": self.message}
        if self.limit:
            body["limit"] = self.limit
        return JSONResponse(body, status_code=self.status)


# --- requests in ------------------------------------------------------------------------------
async def read_body(request: Request, max_bytes: int) -> bytes:
    """The body, refused with 413 as soon as it passes max_bytes (Content-Length may be absent or lie)."""
    too_large = ApiError(413, "limit_exceeded", f"the request body is larger than {max_bytes} bytes",
                         limit="max_body_bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():  # chunked bodies have no Content-Length: count as they come
        size += len(chunk)
        if size > max_bytes:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def parse_request(body: bytes, limits: ServerLimits) -> TranslateRequest:
    """JSON -> TranslateRequest, checked against the limits; ApiError (400/422) otherwise."""
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ApiError(400, "malformed_json", f"the body is not valid JSON: {err}") from None
    try:
        request = TranslateRequest.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in err.errors())
        raise ApiError(422, "invalid_request",
                       f'expected {{"text": [str, ...], "beam": int, "attention": bool}}: {problems}') from None
    if len(request.text) > limits.max_sentences:
        raise ApiError(422, "limit_exceeded", f"{len(request.text)} sentences; at most {limits.max_sentences} "
                       "per request", limit="max_sentences")
    for i, text in enumerate(request.text):
        if len(text) > limits.max_chars:
            raise ApiError(422, "limit_exceeded", f"sentence {i} has {len(text)} characters; at most "
                           f"{limits.max_chars}", limit="max_chars")
    if request.beam is not None and request.beam < 1:
        raise ApiError(422, "invalid_request", f"beam must be at least 1, got {request.beam}")
    if request.beam is not None and request.beam > limits.max_beam:
        raise ApiError(422, "limit_exceeded", f"beam {request.beam} is larger than {limits.max_beam}",
                       limit="max_beam")
    return request


# --- translations out -----------------------------------------------------------------------------
def translation_json(translation: Translation, *, attention: bool) -> dict[str, Any]:
    """One best translation as JSON; with attention, its (layers, heads, tgt, src) weights and pieces."""
    out: dict[str, Any] = {"text": translation.text, "score": round(translation.score, 4),
                           "truncated": translation.truncated}
    if attention:
        weights = translation.attention  # (layers, heads, steps, src_len); None for an empty input
        tgt_pieces = list(translation.pieces)
        if weights is not None and weights.shape[2] > len(tgt_pieces):
            tgt_pieces.append(EOS)  # the step that chose [END] has an attention row too
        out["attention"] = {
            "src_pieces": translation.src_pieces,
            "tgt_pieces": tgt_pieces if weights is not None else [],
            # float64 before rounding, or float32's 0.1234000027 comes back through json
            "weights": weights.double().round(decimals=4).tolist() if weights is not None else [],
        }
    return out


def model_info(model_dir: str | Path, translator: Translator) -> dict[str, Any]:
    """What /health says about the model: its directory name, size and languages."""
    model_dir = Path(model_dir)
    config_path = model_dir / "config.yaml"
    config = (yaml.safe_load(config_path.read_text()) or {}) if config_path.exists() else {}
    data = config.get("data") or {}
    return {"model": model_dir.resolve().name,
            "parameters": sum(p.numel() for p in translator.model.parameters()),
            "src_lang": data.get("src_lang"), "tgt_lang": data.get("tgt_lang"),
            "device": str(translator.device)}


def index_page() -> str:
    """The web page, shipped as package data beside this module."""
    return files("nmt").joinpath("web", "index.html").read_text(encoding="utf-8")


# --- the app ----------------------------------------------------------------------------------------
def create_app(translator: Translator, limits: ServerLimits, *, info: dict[str, Any],
               batching: BatchingConfig | None = None) -> FastAPI:
    """The ASGI app. Its lifespan starts and stops the batching worker, so run it under uvicorn
    (or `with TestClient(app)`); `info` is what /health reports about the model (see model_info)."""
    queue = BatchingQueue(translator, batching)
    default_beam = min(translator.decode.beam, limits.max_beam)
    page = index_page()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        queue.start()
        yield
        # stop() joins the worker, which may be mid-batch: wait in a thread, not on the event loop
        await asyncio.to_thread(queue.stop)

    app = FastAPI(title="nmt", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.queue = queue  # for tests and for anyone embedding the app

    @app.exception_handler(ApiError)
    async def api_error(request: Request, err: ApiError) -> JSONResponse:
        return err.response()

    @app.get("/", response_class=HTMLResponse)
    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/health")
    async def health() -> JSONResponse:
        body = {"ready": queue.running, **info, "default_beam": default_beam, "limits": asdict(limits),
                "batching": {**asdict(queue.config), **asdict(queue.stats)}}
        return JSONResponse(body, status_code=200 if queue.running else 503)

    @app.post("/translate")
    async def translate(request: Request) -> JSONResponse:
        parsed = parse_request(await read_body(request, limits.max_body_bytes), limits)
        if not queue.running:
            raise ApiError(503, "not_ready", "the translation worker is not running")
        beam = default_beam if parsed.beam is None else parsed.beam
        if not parsed.text:  # nothing to translate: no need to queue
            return JSONResponse({"beam": beam, "translations": []})
        future = queue.submit(parsed.text, beam=beam, attention=parsed.attention)
        try:
            # uvicorn lets a handler run on after its client has gone: the request is translated with
            # its batch and the answer dropped. (Were the handler cancelled, say at shutdown, the
            # wrapped future would be too, and the worker would skip the request if still queued.)
            results = await asyncio.wrap_future(future)
        except Exception as err:  # noqa: BLE001 - one failed batch is reported, not raised as a bare 500
            raise ApiError(500, "translation_failed", f"{type(err).__name__}: {err}") from err
        return JSONResponse({"beam": beam, "translations": [translation_json(best[0], attention=parsed.attention)
                                                            for best in results]})

    return app


def serve(model_dir: str | Path, *, host: str = "127.0.0.1", port: int = 8000, limits: ServerLimits | None = None,
          device: str = "auto", batching: BatchingConfig | None = None) -> None:
    """Load the model and serve it until interrupted (Ctrl-C)."""
    translator = Translator.load(model_dir, device=device)
    info = model_info(model_dir, translator)
    if host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("listening on %s: there is no authentication; anyone who can reach it can use it", host)
    log.info("serving %s (%s -> %s, %d parameters) at http://%s:%d/", info["model"], info["src_lang"],
             info["tgt_lang"], info["parameters"], host, port)
    app = create_app(translator, limits or ServerLimits(), info=info, batching=batching)
    uvicorn.run(app, host=host, port=port, log_level="info")


@contextmanager
def serve_in_thread(app: FastAPI, *, host: str = "127.0.0.1", timeout: float = 30.0) -> Iterator[str]:
    """Run the app with uvicorn in a background thread on a free port; yields its base URL.

    For tests and notebooks. The socket is bound here, before the thread starts, so the port is
    known at once and no other process can take it in between.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((host, 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
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
