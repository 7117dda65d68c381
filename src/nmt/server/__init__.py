"""Serving: an HTTP translation server over a Translator, built to face hostile clients and overload.

    nmt serve --model runs/de_en --port 8000          # or, in Python:
    from nmt.server import serve; serve("runs/de_en", port=8000)

app.py             the FastAPI app: routes, the web page, model info, serve / run_app / serve_in_thread
requests.py        reading and checking a request body; the JSON answer (ServerLimits)
batching_queue.py  one worker thread translating concurrent requests together, bounded, with deadlines
access.py          Host and Origin allow-lists (AccessPolicy)
connections.py     uvicorn's timeouts and connection limits; draining at SIGTERM (ConnectionOptions)
metrics.py         /metrics in the Prometheus text format, one registry per app
web/index.html     the web page
"""

from .access import AccessPolicy
from .app import access_policy, create_app, model_info, run_app, serve, serve_in_thread
from .batching_queue import BatchingConfig
from .connections import ConnectionOptions
from .requests import ApiError, ServerLimits

__all__ = [
    "AccessPolicy",
    "ApiError",
    "BatchingConfig",
    "ConnectionOptions",
    "ServerLimits",
    "access_policy",
    "create_app",
    "model_info",
    "run_app",
    "serve",
    "serve_in_thread",
]
