"""nmt serve: the HTTP server, its options generated from the server's settings dataclasses.

Each field of ServerLimits, BatchingConfig and ConnectionOptions (nmt.server.settings) names its
option and help; its default is shown from the field, so no default is written twice.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import typing
from typing import Any

from ..config_checks import ConfigError
from ..server.settings import DEFAULT_HOST, DEFAULT_PORT, BatchingConfig, ConnectionOptions, ServerLimits
from .common import (
    CommandError,
    beam_options,
    case_options,
    engine_arguments,
    engine_options,
    length_penalty_options,
    search_options,
)
from .memory import memory_options, read_memory

SETTINGS = (
    (ServerLimits, "what one request may ask for, and how long it may take (more: 4xx or 503 naming the limit)"),
    (BatchingConfig, "batching and load (over it: 503 with Retry-After)"),
    (ConnectionOptions, "connections (uvicorn's own limits)"),
)


def dest(field: dataclasses.Field) -> str:
    """The argparse attribute of a settings field: its option's name ("--max-sentences" -> "max_sentences")."""
    return field.metadata["option"].removeprefix("--").replace("-", "_")


def add_settings(parser: argparse.ArgumentParser, settings: type, title: str) -> None:
    """One option per field of a settings dataclass, in a group of its own."""
    group = parser.add_argument_group(title)
    hints = typing.get_type_hints(settings)
    for field in dataclasses.fields(settings):
        shown = f"{field.default:g}" if isinstance(field.default, float) else field.default
        metavar = "SECONDS" if field.name.endswith("_s") else "MS" if field.name.endswith("_ms") else "N"
        group.add_argument(
            field.metadata["option"],
            dest=dest(field),
            type=hints[field.name],
            default=field.default,
            metavar="LIST" if hints[field.name] is str else metavar,
            help=f"{field.metadata['help']}" + (f" (default {shown})" if shown != "" else ""),
        )


def build_settings(settings: type, args: argparse.Namespace) -> Any:
    """The settings dataclass from its options; a bad value is a CommandError naming the option."""
    fields = {f.name: f for f in dataclasses.fields(settings)}
    try:
        return settings(**{name: getattr(args, dest(f)) for name, f in fields.items()})
    except ConfigError as err:
        if err.field not in fields:
            raise
        raise CommandError(f"{fields[err.field].metadata['option']} {err.problem}") from None


def add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="HTTP translation server with a web page",
        parents=[beam_options(), length_penalty_options(), engine_arguments(), case_options()],
        description="Serve POST /translate, GET /health, GET /metrics and a web page at /, and "
        "LibreTranslate's API (/translate, /detect, /languages, /frontend/settings). Every limit below "
        "is explained in docs/serving.md.",
    )
    p.add_argument(
        "--model",
        action="append",
        required=True,
        help="model directory; repeat for several directions (LibreTranslate's API routes by language; "
        "nmt's own API uses the first; the page offers every direction)",
    )
    p.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (default %(default)s: this machine only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default %(default)s)")
    for settings, title in SETTINGS:
        add_settings(p, settings, title)
    g = p.add_argument_group("cross-site protection")
    g.add_argument(
        "--allowed-hosts",
        default=None,
        help="comma-separated Host names to answer, '*' for any (default: 127.0.0.1, localhost, ::1 "
        "and --host); behind a proxy, the public name",
    )
    g.add_argument(
        "--allowed-origins",
        default="",
        help="comma-separated origins (scheme://host[:port]) whose pages may call the API, besides the "
        "server's own page; '*' for any (default: none)",
    )
    g = p.add_argument_group("API keys and rate limits (see docs/serving.md)")
    g.add_argument(
        "--api-keys",
        metavar="FILE",
        help="require an API key on every translation request: FILE holds one key a line, optionally "
        "followed by its requests per minute",
    )
    g.add_argument(
        "--req-limit",
        type=int,
        default=0,
        metavar="N",
        help="requests per minute per client address, keyed or not; a request of several texts counts "
        "each (default 0: no limit)",
    )
    g = p.add_argument_group("several replicas (see docs/serving.md)")
    g.add_argument(
        "--state",
        metavar="URL",
        default=os.environ.get("NMT_STATE") or None,
        help="where replicas share their rate-limit windows and translated files: redis://HOST:PORT/DB "
        "(default: $NMT_STATE, else this process alone); unreachable at start: exit 2",
    )
    g.add_argument(
        "--translation-cache",
        type=int,
        default=10_000,
        metavar="N",
        help="sentences whose translations the process keeps, answered again without a search (0: no "
        "cache); with --state, the cache is in Redis and each entry kept a day (default %(default)s)",
    )
    g.add_argument(
        "--translation-cache-scope",
        choices=("key", "service"),
        default="key",
        help="with --api-keys, whose translations a request may be answered with: its own key's (key: "
        "a hit's speed tells no one what another key translated) or every key's (service) (default "
        "%(default)s)",
    )
    p.add_argument(
        "--glossary",
        metavar="FILE.tsv",
        help="source term<TAB>required target term per line, for every request to the first model "
        "(docs/real-text.md; the torch engine)",
    )
    memory_options(p, update=False)
    p.set_defaults(func=cmd_serve)


def load_served_memory(args: argparse.Namespace):
    """--memory for the first model's direction (its languages from its directory), or None."""
    from ..model_dir import read_languages

    if args.memory is None:
        return None
    source, target = read_languages(args.model[0])
    return read_memory(args.memory, source=source, target=target, threshold=args.memory_threshold)


def cmd_serve(args: argparse.Namespace) -> int:
    from .. import server
    from .translate import load_glossary

    limits, batching, connections = (build_settings(settings, args) for settings, _ in SETTINGS)
    if batching.max_pending_sentences < limits.max_sentences:
        raise CommandError(
            f"--max-pending-sentences ({batching.max_pending_sentences}) must be at least "
            f"--max-sentences ({limits.max_sentences})"
        )
    if args.req_limit < 0:
        raise CommandError(f"--req-limit must be >= 0, got {args.req_limit}")
    keys = server.ApiKeys.load(args.api_keys) if args.api_keys else None  # a bad file fails before models load
    glossary = load_glossary(args)
    memory = load_served_memory(args)  # a bad file fails before the models load
    if args.translation_cache < 0:
        raise CommandError(f"--translation-cache must be >= 0, got {args.translation_cache}")
    try:  # before the models load: a wrong URL or a server that does not answer is one line at once
        state = server.open_state(args.state, cache_size=args.translation_cache)
    except (ValueError, ConnectionError) as err:
        raise CommandError(str(err)) from None
    admission = server.Admission(
        keys, per_address=args.req_limit, limiter=state.limiter, cache_per_key=args.translation_cache_scope == "key"
    )
    if not 0 <= args.port <= 65535:
        raise CommandError(f"--port must be between 0 and 65535, got {args.port}")
    access = server.access_policy(args.host, allowed_hosts=args.allowed_hosts, allowed_origins=args.allowed_origins)
    decode = {**search_options(args), "min_len": args.min_len}  # checked before any model loads
    if args.beam is not None and args.beam > limits.max_beam:
        raise CommandError(
            f"--beam {args.beam} is larger than --max-beam {limits.max_beam}: the most a request may ask"
        )
    server.serve(
        args.model,
        host=args.host,
        port=args.port,
        limits=limits,
        engine=engine_options(args),
        decode=decode,
        batching=batching,
        access=access,
        connections=connections,
        admission=admission,
        glossary=glossary,
        memory=memory,
        source_case=args.source_case,
        truecase=args.truecase,
        state=state,
    )
    return 0
