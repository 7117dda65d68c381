"""The translation service behind both HTTP APIs.

One object holds what the two APIs share: the models and their batching queues, admission (API keys
and rate limits), the metrics, the route from a language pair to a model, the store of translated
files, and the lifecycle (the queues start with the app and drain at SIGTERM). The APIs are routers
over it (nmt_api.py, libretranslate_api.py): each turns its own body into calls here and owns the
shape of its errors; app.py assembles them.

A request waits for its answer here (`translate`): handlers only validate and wait, one worker
thread per model runs it (batching_queue.py), and a client that hangs up takes its work out of
the queue.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import Future
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.types import Receive

from ..directions import Directions
from ..memory import MemoryMatch, TranslationMemory
from ..model_dir import WEIGHTS, read_directions, read_languages
from ..search_settings import SearchRequest
from ..translator import Translation, Translator
from .batching_queue import BatchingConfig, BatchingQueue, DeadlineExceeded, Overloaded, ShuttingDown
from .keys import Admission, Refusal
from .metrics import ServerMetrics
from .requests import ApiError, BodyAbandoned, ServerLimits, read_body
from .shared_state import ProcessState, SharedState

CLIENT_GONE = 499  # nginx's code for "the client closed the connection first": logged, never received


def model_identity(model_dir: Path, translator: Translator) -> str:
    """What makes two served models answer alike, as a hex digest: the sha256 of the weights file, the
    engine, its precision and device, every search setting, the glossary and how text is read and
    written back. Equal on every replica that serves the same model the same way: a translation
    cache keyed on it never hands one model's answer to another."""
    weights = model_dir / WEIGHTS
    if weights.is_file():
        with open(weights, "rb") as file:
            weights_digest = hashlib.file_digest(file, "sha256").hexdigest()
    else:  # no weights file of nmt's own: only this directory is known to be this model
        weights_digest = str(model_dir.resolve())
    glossary = translator.glossary
    text_form = translator.text_form
    served = {
        "weights": weights_digest,
        "engine": [translator.engine.name, translator.engine.precision, str(translator.device)],
        "search": translator.decode.search_settings(),
        "min_len": translator.decode.min_len,
        "glossary": list(glossary.entries) if glossary is not None else None,
        # repr leaves the truecaser out (its own file): whether there is one is what changes the output
        "text_form": None if text_form is None else [repr(text_form), text_form.truecaser is not None],
    }
    return hashlib.sha256(json.dumps(served, sort_keys=True, default=str).encode()).hexdigest()


def model_info(model_dir: str | Path, translator: Translator) -> dict[str, Any]:
    """What /health says about the model: its directory name, size, languages, engine and identity
    (model_identity: equal where replicas serve the same model alike)."""
    model_dir = Path(model_dir)
    src_lang, tgt_lang = read_languages(model_dir)
    return {
        "identity": model_identity(model_dir, translator),
        "model": model_dir.resolve().name,
        "parameters": translator.parameter_count,
        "engine": translator.engine.name,
        "attention": translator.engine.capabilities.attention,  # the page shows a heatmap only where true
        "precision": translator.engine.precision,
        **translator.decode.search_settings(),  # every search setting, as SearchSettings declares them
        "min_len": translator.decode.min_len,
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        # a multi-target model: the languages of its >>xx<< tokens, each a direction of its own
        "target_langs": list(translator.target_languages),
        # the directions a multilingual model of nmt's own was trained for, as [source, target]
        "directions": [list(d) for d in read_directions(model_dir)],
        "device": str(translator.device),
    }


class ServedModel(Protocol):
    """What the server asks of a model: nmt.translator.Translator has it all; the tests serve stand-ins."""

    decode: Any  # its nmt.config.DecodeConfig: the search of a request that names none
    engine: Any  # its name, precision and capabilities (nmt.inference.contract.Engine)
    text_form: Any  # its nmt.text_form.TextForm, or None for a model of running text

    @property
    def target_languages(self) -> list[str]: ...

    def source_fits(self, text: str, *, pretokenized: bool = False, target_lang: str | None = None) -> bool: ...

    def check_request(self, request: SearchRequest) -> SearchRequest: ...

    def check_languages(
        self, texts: Sequence[str] = (), target_lang: str | None = None, source_lang: str | None = None
    ) -> None: ...

    def translate_detailed(self, texts: Sequence[str], request: SearchRequest, **options: Any) -> Any: ...


def info_directions(info: dict[str, Any]) -> Directions:
    """What a served model reads and writes, from what /health says of it (model_info)."""
    return Directions(
        tuple(tuple(d) for d in info.get("directions") or ()),
        tuple(info.get("target_langs") or ()),
        source=info.get("src_lang"),
        output=info.get("tgt_lang"),
    )


def model_routes(infos: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[int, str | None]]:
    """(source, target) -> (which model translates it, the target language to ask a multi-target model
    for, else None); a model of unknown languages serves nmt's API only.

    Two models for one direction are refused: the server could not say which one answers."""
    routes: dict[tuple[str, str], tuple[int, str | None]] = {}
    for index, info in enumerate(infos):
        for pair, asked in info_directions(info).routes():
            if pair in routes:
                raise ValueError(
                    f"{infos[routes[pair][0]]['model']} and {info['model']} both translate {pair[0]} -> "
                    f"{pair[1]}: serve one model per direction"
                )
            routes[pair] = (index, asked)
    return routes


# The cached answers' form: a replica that writes them otherwise (a new Translation field) names another
# form, so replicas of two versions side by side never read each other's entries.
CACHE_FORM = 1


def cache_keys(
    identity: str, texts: Sequence[str], search: SearchRequest, options: dict[str, Any], *, scope: str | None = None
) -> list[str]:
    """Each text's translation-cache key: the model's identity (model_identity), the whole search
    request, what else the model is asked (target language, scores, alignments) and the text itself.
    A different beam, glossary, engine or model is another key. A document's format reaches the
    model as what it asks (alignments, to put markup back) and the sentences it sends: a sentence
    alike is answered alike, whichever document it came from. `scope`: whose cache (an API key's,
    Admission.cache_scope), None for the service's."""
    asked = [CACHE_FORM, identity, dataclasses.asdict(search), options]
    if scope is not None:  # unscoped keys stay as they were: replicas of the last version share them
        asked.append({"scope": scope})
    prefix = hashlib.sha256(json.dumps(asked, sort_keys=True, default=str).encode()).digest()
    return [hashlib.sha256(prefix + text.encode("utf-8", "surrogatepass")).hexdigest() for text in texts]


def cache_form(found: list[Translation]) -> bytes:
    """An n-best list as the cache keeps it: JSON (never pickle: whoever can write to Redis must not
    be able to run code here); attention is never cached."""
    return json.dumps(
        [{f.name: getattr(t, f.name) for f in dataclasses.fields(t) if f.name != "attention"} for t in found]
    ).encode()


def from_cache_form(kept: bytes | None) -> list[Translation] | None:
    """cache_form read back: the same fields, alignment pairs as tuples again; None for nothing kept,
    or for bytes that are not such a list (a cache is shared: a bad entry is a miss, never a 500)."""
    if kept is None:
        return None
    try:
        found = []
        for fields in json.loads(kept):
            if fields.get("alignment") is not None:
                fields["alignment"] = [tuple(pair) for pair in fields["alignment"]]
            found.append(Translation(**fields))
        return found
    except (ValueError, TypeError, AttributeError):
        return None


class TranslationService:
    """The models a server runs (ServedModel: Translators, in the tests stand-ins), each with its own
    batching queue, and everything both APIs share; see the module's docstring.

    info: what /health reports about the first model (see model_info); more_models: further
    (translator, info) pairs, reached through LibreTranslate's API by their languages (nmt's own
    API and the web page use the first); admission: API keys and rate limits (keys.py).
    """

    def __init__(
        self,
        translator: ServedModel,
        limits: ServerLimits,
        *,
        info: dict[str, Any],
        batching: BatchingConfig | None = None,
        more_models: Sequence[tuple[ServedModel, dict[str, Any]]] = (),
        admission: Admission | None = None,
        memory: TranslationMemory | None = None,
        state: SharedState | None = None,
    ):
        self.limits = limits
        self.admission = admission or Admission()
        if state is not None:  # the limits count in the state's windows, shared by the replicas where it is
            self.admission = self.admission.with_limiter(state.limiter)
        self.state = state or ProcessState()  # the translated files until fetched, and the windows
        self.memory = memory  # the first model's, for its own direction (as a glossary is)
        self.metrics = ServerMetrics()
        self.metrics.shared_state_reachable.set_function(lambda: float(self.state.status()["reachable"]))
        self.models = [(translator, info), *more_models]
        self.queues = [BatchingQueue(t, batching, on_batch=self.metrics.batch) for t, _ in self.models]
        self.metrics.watch(self.queues)
        self.routes = model_routes([i for _, i in self.models])  # (source, target) -> index into models

    def remembered(self, index: int, texts: Sequence[str], target_lang: str | None = None) -> list[MemoryMatch | None]:
        """Each text's translation memory match (exact, fuzzy or None), counted in the metrics; all
        None where there is no memory for model `index` into `target_lang`."""
        memory_target = self.models[0][1].get("tgt_lang")
        if self.memory is None or index != 0 or target_lang not in (None, memory_target):
            return [None] * len(texts)
        matches = [self.memory.lookup(text) for text in texts]
        for match in matches:
            result = "none" if match is None else "exact" if match.exact else "fuzzy"
            self.metrics.memory_lookups.labels(result).inc()
        return matches

    def default_beam(self, index: int = 0) -> int:
        """Model `index`'s own beam, within the server's limit."""
        return min(self.models[index][0].decode.beam, self.limits.max_beam)

    def search(self, index: int, **settings: Any) -> SearchRequest:
        """The search a request to model `index` asks for: its settings (None: the model's own, its
        beam within the server's limit), resolved once here and passed down unchanged. Checked
        against the model and its engine as the Translator checks a call (a beam beyond the
        vocabulary, a value out of its range): ApiError 422 here, never a failure in the worker."""
        given = {"beam": self.default_beam(index), **{k: v for k, v in settings.items() if v is not None}}
        translator = self.models[index][0]
        try:
            return translator.check_request(SearchRequest.of(translator.decode, **given))
        except ValueError as err:  # ConfigError too: a value out of its range, named by its field
            raise ApiError(422, "invalid_request", str(err)) from None

    @asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        """The app's lifespan: the queues' workers run while the app does."""
        self.state.start()
        for queue in self.queues:
            queue.start()
        yield
        # stop() joins the worker, which may be mid-batch: wait in a thread, not on the event loop
        await asyncio.gather(*(asyncio.to_thread(queue.stop) for queue in self.queues))
        await asyncio.to_thread(self.state.close)  # the process's own files nobody fetched are dropped

    def close(self) -> None:
        """Stop taking requests on every model's queue (SIGTERM: the drain begins)."""
        for queue in self.queues:
            queue.close()

    def draining(self) -> bool:
        """Whether the drain has begun (keep-alive connections are then closed after each answer)."""
        return any(queue.running and not queue.accepting for queue in self.queues)

    def readiness(self) -> tuple[dict[str, Any], bool]:
        """/readyz's body and whether a proxy should send this replica work: the models loaded (they are,
        once the app exists), every worker running, no drain begun (false from the moment SIGTERM
        closes the queues, while requests in hand are still answered), the shared state reachable."""
        workers = all(queue.running for queue in self.queues)
        draining = not all(queue.accepting for queue in self.queues) and workers
        state = self.state.status()
        ready = workers and not draining and state["reachable"]
        body = {
            "ready": ready,
            "models": len(self.models),
            "workers_running": workers,
            "draining": draining,
            "shared_state": state,
        }
        return body, ready

    def health(self) -> tuple[dict[str, Any], bool]:
        """/health's body (the first model's info, the limits, the batching figures) and readiness."""
        ready = all(queue.running for queue in self.queues)
        queue = self.queues[0]
        state = self.state.status()
        body = {
            "ready": ready,
            # serving, but alone: the limits are this replica's own and other replicas' files out of reach
            "degraded": not state["reachable"],
            "shared_state": state,
            **self.models[0][1],
            "default_beam": self.default_beam(),
            "translation_cache": self.state.caching,
            "limits": asdict(self.limits),
            "batching": {**asdict(queue.config), **asdict(queue.stats), "pending_sentences": queue.pending_sentences},
            "models": [info for _, info in self.models],
        }
        return body, ready

    def admit(self, request: Request, key: Any, cost: int) -> Refusal | None:
        """The key and rate-limit check of a request costing `cost` units (None: admitted). An
        admitted request's translation-cache scope (its key's, where each key has its own) is kept
        with it, for `translate`."""
        offered = key if isinstance(key, str) else None
        address = request.client.host if request.client else ""
        refusal = self.admission.check(offered, address, cost)
        if refusal is None:
            request.state.cache_scope = self.admission.cache_scope(offered)
        return refusal

    async def body(self, request: Request) -> bytes | None:
        """The request's body within the size and time limits (ApiError past them); None where the
        client left while sending it (counted: answer with `client_left`)."""
        try:
            return await read_body(request, self.limits.max_body_bytes, self.limits.body_timeout_s)
        except BodyAbandoned:
            self.metrics.disconnects.labels("body").inc()
            return None

    def client_left(self, body: dict[str, str], stage: str = "answer") -> JSONResponse:
        """The answer nobody reads (logged as one access line) once the client left; counted unless
        `stage` is "body" (`body` counted it)."""
        if stage != "body":
            self.metrics.disconnects.labels(stage).inc()
        return JSONResponse(body, CLIENT_GONE)

    async def translate(
        self,
        request: Request,
        index: int,
        texts: list[str],
        search: SearchRequest,
        *,
        deadline: float | None = None,
        **extras: Any,
    ) -> list[list[Translation]] | None:
        """The n-best of each text from model `index` (None: the client left first), searched as
        `search` asks (see `search`), under a time.monotonic() `deadline` (default: the server's
        deadline_s from now); extras: BatchingQueue.submit's (target_lang, scores, alignments).
        Overloaded where the queue is full; ApiError (503) past the deadline or at shutdown.
        Sentences the translation cache holds for this model and request are answered from it
        (cache_keys), the others searched and then kept there."""
        # A draw is meant to differ each time, and attention is megabytes: neither is cached.
        caching = self.state.caching and search.sampling is None and not search.return_attention
        if not caching:
            return await self.searched(request, index, texts, search, deadline, extras)
        identity = self.models[index][1].get("identity") or json.dumps(self.models[index][1], sort_keys=True)
        keys = cache_keys(identity, texts, search, extras, scope=getattr(request.state, "cache_scope", None))
        kept = self.state.cached(keys)
        results = [from_cache_form(k) for k in kept]
        missing = [i for i, found in enumerate(results) if found is None]
        self.metrics.cache_lookups.labels("hit").inc(len(texts) - len(missing))
        self.metrics.cache_lookups.labels("miss").inc(len(missing))
        if missing:
            found = await self.searched(request, index, [texts[i] for i in missing], search, deadline, extras)
            if found is None:
                return None
            for i, answer in zip(missing, found, strict=True):
                results[i] = answer
            self.state.cache({keys[i]: cache_form(answer) for i, answer in zip(missing, found, strict=True)})
        return results  # type: ignore[return-value]  # every None was filled

    async def searched(
        self,
        request: Request,
        index: int,
        texts: list[str],
        search: SearchRequest,
        deadline: float | None,
        extras: dict[str, Any],
    ) -> list[list[Translation]] | None:
        """`translate` through model `index`'s queue, without the cache."""
        queue, wait_s = self.queues[index], self.limits.deadline_s
        if deadline is None:
            deadline = time.monotonic() + wait_s
        else:
            wait_s = deadline - time.monotonic()
        future = await submit_unless_gone(request, queue, texts, search, deadline=deadline, **extras)
        if future is None:
            return None
        return await wait_for_answer(request, future, queue, wait_s)


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


async def submit_unless_gone(
    request: Request, queue: BatchingQueue, texts: list[str], search: SearchRequest, **options: Any
) -> Future | None:
    """queue.submit, or None when the client left before its turn (it takes no room in the queue).

    A full queue is asked once more 50 ms later: clients that hung up just before this request came
    leave the queue as soon as the event loop hears of them, which may be a moment after this
    request is read (50 abandoned requests, then one that waits)."""
    if await request.is_disconnected():
        return None
    try:
        return queue.submit(texts, search, **options)
    except Overloaded as err:
        if err.limit != "max_pending_sentences":
            raise
        await asyncio.sleep(0.05)
        return queue.submit(texts, search, **options)
