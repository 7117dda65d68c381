"""Running the server: load the models, build the app (app.py), and serve it with uvicorn until
SIGTERM or Ctrl-C, then drain (connections.py); or in a background thread, for tests and notebooks.

    nmt serve --model runs/de_en --port 8000          # or, in Python:
    from nmt.server import serve; serve("runs/de_en", port=8000)
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from ..glossary import Glossary
from ..memory import TranslationMemory
from ..model_dir import read_directions, read_languages
from ..translator import EngineOptions, Translator
from .access import LOOPBACK_NAMES, AccessPolicy
from .app import create_app
from .batching_queue import BatchingConfig
from .connections import ConnectionOptions, DrainingServer, listening_socket, uvicorn_config
from .keys import Admission
from .service import model_info, model_routes
from .settings import DEFAULT_HOST, DEFAULT_PORT, ServerLimits
from .shared_state import SharedState

log = logging.getLogger(__name__)


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
    decode: Mapping[str, Any] | None = None,
    batching: BatchingConfig | None = None,
    access: AccessPolicy | None = None,
    connections: ConnectionOptions | None = None,
    admission: Admission | None = None,
    glossary: Glossary | None = None,
    memory: TranslationMemory | None = None,
    source_case: bool = True,
    truecase: bool = True,
    state: SharedState | None = None,
) -> None:
    """Load the model (or models) and serve until SIGTERM or Ctrl-C (then drain: see connections.py).

    model_dir: one directory, or several (one per direction; nmt's own API and the page use the
    first, LibreTranslate's API routes by language). engine: how the models run (EngineOptions);
    decode: each model's decode settings replaced by name for every request (`{"length_penalty":
    1.0, "min_len": 0}`: any DecodeConfig field, as Translator.load takes them; None keeps the
    model's). glossary: terms every translation of the first model must use (nmt.glossary);
    memory: a translation memory for the first model's direction (nmt.memory).
    source_case, truecase: how a lower-cased model's output is cased, as Translator.load takes them.
    state: what the replicas of a service share (shared_state.open_state; None: this process alone).
    """
    sock = listening_socket(host, port)  # before the model loads: a port in use fails at once
    try:
        serve_on(
            sock,
            host,
            model_dir,
            limits=limits,
            engine=engine,
            decode=decode,
            batching=batching,
            access=access,
            connections=connections,
            admission=admission,
            glossary=glossary,
            memory=memory,
            source_case=source_case,
            truecase=truecase,
            state=state,
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
    decode: Mapping[str, Any] | None,
    batching: BatchingConfig | None,
    access: AccessPolicy | None,
    connections: ConnectionOptions | None,
    admission: Admission | None = None,
    glossary: Glossary | None = None,
    memory: TranslationMemory | None = None,
    source_case: bool = True,
    truecase: bool = True,
    state: SharedState | None = None,
) -> None:
    """`serve` on a socket bound to `host` (the name as given: the Host names answered follow it)."""
    port = sock.getsockname()[1]  # the one the system chose for port 0
    engine = engine or EngineOptions()
    model_dirs = [model_dir] if isinstance(model_dir, (str, Path)) else list(model_dir)
    known = [(str(d), *read_languages(d), read_directions(d)) for d in model_dirs]
    # two models for one direction are refused before any loads
    model_routes([{"model": d, "src_lang": s, "tgt_lang": t, "directions": ds} for d, s, t, ds in known])
    loaded = []
    for each_dir in model_dirs:
        translator = Translator.load(each_dir, engine, source_case=source_case, truecase=truecase, **(decode or {}))
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
        pairs = each_info.get("directions") or [(each_info["src_lang"], each_info["tgt_lang"])]
        log.info(
            "serving %s (%s, %s engine%s) at http://%s:%d/",
            each_info["model"],
            ", ".join(f"{s} -> {t}" for s, t in pairs),
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
        memory=memory,
        state=state,
    )
    run_app(app, connections or ConnectionOptions(), host=host, port=port, sockets=[sock])


def close_queues(app: FastAPI) -> None:
    """Stop taking requests on every model's queue (SIGTERM: the drain begins)."""
    app.state.service.close()


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
