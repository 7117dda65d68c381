"""Serving: an HTTP translation server over a Translator, built to face hostile clients and overload.

    nmt serve --model runs/de_en --port 8000          # or, in Python:
    from nmt.server import serve; serve("runs/de_en", port=8000)

settings.py        ServerLimits, BatchingConfig, ConnectionOptions: every setting, its option and help
app.py             the FastAPI app: the two routers below over one service, behind the guards
service.py         the models and their batching queues, admission, metrics, the lifecycle
nmt_api.py         nmt's API: the web page, /health, /metrics, POST /translate (JSON)
libretranslate_api.py  LibreTranslate's API, in its shapes (libretranslate.py: its pure parts)
running.py         serve / run_app / serve_in_thread: loading the models and running uvicorn
requests.py        reading and checking a request body; the JSON answer
batching_queue.py  one worker thread translating concurrent requests together, bounded, with deadlines
access.py          Host and Origin allow-lists (AccessPolicy)
connections.py     uvicorn's timeouts and connection limits; draining at SIGTERM
metrics.py         /metrics in the Prometheus text format, one registry per app
keys.py            API keys and rate limits (Admission)
shared_state.py    what replicas share (rate-limit windows, translated files): in the process or in Redis
web/index.html     the web page

The public names load on first use, so that `nmt --help` can read the settings without loading
FastAPI or torch.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> the module that defines it
_PUBLIC = {
    "AccessPolicy": "access",
    "Admission": "keys",
    "ApiError": "requests",
    "ApiKeys": "keys",
    "BatchingConfig": "settings",
    "ConnectionOptions": "settings",
    "ServerLimits": "settings",
    "access_policy": "running",
    "create_app": "app",
    "model_info": "service",
    "open_state": "shared_state",
    "run_app": "running",
    "serve": "running",
    "serve_in_thread": "running",
}
__all__ = list(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'nmt.server' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
